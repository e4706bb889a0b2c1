"""Entry point of the resume function: resume a turn awaiting client tool results, over HTTP
(streamed) and from the SQS resume queue.

The Lambda Web Adapter layer runs `run.sh`, which serves this ASGI app with uvicorn; the
adapter turns each API Gateway request into an HTTP request and streams the response back, and
POSTs each SQS batch to `/events`, returning the app's answer (the batch item failures).
"""

from agents_core import container
from agents_core.services import build_services
from agents_core.settings import Settings
from agents_core.web.app import connecting, create_app
from agents_core.web.turns import queue_router, resume_router

services = build_services(Settings.from_env())
app = create_app(resume_router, queue_router, services=services, lifespan=connecting(services))
engine = services.engine  # built (imports and all) during init, not on the first request
services.models.prepare()  # the model client too
services.prime()  # what the first request would build, built at init (Services.prime)
container.init_done()  # what init built is kept out of the collector's way
