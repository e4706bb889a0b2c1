"""File search end to end, as users run it: `make run`'s server (its offline model, offline
embedder and local S3 Vectors peer; the ingestion queue polled in-process), the openai SDK for
files, vector stores and a response with `file_search`, and llama-stack-client's `Agent` with
`builtin::rag`. The offline embedder is lexical, so the file holding the query's words wins."""

from __future__ import annotations

import time
from collections.abc import Iterator

import openai
import pytest
from llama_stack_client import LlamaStackClient
from llama_stack_client.lib.agents.agent import Agent

from .local_server import running_server

OTTERS = b"Sea otters hold hands while they sleep so that they do not drift apart."
VOLCANO = b"Volcanoes erupt when magma rises through cracks in the crust of the earth."


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with running_server() as (url, _):
        yield url


@pytest.fixture(scope="module")
def store(base):
    """A vector store with two files, ingested."""
    client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)
    otters = client.files.create(file=("otters.md", OTTERS), purpose="assistants")
    volcano = client.files.create(file=("volcano.txt", VOLCANO), purpose="assistants")
    created = client.vector_stores.create(name="facts", file_ids=[otters.id, volcano.id])
    deadline = time.monotonic() + 30
    while client.vector_stores.retrieve(created.id).file_counts.completed < 2:
        assert time.monotonic() < deadline, "the files were not ingested"
        time.sleep(0.2)
    return created.id, otters.id, volcano.id


def test_a_response_with_file_search_cites_the_file_that_answers(base, store):
    store_id, otters_id, _ = store
    client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)
    response = client.responses.create(
        model="offline",
        input='file_search query="otters sleep hands"',
        tools=[{"type": "file_search", "vector_store_ids": [store_id], "max_num_results": 2}],
        include=["file_search_call.results"],
    )
    search, answer = response.output
    assert search.type == "file_search_call" and search.status == "completed"
    assert search.queries == ["otters sleep hands"]
    assert search.results[0].file_id == otters_id and search.results[0].filename == "otters.md"
    assert "hold hands" in answer.content[0].text
    citations = answer.content[0].annotations
    assert citations and citations[0].type == "file_citation"
    assert citations[0].file_id == otters_id and citations[0].filename == "otters.md"
    assert "<|" not in answer.content[0].text


def test_a_streamed_file_search_sends_its_events_in_the_sdks_order(base, store):
    store_id, otters_id, _ = store
    client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)
    with client.responses.stream(
        model="offline",
        input='file_search query="magma crust"',
        tools=[{"type": "file_search", "vector_store_ids": [store_id]}],
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    searched = [k for k in kinds if k.startswith("response.file_search_call.")]
    assert searched == [
        "response.file_search_call.in_progress",
        "response.file_search_call.searching",
        "response.file_search_call.completed",
    ]
    assert "response.output_text.annotation.added" in kinds
    assert final.output[0].results is None  # not asked for with include
    assert "magma" in final.output_text


def test_an_agent_with_builtin_rag_answers_from_the_store(base, store):
    store_id, _, _ = store
    client = LlamaStackClient(base_url=base)
    agent = Agent(
        client,
        model="offline",
        instructions="Answer from the documents.",
        tools=[{"name": "builtin::rag", "args": {"vector_db_ids": [store_id]}}],
    )
    session_id = agent.create_session("rag")
    chunks = list(
        agent.create_turn(
            messages=[{"role": "user", "content": 'knowledge_search query="otters sleep"'}],
            session_id=session_id,
        )
    )
    turn = chunks[-1].event.payload.turn
    steps = [s.step_type for s in turn.steps]
    assert "tool_execution" in steps
    (execution,) = [s for s in turn.steps if s.step_type == "tool_execution"]
    assert execution.tool_calls[0].tool_name == "knowledge_search"
    assert "otters.md" in str(execution.tool_responses[0].content)
    assert "hold hands" in turn.output_message.content


def test_file_search_over_another_tenants_or_a_missing_store_finds_nothing_of_it(base, store):
    client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)
    response = client.responses.create(
        model="offline",
        input='file_search query="otters"',
        tools=[{"type": "file_search", "vector_store_ids": ["vs_doesnotexist"]}],
    )
    search = response.output[0]
    assert search.type == "file_search_call" and search.status == "failed"
    assert "hold hands" not in response.output_text
