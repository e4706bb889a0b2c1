"""A session's finished turns are converted for the model once per container: each later turn
converts only the messages it has not seen, and a provider encodes each message once."""

from __future__ import annotations

import json

from agents_core.engine.messages import FinishedTurns
from agents_core.inference.openai_compat import _body
from agents_core.inference.types import ChatMessage, ChatRequest, ChatToolCall


def stored_turn(i: int) -> list[dict]:
    return [{"role": "user", "content": f"q {i}"}, {"role": "assistant", "content": f"a {i}"}]


def test_a_later_turn_converts_only_the_messages_its_history_adds():
    finished = FinishedTurns()
    history = stored_turn(0)
    first = finished.messages("t1", "s1", history)
    history = history + stored_turn(1)  # what the store hands the next turn: the same objects
    second = finished.messages("t1", "s1", history)
    assert [m.content for m in second] == ["q 0", "a 0", "q 1", "a 1"]
    assert second[0] is first[0] and second[1] is first[1]
    assert all(m.memo == {} for m in second[2:])  # messages of finished turns: they get a memo
    # A history read again (other objects from the same position on) is converted again there.
    reread = [history[0], dict(history[1]), *history[2:]]
    third = finished.messages("t1", "s1", reread)
    assert third[0] is second[0]
    assert all(a is not b for a, b in zip(third[1:], second[1:], strict=True))
    assert third == second  # the same messages all the same


def test_sessions_are_kept_apart_by_tenant_and_bounded_in_sessions_and_characters():
    finished = FinishedTurns(max_sessions=2, max_chars=10_000)
    history = stored_turn(0)
    mine = finished.messages("t1", "s1", history)
    theirs = finished.messages("t2", "s1", history)  # another tenant's session of the same id
    assert theirs[0] is not mine[0]
    finished.messages("t3", "s3", stored_turn(3))  # a third session: the oldest goes
    assert finished.messages("t1", "s1", history)[0] is not mine[0]
    assert finished._chars == sum(c.chars for c in finished._sessions.values())
    # A history larger than the bound is converted and not kept; the others stay within it.
    big = [{"role": "user", "content": "x" * 6_000}]
    assert finished.messages("t4", "s4", big)[0].content == "x" * 6_000
    assert ("t4", "s4") not in finished._sessions
    assert finished._chars * 2 <= finished.max_chars


def test_a_later_turn_encodes_only_the_messages_its_history_adds(monkeypatch):
    """The OpenAI-compatible body joins a session's history once: the next turn's history (the
    same objects, two more) is the join kept, extended; a message being built is encoded at
    every use, and a history read again (other objects) is encoded whole."""
    from agents_core.inference import openai_compat

    encoded: list[str] = []
    encode = openai_compat._message_json

    def counted(message: ChatMessage) -> str:
        encoded.append(message.content)
        return encode(message)

    def expected(messages: list[ChatMessage]) -> str:
        return ",".join(encode(m) for m in messages)

    monkeypatch.setattr(openai_compat, "_message_json", counted)
    finished, system = FinishedTurns(), ChatMessage("system", "Be brief.")
    history = stored_turn(0) + stored_turn(1)
    first = [system, *finished.messages("t", "s", history), ChatMessage("user", "q 2")]
    assert openai_compat._messages_json(first) == expected(first)
    history = history + stored_turn(2)
    second = [system, *finished.messages("t", "s", history), ChatMessage("user", "q 3")]
    encoded.clear()
    assert openai_compat._messages_json(second) == expected(second)
    assert encoded == ["Be brief.", "q 2", "a 2", "q 3"]
    assert openai_compat._RUN not in first[4].memo and openai_compat._RUN in second[6].memo
    encoded.clear()
    assert openai_compat._messages_json(second) == expected(second)  # another model call
    assert encoded == ["Be brief.", "q 3"]
    reread = [history[0], *(dict(m) for m in history[1:])]
    third = [system, *finished.messages("t", "s", reread)]
    encoded.clear()
    assert openai_compat._messages_json(third) == expected(third)
    assert encoded == ["Be brief.", "q 0", "a 0", "q 1", "a 1", "q 2", "a 2"]
    assert openai_compat._messages_json(third[2:]) == expected(third[2:])  # another first


def test_the_model_s_request_body_is_the_same_whether_its_messages_were_encoded_before():
    call = ChatToolCall("c1", "get_weather", '{"city": "Paris"}')
    messages = [
        ChatMessage("system", "Be brief."),
        ChatMessage.from_dict({"role": "user", "content": 'Weather? \u00e9\n"q"'}, finished=True),
        ChatMessage.from_dict(ChatMessage("assistant", "", [call]).to_dict(), finished=True),
        ChatMessage("tool", "sunny", tool_call_id="c1"),
    ]
    request = ChatRequest(model="m", messages=messages)
    first = json.loads(_body(request))
    again = json.loads(_body(request))  # the finished messages' JSON is reused now
    assert first == again
    assert first["model"] == "m" and first["stream"] is True
    assert first["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": 'Weather? \u00e9\n"q"'},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "content": "sunny", "tool_call_id": "c1"},
    ]
    # The finished run's JSON is kept on its last message.
    assert set(messages[2].memo) == {"openai run"} and messages[1].memo == {}
    assert messages[0].memo is None


def test_turns_of_a_session_in_one_container_send_its_earlier_messages_converted_once(
    api, services
):
    """With the DynamoDB store, which remembers a warm container's sessions: each turn's
    messages are converted when the next turn first sends them, and reused after."""
    config = {"model": "offline", "instructions": "Be brief."}
    agent = api.post("/v1/agents", json={"agent_config": config}).json()["agent_id"]
    session = api.post(f"/v1/agents/{agent}/session", json={"session_name": "s"}).json()
    url = f"/v1/agents/{agent}/session/{session['session_id']}/turn"
    seen = []
    for i in range(3):
        answer = api.post(url, json={"messages": [{"role": "user", "content": f"q {i}"}]})
        assert answer.status_code == 200, answer.text
        kept = services.engine.finished_turns._sessions.get(("default", session["session_id"]))
        seen.append(kept.messages if kept is not None else [])
    assert [m.content for m in seen[2][:2]] == ["q 0", seen[1][1].content]
    assert seen[2][0] is seen[1][0] and seen[2][1] is seen[1][1]  # the first turn's, once
    assert len(seen[2]) == 4


def test_threads_converting_at_once_keep_the_bounds_accounted():
    """`make run`'s queue pollers run the engine on loops of their own threads."""
    import threading

    finished = FinishedTurns(max_sessions=8, max_chars=40_000)
    histories = {s: [m for i in range(20) for m in stored_turn(i)] for s in range(16)}

    def convert(offset: int) -> None:
        for round_ in range(200):
            session = (round_ + offset) % 16
            finished.messages("t", str(session), histories[session])

    threads = [threading.Thread(target=convert, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(finished._sessions) <= 8
    assert finished._chars == sum(c.chars for c in finished._sessions.values())
    assert finished._chars * 2 <= finished.max_chars
