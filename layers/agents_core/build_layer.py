"""Build the AgentsCoreLayer: the agents_core package and its dependencies, laid out the way
Lambda unpacks a layer (the layer's `python/` folder becomes `/opt/python`).

There is one dependency list, pyproject.toml's `[project].dependencies`. The layer gets all of
it except what the Lambda runtime already has (`[tool.serverless-agents]
lambda-runtime-provides`: boto3, with botocore). Dependencies are installed from wheels only,
for the platform template.yaml declares (arm64, python3.12), so no python3.12 and no container
is needed; or, with --host, for this machine (the built-artifact test runs that build). Each
install is cached under build/layer-cache/, keyed by a hash of what it installs, so a repeat
build is a copy.

    python layers/agents_core/build_layer.py OUT_DIR           # what `sam build` runs (Makefile)
    python layers/agents_core/build_layer.py OUT_DIR --host    # for this machine
    python layers/agents_core/build_layer.py --report OUT_DIR  # sizes of a built layer
    python layers/agents_core/build_layer.py OUT_DIR --function authorizer   # a function's own

A function that does not use the layer (the authorizer: it needs PyJWT and cryptography, 16 MB
nothing else imports, and none of the layer's web stack) gets its own build: the agents_core
package and the dependencies `[tool.serverless-agents] <function>-packages` names (their
requirements as `[project].dependencies` states them), in its artifact's root. The layer leaves
those out that only such functions import (`layer-leaves-out`).

Needs Python 3.11+ (tomllib) with pip; nothing else.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import io
import json
import re
import shutil
import struct
import subprocess
import sys
import sysconfig
import tempfile
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # loaded by its path (tests, benches): its sibling module too
    sys.path.append(str(HERE))
import certificate_directory  # noqa: E402

ROOT = HERE.parent.parent
PYPROJECT = ROOT / "pyproject.toml"
PACKAGE = HERE / "agents_core"
CACHE = ROOT / "build" / "layer-cache"
#: certifi's bundle as a hashed directory (certificate_directory), in the layer's agents_core.
CERTIFICATES = "certificates"


@dataclass(frozen=True)
class Target:
    """Where the layer runs: a Python version and the wheel platforms that run there."""

    name: str
    python_version: str | None = None  # None: this interpreter
    platforms: tuple[str, ...] = ()  # empty: this machine

    def pip_args(self) -> list[str]:
        if self.python_version is None:
            return []
        args = ["--implementation", "cp", "--python-version", self.python_version]
        for platform in self.platforms:
            args += ["--platform", platform]
        return args

    def key(self) -> list[str]:
        if self.python_version is None:
            return [sys.implementation.cache_tag, sysconfig.get_platform()]
        return [self.python_version, *self.platforms]


#: template.yaml's AgentsCoreLayer: CompatibleRuntimes python3.12, CompatibleArchitectures arm64.
#: The python3.12 runtime runs on Amazon Linux 2023 (glibc 2.34): manylinux wheels up to 2.34 run.
LAMBDA = Target(
    "lambda-python3.12-arm64",
    "3.12",
    ("manylinux_2_34_aarch64", "manylinux_2_28_aarch64", "manylinux2014_aarch64"),
)
HOST = Target("host")


def _name(requirement: str) -> str:
    """The normalized project name of a requirement string ("Foo_Bar>=1" -> "foo-bar")."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if not match:
        raise ValueError(f"not a requirement: {requirement!r}")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def _project() -> tuple[list[str], set[str]]:
    data = tomllib.loads(PYPROJECT.read_text())
    provided = data["tool"]["serverless-agents"]["lambda-runtime-provides"]
    return data["project"]["dependencies"], {_name(n) for n in provided}


def layer_requirements() -> list[str]:
    """What the layer installs: the project's dependencies minus what the runtime provides."""
    dependencies, provided = _project()
    return [r for r in dependencies if _name(r) not in provided]


