"""Local entry point (`make run`): every function's routers in one ASGI app on 127.0.0.1:$PORT.

AWS is whatever AWS_ENDPOINT_URL names (boto3 reads it natively); without it an embedded moto
server stands in, its data in memory (DATA_DIR keeps the table, the files bucket and the local
vector indexes across restarts). The table, the resume, background and ingestion queues (each
with its DLQ), the files bucket and the event bus are created there if missing, and each queue
is polled in-process by the worker its Lambda function runs. The routers, stores, engine and
workers are the same code the Lambda functions run.

Each problem a user can fix (a busy port, an unreachable AWS endpoint, missing credentials)
ends the server with one line saying what is wrong and what to do, never a traceback.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import errno
import json
import logging
import os
import shutil
import socket
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

#: What the outbound guard lets the local server call for a caller (unless OUTBOUND_ALLOW says
#: otherwise): loopback, where local MCP servers listen.
LOCAL_OUTBOUND_ALLOW = ("127.0.0.0/8", "::1/128", "localhost")

#: The path `make invoke` (functions/local/invoke.py) asks for the AWS endpoint and names in use.
LOCAL_AWS_PATH = "/local/aws"


class StartupError(Exception):
    """A problem the user can fix; its message is the one line the server prints before exiting."""


def _bind(port: int) -> socket.socket:
    """The listening socket, bound before anything else starts, so a busy port is the first and
    only thing reported (and the banner is printed only once the port is ours)."""
    # IPPROTO_TCP, not the default 0: asyncio sets TCP_NODELAY only on sockets whose proto says
    # TCP, and without it Nagle's algorithm met the client's delayed ACK, answering every
    # request on a kept-alive connection some 40 ms late.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as err:
        sock.close()
        if err.errno == errno.EADDRINUSE:
            raise StartupError(
                f"port {port} on 127.0.0.1 is already in use (another `make run`?): stop that"
                f" server, or choose another port: PORT={port + 1} make run"
            ) from None
        raise StartupError(
            f"cannot listen on 127.0.0.1:{port} ({err.strerror or err}): choose another port,"
            " e.g. PORT=8321 make run"
        ) from None
    sock.listen(2048)
    return sock


def _check_reachable(endpoint: str) -> None:
    """Fail fast and clearly when AWS_ENDPOINT_URL names nothing that listens (boto3 would
    retry, then complain about credentials or connections in a long traceback)."""
    parsed = urlparse(endpoint)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise StartupError(
            f"AWS_ENDPOINT_URL={endpoint!r} is not an http(s) URL: set it to your AWS emulator's"
            " address (e.g. http://127.0.0.1:5000), or unset it to use the embedded moto server"
        )
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        socket.create_connection((parsed.hostname, port), timeout=3).close()
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise StartupError(
            f"AWS_ENDPOINT_URL {endpoint} is unreachable ({reason.lower()}): start the service"
            " there (moto_server, LocalStack...), or unset AWS_ENDPOINT_URL to use the embedded"
            " moto server"
        ) from None


def _start_embedded_moto() -> str:
    """moto's server with DynamoDB's requests one at a time (serial_moto.py says why)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from serial_moto import SerialMotoServer

    # Werkzeug logs every request moto fails with a traceback; moto fails the actions it lacks
    # (Bedrock's among them), and the caller already gets a clear error for those.
    logging.getLogger("werkzeug").setLevel(logging.CRITICAL)
    endpoint = SerialMotoServer().start()
    # moto takes any credentials. Yours (AWS_PROFILE, AWS_ACCESS_KEY_ID) are kept, so a
    # bedrock/ model can reach real Bedrock through AWS_ENDPOINT_URL_BEDROCK_RUNTIME.
    if not (os.environ.get("AWS_ACCESS_KEY_ID") or os.environ.get("AWS_PROFILE")):
        os.environ["AWS_ACCESS_KEY_ID"] = "local"
        os.environ["AWS_SECRET_ACCESS_KEY"] = "local"
        os.environ["AWS_SESSION_TOKEN"] = "local"
    return endpoint


