"""Entry point of the ingest function: files attached to vector stores, from the ingestion
queue to vectors (agents_core.services.ingest). A plain Lambda handler with Powertools batch
processing: only the failed records are reported (ReportBatchItemFailures)."""

from agents_core import container
from agents_core.log import logger
from agents_core.services import build_services
from agents_core.services.ingest import IngestWorker
from agents_core.settings import Settings

services = build_services(Settings.from_env())
worker = IngestWorker(services)
embedder = services.embedder  # built (imports and all) during init, not on the first event
services.prime()  # what the first request would build, built at init (Services.prime)
container.init_done()  # what init built is kept out of the collector's way


@logger.inject_lambda_context
def handler(event, context):
    return worker.handle(event, context)
