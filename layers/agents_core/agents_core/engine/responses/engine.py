"""`ResponsesEngine`: a request (or a background run's stored state) made into a ResponseRun:
its context read (a previous response or a conversation), its input and tools checked, the
loop's model request built. Everything a request gets wrong is a 4xx here, before anything runs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

from ...api.common import JsonSchemaResponseFormat
from ...api.prompts import PLACEHOLDER, ResponsePrompt
from ...api.responses import (
    CompactedResponse,
    CompactResponseRequest,
    ConversationReference,
    CountInputTokensRequest,
    CreateOpenaiResponseRequest,
    OpenAIResponseCompactionItem,
    OpenAIResponseInputToolFileSearch,
    OpenAIResponseInputToolFunction,
    OpenAIResponseInputToolMCP,
    OpenAIResponseInputToolWebSearch,
    OpenAIResponseMCPApprovalResponse,
    OpenAIResponseObjectWithInput,
    OpenAIResponseText,
    OpenAIResponseTextFormat,
    ToolChoiceFunction,
    ToolChoiceMcp,
)
from ...domain import ConversationAppend
from ...errors import InvalidRequest
from ...ids import item_id
from ...inference.router import ModelRouter
from ...inference.types import (
    ChatMessage,
    ChatRequest,
    ChatToolCall,
    ModelOptions,
    Provider,
    ToolSpec,
)
from ...lifecycle import TurnEventPublisher
from ...seal import Sealer
from .. import loop as L
from ..file_search import FileSearchTool
from ..server_tools import ToolRuntime
from ..shields import ShieldService, shields_for
from ..storage import ResponseStorage
from ..trace import SpanExporter
from . import compaction, inputs
from .run import ResponseRun, RunControl
from .tools import (
    Approval,
    McpServer,
    RequestTools,
    ServerCall,
    file_search_tool,
    request_tools,
)

#: What `include` names to have reasoning items carry their reasoning as a blob.
REASONING_BLOBS = "reasoning.encrypted_content"


class ResponsesEngine:
    def __init__(
        self,
        storage: ResponseStorage,
        models: ModelRouter,
        limits: L.Limits = L.Limits(),
        tools: ToolRuntime | None = None,
        shields: ShieldService | None = None,
        publisher: TurnEventPublisher | None = None,
        sealer: Sealer | None = None,
        exporter: SpanExporter | None = None,
    ) -> None:
        self.exporter = exporter  # runs' spans go there too (OTLP), when configured
        self.sealer = sealer  # signs the blobs a client replays; None: it takes none
        self.storage = storage
        self.models = models
        self.limits = limits
        self.publisher = publisher
        self.tools = tools  # None: only function tools
        self.shields = shields  # None: `guardrails` are refused

    async def start(self, tenant: str, body: CreateOpenaiResponseRequest) -> ResponseRun:
        if body.moderation is not None:
            raise InvalidRequest(
                "moderation: send guardrails (shield ids) to check the input and each answer"
            )
        tools = await request_tools(self.tools, tenant, body)
        conversation = await self._in_conversation(tenant, body)
        previous: list[ChatMessage] = conversation[1] if conversation is not None else []
        if body.previous_response_id:
            previous = await self._previous(tenant, body.previous_response_id)
        items = inputs.input_items(body.input)
        new_input = await self._messages(tenant, items)
        search = tools.server.get("file_search")
        if isinstance(search, FileSearchTool):  # the query of a call without one
            users = [m.content for m in new_input if m.role == "user" and m.content]
            search.fallback_query = users[-1] if users else ""
        guardrails = body.guardrails or []
        shields = await shields_for(
            self.shields,
            tenant,
            guardrails,
            guardrails,
            [{"role": m.role, "content": m.content} for m in new_input if m.content],
        )
        inputs.refuse_answered_again(previous, new_input)
        previous, compacted = await self._auto_compacted(tenant, body, previous, new_input, items)
        current = previous + new_input
        approvals = inputs.approvals(current, items)
        inputs.answer_forgotten_calls(current)
        current = inputs.fit(current, body.truncation or "disabled", self.limits.context_tokens)
        text = body.text or OpenAIResponseText(format=OpenAIResponseTextFormat(type="text"))
        instructions = body.instructions
        if body.prompt is not None:
            template = await self._prompt(tenant, body.prompt)
            instructions = "\n\n".join(filter(None, [template, body.instructions]))
        provider, request = self._chat_request(body, current, tools, text, instructions)
        provider.check(request)  # 400 before anything runs
        if REASONING_BLOBS in (body.include or []):
            await self._sealer_ready()
        response = _response_object(body, items, text)
        if conversation is not None:
            response.conversation = ConversationReference(id=conversation[0].conversation_id)
        limits = self.limits
        if body.max_tool_calls is not None:
            calls = min(body.max_tool_calls, limits.max_tool_calls)
            limits = dataclasses.replace(limits, max_tool_calls=calls)
        loop = L.AgentLoop(
            provider,
            request,
            L.Tools(client=None, server=tools.server),
            max_iterations=body.max_infer_iters or 10,
            limits=limits,
            stream=bool(body.stream or body.background),  # a background run may be followed
            new_call_id=lambda: item_id("call"),
            shields=shields,
        )
        return ResponseRun(
            storage=self.storage,
            tenant=tenant,
            response=response,
            context=current,
            loop=loop,
            store=body.store is not False,
            tools=self.tools,
            mcp=tools.mcp,
            approvals=approvals,
            server_calls=tools.kinds,
            publisher=self.publisher,
            conversation=conversation[0] if conversation is not None else None,
            guardrails=guardrails,
            include=list(body.include or []),
            namespaced=tools.namespaced,
            sealer=self.sealer,
            compaction=compacted,
            exporter=self.exporter,
        )

    def _chat_request(
        self,
        body: CreateOpenaiResponseRequest,
        conversation: list[ChatMessage],
        tools: RequestTools,
        text: OpenAIResponseText,
        instructions: str | None,
    ) -> tuple[Provider, ChatRequest]:
        """The model's provider, and the first request the loop sends it."""
        system = [ChatMessage("system", instructions)] if instructions else []
        provider, model_id = self.models.resolve(body.model)
        request = ChatRequest(
            model=model_id,
            messages=system + conversation,
            tools=tools.specs,
            tool_choice=_tool_choice(body, tools.mcp),
            response_format=_response_format(text),
            options=ModelOptions(
                temperature=body.temperature,
                top_p=body.top_p,
                max_tokens=body.max_output_tokens,
                presence_penalty=body.presence_penalty,
                frequency_penalty=body.frequency_penalty,
                top_logprobs=body.top_logprobs,
                parallel_tool_calls=body.parallel_tool_calls,
                reasoning_effort=body.reasoning.effort if body.reasoning else None,
                user=body.safety_identifier or body.user,
                prompt_cache_key=body.prompt_cache_key,
            ),
        )
        return provider, request

    async def restore(
        self,
        tenant: str,
        state: dict[str, Any],
        credentials: dict[str, dict[str, Any]],
        control: RunControl,
        run_seconds: float | None = None,
    ) -> ResponseRun:
        """A run rebuilt from its stored `state()`, to go on under `control`. `credentials`:
        each MCP server's `headers` and `authorization` by label (never stored with the
        state); `run_seconds`: what is left of this invocation for the run."""
        response = OpenAIResponseObjectWithInput.model_validate(state["response"])
        servers = _mcp_servers(response, credentials)
        kinds = {
            name: ServerCall(kind, servers.get(label) if label else None)
            for name, (kind, label) in state["kinds"].items()
        }
        provider, _ = self.models.resolve(response.model)
        request = _restored_request(state)
        messages = request.messages
        guardrails = state["guardrails"]
        if REASONING_BLOBS in state["include"]:
            await self._sealer_ready()
        shields = await shields_for(
            self.shields, tenant, guardrails, guardrails, state["shield_input"]
        )
        limits = dataclasses.replace(self.limits, max_tool_calls=state["max_tool_calls"])
        if run_seconds is not None:
            limits = dataclasses.replace(limits, run_seconds=min(limits.run_seconds, run_seconds))
        loop = L.AgentLoop(
            provider,
            request,
            L.Tools(client=None, server=self._restored_tools(tenant, response, kinds, state)),
            max_iterations=state["max_iterations"],
            iterations=state["iterations"],
            tool_calls=state["tool_calls"],
            limits=limits,
            stream=state["stream"],
            new_call_id=lambda: item_id("call"),
            shields=shields,
            should_suspend=control.should_suspend,
        )
        base, system = state["base"], state["system"]
        approvals = [
            Approval(
                OpenAIResponseMCPApprovalResponse.model_validate(a["answer"]),
                ChatToolCall(**a["call"]),
                messages[a["message"]],
            )
            for a in state["approvals"]
        ]
        conversation = state["conversation"]
        run = ResponseRun(
            storage=self.storage,
            tenant=tenant,
            response=response,
            context=messages[system:base],  # the same messages, as the run built them
            loop=loop,
            store=state["store"],
            tools=self.tools,
            mcp=[servers[label] for label in state["pending_mcp"]],
            approvals=approvals,
            server_calls=kinds,
            publisher=self.publisher,
            conversation=ConversationAppend(*conversation) if conversation else None,
            control=control,
            guardrails=guardrails,
            include=state["include"],
            namespaced={name: tuple(pair) for name, pair in state.get("namespaced", {}).items()},
            base=base,
            input_checked=not state["shield_input"],
            resumed=state["sequence"] > 0,
            sealer=self.sealer,
            trace=state.get("trace"),  # not in states stored before runs kept their spans
            exporter=self.exporter,
        )
        run.output.restore(state)
        return run

    def _restored_tools(
        self,
        tenant: str,
        response: OpenAIResponseObjectWithInput,
        kinds: dict[str, ServerCall],
        state: dict[str, Any],
    ) -> dict[str, Any]:
        """The server tools a stored run had offered, by name, made again."""
        server_tools: dict[str, Any] = {}
        for name, call in kinds.items():
            if call.kind == "file_search":
                tool = next(
                    t for t in response.tools if isinstance(t, OpenAIResponseInputToolFileSearch)
                )
                search = file_search_tool(self.tools, tenant, tool)
                search.fallback_query = state["file_search"]["fallback_query"]
                search.files.update(state["file_search"]["files"])
                server_tools[name] = search
            elif call.kind == "web_search":
                server_tools[name] = self.tools.web_search()[1]
            elif call.kind == "mcp" and call.server is not None:
                server_tools[name] = self.tools.mcp_tool(call.server.endpoint, name)
        return server_tools

    async def compact(self, tenant: str, body: CompactResponseRequest) -> CompactedResponse:
        """The conversation (a previous response's, then this input) as its user messages and
        one compaction item holding the model's summary of it (compaction.py). Nothing is
        stored: the client sends the output back as the next input."""
        previous: list[ChatMessage] = []
        if body.previous_response_id:
            previous = await self._previous(tenant, body.previous_response_id)
        conversation = previous + await self._messages(tenant, inputs.input_items(body.input or []))
        if not conversation:
            raise InvalidRequest("Nothing to compact: send input or previous_response_id")
        if self.sealer is None:
            raise InvalidRequest("compaction is not available on this deployment")
        fitted = inputs.fit(conversation, "auto", self.limits.context_tokens)
        provider, model_id = self.models.resolve(body.model)
        summary, usage = await compaction.summarize(
            provider, model_id, fitted, body.instructions, self.limits.call_seconds
        )
        await self._sealer_ready()
        return compaction.compacted(tenant, conversation, summary, usage, self.sealer)

    async def _auto_compacted(
        self,
        tenant: str,
        body: CreateOpenaiResponseRequest,
        previous: list[ChatMessage],
        new_input: list[ChatMessage],
        items: list[Any],
    ) -> tuple[list[ChatMessage], OpenAIResponseCompactionItem | None]:
        """`context_management`: past its threshold, the context before this input as one
        summary message, and the compaction item that carries it. Not while the input answers
        calls of that context (tool results, approvals): they need the calls they answer."""
        entry = next((c for c in body.context_management or [] if c.type == "compaction"), None)
        if entry is None or not previous or self.sealer is None:
            return previous, None
        threshold = entry.compact_threshold or int(self.limits.context_tokens * 0.8)
        answering = any(m.role == "tool" for m in new_input) or any(
            isinstance(item, OpenAIResponseMCPApprovalResponse) for item in items
        )
        if answering or inputs.estimated_tokens(previous + new_input) <= threshold:
            return previous, None
        provider, model_id = self.models.resolve(body.model)
        fitted = inputs.fit(previous, "auto", self.limits.context_tokens)
        summary, _ = await compaction.summarize(
            provider, model_id, fitted, None, self.limits.call_seconds
        )
        await self._sealer_ready()
        item = compaction.item(tenant, summary, self.sealer)
        return [compaction.summary_message(summary)], item

    async def _prompt(self, tenant: str, prompt: ResponsePrompt) -> str:
        """A stored template's text with the request's values in its placeholders; 400 for a
        value it has no variable for, or a placeholder left without one."""
        version = int(prompt.version) if prompt.version else None
        stored = await self.storage.prompt(tenant, prompt.id, version)
        values = {
            name: value if isinstance(value, str) else value.text
            for name, value in (prompt.variables or {}).items()
        }
        unknown = sorted(set(values) - set(stored.variables))
        if unknown:
            raise InvalidRequest(f"prompt {prompt.id} has no variables {unknown}")
        missing = sorted(set(PLACEHOLDER.findall(stored.prompt or "")) - set(values))
        if missing:
            raise InvalidRequest(f"prompt {prompt.id} needs values for {missing}")
        return PLACEHOLDER.sub(lambda found: values[found.group(1)], stored.prompt or "")

    async def input_tokens(self, tenant: str, body: CountInputTokensRequest) -> int:
        """The input tokens of a would-be request: its instructions, context (a previous
        response's or a conversation's), input and tools, as the context window counts them
        (`inputs.estimated_tokens`; with `truncation: auto`, what is left after fitting)."""
        tools = await request_tools(self.tools, tenant, body)
        previous: list[ChatMessage] = []
        if body.conversation is not None and body.previous_response_id:
            raise InvalidRequest("conversation and previous_response_id cannot be used together")
        if body.conversation is not None:
            previous = (await self._conversation(tenant, body.conversation))[1]
        elif body.previous_response_id:
            previous = await self._previous(tenant, body.previous_response_id)
        current = previous + await self._messages(tenant, inputs.input_items(body.input or []))
        if body.truncation == "auto":
            current = inputs.fit(current, "auto", self.limits.context_tokens)
        system = [ChatMessage("system", body.instructions)] if body.instructions else []
        if body.model:
            provider, model_id = self.models.resolve(body.model)
            if hasattr(provider, "count_tokens"):
                request = ChatRequest(model=model_id, messages=system + current, tools=tools.specs)
                provider.check(request)
                return await provider.count_tokens(request)
        return inputs.estimated_tokens(system + current, tools.specs)

    async def _in_conversation(
        self, tenant: str, body: CreateOpenaiResponseRequest
    ) -> tuple[ConversationAppend, list[ChatMessage]] | None:
        """A response in a conversation continues it: its items as the context, and the version
        they were read at, which the append of this response's items must still find."""
        if body.conversation is None:
            return None
        if body.previous_response_id:
            raise InvalidRequest("conversation and previous_response_id cannot be used together")
        if body.store is False:
            raise InvalidRequest("a response in a conversation is stored: store cannot be false")
        return await self._conversation(tenant, body.conversation)

    async def _previous(self, tenant: str, response_id: str) -> list[ChatMessage]:
        """A previous response's stored conversation, as chat messages (NotFound)."""
        return [ChatMessage.from_dict(m) for m in await self.storage.context(tenant, response_id)]

    async def _conversation(
        self, tenant: str, conversation: str | ConversationReference
    ) -> tuple[ConversationAppend, list[ChatMessage]]:
        conversation_id = conversation if isinstance(conversation, str) else conversation.id
        items, version = await self.storage.conversation_context(tenant, conversation_id)
        return ConversationAppend(conversation_id, version), await self._messages(tenant, items)

    async def _messages(self, tenant: str, items: list[Any]) -> list[ChatMessage]:
        """Input items as chat messages: their files read, their blobs opened."""
        if any(getattr(item, "encrypted_content", None) for item in items):
            await self._sealer_ready()
        summaries = inputs.opened_blobs(items, tenant, self.sealer)
        files = await inputs.read_files(self.tools, items)
        return inputs.input_messages(items, files, summaries)

    async def _sealer_ready(self) -> None:
        """The sealer's key read (from its secret, at the container's first blob) off the
        event loop."""
        if self.sealer is not None and not self.sealer.loaded:
            await asyncio.to_thread(self.sealer.load)