def _aws_failure(endpoint: str, err: Exception) -> StartupError:
    from botocore.exceptions import NoCredentialsError, PartialCredentialsError

    if isinstance(err, NoCredentialsError | PartialCredentialsError):
        return StartupError(
            f"no AWS credentials for AWS_ENDPOINT_URL {endpoint}: set AWS_ACCESS_KEY_ID and"
            " AWS_SECRET_ACCESS_KEY (any values work for moto or LocalStack) or AWS_PROFILE"
        )
    code = (getattr(err, "response", None) or {}).get("Error", {}).get("Code", "")
    if code.isdigit():  # no AWS error document: something else answers there
        what = f"answered HTTP {code} with no AWS reply"
    else:
        first_line = (str(err).strip() or type(err).__name__).splitlines()[0][:200]
        what = f"failed {getattr(err, 'operation_name', 'a call')} ({first_line})"
    return StartupError(
        f"the AWS endpoint {endpoint} {what}: check that AWS_ENDPOINT_URL names an"
        " AWS-compatible service (moto, LocalStack) or AWS itself"
    )


def _web_search_note(provider: str) -> str:
    if provider == "offline":
        return "web search: offline results (set WEB_SEARCH_PROVIDER=tavily for real ones)"
    return f"web search: {provider}"


def _start_vector_peer() -> tuple[str, Any]:
    """The local S3 Vectors (functions/local/vector_peer.py: moto lacks QueryVectors), unless
    AWS_ENDPOINT_URL_S3VECTORS names one; boto3 sends the s3vectors client there. (A note for
    the banner, the peer or None.)"""
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3VECTORS")
    if endpoint:
        return f"S3 Vectors at {endpoint}", None
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from vector_peer import VectorPeer, start_vector_peer

    peer = VectorPeer()
    url, _ = start_vector_peer(peer=peer)
    os.environ["AWS_ENDPOINT_URL_S3VECTORS"] = url
    return f"S3 Vectors: local peer at {url}", peer


def _embedder_note(settings: Any) -> str:
    if settings.embedding_provider == "offline":
        return (
            "embeddings: offline, lexical not semantic (set EMBEDDING_PROVIDER=bedrock or"
            " openai for a real model)"
        )
    return f"embeddings: {settings.embedding_provider}"


def _bedrock_note(embedded: bool) -> str:
    """Where bedrock/ models go: the embedded moto server has no Bedrock."""
    bedrock_endpoint = os.environ.get("AWS_ENDPOINT_URL_BEDROCK_RUNTIME")
    if bedrock_endpoint:
        return f"bedrock/<id> on Bedrock at {bedrock_endpoint}"
    if embedded:
        return (
            "bedrock/<id> needs real AWS (the embedded moto server has no Bedrock: set"
            " AWS_ENDPOINT_URL_BEDROCK_RUNTIME and your AWS credentials)"
        )
    return "bedrock/<id> on Bedrock at AWS_ENDPOINT_URL"


def _shields_note(settings: Any) -> str:
    """The shield every tenant has, and how a failing shield is treated."""
    from agents_core.services.safety import BUILTIN_SHIELD

    failing = "fail open" if settings.shield_fail_open else "fail closed"
    return (
        f"shields: built-in {BUILTIN_SHIELD.identifier!r} (offline regex patterns; register"
        f" llama-guard or bedrock shields with POST /v1/shields), provider failures {failing}"
    )


class TableSnapshot:
    """The table's items in DATA_DIR/<table>.jsonl: restored at start, saved at shutdown.

    Items go through DynamoDB's own API both ways (Scan, BatchWriteItem), exactly as stored;
    the indexes rebuild from them. Queue messages and bus rules are not kept."""

    def __init__(self, client: Any, table: str, data_dir: str) -> None:
        self.client, self.table = client, table
        self.path = Path(data_dir) / f"{table}.jsonl"

    def restore(self) -> int:
        if not self.path.exists():
            return 0
        items = [_decode(json.loads(line)) for line in self.path.read_text().splitlines() if line]
        for start in range(0, len(items), 25):
            requests = [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]
            pending = {self.table: requests}
            for _ in range(10):  # unprocessed items are retried a bounded number of times
                pending = self.client.batch_write_item(RequestItems=pending)["UnprocessedItems"]
                if not pending:
                    break
        return len(items)

    def save(self) -> int:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_suffix(".jsonl.partial")
        count = 0
        with partial.open("w") as out:
            for page in self.client.get_paginator("scan").paginate(TableName=self.table):
                for item in page["Items"]:
                    out.write(json.dumps(_encode(item)) + "\n")
                    count += 1
        partial.replace(self.path)
        return count


