"""The peers the benchmarks run beside the service: a moto server standing in for AWS (with
DynamoDB's requests one at a time, functions/local/serial_moto.py) and the
scripted OpenAI-compatible model (tests/peers/openai_server.py), each in a process of its own, as
AWS and a model server would be: they share no interpreter lock with what is measured.

    with moto_and_model() as (aws_endpoint, model_url):
        ...
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, seconds: float = 30) -> None:
    """Until something listens on `port`, looking every 10 ms as the Lambda Web Adapter's
    readiness check does (a cold init's figure is then within 10 ms of its end)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.01)
    raise RuntimeError(f"nothing listens on {port}")


def compile_bytecode(root: Path = ROOT) -> None:
    """Write the bytecode of the functions' code and the layer's package, as the built layer
    ships it: an init here then reads .pyc files as in Lambda, not compiling from source at
    each start where PYTHONDONTWRITEBYTECODE is set (as on this machine) or a checkout is new."""
    folders = [root / "layers" / "agents_core" / "agents_core", root / "functions"]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *map(str, folders)], check=True)


def built_layer(root: Path = ROOT) -> Path:
    """The AgentsCoreLayer as `sam build` lays it out, for this machine (build_layer.py --host,
    its install cached under build/layer-cache), with its bytecode: its `python/` folder, what
    Lambda mounts at /opt/python. It leaves out what the layer prunes (pydantic's 1.x copy,
    Powertools' event handler, ...), which a checkout's virtualenv still has."""
    module = _build_layer_module(root)
    site = module.build(root / "build" / "bench-layer", module.HOST)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(site)], check=True)
    return site


def built_function(name: str, root: Path = ROOT) -> Path:
    """A function's own build, for one built without the layer (the authorizer: build_layer.py
    --host --function NAME), with its bytecode: its dependencies and agents_core, what Lambda
    puts on its path instead of /opt/python."""
    module = _build_layer_module(root)
    out = root / "build" / f"bench-{name}"
    shutil.rmtree(out, ignore_errors=True)
    module.build_function(out, name, module.HOST)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(out)], check=True)
    return out


def _build_layer_module(root: Path):
    import importlib.util

    path = root / "layers" / "agents_core" / "build_layer.py"
    spec = importlib.util.spec_from_file_location("build_layer", path)
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def use_in_process(aws_endpoint: str, model_url: str) -> None:
    """Point this process's app at the peers, as `make run` would be pointed at them (its
    metrics off, as `make run` has them)."""
    os.environ.update(
        OPENAI_BASE_URL=model_url,
        POWERTOOLS_METRICS_DISABLED="true",
        AWS_ENDPOINT_URL=aws_endpoint,
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_DEFAULT_REGION="us-east-1",
    )


@contextmanager
def moto_and_model() -> Iterator[tuple[str, str]]:
    """(the moto server's endpoint, the model's base URL), both up; stopped on exit."""
    moto_port = free_port()
    moto = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "functions" / "local" / "serial_moto.py"),
            "-p",
            str(moto_port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    model = subprocess.Popen(
        [sys.executable, "-m", "tests.peers.openai_server"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        model_url = model.stdout.readline().strip()
        wait_for_port(moto_port, moto)
        yield f"http://127.0.0.1:{moto_port}", model_url
    finally:
        moto.terminate()
        model.terminate()
