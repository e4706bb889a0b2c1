"""OpenAI's Codex CLI end to end against `make run`'s server and a scripted model: a plain
answer, its shell tool called and its output read back (Codex sends `store: false` and replays
its items), and several turns of one session."""

from __future__ import annotations

import json
import secrets

import pytest

from .codex_cli import codex_exec, codex_home
from .local_server import running_server


@pytest.fixture(scope="module")
def base(model):
    with running_server({"OPENAI_BASE_URL": model.url}) as (url, _):
        yield url


@pytest.fixture
def env(base, model, tmp_path):
    model.reset()
    return codex_home(tmp_path / "codex-home", f"{base}/v1")


def test_codex_answers_a_question_through_the_responses_api(env, model, tmp_path):
    model.reply(text="Hello from the scripted model.")
    done = codex_exec(env, "say hello", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Hello from the scripted model." in done.stdout
    sent = model.requests[-1]
    assert sent["messages"][-1] == {"role": "user", "content": "say hello"}
    offered = {tool["function"]["name"] for tool in sent["tools"]}
    # Codex's own tools, its namespace's functions by their chat names among them.
    assert "exec_command" in offered
    assert any(name.startswith("multi_agent_v1__") for name in offered)


def test_codex_runs_its_shell_tool_and_reads_the_output_back(env, model, tmp_path):
    token = secrets.token_hex(8)
    model.reply(tool_calls=[("exec_command", json.dumps({"cmd": f"echo shell-{token}"}))])
    model.reply(text="The command printed its token.")
    done = codex_exec(env, "run the command", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "The command printed its token." in done.stdout
    assert len(model.requests) == 2
    replayed = model.requests[1]["messages"]
    call = next(m for m in replayed if m["role"] == "assistant" and m.get("tool_calls"))
    assert call["tool_calls"][0]["function"]["name"] == "exec_command"
    result = next(m for m in replayed if m["role"] == "tool")
    assert result["tool_call_id"] == call["tool_calls"][0]["id"]
    assert f"shell-{token}" in result["content"]  # Codex ran it, and sent its output back


def test_codex_carries_a_session_over_several_turns(env, model, tmp_path):
    model.reply(text="First answer: the sky is blue.")
    first = codex_exec(env, "what colour is the sky?", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    model.reply(text="Second answer: still blue.")
    second = codex_exec(env, "resume", "--last", "and at noon?", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert "Second answer: still blue." in second.stdout
    history = model.requests[-1]["messages"]
    said = [(m["role"], m["content"]) for m in history if m["role"] in ("user", "assistant")]
    assert ("user", "what colour is the sky?") in said
    assert ("assistant", "First answer: the sky is blue.") in said
    assert said[-1] == ("user", "and at noon?")