def _mcp_servers(
    response: OpenAIResponseObjectWithInput, credentials: dict[str, dict[str, Any]]
) -> dict[str, McpServer]:
    """A stored response's MCP servers by label, with the credentials its worker was handed."""
    servers: dict[str, McpServer] = {}
    for tool in response.tools:
        if isinstance(tool, OpenAIResponseInputToolMCP):
            secret = credentials.get(tool.server_label, {})
            config = tool.model_copy(
                update={
                    "headers": secret.get("headers"),
                    "authorization": secret.get("authorization"),
                }
            )
            servers[tool.server_label] = McpServer.of(config)
    return servers


def _restored_request(state: dict[str, Any]) -> ChatRequest:
    response_format = state["response_format"]
    return ChatRequest(
        model=state["model"],
        messages=[ChatMessage.from_dict(m) for m in state["messages"]],
        tools=[ToolSpec(**spec) for spec in state["tools"]],
        tool_choice=state["tool_choice"],
        response_format=(
            JsonSchemaResponseFormat.model_validate(response_format) if response_format else None
        ),
        options=ModelOptions(**state["options"]),
    )


def _response_object(
    body: CreateOpenaiResponseRequest, items: list[Any], text: OpenAIResponseText
) -> OpenAIResponseObjectWithInput:
    """The response as it starts: the request's settings echoed, the specification's defaults
    for what it left unset. MCP credentials (`headers`, `authorization`) are not echoed or
    stored."""
    tools = [
        tool.model_copy(update={"headers": None, "authorization": None})
        if isinstance(tool, OpenAIResponseInputToolMCP)
        else tool
        for tool in body.tools or []
    ]
    settings = body.model_dump(
        include={
            "temperature",
            "top_p",
            "presence_penalty",
            "frequency_penalty",
            "top_logprobs",
            "truncation",
            "parallel_tool_calls",
            "max_output_tokens",
            "max_tool_calls",
            "user",
            "safety_identifier",
            "prompt_cache_key",
            "prompt",
            "service_tier",
            "metadata",
            "reasoning",
            "tool_choice",
        },
        exclude_none=True,
    )
    if settings.get("service_tier") == "auto":
        settings["service_tier"] = "default"  # the tier `auto` chose: there is one
    return OpenAIResponseObjectWithInput(
        id=item_id("resp"),
        created_at=int(time.time()),
        model=body.model,
        output=[],
        status="in_progress",
        previous_response_id=body.previous_response_id,
        text=text,
        instructions=body.instructions,
        input=items,
        tools=tools,
        store=body.store is not False,
        background=bool(body.background),
        **settings,
    )