class BucketSnapshot:
    """The files bucket's objects in DATA_DIR/<bucket>/, one file per object named by its key
    in base64url: restored at start, saved at shutdown (a new folder, then swapped in)."""

    what = "files"

    def __init__(self, s3: Any, bucket: str, data_dir: str) -> None:
        self.s3, self.bucket = s3, bucket
        self.path = Path(data_dir) / bucket

    def restore(self) -> int:
        if not self.path.is_dir():
            return 0
        count = 0
        for entry in sorted(self.path.iterdir()):
            key = base64.urlsafe_b64decode(entry.name.encode()).decode()
            self.s3.put_object(Bucket=self.bucket, Key=key, Body=entry.read_bytes())
            count += 1
        return count

    def save(self) -> int:
        partial = self.path.with_name(self.path.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        count = 0
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket):
            for listed in page.get("Contents", []):
                name = base64.urlsafe_b64encode(listed["Key"].encode()).decode()
                body = self.s3.get_object(Bucket=self.bucket, Key=listed["Key"])["Body"]
                (partial / name).write_bytes(body.read())
                count += 1
        shutil.rmtree(self.path, ignore_errors=True)
        partial.rename(self.path)
        return count


class VectorSnapshot:
    """The local S3 Vectors peer's indexes in DATA_DIR/vectors.json."""

    what = "vector indexes"

    def __init__(self, peer: Any, data_dir: str) -> None:
        self.peer = peer
        self.path = Path(data_dir) / "vectors.json"

    def restore(self) -> int:
        if not self.path.exists():
            return 0
        self.peer.load(json.loads(self.path.read_text()))
        return sum(len(indexes) for indexes in self.peer.buckets.values())

    def save(self) -> int:
        state = self.peer.dump()
        partial = self.path.with_suffix(".json.partial")
        partial.write_text(json.dumps(state))
        partial.replace(self.path)
        return sum(len(indexes) for indexes in state.values())


def _encode(value: Any) -> Any:
    """A DynamoDB attribute value as JSON (binary as base64)."""
    if isinstance(value, dict):
        return {k: _encode_binary(k, v) for k, v in value.items()}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    return value


