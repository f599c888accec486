"""Warm from the first capture (issue 30 item 1): the folder's resident worker is started
and imports the libraries a workspace's model files name before any capture
(capture.session.preload); the capture that comes during it waits for the rest only,
and runs in a child of that resident process. Fake framework (fast)."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from capture.session.preload import framework_modules, preload_names, start_preload
from capture.session.runner import run_capture
from capture.session.warm import WarmPool
from fake_workspace import fake_recipe, tensor
from processes import exited

# A library that takes a while to import and says which process imported it: TV_SLOW_S
# seconds, or, with TV_GATE, until the test creates that file (at most 120 s), so that a
# test knows the import cannot have finished.
SLOW_LIBRARY = """\
import os, time
if os.environ.get("TV_GATE"):
    end = time.monotonic() + 120
    while not os.path.exists(os.environ["TV_GATE"]) and time.monotonic() < end:
        time.sleep(0.02)
else:
    time.sleep(float(os.environ.get("TV_SLOW_S", "2")))
with open(os.environ["TV_IMPORTS"], "a") as fh:
    fh.write(f"tvslow {os.getpid()}\\n")
SCALE = 2.0
"""
# A package whose class loads its own module only when read (as transformers' do).
LAZY_INIT = """\
import importlib

def __getattr__(name):
    if name == "Widget":
        return importlib.import_module(".widgets", __name__).Widget
    raise AttributeError(name)
"""
LAZY_WIDGETS = """\
import os
with open(os.environ["TV_IMPORTS"], "a") as fh:
    fh.write(f"tvlazy.widgets {os.getpid()}\\n")

class Widget:
    pass
"""
USES = """\
import os
import tvslow
from tvlazy import Widget

def net(x, w):
    with open(os.environ["TV_IMPORTS"], "a") as fh:
        fh.write(f"child {os.getpid()} {os.getppid()}\\n")
    return (x @ w) * tvslow.SCALE
