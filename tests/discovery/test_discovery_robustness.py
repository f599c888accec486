"""Bad input never raises out of discovery (nor crashes the process)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import discovery.candidates
from discovery import FileResult, WorkspaceIndex, discover_source
from discovery.parsing import MAX_SOURCE_CHARS


@pytest.mark.parametrize(
    "text, line, character",
    [
        pytest.param("import torch\nclass A(nn.Module:\n    pass\n", 1, 17, id="colon-in-bases"),
        pytest.param("import jax\ndef f(:\n    pass\n", 1, 6, id="bad-parameter"),
        pytest.param("import jax\ndef f(x):\nreturn x\n", 2, 0, id="indentation"),
        # "(" is code point 11 of its line; 😀 takes two UTF-16 units.
        pytest.param("import jax\ns = 'é😀' + (\n", 1, 12, id="utf16-column"),
    ],
)
def test_syntax_errors_are_reported_with_a_position(text, line, character):
    result = discover_source(text, "broken.py")
    assert result.candidates == ()
    (error,) = result.errors
    assert error.code == "syntax_error"
    assert (error.range.start.line, error.range.start.character) == (line, character)
    assert not result.ok
    json.dumps(result.to_json())


def test_a_file_mid_edit_recovers_when_fixed():
    good = "import torch.nn as nn\nclass A(nn.Module):\n    pass\n"
    broken = good.replace("):", ")")
    assert discover_source(broken, "edit.py").errors
    assert [c.name for c in discover_source(good, "edit.py").candidates] == ["A"]


def test_text_with_nul_is_binary():
    (error,) = discover_source("import torch\x00\x01", "x.py").errors
    assert error.code == "binary"


def test_binary_and_non_utf8_files(tmp_path):
    (tmp_path / "blob.py").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00torch")
    (tmp_path / "latin.py").write_bytes(b"import torch\n# caf\xe9\nclass A: pass\n")
    (tmp_path / "bom.py").write_bytes(b"\xef\xbb\xbfimport torch.nn as nn\nclass A(nn.Module): pass\n")
    index = WorkspaceIndex(tmp_path)
    (blob,) = index.discover(tmp_path / "blob.py").errors
    assert blob.code == "binary"
    (latin,) = index.discover(tmp_path / "latin.py").errors
    assert latin.code == "not_utf8"
    assert (latin.range.start.line, latin.range.start.character) == (1, 5)
    assert [c.name for c in index.discover(tmp_path / "bom.py").candidates] == ["A"]


def test_huge_text_is_refused_quickly():
    text = "import torch\n" + "x = 1\n" * (MAX_SOURCE_CHARS // 6 + 1)
    (error,) = discover_source(text, "huge.py").errors
    assert error.code == "too_large"


def test_huge_text_without_a_framework_is_just_not_a_model():
    text = "x = 1\n" * (MAX_SOURCE_CHARS // 6 + 1)
    result = discover_source(text, "data.py")
    assert result.errors == () and result.candidates == ()


@pytest.mark.slow
def test_a_large_file_is_discovered_whole():
    blocks = [
        f"class Block{i}(nn.Module):\n    def forward(self, x, y={i}):\n        return x\n\n"
        for i in range(2000)
    ]
    result = discover_source("import torch.nn as nn\n\n" + "".join(blocks), "large.py")
    assert len(result.candidates) == 2000
    assert result.candidates[-1].name_range.start.line == 2 + 4 * 1999


@pytest.mark.parametrize("value", [b"import torch", None, 3])
def test_non_text_input_is_an_error_entry(value):
    (error,) = discover_source(value, "x.py").errors  # type: ignore[arg-type]
    assert error.code == "binary"


def test_non_text_buffer_in_a_workspace_is_an_error_entry(tmp_path):
    (error,) = WorkspaceIndex(tmp_path).discover(tmp_path / "x.py", b"import torch").errors  # type: ignore[arg-type]
    assert error.code == "binary"


def test_internal_failures_become_error_entries(monkeypatch):
    def explode(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(discovery.candidates, "_module_candidate", explode)
    result = discover_source("import torch.nn as nn\nclass Boom(nn.Module): pass\n", "boom.py")
    (error,) = result.errors
    assert error.code == "internal_error" and "boom" in error.message


# libcst's native parser overflows its stack (killing the process) on input nested a
# few thousand levels deep; the ast gate must refuse these first. In a subprocess so
# that a regression shows as a failed test, not a vanished test run.
DEEP_INPUTS = {
    "parens": "import torch\nx = " + "(" * 5000 + "1" + ")" * 5000 + "\n",
    "lists": "import torch\nx = " + "[" * 20000 + "]" * 20000 + "\n",
    "unary": "import torch\nx = " + "-" * 20000 + "1\n",
    "binop": "import torch\nx = " + "+".join(["1"] * 20000) + "\n",
    "attributes": "import torch\nx = a" + ".b" * 20000 + "\n",
    "calls": "import torch\nx = f" + "()" * 20000 + "\n",
    # Python 3.12 syntax (no ast gate on 3.11) plus depth: must not reach libcst.
    "newer-syntax-and-deep": "import torch\ntype X = int\nx = " + "-" * 20000 + "1\n",
}


def test_deeply_nested_input_does_not_crash_the_process():
    script = textwrap.dedent(
        """
        import json, sys
        import tensorviz_lsp  # hands discovery the frameworks' registry
        from discovery import discover_source
        cases = json.loads(sys.stdin.read())
        out = {}
        for name, text in cases.items():
            result = discover_source(text, name + ".py")
            out[name] = [e.code for e in result.errors]
        print(json.dumps(out))
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", script],
        input=json.dumps(DEEP_INPUTS),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    codes = json.loads(run.stdout)
    for name, errors in codes.items():
        assert errors and errors[0] in ("too_complex", "syntax_error"), name


