"""The layer build strips the shared objects it ships (build_layer.strip_shared_object): what
the dynamic loader maps stays byte for byte, the rest goes, and the library still loads."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import greenlet

from .test_built_artifacts import _build_layer_module, section_names

build_layer = _build_layer_module()


def loaded_bytes(library: Path) -> bytes:
    """The file up to the end of its last loaded segment (what the loader maps)."""
    data = library.read_bytes()
    phoff = int.from_bytes(data[0x20:0x28], "little")
    phentsize, phnum = (int.from_bytes(data[at : at + 2], "little") for at in (0x36, 0x38))
    end = 0
    for index in range(phnum):
        at = phoff + index * phentsize
        offset = int.from_bytes(data[at + 8 : at + 16], "little")
        size = int.from_bytes(data[at + 32 : at + 40], "little")
        end = max(end, offset + size)
    return data[:end]


def test_a_stripped_library_keeps_its_loaded_bytes_and_loses_its_symbols_and_debug_sections(
    tmp_path,
):
    package = tmp_path / "greenlet"
    shutil.copytree(Path(greenlet.__file__).parent, package)
    (library,) = package.glob("_greenlet*.so")
    before, names_before = library.read_bytes(), section_names(library)
    assert ".symtab" in names_before  # the wheel's copy has them: the test can fail

    assert build_layer.strip_shared_object(library)

    after = library.read_bytes()
    assert len(after) < len(before) / 2
    assert loaded_bytes(library)[0x40:] == before[0x40 : len(loaded_bytes(library))]
    names = section_names(library)
    assert ".symtab" not in names and not [n for n in names if n.startswith(".debug")]
    assert [n for n in names_before if n in names] == names  # the rest in their order
    assert {".dynsym", ".dynstr", ".text", ".data", ".shstrtab"} <= set(names)
    # Stripping again changes nothing; the stripped library still loads and works.
    assert not build_layer.strip_shared_object(library)
    assert library.read_bytes() == after
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.path.insert(0, sys.argv[1]); import greenlet;"
            " assert greenlet.__file__.startswith(sys.argv[1]);"
            " print(greenlet.greenlet(lambda: 6 * 7).switch())",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
    )
    assert loaded.stdout.strip() == "42", loaded.stderr


def test_files_that_are_not_64_bit_elf_libraries_are_left_as_they_are(tmp_path):
    script = tmp_path / "not_a_library.so"
    script.write_bytes(b"#!/bin/sh\necho hello\n")
    truncated = tmp_path / "cut.so"
    truncated.write_bytes(b"\x7fELF\x02\x01\x01")
    for path in (script, truncated):
        before = path.read_bytes()
        assert not build_layer.strip_shared_object(path)
        assert path.read_bytes() == before
