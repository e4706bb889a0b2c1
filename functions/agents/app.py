"""Lambda entry point of the agents function (buffered): agents and sessions;
tool groups and the tool runtime; shields, run-shield and moderations; embeddings; files and
vector stores; prompts; the playground's static page."""

from agents_core import container
from agents_core.log import logger
from agents_core.services import build_services
from agents_core.settings import Settings
from agents_core.web.agents import router
from agents_core.web.app import create_app
from agents_core.web.embeddings import router as embeddings_router
from agents_core.web.files import files_router, vector_stores_router
from agents_core.web.playground import router as playground_router
from agents_core.web.prompts import router as prompts_router
from agents_core.web.safety import safety_router, shields_router
from agents_core.web.tools import router as tools_router
from aws_lambda_powertools.logging import correlation_paths
from mangum import Mangum

services = build_services(Settings.from_env())
app = create_app(
    router,
    tools_router,
    shields_router,
    safety_router,
    embeddings_router,
    files_router,
    vector_stores_router,
    prompts_router,
    playground_router,
    services=services,
)
stores = (services.agents, services.turns)  # built (imports and all) during init
_asgi = Mangum(app, lifespan="off")
services.prime()  # what the first request would build, built at init (Services.prime)
container.init_done()  # what init built is kept out of the collector's way


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
def handler(event, context):
    return _asgi(event, context)