# --- property tests ---------------------------------------------------------------------

FRAGMENTS = [
    "import jax\n",
    "import jax.numpy as jnp\n",
    "from flax import linen as nn\n",
    "from flax import nnx\n",
    "import torch.nn as nn\n",
    "from functools import partial\n",
    "from .layers import Base\n",
    "from . import *\n",
    "class A(nn.Module):\n",
    "class B(A, Base):\n",
    "class C(nnx.Module):\n",
    "    x: int = 3\n",
    "    def __call__(self, x, *a, k=1, **kw):\n",
    "    def forward(self, x):\n",
    "    def __init__(self, d, *, rngs: nnx.Rngs):\n",
    "        return jnp.sum(x)\n",
    "@jax.jit\n",
    "@partial(jax.jit, static_argnums=(0,))\n",
    "def f(x, y=(1, 2)):\n",
    "    return jnp.ones(3)\n",
    "    pass\n",
    "\n",
    "(((",
    ")",
    "'''",
    "\\\n",
    "\t",
    "é😀",
    "\r\n",
    "\x00",
    "\ud800",
]


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=300))
def test_arbitrary_text_never_raises(text):
    result = discover_source(text, "fuzz.py")
    assert isinstance(result, FileResult)
    json.dumps(result.to_json())


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=25))
def test_python_like_text_never_raises(fragments):
    text = "".join(fragments)
    result = discover_source(text, "fuzz.py")
    assert isinstance(result, FileResult)
    json.dumps(result.to_json())
    for candidate in result.candidates:
        assert candidate.name_range.start.line <= candidate.name_range.end.line
        assert candidate.range.start.line <= candidate.name_range.start.line
        assert candidate.name_range.end.line <= candidate.range.end.line


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=15), st.lists(st.sampled_from(FRAGMENTS), max_size=15))
def test_workspace_text_never_raises(tmp_path, layers, model):
    index = WorkspaceIndex(tmp_path)
    index.update(tmp_path / "layers.py", "".join(layers))
    result = index.discover(tmp_path / "model.py", "".join(model))
    assert isinstance(result, FileResult)
    json.dumps(result.to_json())