def _tool_choice(body: CreateOpenaiResponseRequest, mcp: list[McpServer]) -> str:
    """`tool_choice` as the loop's model request names it: auto, none, required, or a tool."""
    choice = body.tool_choice or "auto"
    if isinstance(choice, str):
        return choice
    if isinstance(choice, ToolChoiceFunction):
        names = [t.name for t in body.tools or [] if isinstance(t, OpenAIResponseInputToolFunction)]
        if choice.name not in names:
            raise InvalidRequest(f"tool_choice names function {choice.name}, not in tools")
        return choice.name
    if isinstance(choice, ToolChoiceMcp):
        if not any(s.config.server_label == choice.server_label for s in mcp):
            raise InvalidRequest(
                f"tool_choice names MCP server {choice.server_label}, not in tools"
            )
        return choice.name or "required"
    if choice.type == "file_search":
        raise InvalidRequest("tool_choice file_search: file_search is not available")
    if not any(isinstance(t, OpenAIResponseInputToolWebSearch) for t in body.tools or []):
        raise InvalidRequest(f"tool_choice {choice.type} needs a {choice.type} tool in tools")
    return "web_search"


def _response_format(text: OpenAIResponseText) -> JsonSchemaResponseFormat | None:
    fmt = text.format
    if fmt is None or fmt.type == "text":
        return None
    if fmt.type == "json_schema":
        if not fmt.schema_:
            raise InvalidRequest("text.format of type json_schema needs a schema")
        return JsonSchemaResponseFormat(json_schema=fmt.schema_)
    return JsonSchemaResponseFormat(json_schema={})  # json_object
