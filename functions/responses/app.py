"""Entry point of the responses function (OpenAI Responses and Conversations APIs, models and
health), streamed.

The Lambda Web Adapter layer runs `run.sh`, which serves this ASGI app with uvicorn; the
adapter turns each API Gateway request into an HTTP request and streams the response back.
"""

from agents_core import container
from agents_core.services import build_services
from agents_core.settings import Settings
from agents_core.web.app import connecting, create_app
from agents_core.web.conversations import router as conversations_router
from agents_core.web.discovery import router as discovery_router
from agents_core.web.responses import router

services = build_services(Settings.from_env())
app = create_app(
    router, conversations_router, discovery_router, services=services, lifespan=connecting(services)
)
engine = services.responses_engine  # built (imports and all) during init, not on first request
services.models.prepare()  # the model client too
services.prime()  # what the first request would build, built at init (Services.prime)
container.init_done()  # what init built is kept out of the collector's way
