"""Start `functions/local/server.py` in a subprocess, as `make run` does, for end-to-end tests."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass

import httpx

from .lambda_support import ROOT

SERVER = ROOT / "functions" / "local" / "server.py"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_env(port: int, extra_env: dict[str, str] | None = None) -> dict[str, str]:
    """This environment without AWS settings (AWS is embedded moto unless told otherwise)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "POWERTOOLS_"))}
    env.update({"PORT": str(port), "PYTHONUNBUFFERED": "1"}, **(extra_env or {}))
    return env


@dataclass
class Started:
    base: str
    banner: str
    proc: subprocess.Popen

    def stop(self) -> str:
        """Stop the server (as Ctrl-C does); everything it printed after the banner."""
        self.proc.send_signal(signal.SIGINT)
        try:
            out, _ = self.proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        return out


@contextmanager
def started_server(extra_env: dict[str, str] | None = None):
    """Yield a Started server, serving; stopped on exit."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SERVER)],
        cwd=ROOT,
        env=server_env(port, extra_env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    server = Started(base, "", proc)
    try:
        server.banner = proc.stdout.readline()
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited: {server.banner}{proc.stdout.read()}")
            try:
                httpx.get(f"{base}/v1/agents", timeout=2)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield server
    finally:
        if proc.poll() is None:
            server.stop()


@contextmanager
def running_server(extra_env: dict[str, str] | None = None):
    """Yield (base_url, first stdout line); AWS is embedded moto unless told otherwise."""
    with started_server(extra_env) as server:
        yield server.base, server.banner


def failed_start(extra_env: dict[str, str], port: int | None = None) -> tuple[int, list[str]]:
    """(exit status, output lines) of a server that is expected not to start."""
    result = subprocess.run(
        [sys.executable, str(SERVER)],
        cwd=ROOT,
        env=server_env(port or free_port(), extra_env),
        capture_output=True,
        text=True,
        timeout=60,
    )
    return result.returncode, (result.stdout + result.stderr).splitlines()


def local_module(name: str):
    """A module of functions/local/ (scripts, not a package), loaded from its file."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "functions" / "local" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextmanager
def aws_in_a_process():
    """The local AWS (functions/local/serial_moto.py) in a process of its own, as a server
    started with AWS_ENDPOINT_URL meets it; yields its endpoint."""
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "functions" / "local" / "serial_moto.py"), "-p", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        yield proc.stdout.readline().strip()  # printed once it listens
    finally:
        proc.terminate()
        proc.wait(timeout=10)
