"""Lambda entry point of the API's authorizer: Bearer keys to tenants (agents_core.auth)."""

from agents_core import aws
from agents_core.auth.authorizer import authorize
from agents_core.auth.store import KeyStore
from agents_core.log import logger
from agents_core.settings import Settings

settings = Settings.from_env()
store = KeyStore(aws.client("dynamodb", read_timeout=2, attempts=2), settings.table_name)


@logger.inject_lambda_context
def handler(event, context):
    return authorize(event, store)
