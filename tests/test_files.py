"""The Files API with the openai SDK against the local server (LOCAL_AUTH=keys, two tenants)."""

from __future__ import annotations

import httpx
import openai
import pytest

from .conftest import error_message
from .files_support import two_tenants

LIMIT = 200_000


@pytest.fixture(scope="module")
def server():
    with two_tenants({"FILE_MAX_BYTES": str(LIMIT)}) as started:
        yield started


def test_a_file_is_uploaded_listed_read_and_deleted(server):
    _, acme, _ = server
    up = acme.files.create(file=("notes.txt", b"walrus tusks and kelp"), purpose="assistants")
    assert up.object == "file" and up.id.startswith("file-")
    assert (up.filename, up.bytes, up.purpose) == ("notes.txt", 21, "assistants")
    assert acme.files.retrieve(up.id) == up
    assert acme.files.content(up.id).content == b"walrus tusks and kelp"
    assert up.id in [f.id for f in acme.files.list()]
    assert acme.files.delete(up.id).deleted
    with pytest.raises(openai.NotFoundError):
        acme.files.retrieve(up.id)
    assert up.id not in [f.id for f in acme.files.list()]


def test_files_are_listed_newest_first_paged_and_by_purpose(server):
    _, acme, _ = server
    made = [acme.files.create(file=(f"p{n}.txt", b"x"), purpose="user_data").id for n in range(3)]
    page = acme.files.list(limit=2, purpose="user_data")
    assert [f.id for f in page.data] == made[::-1][:2] and page.has_more
    everything = [f.id for f in acme.files.list(limit=2, purpose="user_data", order="asc")]
    assert everything == made  # the SDK follows `after` across pages
    assert all(f.purpose == "assistants" for f in acme.files.list(purpose="assistants"))


def test_the_openai_prefix_serves_the_same_files(server):
    base, acme, _ = server
    up = acme.files.create(file=("a.md", b"# title"), purpose="assistants")
    prefixed = openai.OpenAI(base_url=f"{base}/v1/openai/v1", api_key=acme.api_key, max_retries=0)
    assert prefixed.files.retrieve(up.id).filename == "a.md"


def test_another_tenants_file_is_not_found_and_stays(server):
    _, acme, globex = server
    up = acme.files.create(file=("secret.txt", b"acme only"), purpose="assistants")
    for call in (globex.files.retrieve, globex.files.content, globex.files.delete):
        with pytest.raises(openai.NotFoundError):
            call(up.id)
    assert up.id not in [f.id for f in globex.files.list()]
    assert acme.files.content(up.id).content == b"acme only"


def test_bad_uploads_are_refused_and_store_nothing(server):
    base, acme, _ = server
    before = [f.id for f in acme.files.list()]
    with pytest.raises(openai.APIStatusError) as too_big:
        acme.files.create(file=("big.txt", b"x" * (LIMIT + 1)), purpose="assistants")
    assert too_big.value.status_code == 413
    headers = {"Authorization": f"Bearer {acme.api_key}"}
    missing = httpx.post(f"{base}/v1/files", headers=headers, files={"file": ("a.txt", b"a")})
    assert missing.status_code == 400 and "purpose" in error_message(missing)
    wrong = httpx.post(
        f"{base}/v1/files", headers=headers, data={"purpose": "nope"}, files={"file": ("a", b"a")}
    )
    assert wrong.status_code == 400
    no_file = httpx.post(f"{base}/v1/files", headers=headers, data={"purpose": "assistants"})
    assert no_file.status_code == 400
    assert [f.id for f in acme.files.list()] == before


def test_a_presigned_upload_goes_straight_to_s3_and_becomes_a_file_once_completed(server):
    base, acme, globex = server
    data = b"x" * (LIMIT + 10)  # more than a request to the API may carry here
    headers = {"Authorization": f"Bearer {acme.api_key}"}
    started = httpx.post(
        f"{base}/v1/files/uploads",
        headers=headers,
        json={"filename": "big.txt", "purpose": "assistants", "bytes": len(data)},
    )
    assert started.status_code == 200, started.text
    upload = started.json()
    assert upload["object"] == "file.upload" and upload["method"] == "PUT"
    complete = f"{base}/v1/files/uploads/{upload['id']}/complete"
    early = httpx.post(complete, headers=headers)
    assert early.status_code == 400 and "Nothing was uploaded" in error_message(early)
    put = httpx.put(upload["upload_url"], content=data, headers=upload["headers"])
    assert put.status_code == 200, put.text
    other = httpx.post(complete, headers={"Authorization": f"Bearer {globex.api_key}"})
    assert other.status_code == 404
    done = httpx.post(complete, headers=headers)
    assert done.status_code == 200, done.text
    assert (done.json()["id"], done.json()["bytes"]) == (upload["id"], len(data))
    assert httpx.post(complete, headers=headers).json() == done.json()  # completed once
    assert acme.files.content(upload["id"]).content == data


def test_a_presigned_upload_of_another_size_than_announced_is_refused(server):
    base, acme, _ = server
    headers = {"Authorization": f"Bearer {acme.api_key}"}
    upload = httpx.post(
        f"{base}/v1/files/uploads",
        headers=headers,
        json={"filename": "a.txt", "purpose": "assistants", "bytes": 5},
    ).json()
    httpx.put(upload["upload_url"], content=b"123456", headers=upload["headers"])
    wrong = httpx.post(f"{base}/v1/files/uploads/{upload['id']}/complete", headers=headers)
    assert wrong.status_code == 400 and "6 bytes" in error_message(wrong)
    with pytest.raises(openai.NotFoundError):
        acme.files.retrieve(upload["id"])
    too_big = httpx.post(
        f"{base}/v1/files/uploads",
        headers=headers,
        json={"filename": "a.txt", "purpose": "assistants", "bytes": 10**12},
    )
    assert too_big.status_code == 413
