"""Issue 52 item 12: the saved-source check (the import closure, before the worker starts)
and the dependency offer read and parsed every imported workspace file in the CLI's own
process, outside --memory: 4 MiB of source took it to 2.6 GB (``ast`` holds ~650 bytes a
byte), a 20 MiB file past 6 GB. A long file is now scanned line by line (no tree), files
are read through safe_read with a bound, and the walk stops after MAX_TOTAL_CHARS."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import pytest

from capture.session import import_closure as ic
from capture.session import model_dependencies as md


def _big(path: Path, chars: int, head: str) -> None:
    line = "x = [" + ", ".join(["1"] * 40) + "]\n"
    path.write_text(head + line * (chars // len(line)))


def _peak(fn) -> tuple[object, int]:
    tracemalloc.start()
    try:
        got = fn()
        return got, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_long_file_is_scanned_not_parsed_and_its_imports_followed(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "near.py").write_text("")
    (tmp_path / "far.py").write_text("")
    _big(tmp_path / "big.py", 1 << 20, "import far\nfrom pkg import near\n")
    files, peak = _peak(lambda: ic.import_closure(tmp_path, [tmp_path / "big.py"], lambda p: p.read_text()))
    assert {p.name for p in files} >= {"big.py", "far.py", "near.py", "__init__.py"}
    assert peak < 24 << 20, f"{peak:,} bytes for 1 MiB of source"  # a tree of it: ~650 MB


def test_the_walk_reads_a_bounded_total(tmp_path, monkeypatch):
    monkeypatch.setattr(ic, "MAX_TOTAL_CHARS", 3000)
    for i in range(10):
        (tmp_path / f"m{i}.py").write_text(f"import m{i + 1}\n" + "#" * 1000 + "\n")
    read: list[Path] = []
    files = ic.import_closure(tmp_path, [tmp_path / "m0.py"], lambda p: read.append(p) or p.read_text())
    assert len(read) == len(files) == 3


def test_the_dependency_offer_reads_with_a_bound_and_scans_long_files(tmp_path, monkeypatch):
    _big(tmp_path / "big.py", 1 << 20, "import numba\nfrom tiktoken import x\n\ndef f():\n    import hidden\n")
    (tmp_path / "small.py").write_text("import jaxtyping\ntry:\n    import optional\nexcept ImportError:\n    pass\n")
    names, peak = _peak(lambda: md.module_level_imports([tmp_path / "big.py", tmp_path / "small.py"]))
    assert names == ["numba", "tiktoken", "jaxtyping"]
    assert peak < 24 << 20, f"{peak:,} bytes for 1 MiB of source"
    monkeypatch.setattr(md, "READ_MAX_BYTES", 1024)
    assert md.module_level_imports([tmp_path / "big.py", tmp_path / "small.py"]) == ["jaxtyping"]


@pytest.mark.timeout(60)
def test_a_fifo_is_never_waited_on_by_the_offer(tmp_path):
    fifo = tmp_path / "fifo.py"
    os.mkfifo(fifo)
    assert md.module_level_imports([fifo]) == []  # never waited on
