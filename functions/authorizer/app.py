"""Lambda entry point of the API's authorizer: Bearer keys, or JWTs from the configured issuer,
to tenants (agents_core.auth)."""

from agents_core import aws
from agents_core.auth import tokens
from agents_core.auth.authorizer import authorize
from agents_core.auth.store import KeyStore
from agents_core.log import logger
from agents_core.settings import Settings

settings = Settings.from_env()
dynamodb = aws.client("dynamodb", read_timeout=2, attempts=2)
store = KeyStore(dynamodb, settings.table_name)
try:
    jwts = tokens.verifier(settings)  # None without JwtIssuer; PyJWT is imported at the first JWT
except ValueError as err:  # keys keep working; every JWT is refused
    logger.error("JWTs are off: the JWT configuration is unusable", error=str(err))
    jwts = None
if settings.prime_at_init:  # the first request's TLS contexts, loaded at init
    dynamodb.prepare()
    if jwts is not None:
        tokens.prepare()


@logger.inject_lambda_context
def handler(event, context):
    return authorize(event, store, jwts)
