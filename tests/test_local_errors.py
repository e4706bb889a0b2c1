"""`make run`'s server tells what is wrong in one line (and exits 1), never with a traceback;
bedrock/ models fail clearly under the embedded moto server; metrics stay out of the console
unless asked for; DATA_DIR keeps the table across restarts."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

from .local_server import SERVER, failed_start, free_port, started_server
from .peers.bedrock_emulator import BedrockEmulator

NO_CREDENTIALS = {"AWS_EC2_METADATA_DISABLED": "true", "HOME": "/nonexistent"}


def listening_socket() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


def test_an_unreachable_aws_endpoint_is_one_line_naming_it_and_what_to_do():
    endpoint = f"http://127.0.0.1:{free_port()}"
    status, lines = failed_start({"AWS_ENDPOINT_URL": endpoint, **NO_CREDENTIALS})
    assert status == 1
    assert lines == [
        f"serverless-agents: AWS_ENDPOINT_URL {endpoint} is unreachable (connection refused):"
        " start the service there (moto_server, LocalStack...), or unset AWS_ENDPOINT_URL to use"
        " the embedded moto server"
    ]


def test_a_reachable_endpoint_without_credentials_is_one_line_about_credentials():
    with listening_socket() as sock:
        endpoint = f"http://127.0.0.1:{sock.getsockname()[1]}"
        status, lines = failed_start({"AWS_ENDPOINT_URL": endpoint, **NO_CREDENTIALS})
    assert status == 1
    assert len(lines) == 1 and lines[0].startswith(
        f"serverless-agents: no AWS credentials for AWS_ENDPOINT_URL {endpoint}: set"
        " AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
    )


def test_an_endpoint_that_is_not_aws_is_one_line_with_its_http_status():
    class NotAws(BaseHTTPRequestHandler):
        def do_POST(self):
            self.send_response(404)
            self.send_header("content-type", "text/html")
            self.end_headers()
            self.wfile.write(b"<html>nothing here</html>")

        def log_message(self, *args):
            pass

    web = ThreadingHTTPServer(("127.0.0.1", 0), NotAws)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{web.server_port}"
    try:
        credentials = {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y"}
        status, lines = failed_start({"AWS_ENDPOINT_URL": endpoint, **credentials})
    finally:
        web.shutdown()
    assert status == 1
    assert lines == [
        f"serverless-agents: the AWS endpoint {endpoint} answered HTTP 404 with no AWS reply:"
        " check that AWS_ENDPOINT_URL names an AWS-compatible service (moto, LocalStack) or AWS"
        " itself"
    ]


def test_an_endpoint_that_never_answers_is_described_in_one_line():
    """(Not started: the call waits out its 10 s bound.) botocore's timeout carries no
    response, unlike its HTTP errors."""
    import importlib.util

    from botocore.exceptions import ReadTimeoutError

    spec = importlib.util.spec_from_file_location("local_server_module", SERVER)
    server = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(server)
    err = ReadTimeoutError(endpoint_url="http://127.0.0.1:9/")
    message = str(server._aws_failure("http://127.0.0.1:9", err))
    assert message == (
        "the AWS endpoint http://127.0.0.1:9 failed a call (Read timeout on endpoint URL:"
        ' "http://127.0.0.1:9/"): check that AWS_ENDPOINT_URL names an AWS-compatible service'
        " (moto, LocalStack) or AWS itself"
    )


def test_a_busy_port_is_one_line_and_nothing_claims_to_serve():
    with listening_socket() as sock:
        port = sock.getsockname()[1]
        status, lines = failed_start({}, port=port)
    assert status == 1
    assert lines == [
        f"serverless-agents: port {port} on 127.0.0.1 is already in use (another `make run`?):"
        f" stop that server, or choose another port: PORT={port + 1} make run"
    ]


def test_a_port_that_is_not_a_number_is_one_line():
    status, lines = failed_start({"PORT": "eighty"})
    assert (status, lines) == (
        1,
        ["serverless-agents: PORT='eighty' is not a port number: e.g. PORT=8321 make run"],
    )


def test_a_data_dir_beside_an_endpoint_of_ones_own_is_one_line(tmp_path):
    with listening_socket() as sock:
        endpoint = f"http://127.0.0.1:{sock.getsockname()[1]}"
        status, lines = failed_start({"AWS_ENDPOINT_URL": endpoint, "DATA_DIR": str(tmp_path)})
    assert status == 1
    assert lines == [
        f"serverless-agents: DATA_DIR keeps the embedded moto server's data, but AWS_ENDPOINT_URL"
        f" {endpoint} keeps its own: unset one of them"
    ]


def new_turn(base: str, model: str, text: str) -> httpx.Response:
    config = {"model": model, "instructions": "Be brief."}
    agent = httpx.post(f"{base}/v1/agents", json={"agent_config": config}).json()["agent_id"]
    session = httpx.post(f"{base}/v1/agents/{agent}/session", json={"session_name": "s"}).json()
    url = f"{base}/v1/agents/{agent}/session/{session['session_id']}/turn"
    return httpx.post(url, json={"messages": [{"role": "user", "content": text}]}, timeout=30)


def test_under_embedded_moto_bedrock_is_said_to_need_real_aws_and_fails_clearly():
    """...and the console stays quiet: no moto traceback for the Bedrock call it lacks, no
    metric lines for the turns."""
    with started_server() as server:
        assert "bedrock/<id> needs real AWS" in server.banner
        assert "data in memory, lost when it stops" in server.banner
        failed = new_turn(server.base, "bedrock/anthropic.claude-3-haiku-20240307-v1:0", "hi")
        assert new_turn(server.base, "offline", "hello").status_code == 200
        console = server.stop()
    assert failed.status_code == 502
    detail = failed.json()["detail"]
    assert "does not serve Bedrock" in detail and "AWS_ENDPOINT_URL_BEDROCK_RUNTIME" in detail
    assert "<html" not in detail.lower()
    assert "Traceback" not in console and '"_aws"' not in console


def test_bedrock_elsewhere_metrics_when_asked_and_data_that_survives_a_restart(tmp_path):
    with BedrockEmulator() as bedrock:
        env = {
            "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": bedrock.url,
            "POWERTOOLS_METRICS_DISABLED": "false",
            "DATA_DIR": str(tmp_path),
            "TABLE_NAME": "kept",
        }
        with started_server(env) as server:
            assert f"bedrock/<id> on Bedrock at {bedrock.url}" in server.banner
            assert f"data in {tmp_path / 'kept.jsonl'} (0 items restored" in server.banner
            turn = new_turn(server.base, "bedrock/some-model", "hello there")
            console = server.stop()
        assert turn.status_code == 200, turn.text
        assert turn.json()["output_message"]["content"] == "echo: hello there"
        assert '"TurnsCompleted"' in console  # the metric line, asked for
        assert "saved" in console and (tmp_path / "kept.jsonl").exists()

        with started_server(env) as again:
            agents = httpx.get(f"{again.base}/v1/agents").json()["data"]
            session = turn.json()["session_id"]
            got = httpx.get(f"{again.base}/v1/agents/{agents[0]['agent_id']}/session/{session}")
    assert [a["agent_config"]["model"] for a in agents] == ["bedrock/some-model"]
    assert got.json()["turns"][0]["output_message"]["content"] == "echo: hello there"


def test_files_and_vector_stores_survive_a_restart_with_data_dir(tmp_path):
    """DATA_DIR keeps the files bucket and the local vector indexes beside the table: after a
    restart a file's bytes read back and its vector store still finds it."""
    import time

    import openai

    text = b"# Otters\n\nSea otters hold hands while they sleep so they do not drift apart.\n"
    env = {"DATA_DIR": str(tmp_path), "TABLE_NAME": "kept"}
    with started_server(env) as server:
        client = openai.OpenAI(base_url=f"{server.base}/v1", api_key="unused", max_retries=0)
        uploaded = client.files.create(file=("otters.md", text), purpose="assistants")
        store = client.vector_stores.create(name="kb", file_ids=[uploaded.id])
        deadline = time.monotonic() + 30
        while client.vector_stores.retrieve(store.id).file_counts.completed < 1:
            assert time.monotonic() < deadline, "the file was not ingested"
            time.sleep(0.2)
        before = client.vector_stores.search(store.id, query="otters sleep")
        console = server.stop()
    assert "saved 1 files" in console and "saved 1 vector indexes" in console

    with started_server(env) as again:
        assert "1 files restored; 1 vector indexes restored" in again.banner
        client = openai.OpenAI(base_url=f"{again.base}/v1", api_key="unused", max_retries=0)
        assert client.files.content(uploaded.id).read() == text
        after = client.vector_stores.search(store.id, query="otters sleep")
    assert [r.file_id for r in before.data] == [uploaded.id]
    assert [(r.file_id, r.score) for r in after.data] == [(r.file_id, r.score) for r in before.data]
