"""The README is a front page and the manual is ``docs/``: every relative link in them
resolves, every ``tensorviz`` command they show parses with the CLI's own parser, the
README stays under 200 lines, and nothing cites a document outside the repository."""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from tensorviz_lsp.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"```(sh|console|bash)\n(.*?)```", re.S)


def _rel(page: Path) -> str:
    return str(page.relative_to(ROOT))


def test_the_readme_is_a_front_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 200
    for page in ("docs/index.md", "docs/architecture.md", "CONTRIBUTING.md", "CHANGELOG.md"):
        assert f"]({page})" in readme, page


def test_every_manual_page_is_listed_in_its_index():
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    for page in (ROOT / "docs").glob("*.md"):
        if page.name != "index.md":
            assert f"]({page.name})" in index, f"docs/index.md does not list {page.name}"


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_relative_links_resolve(page: Path):
    text = page.read_text(encoding="utf-8")
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = target.split("#", 1)[0]
        if not (page.parent / path).exists():
            broken.append(target)
    assert not broken, f"{_rel(page)} links to what does not exist: {broken}"


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_no_document_outside_the_repository_is_cited(page: Path):
    text = page.read_text(encoding="utf-8")
    assert "DESIGN.md" not in text and "../shared" not in text


def _commands(text: str) -> list[str]:
    """Each ``tensorviz …`` command the page shows: in shell blocks (continuation lines and
    quotes that span lines joined; in a ``console`` block only the ``$ `` lines), and whole
    commands in inline code."""
    found = []
    for kind, block in FENCE.findall(text):
        block = re.sub(r"\\\n\s*", " ", block)
        pending = ""
        for line in block.splitlines():
            if kind == "console" and not pending:
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            pending = f"{pending} {line.strip()}" if pending else line.strip()
            if pending.count("'") % 2 == 0 and pending.count('"') % 2 == 0:
                if pending.startswith("tensorviz "):
                    found.append(pending)
                pending = ""
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    for span in re.findall(r"`(tensorviz [^`]+)`", prose):
        words = span.split()
        # A whole command, not a mention (`tensorviz capture`) or a synopsis (`FILE…`, `[--json]`).
        if len(words) >= 3 and not words[-1].startswith("--") and not re.search(r"[\[…|\n]|\.\.\.", span):
            found.append(span)
    return found


def _parse(command: str) -> None:
    words = shlex.split(command, comments=True)
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        try:
            build_parser().parse_args(words[1:])
        except SystemExit as stop:
            raise AssertionError(f"`{command}` does not parse: {stderr.getvalue().strip()}") from stop


DOCUMENTED = [(page, c) for page in PAGES for c in _commands(page.read_text(encoding="utf-8"))]


def test_the_pages_show_commands():
    """The collection below is not empty by accident: the README's own commands are in it."""
    readme = [c for page, c in DOCUMENTED if page.name == "README.md"]
    assert "tensorviz demo" in readme and any(c.startswith("tensorviz open ") for c in readme)
    assert len(DOCUMENTED) >= 20


@pytest.mark.parametrize(("page", "command"), DOCUMENTED, ids=[f"{_rel(p)}: {c[:60]}" for p, c in DOCUMENTED])
def test_every_documented_command_parses(page: Path, command: str):
    _parse(command)


def test_a_wrong_command_is_caught():
    with pytest.raises(AssertionError, match="does not parse"):
        _parse("tensorviz capture --no-such-option")
    with pytest.raises((AssertionError, argparse.ArgumentError)):
        _parse("tensorviz nosuchcommand")
