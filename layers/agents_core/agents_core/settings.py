"""Settings read once from the environment: one typed object, no other place reads os.environ."""

from __future__ import annotations

import os
from dataclasses import dataclass

#: The tenant of a caller with no identity in the request context (local use only: in Lambda,
#: API Gateway's authorizer names the tenant, and a request without one is refused).
DEFAULT_TENANT = "default"


@dataclass(frozen=True)
class Settings:
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
    #: boto3's own (AWS_ENDPOINT_URL_S3VECTORS, else AWS_ENDPOINT_URL).
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
    #: The queue of files to ingest into vector stores (services/ingest.py).
    ingest_queue_name: str = "serverless-agents-ingest"
    ingest_queue_url: str | None = None  # the stack's; found by name when unset

    @classmethod
    def from_env(cls) -> Settings:
        return cls(
            table_name=os.environ.get("TABLE_NAME", cls.table_name),
            ephemeral_session_ttl_seconds=int(
                os.environ.get("EPHEMERAL_SESSION_TTL_SECONDS", cls.ephemeral_session_ttl_seconds)
            ),
            openai_base_url=os.environ.get("OPENAI_BASE_URL") or None,
            openai_api_key=os.environ.get("OPENAI_API_KEY") or None,
            openai_api_key_secret_id=os.environ.get("OPENAI_API_KEY_SECRET_ID") or None,
            inference_timeout_seconds=float(
                os.environ.get("INFERENCE_TIMEOUT_SECONDS", cls.inference_timeout_seconds)
            ),
            max_iterations=int(os.environ.get("MAX_ITERATIONS", cls.max_iterations)),
            max_tool_calls=int(os.environ.get("MAX_TOOL_CALLS", cls.max_tool_calls)),
            model_call_timeout_seconds=float(
                os.environ.get("MODEL_CALL_TIMEOUT_SECONDS", cls.model_call_timeout_seconds)
            ),
            run_timeout_seconds=float(
                os.environ.get("RUN_TIMEOUT_SECONDS", cls.run_timeout_seconds)
            ),
            context_window_tokens=int(
                os.environ.get("CONTEXT_WINDOW_TOKENS", cls.context_window_tokens)
            ),
            turn_lease_seconds=int(os.environ.get("TURN_LEASE_SECONDS", cls.turn_lease_seconds)),
            resume_queue_name=os.environ.get("RESUME_QUEUE_NAME", cls.resume_queue_name),
            event_bus_name=os.environ.get("EVENT_BUS_NAME", cls.event_bus_name),
            trust_request_context_header=bool(os.environ.get("AWS_LAMBDA_FUNCTION_NAME")),
            require_caller=bool(os.environ.get("AWS_LAMBDA_FUNCTION_NAME")),
            bedrock_model_ids=tuple(
                m.strip() for m in os.environ.get("BEDROCK_MODEL_IDS", "").split(",") if m.strip()
            ),
            local_auth=os.environ.get("LOCAL_AUTH", "").strip().lower(),
            jwt_issuer=os.environ.get("JWT_ISSUER", "").strip().rstrip("/"),
            jwt_audience=tuple(
                a.strip() for a in os.environ.get("JWT_AUDIENCE", "").split(",") if a.strip()
            ),
            jwt_tenant_claim=os.environ.get("JWT_TENANT_CLAIM", "").strip() or cls.jwt_tenant_claim,
            outbound_allow=tuple(
                entry.strip()
                for entry in os.environ.get("OUTBOUND_ALLOW", "").split(",")
                if entry.strip()
            ),
            outbound_max_response_bytes=int(
                os.environ.get("OUTBOUND_MAX_RESPONSE_BYTES", cls.outbound_max_response_bytes)
            ),
            mcp_call_timeout_seconds=float(
                os.environ.get("MCP_CALL_TIMEOUT_SECONDS", cls.mcp_call_timeout_seconds)
            ),
            mcp_list_cache_seconds=float(
                os.environ.get("MCP_LIST_CACHE_SECONDS", cls.mcp_list_cache_seconds)
            ),
            tool_result_max_bytes=int(
                os.environ.get("TOOL_RESULT_MAX_BYTES", cls.tool_result_max_bytes)
            ),
            web_search_provider=os.environ.get("WEB_SEARCH_PROVIDER") or cls.web_search_provider,
            web_search_api_key_secret_id=os.environ.get("WEB_SEARCH_API_KEY_SECRET_ID") or None,
            web_search_base_url=os.environ.get("WEB_SEARCH_BASE_URL") or cls.web_search_base_url,
            web_search_timeout_seconds=float(
                os.environ.get("WEB_SEARCH_TIMEOUT_SECONDS", cls.web_search_timeout_seconds)
            ),
            stream_retention_seconds=int(
                os.environ.get("STREAM_RETENTION_SECONDS", cls.stream_retention_seconds)
            ),
            stream_flush_seconds=float(
                os.environ.get("STREAM_FLUSH_SECONDS", cls.stream_flush_seconds)
            ),
            stream_poll_seconds=float(
                os.environ.get("STREAM_POLL_SECONDS", cls.stream_poll_seconds)
            ),
            stream_alive_check_seconds=float(
                os.environ.get("STREAM_ALIVE_CHECK_SECONDS", cls.stream_alive_check_seconds)
            ),
            stream_follow_max_seconds=float(
                os.environ.get("STREAM_FOLLOW_MAX_SECONDS", cls.stream_follow_max_seconds)
            ),
            shield_fail_open=os.environ.get("SHIELD_FAIL_OPEN", "").lower() in ("1", "true", "yes"),
            shield_timeout_seconds=float(
                os.environ.get("SHIELD_TIMEOUT_SECONDS", cls.shield_timeout_seconds)
            ),
            background_queue_name=os.environ.get(
                "BACKGROUND_QUEUE_NAME", cls.background_queue_name
            ),
            background_queue_url=os.environ.get("BACKGROUND_QUEUE_URL") or None,
            resume_queue_url=os.environ.get("RESUME_QUEUE_URL") or None,
            run_suspend_margin_seconds=float(
                os.environ.get("RUN_SUSPEND_MARGIN_SECONDS", cls.run_suspend_margin_seconds)
            ),
            queue_invocation_seconds=float(
                os.environ.get("QUEUE_INVOCATION_SECONDS", cls.queue_invocation_seconds)
            ),
            resume_retry_delay_seconds=min(
                900,
                int(os.environ.get("RESUME_RETRY_DELAY_SECONDS", cls.resume_retry_delay_seconds)),
            ),
            background_cancel_poll_seconds=float(
                os.environ.get("BACKGROUND_CANCEL_POLL_SECONDS", cls.background_cancel_poll_seconds)
            ),
            background_unstored_seconds=int(
                os.environ.get("BACKGROUND_UNSTORED_SECONDS", cls.background_unstored_seconds)
            ),
            embedding_provider=(
                os.environ.get("EMBEDDING_PROVIDER", "").strip().lower() or cls.embedding_provider
            ),
            embedding_model=os.environ.get("EMBEDDING_MODEL") or None,
            # 0 (the stack's default) or unset: the provider's default.
            embedding_dimension=int(os.environ.get("EMBEDDING_DIMENSION") or 0) or None,
            embedding_base_url=os.environ.get("EMBEDDING_BASE_URL") or None,
            embedding_api_key=os.environ.get("EMBEDDING_API_KEY") or None,
            embedding_api_key_secret_id=os.environ.get("EMBEDDING_API_KEY_SECRET_ID") or None,
            embedding_timeout_seconds=float(
                os.environ.get("EMBEDDING_TIMEOUT_SECONDS", cls.embedding_timeout_seconds)
            ),
            embedding_concurrency=int(
                os.environ.get("EMBEDDING_CONCURRENCY", cls.embedding_concurrency)
            ),
            vector_bucket_name=_bucket_name(os.environ.get("VECTOR_BUCKET_NAME"))
            or cls.vector_bucket_name,
            files_bucket=os.environ.get("FILES_BUCKET") or cls.files_bucket,
            file_max_bytes=int(os.environ.get("FILE_MAX_BYTES") or cls.file_max_bytes),
            upload_max_bytes=int(os.environ.get("UPLOAD_MAX_BYTES") or cls.upload_max_bytes),
            upload_url_seconds=int(os.environ.get("UPLOAD_URL_SECONDS") or cls.upload_url_seconds),
            ingest_max_file_bytes=int(
                os.environ.get("INGEST_MAX_FILE_BYTES") or cls.ingest_max_file_bytes
            ),
            ingest_max_chars=int(os.environ.get("INGEST_MAX_CHARS") or cls.ingest_max_chars),
            ingest_embed_batch=int(os.environ.get("INGEST_EMBED_BATCH") or cls.ingest_embed_batch),
            ingest_queue_name=os.environ.get("INGEST_QUEUE_NAME") or cls.ingest_queue_name,
            ingest_queue_url=os.environ.get("INGEST_QUEUE_URL") or None,
        )


def _bucket_name(value: str | None) -> str | None:
    """A vector bucket's name, given its name or its ARN (arn:...:bucket/<name>)."""
    if value and value.startswith("arn:"):
        return value.rsplit("bucket/", 1)[-1]
    return value or None
