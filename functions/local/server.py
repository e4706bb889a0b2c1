"""Local entry point (`make run`): every function's routers in one ASGI app on 127.0.0.1:$PORT.

AWS is whatever AWS_ENDPOINT_URL names (boto3 reads it natively); without it an embedded moto
server stands in. The table, the resume queue (with its DLQ) and the event bus are created there
if missing, and the resume queue is polled in-process by the worker the resume function runs.
The routers, stores, engine and worker are the same code the Lambda functions run.
"""

from __future__ import annotations

import asyncio
import os
import socket


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start_embedded_moto() -> str:
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = _free_port()
    ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False).start()
    for name, value in (
        ("AWS_ACCESS_KEY_ID", "local"),
        ("AWS_SECRET_ACCESS_KEY", "local"),
        ("AWS_SESSION_TOKEN", "local"),
    ):
        os.environ.setdefault(name, value)
    return f"http://127.0.0.1:{port}"


def build_local_app():
    """(app, services, description): every router over the configured (or embedded) AWS."""
    from contextlib import asynccontextmanager

    from agents_core import aws
    from agents_core.lifecycle import ensure_event_bus
    from agents_core.services import build_services
    from agents_core.services.resume_queue import (
        ResumeQueueWorker,
        ensure_resume_queue,
        poll_forever,
    )
    from agents_core.settings import Settings
    from agents_core.store.schema import create_table_if_missing
    from agents_core.web.agents import router as agents_router
    from agents_core.web.app import create_app
    from agents_core.web.responses import router as responses_router
    from agents_core.web.turns import resume_router, turns_router

    os.environ.setdefault("AWS_DEFAULT_REGION", os.environ.get("AWS_REGION", "us-east-1"))
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    where = "given by AWS_ENDPOINT_URL"
    if not endpoint:
        endpoint = os.environ["AWS_ENDPOINT_URL"] = _start_embedded_moto()
        where = "embedded moto server"

    settings = Settings.from_env()
    client = aws.client("dynamodb")
    create_table_if_missing(client, settings.table_name)
    sqs = aws.client("sqs", read_timeout=10)
    queue_url = ensure_resume_queue(sqs, settings.resume_queue_name)
    ensure_event_bus(aws.client("events"), settings.event_bus_name)
    services = build_services(settings, client)

    @asynccontextmanager
    async def poll_resume_queue(_app):
        poller = asyncio.create_task(poll_forever(sqs, queue_url, ResumeQueueWorker(services)))
        yield
        poller.cancel()

    app = create_app(
        agents_router,
        turns_router,
        resume_router,
        responses_router,
        services=services,
        lifespan=poll_resume_queue,
    )
    description = (
        f"AWS endpoint {endpoint} ({where}) | table {settings.table_name}"
        f" | queue {settings.resume_queue_name} (polled here) | bus {settings.event_bus_name}"
        f" | {services.models.describe()}"
    )
    return app, services, description


def main() -> None:
    import uvicorn

    app, _, description = build_local_app()
    port = int(os.environ.get("PORT", "8321"))
    print(f"serverless-agents serving http://127.0.0.1:{port} | {description}", flush=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