def _encode_binary(kind: str, value: Any) -> Any:
    if kind == "B":
        return base64.b64encode(bytes(value)).decode()
    if kind == "BS":
        return [base64.b64encode(bytes(v)).decode() for v in value]
    return _encode(value)


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _decode_binary(k, v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def _decode_binary(kind: str, value: Any) -> Any:
    if kind == "B":
        return base64.b64decode(value)
    if kind == "BS":
        return [base64.b64decode(v) for v in value]
    return _decode(value)


def build_local_app():
    """(app, services, description): every router over the configured (or embedded) AWS.
    Raises StartupError for what the user can fix."""
    from contextlib import asynccontextmanager
    from dataclasses import replace

    from agents_core import aws
    from agents_core.lifecycle import ensure_event_bus
    from agents_core.services import build_services
    from agents_core.services.background import BackgroundWorker
    from agents_core.services.ingest import IngestWorker
    from agents_core.services.resume_queue import (
        ResumeQueueWorker,
        ensure_resume_queue,
        poll_forever,
    )
    from agents_core.settings import Settings
    from agents_core.store.schema import create_table_if_missing
    from agents_core.web.agents import router as agents_router
    from agents_core.web.app import create_app
    from agents_core.web.conversations import router as conversations_router
    from agents_core.web.discovery import router as discovery_router
    from agents_core.web.embeddings import router as embeddings_router
    from agents_core.web.files import files_router, vector_stores_router
    from agents_core.web.playground import router as playground_router
    from agents_core.web.prompts import router as prompts_router
    from agents_core.web.responses import router as responses_router
    from agents_core.web.safety import safety_router, shields_router
    from agents_core.web.tools import router as tools_router
    from agents_core.web.turns import resume_router, turns_router
    from botocore.exceptions import BotoCoreError, ClientError
    from fastapi import APIRouter

    region = os.environ.setdefault("AWS_DEFAULT_REGION", os.environ.get("AWS_REGION", "us-east-1"))
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    data_dir = os.environ.get("DATA_DIR")
    embedded = not endpoint
    if endpoint:
        if data_dir:
            raise StartupError(
                f"DATA_DIR keeps the embedded moto server's data, but AWS_ENDPOINT_URL {endpoint}"
                " keeps its own: unset one of them"
            )
        _check_reachable(endpoint)
        where = "given by AWS_ENDPOINT_URL"
    else:
        endpoint = os.environ["AWS_ENDPOINT_URL"] = _start_embedded_moto()
        where = "embedded moto server"

    vectors_note, vector_peer = _start_vector_peer()
    settings = Settings.from_env()
    if settings.local_auth not in ("", "keys"):
        raise StartupError(
            f"LOCAL_AUTH={settings.local_auth!r} is not known: LOCAL_AUTH=keys asks callers for"
            " a Bearer key (scripts/api_keys.py --local create <tenant>); unset, none is asked"
        )
    try:
        from agents_core.auth.tokens import verifier

        jwts = verifier(settings)
    except ValueError as err:
        raise StartupError(str(err)) from None
    if jwts and settings.local_auth != "keys":
        raise StartupError("JWT_ISSUER is checked under LOCAL_AUTH=keys only: set both")
    if "OUTBOUND_ALLOW" not in os.environ:  # MCP servers on this machine, never in Lambda
        settings = replace(settings, outbound_allow=LOCAL_OUTBOUND_ALLOW)
    try:
        # One call first, not retried: a wrong endpoint or missing credentials fail here, once
        # (10 s: LocalStack starts its DynamoDB on the first call).
        aws.client("dynamodb", read_timeout=10, attempts=1).list_tables(Limit=1)
        client = aws.client("dynamodb")
        create_table_if_missing(client, settings.table_name)
        sqs = aws.client("sqs", read_timeout=10)
        queue_url = ensure_resume_queue(sqs, settings.resume_queue_name)
        background_url = ensure_resume_queue(
            sqs,
            settings.background_queue_name,
            visibility_seconds=int(settings.queue_invocation_seconds) + 5,
        )
        ingest_url = ensure_resume_queue(sqs, settings.ingest_queue_name)
        settings = replace(
            settings, background_queue_url=background_url, ingest_queue_url=ingest_url
        )
        s3 = aws.client("s3", read_timeout=30)
        _ensure_files_bucket(s3, settings.files_bucket)
        ensure_event_bus(aws.client("events"), settings.event_bus_name)
    except (BotoCoreError, ClientError) as err:
        raise _aws_failure(endpoint, err) from None
    services = build_services(settings, client)
    services.sqs_client = sqs
    services.s3_client = s3
    try:
        services.embedder  # noqa: B018 (a wrong EMBEDDING_* setting fails here, said once)
        services.vector_index.ensure_bucket()
    except ValueError as err:
        raise StartupError(str(err)) from None
    except (BotoCoreError, ClientError) as err:
        raise _aws_failure(os.environ["AWS_ENDPOINT_URL_S3VECTORS"], err) from None

    snapshot = TableSnapshot(client, settings.table_name, data_dir) if data_dir else None
    kept: list[Any] = []  # what else DATA_DIR keeps: the files bucket, the local vectors
    if snapshot:
        kept.append(BucketSnapshot(s3, settings.files_bucket, data_dir))
        if vector_peer is not None:
            kept.append(VectorSnapshot(vector_peer, data_dir))
        restored = snapshot.restore()
        others = "; ".join(f"{part.restore()} {part.what} restored" for part in kept)
        data = f"data in {snapshot.path} ({restored} items restored; {others}; saved when it stops)"
    elif embedded:
        data = "data in memory, lost when it stops (DATA_DIR=<dir> keeps it)"
    else:
        data = "data in that endpoint"

    @asynccontextmanager
    async def lifespan(_app):
        pollers = [
            asyncio.create_task(poll_forever(sqs, queue_url, ResumeQueueWorker(services))),
            asyncio.create_task(
                poll_forever(sqs, background_url, BackgroundWorker(services), batch_size=1)
            ),
            asyncio.create_task(
                poll_forever(sqs, ingest_url, _AsyncWorker(IngestWorker(services)))
            ),
        ]
        yield
        for poller in pollers:  # and wait for them: no call once the server's threads are gone
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await poller
        if snapshot:
            saved = await asyncio.to_thread(snapshot.save)
            print(f"saved {saved} items to {snapshot.path}", flush=True)
        for part in kept:
            saved = await asyncio.to_thread(part.save)
            print(f"saved {saved} {part.what} to {part.path}", flush=True)

    local = APIRouter()

    @local.get(LOCAL_AWS_PATH, include_in_schema=False)
    def local_aws() -> dict[str, str]:
        """Where this server keeps its data, for `make invoke` to run functions against."""
        return {
            "endpoint_url": endpoint,
            "region": region,
            "table_name": settings.table_name,
            "resume_queue_url": queue_url,
            "background_queue_url": background_url,
            "ingest_queue_url": ingest_url,
            "files_bucket": settings.files_bucket,
            "event_bus_name": settings.event_bus_name,
        }

    app = create_app(
        agents_router,
        turns_router,
        resume_router,
        responses_router,
        conversations_router,
        discovery_router,
        tools_router,
        shields_router,
        safety_router,
        embeddings_router,
        files_router,
        vector_stores_router,
        prompts_router,
        playground_router,
        local,
        services=services,
        lifespan=lifespan,
    )
    auth = (
        "callers need a Bearer key (LOCAL_AUTH=keys; scripts/api_keys.py --local create <tenant>)"
        if settings.local_auth == "keys"
        else "no key needed (tenant default)"
    )
    if settings.jwt_issuer:
        auth += f", or a JWT from {settings.jwt_issuer}"
    description = (
        f"{auth} | AWS endpoint {endpoint} ({where}) | table {settings.table_name}"
        f" | queues {settings.resume_queue_name}, {settings.background_queue_name},"
        f" {settings.ingest_queue_name} (polled here) | files bucket {settings.files_bucket}"
        f" | bus {settings.event_bus_name}"
        f" | {data} | {services.models.describe()}, {_bedrock_note(embedded)}"
        f" | {_web_search_note(settings.web_search_provider)}"
        f" | callers' URLs may also reach {', '.join(settings.outbound_allow) or 'nothing private'}"
        f" | {_shields_note(settings)}"
        f" | {_embedder_note(settings)} | {vectors_note}, bucket {settings.vector_bucket_name}"
    )
    return app, services, description


class _AsyncWorker:
    """A plain (synchronous) queue worker, such as the ingestion one, for `poll_forever`: run
    in a thread, off the server's event loop."""

    def __init__(self, worker: Any) -> None:
        self.worker = worker

    async def handle(self, event: dict[str, Any]) -> dict[str, Any]:
        return await asyncio.to_thread(self.worker.handle, event)


def _ensure_files_bucket(s3: Any, name: str) -> None:
    """The files bucket, created if missing (a stack declares its own: template.yaml); one that
    another server created meanwhile is ours to use."""
    from botocore.exceptions import ClientError

    try:
        s3.head_bucket(Bucket=name)
    except ClientError:
        with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
            s3.create_bucket(Bucket=name)


def _port() -> int:
    value = os.environ.get("PORT", "8321")
    if not value.isdigit() or not 0 < int(value) < 65536:
        raise StartupError(f"PORT={value!r} is not a port number: e.g. PORT=8321 make run")
    return int(value)


def main() -> None:
    # Metrics are CloudWatch lines for Lambda's logs; in a terminal they are noise unless asked
    # for (POWERTOOLS_METRICS_DISABLED=false make run).
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    try:
        port = _port()
        sock = _bind(port)
        app, _, description = build_local_app()
    except StartupError as err:
        print(f"serverless-agents: {err}", file=sys.stderr, flush=True)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)

    import uvicorn
    from agents_core.web.serve import Server

    print(f"serverless-agents serving http://127.0.0.1:{port} | {description}", flush=True)
    try:
        Server(uvicorn.Config(app, log_level="warning", loop="uvloop")).run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn shut down cleanly, then re-raised the Ctrl-C
        sys.exit(130)


if __name__ == "__main__":
    main()