def runtime_requirements() -> list[str]:
    """The project's dependencies the Lambda runtime provides (and the layer leaves out)."""
    dependencies, provided = _project()
    return [r for r in dependencies if _name(r) in provided]


def function_requirements(function: str) -> list[str]:
    """The requirements `[tool.serverless-agents] <function>-packages` names, as the project's
    dependency list states them (one list: versions and extras are kept there)."""
    data = tomllib.loads(PYPROJECT.read_text())
    names = {_name(n) for n in data["tool"]["serverless-agents"][f"{function}-packages"]}
    found = [r for r in data["project"]["dependencies"] if _name(r) in names]
    missing = names - {_name(r) for r in found}
    if missing:
        raise SystemExit(f"{function}-packages names no dependency of the project: {missing}")
    return found


def build_function(out: Path, function: str, target: Target = LAMBDA) -> Path:
    """A function's own dependencies and the agents_core package, in its artifact `out`."""
    dependencies = install(function_requirements(function), target)
    _refuse_runtime_copies(dependencies, f"{function}'s dependencies")
    shutil.copytree(dependencies, out, dirs_exist_ok=True)
    shutil.rmtree(out / PACKAGE.name, ignore_errors=True)
    shutil.copytree(PACKAGE, out / PACKAGE.name, ignore=shutil.ignore_patterns("__pycache__"))
    _write_certificates(out)
    if target is LAMBDA:
        _compile(out, f"python{target.python_version}")
    return out


def install(requirements: list[str], target: Target, cache: Path = CACHE) -> Path:
    """A folder holding `requirements` installed for `target`, from the cache when there."""
    key = hashlib.sha256(json.dumps([sorted(requirements), target.key()]).encode()).hexdigest()
    folder = cache / f"{target.name}-{key[:16]}"
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one install at a time (parallel tests, make build)
        if folder.is_dir():
            return folder
        scratch = Path(tempfile.mkdtemp(prefix=".install-", dir=cache))
        scratch.chmod(0o755)  # mkdtemp's 0700 would follow into the zip: Lambda could not read
        try:
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                    "--no-compile",  # this interpreter's bytecode would be dead weight on 3.12
                    "--only-binary=:all:",
                    "--target",
                    str(scratch),
                    *target.pip_args(),
                    *requirements,
                ],
                check=True,
            )
            _prune(scratch)
            scratch.rename(folder)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return folder


def _prune(site: Path) -> None:
    """Drop what nothing imports at run time."""
    shutil.rmtree(site / "bin", ignore_errors=True)  # console scripts, with this host's shebang
    for cache in list(site.rglob("__pycache__")):
        shutil.rmtree(cache, ignore_errors=True)
    # greenlet's wheel ships its C++ sources and headers and two compiled test modules (1 MB).
    shutil.rmtree(site / "greenlet" / "tests", ignore_errors=True)
    # Powertools' event handler (its own REST and GraphQL routers, 2.3 MB): the routes are
    # FastAPI's; only its logger, metrics and SQS batch processing are imported.
    shutil.rmtree(site / "aws_lambda_powertools" / "event_handler", ignore_errors=True)
    # pydantic's copy of its 1.x API: nothing here has a 1.x model, and FastAPI imports it, at
    # every route it registers, only to ask whether a model is one (about 60 ms of each init;
    # without it FastAPI's answer is no, as on Pythons pydantic.v1 does not support).
    shutil.rmtree(site / "pydantic" / "v1", ignore_errors=True)
    for pattern in ("*.c", "*.cpp", "*.h", "*.hpp", "*.pyx", "*.pxd"):
        for source in list(site.rglob(pattern)):
            source.unlink()
    for library in list(site.rglob("*.so*")):
        if library.is_file():
            strip_shared_object(library)


