"""The Torch capture end to end: a real worker process (``capture.session.runner.run_capture``)
and the ``tensorviz capture`` command, each starting the selected interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from capture.graph import graphfile  # noqa: E402
from capture.graph.model import describe_tree  # noqa: E402
from capture.recipe import parse_profile  # noqa: E402
from capture.session.runner import run_capture  # noqa: E402

from torch_workspace import profile, tensor  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def capture(ws, table, **kw):
    return run_capture(ws, parse_profile("p", table), timeout=120, **kw)


def test_forward_through_the_worker(ws):
    c = capture(ws, profile("models:Block", args=[tensor([2, 5, 16])]))
    assert c.failure is None, c.failure
    assert (c.backend, c.framework, c.framework_version) == ("torch_eager", "torch", torch.__version__)
    assert c.coverage.scope == "eager_forward" and c.coverage.status == "complete"
    assert [g.name for g in c.groups if g.parent == 0] == ["ln1", "attn", "ln2", "mlp"]
    assert describe_tree(c.outputs, {v.id: v for v in c.values}) == "float32[2,5,16]"
    assert [s.path for s in c.sources] == ["models.py"]
    assert c.recipe["model"] == "models:Block"
    assert any("stats" in (v.measured or {}) for v in c.values)


def test_training_step_through_the_worker_with_statistics_off(ws):
    table = profile(
        "models:MLP", args=[tensor([6, 4])], kind="training_step", mode="train", grad_enabled=True,
        step={"loss": "sum", "optimizer": {"factory": "models:make_sgd"}},
    )
    c = capture(ws, table, env={"TENSORVIZ_TORCH_STATS": "0"})
    assert c.failure is None, c.failure
    assert c.coverage.scope == "training_step"
    assert [g.kind for g in c.groups if g.parent is None] == ["module", "loss", "backward", "optimizer"]
    assert c.meta["stats"] is False and not any("stats" in (v.measured or {}) for v in c.values)


def test_cuda_refused_in_the_worker_before_the_model_is_imported(ws):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    c = capture(ws, profile("marked:Marked", args=[tensor([2])], device="cuda:0"))
    assert c.failed and not c.nodes
    assert c.failure.stage == "device"
    assert "cuda:0" in c.failure.message and "fall back" in c.failure.message
    assert not (ws / "imported.marker").exists()


def test_a_raising_model_is_a_failure_with_user_frames(ws):
    c = capture(ws, profile("models:Raises", args=[tensor([2, 4])]))
    assert c.failed and not c.nodes
    assert (c.failure.stage, c.failure.type) == ("trace", "ValueError")
    assert "broken on purpose" in c.failure.message
    assert [(f.file, f.function) for f in c.failure.frames][-2:] == [("models.py", "forward"), ("models.py", "helper")]


def test_tensorviz_capture_command(ws):
    (ws / ".tensorviz").mkdir()
    (ws / ".tensorviz" / "recipes.toml").write_text(
        "version = 1\n\n[profiles.cnn]\nkind = \"model\"\nmodel = \"models:SmallCNN\"\n"
        "init = { args = [], kwargs = { classes = 4 } }\n"
        "inputs = { args = [{ kind = \"tensor\", shape = [1, 3, 16, 16], dtype = \"float32\" }], kwargs = {} }\n"
    )
    out = ws / "cnn.tvg"
    proc = subprocess.run(
        [sys.executable, "-m", "tensorviz_lsp", "capture", "--workspace", str(ws), "--profile", "cnn", "-o", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    c = graphfile.read(out)
    assert c.framework == "torch" and c.recipe["framework"] == "torch"
    assert describe_tree(c.outputs, {v.id: v for v in c.values}) == "float32[1,4]"
    shown = subprocess.run(
        [sys.executable, "-m", "tensorviz_lsp", "inspect", str(out), "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert data["backend"] == "torch_eager"


def test_models_that_load_dynamo_keep_its_guard_on_the_mode():
    """Once torch._dynamo is imported (a model that may compile), Dynamo skips the dispatch
    mode's frames and all they call (its code marked, instead of PyTorch's per-op
    wrapper): a compiled module records the same ops and Dynamo compiles nothing of the
    trace (no graph, no graph break: with a dispatch mode active it runs the module
    eagerly, as under PyTorch's wrapper; unguarded, it compiled 4 graphs of the trace's own
    code with 3 graph breaks)."""
    code = (
        "import torch, torch._dynamo, sys, warnings\n"
        "sys.path.insert(0, '.')\n"
        "from torch._dynamo.utils import counters\n"
        "from capture.torch.trace import TorchTrace, _Mode\n"
        "lin = torch.nn.Linear(3, 2)\n"
        "x = torch.ones(1, 3)\n"
        "tr = TorchTrace(None, stats=False)\n"
        "graphs = []\n"
        "def backend(gm, example_inputs):\n"
        "    graphs.append(gm)\n"
        "    return gm.forward\n"
        "compiled = torch.compile(lin, backend=backend)\n"
        "with warnings.catch_warnings():\n"
        "    warnings.simplefilter('ignore')\n"
        "    with tr.recording():\n"
        "        mode = torch.utils._python_dispatch._get_current_dispatch_mode()\n"
        "        lin(x)\n"
        "        compiled(x)\n"
        "print(type(mode).__name__, len(graphs), dict(counters['graph_break']),\n"
        "      [n.op for n in tr.b.nodes])\n"
    )
    env = dict(os.environ, TENSORVIZ_TORCH_RECORDER="python")  # the dispatch mode's guard (the native: below)
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[:3] == ["_Mode", "0", "{}"], proc.stdout
    assert "['aten::t', 'aten::addmm', 'aten::t', 'aten::addmm']" in proc.stdout
