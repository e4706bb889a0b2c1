"""OpenAI's Codex CLI (npm `@openai/codex`), installed by the test setup into the virtualenv,
and run as a user runs it: `codex exec` with a provider whose `wire_api` is `responses`."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

from .lambda_support import ROOT

#: The version the suite runs (`codex exec` and its `resume`).
CODEX_VERSION = "0.171.0"
INSTALL = ROOT / ".venv" / "codex" / CODEX_VERSION


def codex_binary() -> Path:
    """The CLI, installed once (under a lock: xdist's workers may ask together)."""
    binary = INSTALL / "node_modules" / ".bin" / "codex"
    if binary.exists():
        return binary
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("the Codex CLI tests need node and npm (apt-get install nodejs npm)")
    INSTALL.mkdir(parents=True, exist_ok=True)
    with open(INSTALL / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not binary.exists():
            subprocess.run(
                [npm, "install", "--prefix", str(INSTALL), "--no-audit", "--no-fund", "--silent"]
                + [f"@openai/codex@{CODEX_VERSION}"],
                check=True,
                timeout=600,
            )
    return binary


def codex_home(home: Path, base_url: str, model: str = "gpt-test") -> dict[str, str]:
    """A `CODEX_HOME` (and `HOME`) whose config points Codex at `base_url` over the Responses
    API; the environment to run it in."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f'model = "{model}"\n'
        'model_provider = "local"\n'
        "[model_providers.local]\n"
        'name = "local"\n'
        f'base_url = "{base_url}"\n'
        'wire_api = "responses"\n'
    )
    keep = ("PATH", "LANG", "TERM", "SSL_CERT_FILE")
    env = {k: v for k, v in os.environ.items() if k in keep}
    return {**env, "CODEX_HOME": str(home), "HOME": str(home), "OPENAI_API_KEY": "sk-local"}


def codex_exec(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`codex exec ARGS`, non-interactive, with no sandbox of its own (the test's temporary
    directory is its workspace)."""
    return subprocess.run(
        [str(codex_binary()), "exec", "--skip-git-repo-check", "-s", "danger-full-access"]
        + list(args),
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