# ELF64, little-endian (x86_64 and aarch64): the file header, a program header, a section header.
_ELF_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
_PROGRAM_HEADER = struct.Struct("<IIQQQQQQ")
_SECTION_HEADER = struct.Struct("<IIQQQQIIQQ")
_SHF_ALLOC, _SHT_NOBITS = 0x2, 8


def strip_shared_object(path: Path) -> bool:
    """Drop what the dynamic loader never reads from a shared object: its symbol table and
    debug information (uvloop's, greenlet's and httptools' wheels ship them: 19 MB of the 22 MB
    they take). The loaded segments stay byte for byte, and with them the sections they hold;
    the section names follow, then the new section table, as `llvm-strip --strip-all` leaves
    it (which is not on every machine that runs `sam build`). Whether the file was stripped:
    anything but a 64-bit little-endian ELF file laid out as linkers lay them out is left as is."""
    data = path.read_bytes()
    if data[:6] != b"\x7fELF\x02\x01" or len(data) < _ELF_HEADER.size:
        return False
    header = list(_ELF_HEADER.unpack_from(data))
    phoff, shoff, phentsize, phnum, shentsize, shnum, names_index = (
        header[5],
        header[6],
        header[9],
        header[10],
        header[11],
        header[12],
        header[13],
    )
    if shoff == 0 or shentsize != _SECTION_HEADER.size or not 0 < names_index < shnum:
        return False
    segments = [_PROGRAM_HEADER.unpack_from(data, phoff + i * phentsize) for i in range(phnum)]
    loaded_end = max([phoff + phnum * phentsize, *(s[2] + s[5] for s in segments)])
    sections = [
        list(_SECTION_HEADER.unpack_from(data, shoff + i * shentsize)) for i in range(shnum)
    ]
    kept = 1  # the null section, then the sections the loader maps, which come first
    while kept < shnum and sections[kept][2] & _SHF_ALLOC:
        kept += 1
    mapped = sections[1:kept]
    if (
        any(s[2] & _SHF_ALLOC for s in sections[kept:])
        or any(s[1] != _SHT_NOBITS and s[4] + s[5] > loaded_end for s in mapped)
        or any(s[6] >= kept for s in mapped)  # a link to a section that would go
        or names_index < kept
    ):
        return False
    names = sections[names_index]
    out = bytearray(data[:loaded_end])
    out += bytes(-len(out) % 8)
    table = [*sections[:kept], [*names[:4], len(out), names[5], 0, 0, *names[8:]]]
    out += data[names[4] : names[4] + names[5]]
    out += bytes(-len(out) % 8)
    header[6], header[12], header[13] = len(out), len(table), kept
    for section in table:
        out += _SECTION_HEADER.pack(*section)
    _ELF_HEADER.pack_into(out, 0, *header)
    if len(out) >= len(data):
        return False
    path.write_bytes(out)
    return True


def build(out: Path, target: Target = LAMBDA) -> Path:
    """Lay the layer out in `out` (its `python/` folder is what Lambda mounts at /opt/python)."""
    dependencies = install(layer_requirements(), target)
    _refuse_runtime_copies(dependencies, "a layer dependency")
    site = out / "python"
    shutil.rmtree(site, ignore_errors=True)
    shutil.copytree(dependencies, site)
    _prune(site)  # also a cache filled before a rule was added
    shutil.copytree(PACKAGE, site / PACKAGE.name, ignore=shutil.ignore_patterns("__pycache__"))
    _leave_out(site, tomllib.loads(PYPROJECT.read_text())["tool"]["serverless-agents"])
    _write_certificates(site)
    if target is LAMBDA:
        _compile(site, f"python{target.python_version}")
    return site


def _write_certificates(site: Path) -> None:
    """certifi's bundle, where `site` has it, as the hashed directory that
    http1.bundled_certificates finds beside agents_core's modules."""
    bundle = site / "certifi" / "cacert.pem"
    if bundle.is_file():
        certificate_directory.write(bundle, site / PACKAGE.name / CERTIFICATES)


