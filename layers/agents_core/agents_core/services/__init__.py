"""Everything a function serves with, built once per Lambda container (or local server): the
stores, the engines over their storage ports, the model router. `resume_queue` is the worker of
the resume queue on these services."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ..settings import Settings

#: The longest `Services.connect` holds up init: a connection is bounded by aws.CONNECT_TIMEOUT
#: and the model's own connect timeout, the key's read by its client's timeouts.
CONNECT_AT_INIT_SECONDS = 5.0


@dataclass
class Services:
    """What a function serves with. Each part is created on first use, so a function imports
    (and builds, at its cold start) only what its routes touch."""

    settings: Settings
    dynamodb: Any = None
    events_client: Any = None  # EventBridge; created at the first publish unless given
    bedrock_client: Any = None  # bedrock-runtime for guardrails; created at first use unless given
    sqs_client: Any = None  # for the queues; created at first use unless given
    s3vectors_client: Any = None  # for the vector index; created at first use unless given
    _queue_urls: dict[str, str] = field(default_factory=dict, repr=False)
    s3_client: Any = None  # for the files bucket; created at first use unless given

    @property
    def sqs(self) -> Any:
        """The SQS client, created at first use unless given."""
        if self.sqs_client is None:
            from .. import aws

            self.sqs_client = aws.client("sqs")
        return self.sqs_client

    def queue_url(self, url: str | None, name: str) -> str:
        """A queue's URL: the stack's (a setting), else found by name (local runs), once."""
        if url:
            return url
        found = self._queue_urls.get(name)
        if found is None:
            found = self._queue_urls[name] = self.sqs.get_queue_url(QueueName=name)["QueueUrl"]
        return found

    def prime(self) -> None:
        """In Lambda (`settings.prime_at_init`), build at init what a first request would:
        every imported API model's deferred schema, the TLS context its HTTPS connections
        verify with (over the layer's directory of certificates, no connection opened), where
        an engine was built the lifecycle events' client, and where the model's key is a secret
        the Secrets Manager client (not the key: a rotated one reaches restored containers). On
        demand, init runs with a full vCPU and the first request at the memory's share (a 192 MB
        function's first turn: 0.5-1.5 s less); under SnapStart the snapshot holds it."""
        if not self.settings.prime_at_init:
            return
        from .. import http1
        from ..api.common import build_deferred
        from ..aws import JsonClient

        build_deferred()
        http1.default_tls_context()  # the model's, the tools'
        if isinstance(self.dynamodb, JsonClient):  # the same one where both name certifi's
            self.dynamodb.prepare()
        if "publisher" in self.__dict__:  # built with an engine
            self.publisher.prepare()
        if self.settings.openai_api_key_secret_id:  # the model's key, read at the first call
            from .. import secrets

            secrets.prepare()

    async def connect(self) -> None:
        """In Lambda but for SnapStart (`settings.connect_at_init`), open at init, before the
        server listens, the connections a first run would: DynamoDB's two, the lifecycle
        events' and the model's, whose key is read from its secret first. On demand, init has
        a full vCPU and a first request the memory's share, which their TLS handshakes (and the
        key's read) would otherwise spend; a snapshot's sockets would be dead after a restore.
        Best effort and bounded (`CONNECT_AT_INIT_SECONDS`): whatever fails is left to the
        first request, which meets it as it would have anyway."""
        if not self.settings.connect_at_init:
            return
        from ..aws import JsonClient
        from ..log import logger

        opening = [self.models.open()]
        if isinstance(self.dynamodb, JsonClient):  # a run's first two calls go out at once
            opening.append(self.dynamodb.open(2))
        if "publisher" in self.__dict__:  # built with an engine
            opening.append(self.publisher.open())
        try:
            async with asyncio.timeout(CONNECT_AT_INIT_SECONDS):
                results = await asyncio.gather(*opening, return_exceptions=True)
        except TimeoutError:
            results = [TimeoutError(f"not done in {CONNECT_AT_INIT_SECONDS} s")]
        for failure in (r for r in results if isinstance(r, Exception)):
            logger.warning("could not connect at init", extra={"error": repr(failure)})

    @cached_property
    def agents(self):
        """Agents and sessions."""
        from ..store.agents import AgentStore

        return AgentStore(
            self.dynamodb,
            self.settings.table_name,
            ephemeral_session_ttl_seconds=self.settings.ephemeral_session_ttl_seconds,
        )

    @cached_property
    def turns(self):
        """Turns, steps and the session lock."""
        from ..store.turns import TurnStore

        return TurnStore(
            self.dynamodb, self.settings.table_name, lease_seconds=self.settings.turn_lease_seconds
        )

    @cached_property
    def responses(self):
        """Responses API records (only the responses function needs them)."""
        from ..store.responses import ResponseStore

        return ResponseStore(
            self.dynamodb,
            self.settings.table_name,
            unstored_seconds=self.settings.background_unstored_seconds,
        )

    @cached_property
    def streams(self):
        """The stored logs of streamed responses and turns: recorders and followers."""
        from ..store.stream_events import StreamEventStore
        from .streams import StreamLog

        store = StreamEventStore(
            self.dynamodb,
            self.settings.table_name,
            retention_seconds=self.settings.stream_retention_seconds,
        )
        return StreamLog(store, self.settings)

    @cached_property
    def conversations(self):
        """Conversations and their items (OpenAI Conversations API)."""
        from .conversations import ConversationService

        return ConversationService(self.conversation_store)

    @cached_property
    def conversation_store(self):
        from ..store.conversations import ConversationStore

        return ConversationStore(self.dynamodb, self.settings.table_name)

    @cached_property
    def model_catalog(self):
        """What `GET /v1/models` lists: the offline model, the endpoint's, Bedrock ids, and the
        embedding model (none when EMBEDDING_PROVIDER is unknown: /v1/embeddings says why)."""
        from ..inference.catalog import ModelCatalog
        from ..vectors import embedding_model

        try:
            embedding = embedding_model(self.settings)
        except ValueError:
            embedding = None
        return ModelCatalog(self.models.settings, self.settings.bedrock_model_ids, embedding)

    @cached_property
    def toolgroups(self):
        """Tool groups (built-in and registered MCP servers), their tools, and calls to them."""
        from ..store.toolgroups import ToolGroupStore
        from .tools import ToolGroupService

        async def file_search(tenant, vector_store_ids, query, max_results):  # builtin::rag
            return await self.tool_runtime.file_search(tenant, vector_store_ids, query, max_results)

        return ToolGroupService(
            ToolGroupStore(self.dynamodb, self.settings.table_name),
            self.settings,
            file_search=file_search,
        )

    @cached_property
    def models(self):
        """Model id to provider routing (CRUD functions never need it)."""
        from ..inference.router import InferenceSettings, ModelRouter

        return ModelRouter(
            InferenceSettings(
                openai_base_url=self.settings.openai_base_url,
                openai_api_key=self.settings.openai_api_key,
                openai_api_key_secret_id=self.settings.openai_api_key_secret_id,
                timeout_seconds=self.settings.inference_timeout_seconds,
            )
        )

    @cached_property
    def prompts(self):
        """Prompt templates (the Prompts API), versioned."""
        from ..store.prompts import PromptStore

        return PromptStore(self.dynamodb, self.settings.table_name)

    @cached_property
    def safety(self):
        """Shields: the registry and the checks turns, responses and the safety routes run."""
        from ..store.shields import ShieldStore
        from .safety import SafetyService

        return SafetyService(
            ShieldStore(self.dynamodb, self.settings.table_name),
            models=self.models,
            bedrock_client=self.bedrock_client,
            fail_open=self.settings.shield_fail_open,
            timeout_seconds=self.settings.shield_timeout_seconds,
        )

    @cached_property
    def limits(self):
        """The server's bounds on every turn and response."""
        from ..engine.loop import Limits

        s = self.settings
        return Limits(
            max_iterations=s.max_iterations,
            max_tool_calls=s.max_tool_calls,
            call_seconds=s.model_call_timeout_seconds,
            run_seconds=s.run_timeout_seconds,
            context_tokens=s.context_window_tokens,
        )

    @cached_property
    def turn_storage(self):
        """The engine's turn storage port on the agent and turn stores."""
        from ..store.engine_storage import DynamoTurnStorage

        return DynamoTurnStorage(self.agents, self.turns)

    @cached_property
    def publisher(self):
        """Lifecycle events of turns and responses, on the bus."""
        from ..lifecycle import TurnEventPublisher

        return TurnEventPublisher(self.events_client, self.settings.event_bus_name)

    @cached_property
    def engine(self):
        """The turn engine (the Agents API face of the agent loop)."""
        from ..engine.turns import TurnEngine

        return TurnEngine(
            self.turn_storage,
            self.models,
            self.publisher,
            self.limits,
            tools=_OnFirstUse(lambda: self.tool_runtime),
            shields=_OnFirstUse(lambda: self.safety),
            exporter=self.span_exporter,
        )

    @cached_property
    def span_exporter(self):
        """Runs' spans over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set; else None, and the
        exporter's module is not imported."""
        s = self.settings
        if not s.otel_exporter_otlp_endpoint:
            return None
        from ..telemetry.otlp import OtlpExporter

        return OtlpExporter(
            s.otel_exporter_otlp_endpoint,
            service_name=s.otel_service_name,
            timeout=s.otel_exporter_otlp_timeout_seconds,
        )

    @cached_property
    def responses_engine(self):
        """The Responses API engine (the Responses API face of the agent loop)."""
        from ..engine.responses import ResponsesEngine
        from ..store.engine_storage import DynamoResponseStorage

        storage = DynamoResponseStorage(self.responses, self.conversation_store, self.prompts)
        return ResponsesEngine(
            storage,
            self.models,
            self.limits,
            tools=_OnFirstUse(lambda: self.tool_runtime),
            shields=_OnFirstUse(lambda: self.safety),
            publisher=self.publisher,
            sealer=self.sealer,
            exporter=self.span_exporter,
        )

    @cached_property
    def sealer(self):
        """Signs the blobs clients replay: with the key in `sealing_key_secret_id` (read at the
        first blob), else one this process generates."""
        from ..seal import Sealer

        secret_id = self.settings.sealing_key_secret_id
        if not secret_id:
            return Sealer.generated()
        from ..secrets import read_secret

        return Sealer(lambda: read_secret(secret_id).encode())

    @cached_property
    def background(self):
        """Background responses: queued here, run by the background worker."""
        from .background import BackgroundRuns

        return BackgroundRuns(self)

    @cached_property
    def tool_runtime(self):
        """The engine's tool runtime port: MCP servers, web search, the tenant's tool groups."""
        from .tool_runtime import ServerToolRuntime

        return ServerToolRuntime(
            self.settings, self.toolgroups, vector_stores=lambda: self.vector_stores
        )

    @cached_property
    def embedder(self):
        """The configured embedder (agents_core.vectors): offline, Bedrock Titan or an
        OpenAI-compatible endpoint; built, its SDKs imported, at first use."""
        from ..vectors import build_embedder

        return build_embedder(self.settings)

    @cached_property
    def vector_index(self):
        """The vector index port: one S3 Vectors index per (tenant, vector store)."""
        from ..vectors import build_vector_index

        return build_vector_index(self.settings, self.s3vectors_client)

    @property
    def s3(self) -> Any:
        if self.s3_client is None:
            from .. import aws

            self.s3_client = aws.client("s3")
        return self.s3_client

    @cached_property
    def file_store(self):
        """Files, vector stores and their files in the table."""
        from ..store.files import FileStore

        return FileStore(self.dynamodb, self.settings.table_name)

    @cached_property
    def files(self):
        """The Files API: bytes in the files bucket, records in the table."""
        from .files import FileService

        return FileService(self)

    @cached_property
    def vector_stores(self):
        """Vector stores, their files (ingested from the ingestion queue) and their search."""
        from .files import VectorStoreService

        return VectorStoreService(self)


class _OnFirstUse:
    """An engine port built (its modules imported) at its first use: the tool runtime and the
    shields cost a function nothing at init until a request names a tool group or a shield."""

    def __init__(self, build: Any) -> None:
        self._build = build
        self._target: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._target is None:
            self._target = self._build()
        return getattr(self._target, name)


def build_services(settings: Settings, dynamodb: Any = None, events: Any = None) -> Services:
    if dynamodb is None:
        from .. import aws

        dynamodb = aws.client("dynamodb")
    return Services(settings=settings, dynamodb=dynamodb, events_client=events)
