"""The stored form of a chat message (a session's history): only what is set, read back whole."""

from __future__ import annotations

from agents_core.inference.types import ChatDocument, ChatMessage, ChatToolCall


def test_a_chat_message_is_stored_with_its_set_fields_only_and_read_back_whole():
    call = ChatMessage("assistant", "", [ChatToolCall("c1", "get_weather", '{"city": "Paris"}')])
    answer = ChatMessage("tool", '{"temp": 21}', tool_call_id="c1")
    rich = ChatMessage(
        "user",
        "look",
        images=["https://example.com/a.png"],
        documents=[ChatDocument("a.pdf", "application/pdf", "QUJD")],
    )
    assert call.to_dict() == {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c1", "name": "get_weather", "arguments": '{"city": "Paris"}'}],
    }
    assert answer.to_dict() == {"role": "tool", "content": '{"temp": 21}', "tool_call_id": "c1"}
    assert list(rich.to_dict()) == ["role", "content", "images", "documents"]
    assert rich.to_dict()["documents"] == [
        {"name": "a.pdf", "media_type": "application/pdf", "data": "QUJD"}
    ]
    for message in (call, answer, rich, ChatMessage("system", "Be brief.")):
        back = ChatMessage.from_dict(message.to_dict())
        assert back == message and repr(back) == repr(message)
    # What an empty tool_call_id stores is what a missing one reads as.
    assert ChatMessage("tool", "x", tool_call_id="").to_dict() == {"role": "tool", "content": "x"}
    assert ChatMessage.from_dict({"role": "user"}) == ChatMessage("user", "")
    # The stored form is the caller's to change: reading it back shares no lists with it.
    stored = rich.to_dict()
    stored["images"].append("https://example.com/b.png")
    assert rich.images == ["https://example.com/a.png"]
