"""Entry point of the turns function, streamed: create a turn; read a turn, a step, or a turn's
stored stream.

The Lambda Web Adapter layer runs `run.sh`, which serves this ASGI app with uvicorn; the
adapter turns each API Gateway request into an HTTP request and streams the response back.
"""

from agents_core import container
from agents_core.services import build_services
from agents_core.settings import Settings
from agents_core.web.app import connecting, create_app
from agents_core.web.turns import turns_router

services = build_services(Settings.from_env())
app = create_app(turns_router, services=services, lifespan=connecting(services))
engine = services.engine  # built (imports and all) during init, not on the first request
services.models.prepare()  # the model client too
services.prime()  # what the first request would build, built at init (Services.prime)
container.init_done()  # what init built is kept out of the collector's way
