"""A local server asking for Bearer keys (LOCAL_AUTH=keys), and two tenants' openai clients,
for the files and vector stores tests."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from contextlib import contextmanager

import openai

from .lambda_support import ROOT
from .local_server import running_server


def _key(port: int, tenant: str) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "api_keys.py"), "--local", str(port)]
        + ["create", tenant],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["key"]


@contextmanager
def two_tenants(extra_env: dict[str, str] | None = None):
    """(base URL, acme's client, globex's client) on one keyed local server."""
    with running_server({"LOCAL_AUTH": "keys", **(extra_env or {})}) as (base, _):
        port = int(base.rsplit(":", 1)[1])
        clients = [
            openai.OpenAI(base_url=f"{base}/v1", api_key=_key(port, t), max_retries=0, timeout=30)
            for t in ("acme", "globex")
        ]
        yield base, *clients


def wait_for_files(client: openai.OpenAI, store_id: str, seconds: float = 30) -> list:
    """The store's files once none is in_progress (polled, as a user would)."""
    deadline = time.monotonic() + seconds
    while True:
        files = list(client.vector_stores.files.list(store_id))
        if all(f.status != "in_progress" for f in files) or time.monotonic() > deadline:
            return files
        time.sleep(0.1)
