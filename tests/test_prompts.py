"""The Prompts API (OGX's `/v1/prompts`) against `make run`'s server: versioned templates, the
latest-version rule on update, the default version, and `prompt` on `responses.create`."""

from __future__ import annotations

import threading

import httpx
import openai
import pytest

from .local_server import running_server

TEMPLATE = "You are a {{ role }} who answers in {{language}}."


@pytest.fixture(scope="module")
def base(model):
    with running_server({"OPENAI_BASE_URL": model.url}) as (url, _):
        yield url


@pytest.fixture
def http(base):
    with httpx.Client(base_url=f"{base}/v1", timeout=30) as client:
        yield client


def created(http: httpx.Client, text: str = TEMPLATE, variables=("role", "language")) -> dict:
    made = http.post("/prompts", json={"prompt": text, "variables": list(variables)})
    assert made.status_code == 200, made.text
    return made.json()


def test_a_prompt_is_created_versioned_listed_and_deleted(http):
    first = created(http)
    prompt_id = first["prompt_id"]
    assert prompt_id.startswith("pmpt_") and len(prompt_id) == 53
    assert (first["version"], first["is_default"]) == (1, True)
    second = http.post(
        f"/prompts/{prompt_id}",
        json={"prompt": "Be a {{ role }}.", "version": 1, "variables": ["role"]},
    ).json()
    assert (second["version"], second["is_default"]) == (2, True)
    assert http.get(f"/prompts/{prompt_id}").json()["prompt"] == "Be a {{ role }}."
    old = http.get(f"/prompts/{prompt_id}", params={"version": 1}).json()
    assert (old["prompt"], old["is_default"]) == (TEMPLATE, False)
    versions = http.get(f"/prompts/{prompt_id}/versions").json()["data"]
    assert [(v["version"], v["is_default"]) for v in versions] == [(1, False), (2, True)]
    back = http.post(f"/prompts/{prompt_id}/set-default-version", json={"version": 1}).json()
    assert (back["version"], back["is_default"]) == (1, True)
    listed = {p["prompt_id"]: p for p in http.get("/prompts").json()["data"]}
    assert listed[prompt_id]["version"] == 1
    third = http.post(
        f"/prompts/{prompt_id}",
        json={"prompt": "Third.", "version": 2, "set_as_default": False},
    ).json()
    assert (third["version"], third["is_default"]) == (3, False)
    assert http.get(f"/prompts/{prompt_id}").json()["version"] == 1  # still the default
    assert http.delete(f"/prompts/{prompt_id}").status_code == 204
    gone = http.get(f"/prompts/{prompt_id}")
    assert gone.status_code == 404 and gone.json()["error"]["message"]
    assert http.get(f"/prompts/{prompt_id}/versions").status_code == 404
    assert prompt_id not in {p["prompt_id"] for p in http.get("/prompts").json()["data"]}


def test_an_update_must_follow_the_latest_version_so_racers_have_one_winner(http):
    prompt_id = created(http)["prompt_id"]
    answers: list[httpx.Response] = []

    def update(n: int) -> None:
        body = {"prompt": f"Racer {n}.", "version": 1}
        answers.append(httpx.post(f"{http.base_url}prompts/{prompt_id}", json=body, timeout=30))

    racers = [threading.Thread(target=update, args=(n,)) for n in range(4)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join()
    assert sorted(a.status_code for a in answers) == [200, 409, 409, 409]
    versions = http.get(f"/prompts/{prompt_id}/versions").json()["data"]
    assert [v["version"] for v in versions] == [1, 2]
    stale = http.post(f"/prompts/{prompt_id}", json={"prompt": "Late.", "version": 1})
    assert stale.status_code == 409 and "version 2" in stale.json()["error"]["message"]


@pytest.mark.parametrize(
    "body",
    [
        {"prompt": "Hi {{ name }}"},  # a placeholder not declared
        {"prompt": "x", "variables": ["not a name"]},
        {"prompt": "x", "bogus": 1},
    ],
)
def test_a_malformed_prompt_is_a_400_and_nothing_is_stored(http, body):
    before = len(http.get("/prompts").json()["data"])
    refused = http.post("/prompts", json=body)
    assert refused.status_code == 400, refused.text
    assert len(http.get("/prompts").json()["data"]) == before


def test_a_response_is_created_from_a_prompt_with_its_variables(base, http, model):
    model.reset()
    prompt_id = created(http)["prompt_id"]
    client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)
    model.reply(text="Bonjour.")
    response = client.responses.create(
        model="m",
        input="Say hello.",
        instructions="Be brief.",
        prompt={
            "id": prompt_id,
            "variables": {"role": "pirate", "language": {"type": "input_text", "text": "French"}},
        },
    )
    assert response.output_text == "Bonjour." and response.prompt.id == prompt_id
    system = model.requests[-1]["messages"][0]
    assert system == {
        "role": "system",
        "content": "You are a pirate who answers in French.\n\nBe brief.",
    }
    http.post(f"/prompts/{prompt_id}", json={"prompt": "Plain.", "version": 1})
    model.reply(text="ok")
    client.responses.create(
        model="m",
        input="hi",
        prompt={
            "id": prompt_id,
            "version": "1",
            "variables": {"role": "cook", "language": "Dutch"},
        },
    )
    assert "cook who answers in Dutch" in model.requests[-1]["messages"][0]["content"]


@pytest.mark.parametrize(
    "variables, says",
    [
        ({"role": "pirate"}, "needs values"),
        ({"role": "a", "language": "b", "x": "c"}, "no variables"),
    ],
)
def test_a_prompt_with_values_missing_or_unknown_is_a_400_and_nothing_runs(
    base, http, model, variables, says
):
    model.reset()
    prompt_id = created(http)["prompt_id"]
    client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(
            model="m", input="hi", prompt={"id": prompt_id, "variables": variables}
        )
    assert says in refused.value.message
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="m", input="hi", prompt={"id": "pmpt_" + "0" * 48})
    assert model.requests == []


def test_a_tenant_never_sees_anothers_prompts(dynamodb):
    from agents_core.api.prompts import Prompt
    from agents_core.errors import NotFound
    from agents_core.store.prompts import PromptStore

    from .conftest import TABLE

    store = PromptStore(dynamodb, TABLE)
    mine = Prompt(prompt_id="pmpt_" + "a" * 48, version=1, prompt="Mine.")
    store.create("alice", mine)
    assert [p.prompt_id for p in store.list("alice")] == [mine.prompt_id]
    assert store.list("bob") == []
    for read in (
        lambda: store.get("bob", mine.prompt_id),
        lambda: store.versions("bob", mine.prompt_id),
        lambda: store.delete("bob", mine.prompt_id),
        lambda: store.set_default("bob", mine.prompt_id, 1),
    ):
        with pytest.raises(NotFound):
            read()
    assert store.get("alice", mine.prompt_id).prompt == "Mine."
