"""The docs are true: the site builds with `--strict` (no broken page, link or anchor), the
README's links resolve, and every code example runs against the local server (`make run`'s),
or says in a marker right above it why it cannot (it needs a deployed stack, say).

An example is a ```python or ```sh block in README.md or docs/; the line above it is
`<!-- example: python -->` / `<!-- example: sh -->` (run here) or `<!-- not run: why -->`. A
page's examples of one language run in order as one program, as a reader runs them one after
the other: a later one uses what an earlier one made. A python example may start from a client
made for it (`<!-- example: python, client: openai -->`, or `llama-stack`): `client`, and
`openai_client` either way, as the page around it says.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .lambda_support import ROOT
from .local_server import started_server

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
_BLOCK = re.compile(
    r"(?:<!-- (example: \w+(?:, client: [\w-]+)?|not run: [^>]+) -->\n[ \t]*)?"
    r"```(python|sh)\n(.*?)```",
    re.S,
)
_OPENAI = (
    "from openai import OpenAI\n"
    'openai_client = OpenAI(base_url="http://127.0.0.1:8321/v1/openai/v1", api_key="unused")\n'
)
CLIENTS = {
    "": _OPENAI,
    "openai": _OPENAI + "client = openai_client\n",
    "llama-stack": _OPENAI
    + "from llama_stack_client import LlamaStackClient\n"
    + "from llama_stack_client.lib.agents.agent import Agent\n"
    + 'client = LlamaStackClient(base_url="http://127.0.0.1:8321")\n',
}


def examples() -> list[tuple[str, str, str, str]]:
    """(where, its marker or "", language, code) of every example block."""
    found = []
    for page in PAGES:
        text = page.read_text()
        for match in _BLOCK.finditer(text):
            line = text[: match.start()].count("\n") + 1
            where = f"{page.relative_to(ROOT)}:{line}"
            found.append((where, match.group(1) or "", match.group(2), match.group(3)))
    return found


def programs() -> list[tuple[str, str, str]]:
    """(page and language, language, program): each page's examples of a language, in order."""
    found: dict[tuple[str, str], str] = {}
    for where, mark, lang, code in examples():
        if mark.startswith("example"):
            page = where.split(":")[0]
            if lang == "python" and (page, lang) not in found:
                found[(page, lang)] = "import time\n" + CLIENTS[mark.partition("client: ")[2]]
            found[(page, lang)] = found.get((page, lang), "") + f"# {where}\n{code}\n"
    return [(f"{page} ({lang})", lang, code) for (page, lang), code in found.items()]


RUN = programs()


def test_every_example_runs_here_or_says_why_not():
    unmarked = [where for where, mark, _, _ in examples() if not mark]
    assert not unmarked, f"examples with no marker: {unmarked}"
    marks = [(mark, lang) for _, mark, lang, _ in examples() if mark.startswith("example")]
    assert all(mark.startswith(f"example: {lang}") for mark, lang in marks)
    assert all(mark.partition("client: ")[2] in CLIENTS for mark, _ in marks)
    assert len(RUN) >= 3


#: The curl examples pick ids out with `jq -r .field`; where the machine has no jq, this stands
#: in for exactly that use (CI's machines have it; a bare one need not).
_JQ = """#!{python}
import json, sys
assert sys.argv[1:2] == ["-r"] and sys.argv[2].startswith("."), sys.argv
print(json.load(sys.stdin)[sys.argv[2][1:]])
"""


@pytest.fixture(scope="module")
def tools_path(tmp_path_factory) -> str:
    """PATH for the examples: this one, with a `jq` where there is none."""
    if shutil.which("jq"):
        return os.environ["PATH"]
    folder = tmp_path_factory.mktemp("bin")
    (folder / "jq").write_text(_JQ.format(python=sys.executable))
    (folder / "jq").chmod(0o755)
    return f"{folder}{os.pathsep}{os.environ['PATH']}"


@pytest.fixture(scope="module")
def server():
    with started_server() as started:
        yield started.base


@pytest.mark.parametrize(("where", "lang", "code"), RUN, ids=[r[0] for r in RUN])
def test_the_example_runs_against_the_local_server(server, tools_path, where, lang, code):
    host = server.removeprefix("http://")
    code = code.replace("127.0.0.1:8321", host).replace("localhost:8321", host)
    command = [sys.executable, "-c", code] if lang == "python" else ["bash", "-euo", "pipefail"]
    ran = subprocess.run(
        command,
        input=None if lang == "python" else code,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "URL": server, "NO_COLOR": "1", "PATH": tools_path},
    )
    assert ran.returncode == 0, f"{where}:\n{ran.stdout}\n{ran.stderr}"


def test_the_site_builds_strictly(tmp_path):
    built = subprocess.run(
        [str(Path(sys.executable).parent / "mkdocs"), "build", "--strict", "-d", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, built.stdout + built.stderr
    assert (tmp_path / "guides" / "responses" / "index.html").exists()


def test_the_readmes_links_resolve():
    text = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if not link.startswith(("http://", "https://"))]
    assert local, "the README links into the docs"
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing, missing


def test_the_configuration_reference_is_what_the_settings_declare():
    script = ROOT / "scripts" / "config_reference.py"
    checked = subprocess.run([sys.executable, str(script), "--check"], cwd=ROOT, timeout=60)
    assert checked.returncode == 0, (
        "docs/configuration.md is stale: run scripts/config_reference.py"
    )
    page = (ROOT / "docs" / "configuration.md").read_text()
    assert "`MAX_ITERATIONS`" in page and "`STREAM_FLUSH_SECONDS`" in page


def test_the_api_reference_is_the_apps_openapi_document():
    script = ROOT / "scripts" / "api_reference.py"
    env = {**os.environ, "AWS_DEFAULT_REGION": "us-east-1"}
    checked = subprocess.run(
        [sys.executable, str(script), "--check"], cwd=ROOT, env=env, timeout=120
    )
    assert checked.returncode == 0, "docs/api.md is stale: run scripts/api_reference.py"
    page = (ROOT / "docs" / "api.md").read_text()
    assert "`/v1/agents/{agent_id}/session/{session_id}/turn`" in page
    assert "`/v1/openai/v1/responses`" in page and "`/v1/responses`" not in page  # no aliases
