"""Entry point of the background function: background responses (`background: true`) run from
the background queue, one message per invocation, each until this invocation's time runs short
(then the run stores its state and sends itself on to a new invocation).

A plain Lambda handler (no Web Adapter): it needs the invocation's remaining time. One event
loop lives as long as the container, so the model and tool clients built on it are reused.
"""

import time

import uvloop
from agents_core import container
from agents_core.services import build_services
from agents_core.services.background import BackgroundWorker
from agents_core.settings import Settings

services = build_services(Settings.from_env())
worker = BackgroundWorker(services)
engine = services.responses_engine  # built (imports and all) during init, not on the first event
services.models.prepare()  # the model client too
services.prime()  # what the first request would build, built at init (Services.prime)
loop = uvloop.new_event_loop()  # as run.sh's functions: less CPU per event than asyncio's
container.init_done()  # what init built is kept out of the collector's way


def handler(event, context):
    deadline = time.time() + context.get_remaining_time_in_millis() / 1000
    return loop.run_until_complete(worker.handle(event, deadline))
