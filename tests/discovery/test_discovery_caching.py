"""Work discovery avoids: files that cannot hold a candidate, and repeats on unchanged text.

Structural checks (what was parsed), not wall-clock assertions; the timings live in
benchmarks/bench_discovery.py.
"""

from __future__ import annotations

import pytest

import discovery.analysis as analysis
import discovery.locate as locate
from discovery import WorkspaceIndex, discover_source


@pytest.fixture
def parses(monkeypatch):
    calls: list[str] = []
    real = analysis.parse_source

    def counting(text: str):
        calls.append(text)
        return real(text)

    monkeypatch.setattr(analysis, "parse_source", counting)
    return calls


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("import numpy as np\n\ndef f(x):\n    return np.sum(x)\n", id="numpy-only"),
        pytest.param("class A(Base):\n    pass\n", id="class-without-imports"),
        pytest.param("x = 1\n" * 1000, id="plain-assignments"),
        pytest.param("def f(:\n", id="broken-but-irrelevant"),
    ],
)
def test_files_that_cannot_hold_a_candidate_are_never_parsed(parses, text):
    result = discover_source(text, "plain.py")
    assert result.candidates == () and result.errors == ()
    assert parses == []


def test_workspace_prefilter_lets_possible_subclasses_through(parses, tmp_path):
    index = WorkspaceIndex(tmp_path)
    index.discover(tmp_path / "a.py", "import numpy as np\nX = np.zeros(3)\n")
    assert parses == []
    index.discover(tmp_path / "b.py", "from base import Base\nclass A(Base):\n    pass\n")
    assert len(parses) == 1


def test_repeat_call_on_unchanged_text_is_answered_from_the_cache(parses):
    text = "import torch.nn as nn\nclass A(nn.Module):\n    pass\n"
    first = discover_source(text, "cached.py")
    again = discover_source(text, "cached.py")
    equal_copy = discover_source("".join(list(text)), "cached.py")
    assert first is again is equal_copy
    assert len(parses) == 1
    changed = discover_source(text + "\n", "cached.py")
    assert changed is not first and len(parses) == 2


def test_workspace_repeat_call_is_answered_from_the_cache(parses, tmp_path):
    index = WorkspaceIndex(tmp_path)
    path = tmp_path / "m.py"
    text = "import torch.nn as nn\nclass A(nn.Module):\n    pass\n"
    first = index.discover(path, text)
    assert index.discover(path, text) is first
    assert index.discover(path) is first  # the buffer the index already holds
    assert len(parses) == 1


def test_positions_are_computed_only_when_there_are_candidates(monkeypatch):
    built: list[str] = []
    real = locate.AstLocator.__init__

    def counting(self, *args, **kwargs):
        built.append("ast")
        real(self, *args, **kwargs)

    monkeypatch.setattr(locate.AstLocator, "__init__", counting)
    discover_source("import torch\n\ndef helper(x):\n    return x\n", "none.py")
    assert built == []
    discover_source("import torch.nn as nn\nclass A(nn.Module): pass\n", "one.py")
    assert built == ["ast"]
