"""Session reads sized for a buffered Lambda, whose whole answer (the body escaped into a JSON
string) must stay under 6 MB: a session answers the oldest turns that fit and says `has_more`; a
turn too large for it is a clear 413 that names the turn, never Lambda's bare 502. A turn alone
is read from the streaming turns function, bounded by `MAX_STREAMED_READ_BYTES`.

The extension keeps the v0.2.14 shape: a session whose turns all fit is answered exactly as the
contract says; only a cut-short answer carries `"has_more": true`, and the next page is
`GET ...?starting_after=<its last turn_id>`.
"""

from __future__ import annotations

import json

from fastapi import Response

from ..api.agents import Turn
from ..errors import TooLarge
from ..store.sessions import SessionPage

#: Bytes of the session's own fields and the marker, besides its turns.
_ENVELOPE = 4096


def escaped_size(text: str) -> int:
    """Bytes `text` takes once escaped into a JSON string, as Lambda's runtime returns it
    (quotes and backslashes doubled, anything beyond ASCII as \\u escapes)."""
    return len(json.dumps(text))


def turn_response(turn: Turn, max_bytes: int) -> Response:
    body = turn.model_dump_json()
    if escaped_size(body) > max_bytes:
        raise _too_large(turn, len(body), max_bytes)
    return Response(content=body, media_type="application/json")


def session_response(page: SessionPage, max_bytes: int) -> Response:
    """The session with as many of its turns as fit in `max_bytes`, oldest first."""
    session = page.session
    turns, size, has_more = [], _ENVELOPE, page.has_more
    for turn in session.turns:
        text = turn.model_dump_json()
        size += escaped_size(text) + 1
        if size > max_bytes:
            if not turns:
                raise TooLarge(
                    f"Turn {turn.turn_id} is {len(text):,} bytes as JSON, more than a session"
                    f" read answers ({max_bytes:,}); read it alone with GET"
                    f" .../turn/{turn.turn_id}"
                )
            has_more = True
            break
        turns.append(text)
    head = session.model_dump_json(exclude={"turns"})
    marker = ',"has_more":true' if has_more else ""
    body = f'{head[:-1]},"turns":[{",".join(turns)}]{marker}}}'
    return Response(content=body, media_type="application/json")


def _too_large(turn: Turn, size: int, max_bytes: int) -> TooLarge:
    steps = ", ".join(step.step_id for step in turn.steps)
    return TooLarge(
        f"Turn {turn.turn_id} is {size:,} bytes as JSON, more than a read answers"
        f" ({max_bytes:,}); read its steps one at a time with GET"
        f" .../turn/{turn.turn_id}/step/{{step_id}} (steps: {steps})"
    )
