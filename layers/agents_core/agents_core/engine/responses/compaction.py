"""Compaction (`POST /v1/responses/compact`): a conversation made into its user messages and one
compaction item, whose blob holds the model's summary of everything else. Sent back as input,
the item stands for the turns it compacted (`inputs.input_messages`).

The summary is the model's, asked once with the conversation as a transcript (so every
provider reads it, tool calls included), and bounded: `MAX_SUMMARY_TOKENS` for the answer, the
model call's time limit for the wait.
"""

from __future__ import annotations

import asyncio
import time

from ...api.responses import (
    CompactedResponse,
    OpenAIResponseCompactionItem,
    OpenAIResponseInputMessageContentText,
    OpenAIResponseMessage,
)
from ...errors import UpstreamFailed, UpstreamTimeout
from ...ids import item_id
from ...inference.types import ChatMessage, ChatRequest, Finish, ModelOptions, Provider, TextDelta
from ...seal import Sealer
from .inputs import COMPACTED_PREFIX

#: The longest summary the model may write.
MAX_SUMMARY_TOKENS = 2048

SUMMARY_INSTRUCTIONS = (
    "You compact a conversation so that it can go on without its full history. Write a"
    " summary that keeps every fact, decision, open question, file, command and result the"
    " conversation will need; leave out greetings and repetition. Answer with the summary only."
)


def transcript(conversation: list[ChatMessage]) -> str:
    """The conversation as plain text, a line per message, tool calls and results included."""
    lines = []
    for message in conversation:
        if message.content:
            lines.append(f"[{message.role}] {message.content}")
        for call in message.tool_calls:
            lines.append(f"[tool call {call.name}] {call.arguments}")
    return "\n".join(lines)


async def summarize(
    provider: Provider,
    model: str,
    conversation: list[ChatMessage],
    instructions: str | None,
    call_seconds: float,
) -> tuple[str, dict[str, int]]:
    """The model's summary of the conversation, and the call's token usage."""
    system = SUMMARY_INSTRUCTIONS + (f"\n\n{instructions}" if instructions else "")
    request = ChatRequest(
        model=model,
        messages=[
            ChatMessage("system", system),
            ChatMessage("user", f"The conversation:\n\n{transcript(conversation)}"),
        ],
        options=ModelOptions(max_tokens=MAX_SUMMARY_TOKENS),
    )
    provider.check(request)
    try:
        events = await asyncio.wait_for(provider.complete(request), call_seconds)
    except TimeoutError:
        raise UpstreamTimeout(f"model {model} did not summarize within {call_seconds} s") from None
    summary = "".join(e.text for e in events if isinstance(e, TextDelta)).strip()
    if not summary:
        raise UpstreamFailed(f"model {model} wrote no summary")
    finish = next((e for e in events if isinstance(e, Finish)), None)
    usage = finish.usage if finish is not None else None
    counts = {
        "input_tokens": usage.input_tokens if usage else 0,
        "output_tokens": usage.output_tokens if usage else 0,
    }
    return summary, counts


def item(tenant: str, summary: str, sealer: Sealer) -> OpenAIResponseCompactionItem:
    """The compaction item carrying `summary`, sealed for the tenant."""
    blob = sealer.seal(tenant, "compaction", {"summary": summary})
    return OpenAIResponseCompactionItem(id=item_id("cmp"), encrypted_content=blob)


def summary_message(summary: str) -> ChatMessage:
    """How a summary reaches the model, in place of the turns it stands for."""
    return ChatMessage("user", f"{COMPACTED_PREFIX}\n{summary}")


def compacted(
    tenant: str,
    conversation: list[ChatMessage],
    summary: str,
    usage: dict[str, int],
    sealer: Sealer,
) -> CompactedResponse:
    """The conversation's user messages (not the summaries of earlier compactions, which the
    new one covers), then the compaction item."""
    users = [
        OpenAIResponseMessage(
            id=item_id("msg"),
            role="user",
            status="completed",
            content=[OpenAIResponseInputMessageContentText(text=m.content)],
        )
        for m in conversation
        if m.role == "user" and m.content and not m.content.startswith(COMPACTED_PREFIX)
    ]
    total = usage["input_tokens"] + usage["output_tokens"]
    return CompactedResponse(
        id=item_id("resp"),
        created_at=int(time.time()),
        output=[*users, item(tenant, summary, sealer)],
        usage={
            **usage,
            "total_tokens": total,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    )
