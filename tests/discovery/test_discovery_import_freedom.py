"""Discovery reads source; it never imports the model, its dependencies, or a framework."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from discovery_helpers import write_tree

from discovery import WorkspaceIndex

REPO = Path(__file__).resolve().parents[2]

MODEL = """\
import sys
import jax
import jax.numpy as jnp
import torch
from flax import linen as nn, nnx
import noisy  # a workspace module whose import leaves a mark

raise RuntimeError("importing model.py is forbidden")

@jax.jit
def net(x):
    return jnp.sum(x)

class MLP(nn.Module):
    width: int = 8

class Lin(nnx.Module):
    def __init__(self, *, rngs: nnx.Rngs):
        pass

class Net(torch.nn.Module):
    def forward(self, x):
        return x

class Child(noisy.Base):
    pass
"""

NOISY = """\
import pathlib
pathlib.Path(__file__).with_name("IMPORTED").write_text("noisy was imported")
import torch
class Base(torch.nn.Module):
    pass
"""


def _workspace(tmp_path: Path) -> Path:
    write_tree(tmp_path, {"model.py": MODEL, "noisy.py": NOISY})
    return tmp_path


def test_discovery_leaves_no_trace_in_process(tmp_path):
    root = _workspace(tmp_path)
    before = set(sys.modules)
    result = WorkspaceIndex(root).discover(root / "model.py")
    assert {c.name: c.kind for c in result.candidates} == {
        "net": "jax_function",
        "MLP": "linen_module",
        "Lin": "nnx_module",
        "Net": "torch_module",
        "Child": "torch_module",
    }
    assert not (root / "IMPORTED").exists()
    assert {"model", "noisy"}.isdisjoint(set(sys.modules) - before)


def test_fresh_interpreter_gains_no_framework_modules(tmp_path):
    root = _workspace(tmp_path)
    script = textwrap.dedent(
        f"""
        import json, sys
        from capture import frameworks  # the registry the front end hands in: plain data
        from discovery.registry import use_frameworks
        use_frameworks(frameworks)
        before = set(sys.modules)
        from discovery import WorkspaceIndex, discover_source
        index = WorkspaceIndex({str(root)!r})
        found = [c.name for c in index.discover({str(root / "model.py")!r}).candidates]
        found += [c.name for c in discover_source(open({str(root / "noisy.py")!r}).read()).candidates]
        gained = sorted(set(sys.modules) - before)
        print(json.dumps({{"found": found, "gained": gained}}))
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout)
    assert report["found"] == ["net", "MLP", "Lin", "Net", "Child", "Base"]
    roots = {name.split(".")[0] for name in report["gained"]}
    assert roots.isdisjoint({"jax", "jaxlib", "flax", "torch", "pygls", "lsprotocol", "noisy", "model"})
    assert not (root / "IMPORTED").exists()
