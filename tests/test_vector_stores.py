"""Vector stores with the openai SDK against the local server: ingestion from the queue,
search, counts, cascades, tenants apart; and the worker retried after a crash (moto)."""

from __future__ import annotations

import io

import openai
import pytest

from .files_support import two_tenants, wait_for_files


@pytest.fixture(scope="module")
def server():
    with two_tenants() as started:
        yield started


def _pdf(text: str) -> bytes:
    """A one-page PDF holding `text`, written by hand (pypdf reads it back)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = io.BytesIO(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % n + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    out.write(b"".join(b"%010d 00000 n \n" % o for o in offsets))
    out.write(
        b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    )
    return out.getvalue()


def test_a_store_ingests_its_files_and_search_finds_the_right_one(server):
    _, acme, _ = server
    walrus = acme.files.create(
        file=("walrus.md", b"# Walrus\nWalruses haul out on ice floes."), purpose="assistants"
    )
    html = acme.files.create(
        file=(
            "volcano.html",
            b"<html><script>ignored()</script><p>Volcanoes erupt basalt lava.</p></html>",
        ),
        purpose="assistants",
    )
    store = acme.vector_stores.create(name="facts", file_ids=[walrus.id, html.id])
    assert store.object == "vector_store" and store.name == "facts"
    assert store.file_counts.in_progress + store.file_counts.completed == 2
    files = wait_for_files(acme, store.id)
    assert sorted(f.status for f in files) == ["completed", "completed"]
    store = acme.vector_stores.retrieve(store.id)
    assert store.status == "completed" and store.file_counts.completed == 2
    assert store.file_counts.total == 2 and store.usage_bytes > 0
    page = acme.vector_stores.search(store.id, query="basalt lava volcanoes")
    assert page.data[0].file_id == html.id and page.data[0].filename == "volcano.html"
    assert (
        "basalt" in page.data[0].content[0].text and "ignored" not in page.data[0].content[0].text
    )
    page = acme.vector_stores.search(store.id, query=["walruses ice floes"], max_num_results=1)
    assert [r.file_id for r in page.data] == [walrus.id]


def test_attributes_filter_the_search_and_the_score_threshold_cuts(server):
    _, acme, _ = server
    store = acme.vector_stores.create(name="filtered")
    for name, year in (("a.txt", 2023), ("b.txt", 2024)):
        f = acme.files.create(file=(name, b"penguin colonies nest on rocks"), purpose="assistants")
        attached = acme.vector_stores.files.create(
            store.id, file_id=f.id, attributes={"year": year}
        )
        assert attached.status == "in_progress" and attached.attributes == {"year": year}
    wait_for_files(acme, store.id)
    page = acme.vector_stores.search(
        store.id, query="penguin colonies", filters={"type": "eq", "key": "year", "value": 2024}
    )
    assert [r.attributes["year"] for r in page.data] == [2024]
    high = acme.vector_stores.search(
        store.id, query="penguin colonies", ranking_options={"score_threshold": 0.999999}
    )
    assert high.data == []


def test_a_pdf_is_ingested_and_a_png_fails_with_a_reason(server):
    _, acme, _ = server
    pdf = acme.files.create(
        file=("glacier.pdf", _pdf("Glaciers carve fjords slowly")), purpose="assistants"
    )
    png = acme.files.create(
        file=("pixel.png", b"\x89PNG\r\n\x1a\n" + bytes(32)), purpose="assistants"
    )
    store = acme.vector_stores.create(name="mixed", file_ids=[pdf.id, png.id])
    by_id = {f.id: f for f in wait_for_files(acme, store.id)}
    assert by_id[pdf.id].status == "completed"
    assert by_id[png.id].status == "failed"
    assert (
        by_id[png.id].last_error.code == "unsupported_file"
        and ".png" in by_id[png.id].last_error.message
    )
    counts = acme.vector_stores.retrieve(store.id).file_counts
    assert (counts.completed, counts.failed, counts.in_progress, counts.total) == (1, 1, 0, 2)
    assert [f.id for f in acme.vector_stores.files.list(store.id, filter="failed")] == [png.id]
    hit = acme.vector_stores.search(store.id, query="glaciers fjords").data[0]
    assert hit.file_id == pdf.id


def test_deletes_cascade_to_vectors_records_and_counts(server):
    _, acme, _ = server
    keep = acme.files.create(file=("keep.txt", b"otters crack clams"), purpose="assistants")
    gone = acme.files.create(file=("gone.txt", b"otters float holding paws"), purpose="assistants")
    store = acme.vector_stores.create(name="cascade", file_ids=[keep.id, gone.id])
    wait_for_files(acme, store.id)
    assert acme.vector_stores.files.delete(gone.id, vector_store_id=store.id).deleted
    assert {r.file_id for r in acme.vector_stores.search(store.id, query="otters paws").data} == {
        keep.id
    }
    assert acme.files.retrieve(gone.id).id == gone.id  # detaching keeps the file
    acme.files.delete(keep.id)  # deleting a file takes it out of its stores
    assert acme.vector_stores.search(store.id, query="otters clams").data == []
    counts = acme.vector_stores.retrieve(store.id).file_counts
    assert (counts.total, counts.completed) == (0, 0)
    assert acme.vector_stores.delete(store.id).deleted
    with pytest.raises(openai.NotFoundError):
        acme.vector_stores.retrieve(store.id)
    assert store.id not in [s.id for s in acme.vector_stores.list()]


def test_a_store_is_updated_and_listed(server):
    _, acme, _ = server
    store = acme.vector_stores.create(name="old", metadata={"team": "a"})
    updated = acme.vector_stores.update(store.id, name="new", metadata={"team": "b"})
    assert (updated.name, updated.metadata) == ("new", {"team": "b"})
    assert store.id in [s.id for s in acme.vector_stores.list()]


def test_another_tenants_store_and_files_are_not_found(server):
    _, acme, globex = server
    f = acme.files.create(file=("mine.txt", b"narwhal tusks spiral"), purpose="assistants")
    store = acme.vector_stores.create(name="private", file_ids=[f.id])
    for call in (
        lambda: globex.vector_stores.retrieve(store.id),
        lambda: globex.vector_stores.search(store.id, query="narwhal"),
        lambda: globex.vector_stores.files.list(store.id),
        lambda: globex.vector_stores.delete(store.id),
    ):
        with pytest.raises(openai.NotFoundError):
            call()
    own = globex.vector_stores.create(name="theirs")
    with pytest.raises(openai.NotFoundError):
        globex.vector_stores.files.create(own.id, file_id=f.id)  # acme's file
    assert store.id not in [s.id for s in globex.vector_stores.list()]
    assert acme.vector_stores.retrieve(store.id).file_counts.total == 1


def test_bad_requests_change_nothing(server):
    _, acme, _ = server
    store = acme.vector_stores.create(name="strict")
    with pytest.raises(openai.NotFoundError):
        acme.vector_stores.files.create(store.id, file_id="file-doesnotexist")
    f = acme.files.create(file=("x.txt", b"text"), purpose="assistants")
    with pytest.raises(openai.BadRequestError):
        acme.vector_stores.files.create(
            store.id,
            file_id=f.id,
            chunking_strategy={
                "type": "static",
                "static": {"max_chunk_size_tokens": 200, "chunk_overlap_tokens": 150},
            },
        )
    with pytest.raises(openai.BadRequestError):
        acme.vector_stores.search(store.id, query="x", max_num_results=51)
    with pytest.raises(openai.NotFoundError):
        acme.vector_stores.create(name="none", file_ids=["file-missing"])
    assert acme.vector_stores.retrieve(store.id).file_counts.total == 0
    assert list(acme.vector_stores.files.list(store.id)) == []


def test_attaching_a_file_twice_answers_the_same_record_and_counts_it_once(server):
    base, acme, _ = server
    f = acme.files.create(file=("twice.txt", b"puffins dive for sand eels"), purpose="assistants")
    store = acme.vector_stores.create(name="twice")
    first = acme.vector_stores.files.create(store.id, file_id=f.id)
    prefixed = openai.OpenAI(base_url=f"{base}/v1/openai/v1", api_key=acme.api_key, max_retries=0)
    second = prefixed.vector_stores.files.create(store.id, file_id=f.id)
    assert (second.id, second.created_at) == (first.id, first.created_at)
    wait_for_files(acme, store.id)
    counts = acme.vector_stores.retrieve(store.id).file_counts
    assert (counts.total, counts.completed) == (1, 1)
    assert acme.vector_stores.files.retrieve(f.id, vector_store_id=store.id).status == "completed"
