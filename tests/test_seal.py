"""Blobs clients hold and send back: they read back only for the tenant and kind they were
made for, with this deployment's key, unchanged."""

from __future__ import annotations

import pytest
from agents_core.seal import Sealer, Unsealable


def test_a_blob_reads_back_for_its_tenant_and_kind_only():
    sealer = Sealer.generated()
    blob = sealer.seal("acme", "compaction", {"summary": "We chose Paris."})
    assert sealer.open("acme", "compaction", blob) == {"summary": "We chose Paris."}
    for tenant, kind in (("globex", "compaction"), ("acme", "reasoning")):
        with pytest.raises(Unsealable):
            sealer.open(tenant, kind, blob)


def test_a_changed_forged_or_foreign_blob_is_refused():
    sealer = Sealer.generated()
    blob = sealer.seal("acme", "reasoning", {"text": "think"})
    version, body, signature = blob.split(".")
    flipped = body[:-1] + ("A" if body[-1] != "A" else "B")
    for bad in (
        f"{version}.{flipped}.{signature}",
        f"{version}.{body}.{signature[:-2]}",
        "sa1.e30.",
        "gAAAAB-not-ours",
        Sealer.generated().seal("acme", "reasoning", {"text": "think"}),  # another key
    ):
        with pytest.raises(Unsealable):
            sealer.open("acme", "reasoning", bad)


def test_the_key_is_read_once_at_the_first_blob():
    reads = []

    def key() -> bytes:
        reads.append(1)
        return b"k" * 32

    sealer = Sealer(key)
    assert not sealer.loaded and reads == []
    blob = sealer.seal("acme", "compaction", {"summary": "s"})
    assert sealer.open("acme", "compaction", blob)["summary"] == "s"
    assert reads == [1]
    assert Sealer(lambda: b"k" * 32).open("acme", "compaction", blob)["summary"] == "s"
