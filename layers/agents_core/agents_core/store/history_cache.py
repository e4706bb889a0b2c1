"""What a warm container remembers of sessions' histories between turns.

A finished turn never changes, so the messages of a session's finished turns, up to one of them,
stay true; the next turn reads only what came after (see `TurnStore.history`). Lambda memory is
small and histories can hold images, so the memory is bounded in bytes as well as in sessions,
least recently used first out.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

MAX_SESSIONS = 128
MAX_BYTES = 32 * 1024 * 1024


@dataclass
class History:
    after: str  # the sort key of the last finished turn the messages reach
    messages: list[dict[str, Any]]
    size: int  # bytes of the messages' JSON, about


class HistoryCache:
    def __init__(self, max_sessions: int = MAX_SESSIONS, max_bytes: int = MAX_BYTES) -> None:
        self.max_sessions = max_sessions
        self.max_bytes = max_bytes
        self._sessions: OrderedDict[str, History] = OrderedDict()
        self._bytes = 0

    def get(self, session_pk: str) -> History | None:
        history = self._sessions.get(session_pk)
        if history is not None:
            self._sessions.move_to_end(session_pk)
        return history

    def put(self, session_pk: str, history: History) -> None:
        self.forget(session_pk)
        if history.size > self.max_bytes:
            return
        self._sessions[session_pk] = history
        self._bytes += history.size
        while len(self._sessions) > self.max_sessions or self._bytes > self.max_bytes:
            _, oldest = self._sessions.popitem(last=False)
            self._bytes -= oldest.size

    def forget(self, session_pk: str) -> None:
        history = self._sessions.pop(session_pk, None)
        if history is not None:
            self._bytes -= history.size
