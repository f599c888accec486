"""Saving a file the model's package merely imports recaptures nothing (issue 49, item 6):
of a capture's sources (every workspace file the worker imported), a save concerns the
files whose code ran (frames), and those the model's file or the recipe's targets import
from, not siblings a package ``__init__`` imports (bonsai's other models)."""

from __future__ import annotations

from pathlib import Path

import pytest

from capture.graph.model import Capture, Coverage, Frame
from tensorviz_lsp.features.recapture import uses_source

FILES = {
    "pkg/__init__.py": "from . import qwen, llama\nVERSION = 1\n",
    "pkg/qwen.py": "from pkg.layers import Block\nfrom pkg import VERSION\n\n\nclass Qwen:\n    pass\n",
    "pkg/layers.py": "from .norms import rms\nfrom .unused import nothing\n\n\nclass Block:\n    def forward(self, x):\n        return rms(x)\n",
    "pkg/unused.py": "nothing = None\n",
    "pkg/norms.py": "def rms(x):\n    return x\n",
    "pkg/llama.py": "from pkg.unrelated_layers import Other\n\n\nclass Llama:\n    pass\n",
    "pkg/unrelated_layers.py": "class Other:\n    pass\n",
    "pkg/runtime_only.py": "def helper(x):\n    return x\n",
    "setup_fns.py": "from pkg.norms import rms\n\n\ndef batch():\n    return {}\n",
}


@pytest.fixture
def ws(tmp_path):
    for name, text in FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def _capture(recipe, frames=()):
    return Capture(backend="torch_eager", framework="torch", framework_version="2", coverage=Coverage("eager_forward"),
                   frames=list(frames), recipe=recipe)


def _read(path: Path) -> str | None:
    return path.read_text() if path.is_file() else None


@pytest.mark.parametrize("rel, used", [
    ("pkg/qwen.py", True),            # the model's file
    ("pkg/layers.py", True),          # imported from by it
    ("pkg/norms.py", True),           # and from that, relatively: Block calls rms
    ("pkg/unused.py", False),         # imported beside Block, used by nothing the model uses
    ("pkg/__init__.py", True),        # ``from pkg import VERSION``
    ("pkg/llama.py", False),          # a sibling the package imports
    ("pkg/unrelated_layers.py", False),
    ("pkg/runtime_only.py", True),    # its code ran in the capture (a frame)
])
def test_which_sources_a_save_concerns(ws, rel, used):
    cap = _capture({"model": "pkg.qwen:Qwen"}, [Frame(file="pkg/runtime_only.py", line=2, column=0, function="helper")])
    assert uses_source(ws, cap, rel, _read) is used


def test_a_file_the_recipe_names_counts(ws):
    recipe = {"model": "pkg.llama:Llama", "inputs": {"factory": "setup_fns:batch"}}
    assert uses_source(ws, _capture(recipe), "pkg/norms.py", _read)
    assert not uses_source(ws, _capture(recipe), "pkg/layers.py", _read)


def test_without_a_model_reference_every_source_counts(ws):
    assert uses_source(ws, _capture(None), "pkg/llama.py", _read)
