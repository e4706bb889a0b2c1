"""Settings read once from the environment: one typed object, no other place reads os.environ.

Declared, not parsed by hand: each field is read from the variable of its name in upper case,
by its type (`from_env`); its `#:` comment is its documentation, from which
scripts/config_reference.py writes docs/configuration.md."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

#: The tenant of a caller with no identity in the request context (local use only: in Lambda,
#: API Gateway's authorizer names the tenant, and a request without one is refused).
DEFAULT_TENANT = "default"


@dataclass(frozen=True)
class Settings:
    #: The DynamoDB table holding everything (docs/storage.md).
    table_name: str = "serverless-agents"
    #: Lifetime of sessions of agents with `enable_session_persistence: false`
    #: (see docs/storage.md).
    ephemeral_session_ttl_seconds: int = 24 * 3600
    #: An OpenAI-compatible endpoint; without one, models are served by the offline model.
    openai_base_url: str | None = None
    openai_api_key: str | None = None
    #: Secrets Manager secret (name or ARN) holding the endpoint's API key, read at the first
    #: model call; deployed stacks use it instead of a key in the environment.
    openai_api_key_secret_id: str | None = None
    #: Secrets Manager secret (name or ARN) holding the key that signs the opaque blobs a
    #: client replays (reasoning items' `encrypted_content`, compaction items); unset, each
    #: process generates one, so locally a blob is read back only by the process that made it.
    sealing_key_secret_id: str | None = None
    #: How long a model may take to answer (connect and between streamed chunks).
    inference_timeout_seconds: float = 60.0
    #: Server-side bounds on one turn or response, whatever the request asks: model calls
    #: (`max_infer_iters` is capped to it), tool calls, one model call's time, and the time of a
    #: run in one invocation (below the streaming functions' 900 s timeout).
    max_iterations: int = 25
    max_tool_calls: int = 100
    model_call_timeout_seconds: float = 300.0
    run_timeout_seconds: float = 840.0
    #: The context a response's conversation must fit (estimated at 4 characters a token):
    #: `truncation: auto` drops the oldest items to fit it, `disabled` refuses a longer one.
    context_window_tokens: int = 200_000
    #: How long a running turn holds its session; longer than the turns function's timeout.
    turn_lease_seconds: int = 60
    #: The queue of resume messages (AgentTurnResumeRequest JSON) and the turn lifecycle bus.
    resume_queue_name: str = "serverless-agents-resume"
    event_bus_name: str = "serverless-agents"
    #: Inside Lambda the Web Adapter's request-context header is API Gateway's word, not a caller's.
    trust_request_context_header: bool = False
    #: Inside Lambda a request without a caller identity is refused (401); `default` is for the
    #: local server only.
    require_caller: bool = False
    #: Bedrock model ids the deployment names (BEDROCK_MODEL_IDS, comma-separated), listed by
    #: `GET /v1/models` as `bedrock/<id>`; id prefixes ending in `*` are not listed.
    bedrock_model_ids: tuple[str, ...] = ()
    #: `keys`: the local server asks every caller for a Bearer key, as the deployed API's
    #: authorizer does (agents_core.auth); unset, callers without identity are `default`.
    local_auth: str = ""
    #: JWTs accepted besides keys (agents_core.auth.tokens): an OpenID Connect issuer (https; a
    #: Cognito user pool's URL), the client ids a token may be for, and the claim naming the
    #: tenant. No issuer: no JWT is accepted.
    jwt_issuer: str = ""
    jwt_audience: tuple[str, ...] = ()
    jwt_tenant_claim: str = "custom:tenant"
    #: Addresses the server may call on a caller's behalf although they are not public: CIDRs
    #: and host names (`OUTBOUND_ALLOW`, comma-separated). Empty in Lambda; the local server
    #: allows loopback, for MCP servers on this machine.
    outbound_allow: tuple[str, ...] = ()
    #: Bound on the bytes of one HTTP response from a server called for a caller (MCP).
    outbound_max_response_bytes: int = 4 * 1024 * 1024
    #: One MCP operation (list the tools, or call one), connection included.
    mcp_call_timeout_seconds: float = 60.0
    #: How long a container reuses an MCP server's tool list (per URL and headers).
    mcp_list_cache_seconds: float = 60.0
    #: A tool result longer than this (UTF-8 bytes) reaches the model and the store cut, with a
    #: marker saying so.
    tool_result_max_bytes: int = 64 * 1024
    #: `offline` (deterministic results, no network) or `tavily`; its API key is the Secrets
    #: Manager secret named by `web_search_api_key_secret_id`.
    web_search_provider: str = "offline"
    web_search_api_key_secret_id: str | None = None
    web_search_base_url: str = "https://api.tavily.com"
    web_search_timeout_seconds: float = 30.0
    #: A shield provider that fails (down, throttled, an answer it cannot read) fails the turn or
    #: response (502) unless this is set: then the failure is logged and the check passes.
    shield_fail_open: bool = False
    #: How long one shield check may take (a Bedrock guardrail, a Llama Guard model call).
    shield_timeout_seconds: float = 30.0
    #: The most a turn or session read answers, as JSON escaped into a Lambda response: a
    #: buffered Lambda answers at most 6 MB (a session read pages its turns to stay below).
    max_read_bytes: int = 6 * 1024 * 1024 - 64 * 1024
    #: The most a streamed read answers (GET turn, on the streaming turns function): Lambda
    #: streams up to 200 MB, and API Gateway slows a stream past 10 MB to 2 MB/s.
    max_streamed_read_bytes: int = 100 * 1024 * 1024
    #: The queue of background responses (`background: true`) and their continuations.
    background_queue_name: str = "serverless-agents-background"
    background_queue_url: str | None = None  # the stack's; found by name when unset
    #: A run driven by a queue (a background response, a turn resumed from the resume queue)
    #: stops at a step boundary when less than this is left of its invocation, and goes on in a
    #: new one (a model call and its tools must fit in it).
    run_suspend_margin_seconds: float = 330.0
    #: The invocation a locally polled queue message gets (Lambda's is its function's timeout).
    queue_invocation_seconds: float = 840.0
    #: A queued resume whose model failed after steps of its own is parked there and continued
    #: by a new message this much later (SQS's DelaySeconds, at most 900).
    resume_retry_delay_seconds: int = 60
    resume_queue_url: str | None = None  # the stack's; found by name when unset
    #: How often a running background response looks whether it was cancelled.
    background_cancel_poll_seconds: float = 0.5
    #: How long a background response with `store: false` stays readable for polling.
    background_unstored_seconds: int = 3600
    #: How long the events of a streamed response or turn stay stored to rejoin
    #: (services/streams.py).
    stream_retention_seconds: int = 24 * 3600
    #: A stream's recorder writes its buffered frames once the oldest is this old: at most
    #: 1 / this many writes a second per stream.
    stream_flush_seconds: float = 0.25
    #: A follower reads the table this often for new frames.
    stream_poll_seconds: float = 0.15
    #: While nothing new arrives, a follower asks this often whether the run still runs.
    stream_alive_check_seconds: float = 3.0
    #: The longest a follower follows, below the streaming functions' 900 s timeout.
    stream_follow_max_seconds: float = 870.0
    #: Embeddings (agents_core.vectors): `offline` (lexical, deterministic, no network),
    #: `bedrock` (Titan Text Embeddings V2 through InvokeModel) or `openai` (an
    #: OpenAI-compatible `/v1/embeddings`). Model and dimension default per provider.
    embedding_provider: str = "offline"
    embedding_model: str | None = None
    embedding_dimension: int | None = None
    #: The OpenAI-compatible embeddings endpoint; unset, OPENAI_BASE_URL's. Its key as the
    #: models': EMBEDDING_API_KEY locally, else the secret EMBEDDING_API_KEY_SECRET_ID names
    #: (unset: the models' key and secret).
    embedding_base_url: str | None = None
    embedding_api_key: str | None = None
    embedding_api_key_secret_id: str | None = None
    #: One embedding call (a batch to the endpoint, one text to Bedrock), and how many Bedrock
    #: calls run at once (Titan embeds one text a call).
    embedding_timeout_seconds: float = 30.0
    embedding_concurrency: int = 8
    #: The S3 Vectors bucket holding one vector index per (tenant, vector store): its name, or
    #: its ARN (a stack passes the ARN: CloudFormation names the bucket). Its endpoint is
    #: botocore's own (AWS_ENDPOINT_URL_S3VECTORS, else AWS_ENDPOINT_URL).
    vector_bucket_name: str = "serverless-agents-vectors"
    #: The S3 bucket of uploaded files (`tenants/<escaped tenant>/files/<file id>`, SSE).
    files_bucket: str = "serverless-agents-files"
    #: The largest upload `POST /v1/files` takes. API Gateway carries 10 MB, but a buffered
    #: Lambda takes a 6 MB event and a binary body arrives base64-encoded (4/3 larger): 4 MB.
    file_max_bytes: int = 4 * 1024 * 1024
    #: The largest file a presigned upload (`POST /v1/files/uploads`, straight to S3) takes,
    #: and how long its URL stays valid.
    upload_max_bytes: int = 512 * 1024 * 1024
    upload_url_seconds: int = 900
    #: The largest file the ingestion worker reads (it reads it whole, in its 1024 MB).
    ingest_max_file_bytes: int = 64 * 1024 * 1024
    #: The most text one file may yield for a vector store (characters), and the texts one
    #: embedding call is given while ingesting.
    ingest_max_chars: int = 2_000_000
    ingest_embed_batch: int = 64
    #: Where runs' spans go over OTLP/HTTP (JSON), e.g. a collector's `http://localhost:4318`
    #: or CloudWatch's `https://xray.<region>.amazonaws.com` (signed); unset: nowhere, and the
    #: exporter is not imported. OTEL_SERVICE_NAME names the service in them.
    otel_exporter_otlp_endpoint: str | None = None
    otel_service_name: str = "serverless-agents"
    otel_exporter_otlp_timeout_seconds: float = 2.0
    #: The queue of files to ingest into vector stores (services/ingest.py).
    ingest_queue_name: str = "serverless-agents-ingest"
    ingest_queue_url: str | None = None  # the stack's; found by name when unset
    #: Build during init what a first request would build (`Services.prime`). Unset, it is on
    #: in Lambda (AWS_LAMBDA_INITIALIZATION_TYPE set): on demand, init runs with a full vCPU
    #: whatever the memory and a first request at the memory's share; under SnapStart or
    #: provisioned concurrency no request waits for init. Off elsewhere (`make run`, tests).
    prime_at_init: bool = False
    #: Open at init the connections a first run would (`Services.connect`: DynamoDB's, the
    #: lifecycle events', the model's after reading its key). Unset, it is on in Lambda but
    #: under SnapStart, whose snapshot would hold the sockets dead; off elsewhere.
    connect_at_init: bool = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Each field from the variable of its name in upper case, parsed by its type; unset or
        empty, its default. A few are derived or fixed (`_DERIVED`, `_FIXED`) and a few tidied
        (`_TIDY`)."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for field in fields(cls):
            if field.name in _DERIVED or field.name in _FIXED:
                continue
            raw = env.get(field.name.upper(), "").strip()
            if raw:
                values[field.name] = _parsed(field.name, str(field.type), raw)
        for name, tidy in _TIDY.items():
            if name in values:
                values[name] = tidy(values[name])
        init_type = env.get("AWS_LAMBDA_INITIALIZATION_TYPE")
        values.setdefault("prime_at_init", bool(init_type))
        values.setdefault("connect_at_init", bool(init_type) and init_type != "snap-start")
        in_lambda = bool(env.get("AWS_LAMBDA_FUNCTION_NAME"))
        values = {k: v for k, v in values.items() if v is not None}
        return cls(**values, **dict.fromkeys(_DERIVED, in_lambda))


#: Fields that follow from being in Lambda (AWS_LAMBDA_FUNCTION_NAME), not from a variable.
_DERIVED = ("trust_request_context_header", "require_caller")
#: Fields no variable changes (Lambda's own limits).
_FIXED = ("max_read_bytes", "max_streamed_read_bytes")
#: Values tidied after parsing (None: the field's default).
_TIDY: dict[str, Callable[[Any], Any]] = {
    "local_auth": str.lower,
    "jwt_issuer": lambda url: url.rstrip("/"),
    "embedding_provider": str.lower,
    "embedding_dimension": lambda n: n or None,  # 0, the stack's default: the provider's own
    "resume_retry_delay_seconds": lambda seconds: min(900, seconds),  # SQS's longest delay
    "vector_bucket_name": lambda name: _bucket_name(name),
}


def _parsed(name: str, kind: str, raw: str) -> Any:
    """`raw` as a field of type `kind` (as written in the class) holds it."""
    try:
        if kind.startswith("tuple["):  # comma-separated
            return tuple(part.strip() for part in raw.split(",") if part.strip())
        if kind == "bool":
            return raw.lower() in ("1", "true", "yes")
        if kind.startswith("int"):
            return int(raw)
        if kind.startswith("float"):
            return float(raw)
    except ValueError:
        raise ValueError(f"{name.upper()}={raw!r} is not a valid {kind}") from None
    return raw


def _bucket_name(value: str | None) -> str | None:
    """A vector bucket's name, given its name or its ARN (arn:...:bucket/<name>)."""
    if value and value.startswith("arn:"):
        return value.rsplit("bucket/", 1)[-1]
    return value or None
