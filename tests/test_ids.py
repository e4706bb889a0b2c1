"""Every id is a UUIDv7 in its canonical text, and ids sort in the order they were minted."""

from __future__ import annotations

import time
import uuid

from agents_core.ids import item_id, new_id


def test_an_id_is_a_version_7_uuid_written_as_uuid_writes_it():
    before = time.time_ns() // 1_000_000
    minted = new_id()
    after = time.time_ns() // 1_000_000
    parsed = uuid.UUID(minted)
    assert str(parsed) == minted
    assert parsed.version == 7 and parsed.variant == uuid.RFC_4122
    assert before <= parsed.int >> 80 <= after  # its first 48 bits: the millisecond


def test_ids_minted_together_sort_in_the_order_they_were_minted_and_differ():
    minted = [new_id() for _ in range(5000)]  # many within one millisecond
    assert minted == sorted(minted)
    assert len(set(minted)) == len(minted)


def test_an_item_id_is_its_prefix_and_a_uuid_7s_hex_digits_in_order():
    minted = [item_id("msg") for _ in range(1000)]
    assert minted == sorted(minted)
    prefix, digits = minted[0].split("_")
    assert prefix == "msg" and uuid.UUID(hex=digits).version == 7
    assert len(digits) == 32
