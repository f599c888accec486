"""Helpers shared by the discovery tests (imported by name: pytest puts this folder on
sys.path, and there is deliberately no ``__init__.py`` that would shadow ``discovery``)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from discovery import FileResult, discover_source


def discover_snippet(source: str, path: str = "snippet.py") -> FileResult:
    return discover_source(textwrap.dedent(source), path)


def kinds_by_name(result: FileResult) -> dict[str, str]:
    return {c.qualname: c.kind for c in result.candidates}


def write_tree(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text), encoding="utf-8")