"""


@pytest.fixture
def pool():
    p = WarmPool(idle_seconds=600)
    yield p
    p.close()


@pytest.fixture
def libs(tmp_path, workspace) -> dict[str, str]:
    lib = tmp_path / "libs"
    (lib / "tvlazy").mkdir(parents=True)
    (lib / "tvslow.py").write_text(SLOW_LIBRARY)
    (lib / "tvlazy" / "__init__.py").write_text(LAZY_INIT)
    (lib / "tvlazy" / "widgets.py").write_text(LAZY_WIDGETS)
    (workspace / "uses.py").write_text(USES)
    return {"PYTHONPATH": str(lib), "TV_IMPORTS": str(tmp_path / "imports.txt")}


def imports(env) -> list[list[str]]:
    path = Path(env["TV_IMPORTS"])
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


def test_the_first_capture_runs_on_the_preloaded_resident_and_waits_only_for_the_rest(workspace, pool, libs, tmp_path):
    names = preload_names(workspace, ["fake"], [(workspace / "uses.py").read_text()])
    assert names == ["tvslow", "tvlazy", "tvlazy:Widget"]  # os: the standard library
    gate = tmp_path / "gate"
    env = {**libs, "TV_GATE": str(gate)}
    assert start_preload(pool, workspace, sys.executable, env, names) == "started"
    # Back while tvslow cannot have finished importing (its gate is shut): the preload runs
    # in the background. (How long start_preload takes: benchmarks/bench_worker.py.)
    assert imports(libs) == [], "start_preload waited for the imports"
    (info,) = pool.workers().values()
    resident = info["pid"]
    assert info["preloading"] == 1
    # The capture comes while tvslow is still importing: it waits for it, then forks.
    threading.Timer(0.5, gate.touch).start()
    c = run_capture(workspace, fake_recipe("uses:net", tensor(2, 3), tensor(3, 4)), warm=pool, env=env)
    assert c.failure is None, c.failure
    rows = imports(libs)
    # Each library was imported once, in the resident process; the child found them loaded.
    assert ["tvslow", str(resident)] in rows and ["tvlazy.widgets", str(resident)] in rows
    (child,) = [r for r in rows if r[0] == "child"]
    assert child[2] == str(resident) and child[1] != str(resident)
    assert len(rows) == 3
    info = pool.workers()[str(workspace.resolve())]
    assert info["pid"] == resident and info["captures"] == 1 and info["imported"] == 3


def test_preloading_again_asks_only_for_what_is_new_and_never_while_a_capture_runs(workspace, pool, libs, tmp_path):
    env = {**libs, "TV_SLOW_S": "0"}
    assert start_preload(pool, workspace, sys.executable, env, ["tvslow"]) == "started"
    assert start_preload(pool, workspace, sys.executable, env, ["tvslow"]) == "warm"
    assert start_preload(pool, workspace, sys.executable, env, ["tvslow", "tvlazy"]) == "preloading"
    # Another capture environment binds another resident: the old one is replaced.
    (old,) = [w["pid"] for w in pool.workers().values()]
    assert start_preload(pool, workspace, sys.executable, {**env, "OTHER": "1"}, ["tvslow"]) == "started"
    assert exited(old, 10) and "environment" in pool.discarded[-1][1]
    # While a capture runs, a preload leaves the resident alone.
    child_pid = tmp_path / "child.pid"
    done = threading.Event()
    threading.Thread(target=lambda: (run_capture(
        workspace, fake_recipe("crashy:hang", tensor(2, 3)), warm=pool, timeout=30,
        env={**env, "OTHER": "1", "TV_WORKER_PID": str(child_pid)}), done.set()), daemon=True).start()
    deadline = time.monotonic() + 60
    while not (child_pid.exists() and child_pid.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert start_preload(pool, workspace, sys.executable, {**env, "OTHER": "1"}, ["tvlazy"]) == "busy"
    pool.close()
    assert done.wait(30)


def test_a_cancel_during_the_preload_ends_the_wait(workspace, pool, libs, tmp_path):
    gate = tmp_path / "gate"  # never opened: the import lasts until the resident is killed
    env = {**libs, "TV_GATE": str(gate)}
    assert start_preload(pool, workspace, sys.executable, env, ["tvslow"]) == "started"
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    c = run_capture(workspace, fake_recipe("uses:net", tensor(2, 3), tensor(3, 4)), warm=pool, env=env,
                    cancel=cancel, timeout=60)
    # Cancelled while the import still ran (not the import's end, not the 60 s deadline).
    assert c.failure is not None and c.failure.stage == "cancelled", c.failure
    assert imports(libs) == [], "the capture waited for the import to end"


def test_workspace_modules_are_never_preloaded(workspace, pool, libs):
    """A name that resolves into the workspace is user code: preload_names leaves it
    out, and a resident asked for one anyway gives up being warm (the next capture
    starts a new one)."""
    (workspace / "mylib.py").write_text("X = 1\n")
    (workspace / "pkg").mkdir(exist_ok=True)
    (workspace / "pkg" / "__init__.py").touch()
    text = "import mylib\nfrom pkg import thing\nimport tvslow\n"
    assert preload_names(workspace, ["fake"], [text]) == ["tvslow"]
    env = {**libs, "PYTHONPATH": f"{libs['PYTHONPATH']}{os.pathsep}{workspace}", "TV_SLOW_S": "0"}
    assert start_preload(pool, workspace, sys.executable, env, ["mylib"]) == "started"
    (resident,) = [w["pid"] for w in pool.workers().values()]
    c = run_capture(workspace, fake_recipe("models:net", tensor(2, 3), tensor(3, 4)), warm=pool, env=env)
    assert c.failure is None
    assert exited(resident, 10) and "mylib resolved to a workspace file" in pool.discarded[-1][1]


@pytest.mark.parametrize(("frameworks", "text", "expected"), [
    pytest.param(["torch"], "import torch\nimport torch.nn as nn\nimport math\n", ["torch"], id="torch-alone"),
    pytest.param(["torch"], "import torch\nfrom transformers import GPT2Config, GPT2LMHeadModel\n",
                 ["torch", "transformers", "transformers:GPT2Config", "transformers:GPT2LMHeadModel"], id="transformers"),
    pytest.param(["torch"], "import torch\ndef f():\n    import scipy\nclass A:\n    import yaml\n", ["torch"],
                 id="function-level-imports-stay-lazy"),
    pytest.param(["torch"], "try:\n    import einops\nexcept ImportError:\n    einops = None\nif True:\n    import timm\n",
                 ["torch", "einops", "timm"], id="module-level-try-and-if"),
    pytest.param(["jax"], "import jax\nimport jax.numpy as jnp\n", ["jax"], id="jax-needs-no-torch-or-flax"),
    pytest.param(["jax", "flax"], "from flax import linen as nn\n", ["jax", "flax"], id="flax"),
    pytest.param(["torch"], "from . import sibling\nfrom __future__ import annotations\nimport pip\n", ["torch"],
                 id="relative-future-tooling"),
    pytest.param(["torch"], "def broken(:\n", ["torch"], id="does-not-parse"),
])
def test_preload_names(tmp_path, frameworks, text, expected):
    names = [n for n in preload_names(tmp_path, frameworks, [text]) if not n.startswith("capture.")]
    assert names == expected


def test_preload_names_are_bounded_and_bring_the_capture_modules(tmp_path):
    text = "".join(f"import lib{i}\n" for i in range(40))
    names = preload_names(tmp_path, ["torch"], [text], limit=5)
    assert [n for n in names if n.startswith("lib")] == [f"lib{i}" for i in range(5)]
    assert "capture.torch.framework" in names and "capture.torch.trace" in framework_modules("torch")
    assert "capture.jax.framework" in framework_modules("jax") and "torch" not in framework_modules("jax")
