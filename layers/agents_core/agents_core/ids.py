"""Time-ordered identifiers.

Every id this service mints is a UUIDv7 (RFC 9562): a valid UUID string whose lexical order is
its creation order. Sort keys built from ids therefore list agents, sessions, turns and steps in
the order they were created, with no extra timestamp attribute or index.
"""

from __future__ import annotations

import os
import threading
import time

_lock = threading.Lock()
_last_ms = 0
_seq = 0


def new_id() -> str:
    """A UUIDv7; ids minted by one process within the same millisecond still sort in order."""
    digits = f"{_value():032x}"
    # uuid.UUID(int=...) and its str() write the same, in two to three times the CPU with
    # cold caches (a turn mints two).
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


def item_id(prefix: str) -> str:
    """An id shaped like OpenAI's own (`resp_…`, `msg_…`, `fc_…`): a prefix, then a UUIDv7's
    hex digits, so they too sort in creation order."""
    return f"{prefix}_{_value():032x}"


def _value() -> int:
    """A UUIDv7 as its 128-bit number."""
    global _last_ms, _seq
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms <= _last_ms:
            ms = _last_ms
            _seq += 1
            if _seq > 0xFFF:  # 4096 ids in one millisecond: borrow the next one
                ms, _seq = ms + 1, 0
        else:
            _seq = 0
        _last_ms = ms
        seq = _seq
    rand_b = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    return (ms << 80) | (0x7 << 76) | (seq << 64) | (0b10 << 62) | rand_b