def _refuse_runtime_copies(dependencies: Path, what: str) -> None:
    """boto3 and botocore are the Lambda runtime's: a copy beside them would shadow its own."""
    shadowing = [name for name in ("boto3", "botocore") if (dependencies / name).exists()]
    if shadowing:
        raise SystemExit(
            f"{what} pulled in {', '.join(shadowing)}, which the Lambda runtime provides: a"
            " copy would shadow the runtime's"
        )


def _leave_out(site: Path, config: dict) -> None:
    """Remove the distributions pyproject.toml's `layer-leaves-out` names (their RECORD's files)."""
    names = {_name(n) for n in config.get("layer-leaves-out", [])}
    for record in list(site.glob("*.dist-info/RECORD")):
        if _name(record.parent.name.split("-")[0]) in names:
            for line in record.read_text().splitlines():
                (site / line.rsplit(",", 2)[0]).unlink(missing_ok=True)
            shutil.rmtree(record.parent, ignore_errors=True)
    for folder in sorted(site.rglob("*"), reverse=True):  # the folders that are now empty
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()


def _compile(site: Path, python: str) -> None:
    """Ship bytecode when the target's interpreter is at hand: /opt/python is read-only, so a
    layer without it compiles every module it imports at each cold start (about 0.5 s of CPU
    for the turns function). Hash-checked `.pyc` files do not depend on the zip's mtimes."""
    interpreter = shutil.which(python)
    works = interpreter is not None and (
        subprocess.run([interpreter, "-c", ""], capture_output=True).returncode == 0
    )  # a pyenv shim is on PATH even when its version is not installed
    if not works:
        print(f"no working {python} on PATH: the layer ships no bytecode", file=sys.stderr)
        return
    subprocess.run(
        [
            interpreter,
            "-m",
            "compileall",
            "-q",
            "-j",
            "0",
            "--invalidation-mode",
            "unchecked-hash",
            str(site),
        ],
        check=True,
    )


def sizes(site: Path) -> dict[str, int]:
    """Bytes per distribution in a built layer (its files' sizes, listed in its RECORD), as
    Lambda counts them against its unzipped limit."""
    result: dict[str, int] = {}
    for record in site.glob("*.dist-info/RECORD"):
        name = record.parent.name.split("-")[0].lower().replace("_", "-")
        total = 0
        for line in record.read_text().splitlines():
            path = site / line.rsplit(",", 2)[0]
            if path.is_file():
                total += path.stat().st_size
        result[name] = total
    package = (site / PACKAGE.name).rglob("*")
    result[PACKAGE.name] = sum(p.stat().st_size for p in package if p.is_file())
    return result


def zipped_size(folder: Path) -> int:
    """Bytes of the layer zipped as `sam deploy` zips it (deflate)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(folder))
    return buffer.tell()


def report(out: Path) -> str:
    site = out / "python"
    parts = sorted(sizes(site).items(), key=lambda item: -item[1])
    unzipped = sum(p.stat().st_size for p in site.rglob("*") if p.is_file())
    lines = [f"{name:<24}{size / 1e6:>7.2f} MB" for name, size in parts]
    lines.append(
        f"layer {out}: {unzipped / 1e6:.1f} MB unzipped, {zipped_size(out) / 1e6:.1f} MB zipped"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the layer's folder (SAM's ARTIFACTS_DIR)")
    parser.add_argument("--host", action="store_true", help="build for this machine")
    parser.add_argument("--report", action="store_true", help="only print the sizes of OUT")
    parser.add_argument("--function", help="a function's own build (its -packages list)")
    args = parser.parse_args()
    target = HOST if args.host else LAMBDA
    if args.function:
        build_function(args.out, args.function, target)
        return
    if not args.report:
        build(args.out, target)
    print(report(args.out), file=sys.stderr)


if __name__ == "__main__":
    main()
