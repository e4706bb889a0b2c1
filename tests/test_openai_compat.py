"""The OpenAI-compatible provider when the model cannot be reached: the caller and the log say so."""

from __future__ import annotations

import logging
import socket

import pytest
from agents_core.services import build_services
from agents_core.settings import Settings
from agents_core.web.agents import router as agents_router
from agents_core.web.app import create_app
from agents_core.web.turns import turns_router
from fastapi.testclient import TestClient

from .conftest import TABLE
from .turn_support import new_session, turn_url, user


def closed_port() -> int:
    """A local port nothing listens on (it was just free)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_refused_connection_says_the_model_could_not_be_reached_and_logs_it(dynamodb, caplog):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    settings = Settings(table_name=TABLE, openai_base_url=url, inference_timeout_seconds=2)
    app = create_app(agents_router, turns_router, services=build_services(settings, dynamodb))
    caplog.set_level(logging.WARNING)
    with TestClient(app, raise_server_exceptions=False) as api:
        agent_id, session_id = new_session(api)
        resp = api.post(turn_url(agent_id, session_id), json={"messages": [user("hi")]})
    assert resp.status_code == 502
    assert resp.json()["detail"] == f"could not reach the model at {url}: connection refused"
    warnings = [r for r in caplog.records if r.getMessage() == "could not reach the model"]
    assert [(w.levelname, w.url, w.reason) for w in warnings] == [
        ("WARNING", url, "connection refused")
    ]


def test_model_calls_reuse_one_kept_alive_connection_per_event_loop(model):
    """The stream is read to its end after `[DONE]`, so its connection serves the next call:
    no new TCP (and, against a real server, TLS) handshake per model call."""
    import asyncio

    from agents_core.inference.openai_compat import OpenAICompatProvider
    from agents_core.inference.types import ChatMessage, ChatRequest, TextDelta

    model.reset()
    provider = OpenAICompatProvider(model.url, None, timeout=5)

    async def calls() -> list[str]:
        texts = []
        for n in range(3):
            model.reply(text=f"answer {n}")
            request = ChatRequest(model="m", messages=[ChatMessage("user", "hi")])
            events = [e async for e in provider.stream(request)]
            texts.append("".join(e.text for e in events if isinstance(e, TextDelta)))
        return texts

    assert asyncio.run(calls()) == ["answer 0", "answer 1", "answer 2"]
    assert model.connections == 1
    # A new event loop (a function may run each invocation in one) gets its own connection:
    # the kept one belongs to the loop that is gone.
    assert asyncio.run(calls()) == ["answer 0", "answer 1", "answer 2"]
    assert model.connections == 2


def test_server_sent_events_are_split_as_the_format_says():
    """LF, CRLF and CR line ends (a CRLF may be cut between two reads), events of several
    `data` lines, comments and other fields, a last event without its blank line."""
    import asyncio

    from agents_core.inference.openai_compat import _sse_data

    parts = [
        b"data: one\n\n: a comment\n\nevent: x\r\ndata: two\r",
        b"\n\r",
        b"\ndata: three\rdata:four\r\rid: 7\n",
        b'data\n\ndata: {"a": "\xc3',
        b'\xa9"}\n\ndata: [DONE]',
    ]

    async def parse() -> list[bytes]:
        async def body():
            for part in parts:
                yield part

        return [data async for data in _sse_data(body())]

    assert asyncio.run(parse()) == [
        b"one",
        b"two",
        b"three\nfour",
        b"",
        b'{"a": "\xc3\xa9"}',
        b"[DONE]",
    ]


def _chat_stream(text: str) -> bytes:
    import json

    chunks = [
        {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    return b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"


def test_answers_framed_by_length_or_by_the_connection_closing_and_a_kept_connection_that_closed():
    """A sized body keeps its connection; a server that closes a kept connection between calls
    costs a new connection, not a failed call; a body that ends with its connection is read to
    that end."""
    import asyncio

    from agents_core.inference.openai_compat import OpenAICompatProvider
    from agents_core.inference.types import ChatMessage, ChatRequest, TextDelta

    accepted: list[int] = []
    served: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            size = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            await reader.readexactly(size)
            served.append(1)
            body = _chat_stream(f"answer {len(served)}")
            if len(served) == 3:  # no length: the body ends when the connection does
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + body)
                writer.close()
                return
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            await writer.drain()
            if len(served) == 1:  # the server drops the kept connection after one answer
                await asyncio.sleep(0.05)
                writer.close()
                return

    async def calls() -> list[str]:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        provider = OpenAICompatProvider(f"http://127.0.0.1:{port}/v1", "k", timeout=5)
        texts = []
        async with server:
            for n in range(4):
                if n == 1:
                    await asyncio.sleep(0.2)  # the kept connection is closed meanwhile
                request = ChatRequest(model="m", messages=[ChatMessage("user", "hi")])
                events = [e async for e in provider.stream(request)]
                texts.append("".join(e.text for e in events if isinstance(e, TextDelta)))
        return texts

    assert asyncio.run(calls()) == ["answer 1", "answer 2", "answer 3", "answer 4"]
    # The first connection (closed by the server), the second (ended with the third body),
    # the third for the last call.
    assert len(accepted) == 3


def test_a_proxy_in_the_environment_sends_the_model_calls_through_httpx(monkeypatch):
    from agents_core.inference.openai_compat import OpenAICompatProvider, _ProxiedHTTP

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    direct = OpenAICompatProvider("https://models.example/v1", None, timeout=5)
    assert not isinstance(direct._http, _ProxiedHTTP)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    proxied = OpenAICompatProvider("https://models.example/v1", None, timeout=5)
    assert isinstance(proxied._http, _ProxiedHTTP)
    monkeypatch.setenv("NO_PROXY", "models.example")
    bypassed = OpenAICompatProvider("https://models.example/v1", None, timeout=5)
    assert not isinstance(bypassed._http, _ProxiedHTTP)


def test_the_httpx_path_reads_answers_and_failures_as_the_lean_client_does(model):
    import asyncio

    import pytest
    from agents_core.errors import UpstreamFailed
    from agents_core.inference.openai_compat import OpenAICompatProvider, _ProxiedHTTP
    from agents_core.inference.types import ChatMessage, ChatRequest, TextDelta

    model.reset()
    provider = OpenAICompatProvider(model.url, None, timeout=5)
    provider._http = _ProxiedHTTP(f"{model.url}/chat/completions", {}, 5, 5)
    request = ChatRequest(model="m", messages=[ChatMessage("user", "hi")])

    async def text() -> str:
        events = [e async for e in provider.stream(request)]
        return "".join(e.text for e in events if isinstance(e, TextDelta))

    model.reply(text="via httpx")
    assert asyncio.run(text()) == "via httpx"
    model.reply(error="status", status=503)
    with pytest.raises(UpstreamFailed, match="answered 503: model exploded"):
        asyncio.run(text())
    model.reply(error="truncated", text="partial")
    with pytest.raises(UpstreamFailed, match="without finishing"):
        asyncio.run(text())


def test_a_grammar_response_format_is_refused_before_any_call():
    import pytest
    from agents_core.api.common import GrammarResponseFormat
    from agents_core.errors import InvalidRequest
    from agents_core.inference.openai_compat import OpenAICompatProvider
    from agents_core.inference.types import ChatMessage, ChatRequest

    provider = OpenAICompatProvider("http://127.0.0.1:9/v1", None, timeout=5)
    plain = ChatRequest(model="m", messages=[ChatMessage("user", "hi")])
    provider.check(plain)
    grammar = GrammarResponseFormat(type="grammar", bnf={"root": "x"})
    with pytest.raises(InvalidRequest, match="grammar"):
        provider.check(ChatRequest(model="m", messages=plain.messages, response_format=grammar))


async def posts(serve, count: int) -> list:
    """`count` POSTs of `{}` by the lean client to a local server answering with `serve`: each
    answer as (status, headers, body), or the message of the Broken it raised."""
    import asyncio

    from agents_core.http1 import Broken, PostClient

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = PostClient(f"http://127.0.0.1:{port}/", {}, timeout=5, connect_timeout=2)
    results: list = []
    async with server:
        for _ in range(count):
            try:
                answer = await client.post(b"{}")
                try:
                    body = b"".join([part async for part in answer.body()])
                finally:
                    answer.close()
                results.append((answer.status, answer.headers, body))
            except Broken as err:
                results.append(str(err))
    return results


def test_an_answers_head_is_read_whole_with_either_line_end_after_interim_answers_within_bounds():
    """The lean client reads a head once its blank line has come: CRLF or bare LF line ends,
    a 100 Continue before the answer; a head with too many lines, one that passes its size
    bound, and one cut short by the server are a broken answer, not a hang."""
    import asyncio

    answers = [
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A: 1\r\n\r\nok",
        b"HTTP/1.1 201 Created\nContent-Length: 3\nX-B:  two \n\nyes",
        b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 101 + b"\r\n",
        b"HTTP/1.1 200 OK\r\nX: " + b"a" * 300_000,
        b"HTTP/1.1 200 OK\r\nContent-Le",
    ]

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        await reader.readexactly(2)  # the body, b"{}"
        writer.write(answers.pop(0))
        await writer.drain()
        writer.close()

    ok, created, *broken = asyncio.run(posts(serve, 5))
    assert ok == (200, {"content-length": "2", "x-a": "1"}, b"ok")
    assert created == (201, {"content-length": "3", "x-b": "two"}, b"yes")
    assert broken == ["the answer's head passes its bounds"] * 2 + [
        "the answer ended within its head"
    ]


def test_a_chunked_body_reads_the_same_whether_its_chunks_arrive_whole_or_in_pieces():
    """A chunked answer's chunks are taken at once when all of each is there and read as
    they come otherwise: the same body either way, with extensions, a last chunk and
    trailers; a chunk whose size or end is wrong is a broken answer in both cases."""
    import asyncio

    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    parts = [b"hello", b" ", b"a\r\n\nworld\r\n", b"!"]  # data with line ends in it
    good = b"".join(
        f"{len(part):X}".encode() + (b";ext=1" if n == 1 else b"") + b"\r\n" + part + b"\r\n"
        for n, part in enumerate(parts)
    )
    good += b"0\r\nX-T: 1\r\n\r\n"
    bodies = [
        good,
        b"5\r\nhello\r\nzz\r\nwhat\r\n0\r\n\r\n",
        b"5\r\nhello\r\n3\r\nabcdef\r\n0\r\n\r\n",
    ]

    # In order, on whichever connection asks (a broken answer's connection is not kept).
    answers = [(body, piecewise) for body in bodies for piecewise in (False, True)]

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while answers:
            try:
                await reader.readuntil(b"\r\n\r\n")
                await reader.readexactly(2)
            except asyncio.IncompleteReadError:
                break  # the client closed this connection
            body, piecewise = answers.pop(0)
            answer = head + body
            if piecewise:  # a few bytes at a time, each after the reader has waited
                for i in range(0, len(answer), 3):
                    writer.write(answer[i : i + 3])
                    await writer.drain()
                    await asyncio.sleep(0.002)
            else:
                writer.write(answer)
                await writer.drain()
        writer.close()

    answered = asyncio.run(posts(serve, len(answers)))
    whole, pieces, *broken = [a[2] if isinstance(a, tuple) else a for a in answered]
    assert whole == pieces == b"".join(parts)
    assert (
        broken
        == ["not a chunk's size: b'zz'"] * 2 + ["a chunk does not end where its size says"] * 2
    )


def test_a_kept_connections_waits_time_out_whether_their_deadline_is_later_or_earlier():
    """A connection's waits share one timer. An answer late past the client's timeout is a
    TimeoutError when the timer was set for an earlier wait (it is set again) and when it was
    set for a later one (it is moved); on time, the answer is read on the same connection."""
    import asyncio

    from agents_core.http1 import PostClient

    delays = [0.0, 1.0, 0.0, 1.0]  # the server's pause before each answer

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while delays:
                await reader.readuntil(b"\r\n\r\n")
                await reader.readexactly(2)
                await asyncio.sleep(delays.pop(0))
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client gave up on this connection

    async def calls() -> list[str]:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = PostClient(f"http://127.0.0.1:{port}/", {}, timeout=0.3, connect_timeout=2)
        outcomes = []
        async with server:
            for timeout in (0.3, 0.3, 30.0, 0.3):  # the third sets the timer far ahead
                client.timeout = timeout
                await asyncio.sleep(0.1)  # the timer set for the last wait fires first
                try:
                    answer = await client.post(b"{}")
                    outcomes.append((await answer.read(100)).decode())
                    answer.close()
                except TimeoutError:
                    outcomes.append("timed out")
        return outcomes

    assert asyncio.run(calls()) == ["ok", "timed out", "ok", "timed out"]


def test_connections_opened_ahead_serve_the_next_calls_and_a_refused_one_is_raised(model):
    """`PostClient.open(n)` (a Lambda init, `Services.connect`) keeps n connections that the
    next n calls at once take, opening none; where nothing listens, it raises what `post`
    would, keeping nothing."""
    import asyncio

    from agents_core.http1 import ConnectFailed, PostClient

    model.reset()
    client = PostClient(f"{model.url}/chat/completions", {}, timeout=5, connect_timeout=2)

    async def opened_then_two_at_once() -> list[int]:
        await client.open(2)
        kept = len(client._idle)
        for _ in range(2):
            model.reply(text="hi")
        answers = await asyncio.gather(*(client.post(b"{}") for _ in range(2)))
        for answer in answers:
            await answer.read(1_000_000)
            answer.close()
        await client.open(2)  # both kept again: nothing to open
        return [kept, len(client._idle)]

    assert asyncio.run(opened_then_two_at_once()) == [2, 2]
    assert model.connections == 2  # the calls took the connections opened ahead

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    nowhere = PostClient(f"http://127.0.0.1:{port}/", {}, timeout=5, connect_timeout=2)
    with pytest.raises(ConnectFailed):
        asyncio.run(nowhere.open(2))
    assert nowhere._idle == []
