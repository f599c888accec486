"""``call`` descriptions built in a real worker (fake framework): the object reaches the
model, the target's file joins the capture's sources, every failure names the key path
and keeps the callee's own message, and nothing runs in an untrusted workspace."""

from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path

import pytest

from capture.recipe import Recipe
from capture.session.runner import run_capture
from fake_workspace import tensor

CONFIGS = """
import os
from dataclasses import dataclass

MARKER = os.environ.get("TV_CONFIG_MARKER")
if MARKER:
    open(MARKER, "w").close()


@dataclass
class Config:
    factor: float = 1.0
    offset: float = 0.0


def table(w, scale=1.0):
    return {"w": w, "scale": scale}


def broken(depth):
    raise RuntimeError(f"the config library says no at depth {depth}")


NOT_CALLABLE = 3
"""

HOLDERS = """
class Configured:
    def __init__(self, config):
        self.config = config

    def __call__(self, x):
        return x * self.config.factor + self.config.offset


class WithTable:
    def __init__(self, table):
        self.table = table

    def __call__(self, x):
        return (x @ self.table["w"]) * self.table["scale"]


class Built:
    # takes a class and builds it itself (Flax's block_cls, torchvision's block)

    def __init__(self, config_cls, factor):
        self.config = config_cls(factor=factor)

    def __call__(self, x):
        return x * self.config.factor
"""


@pytest.fixture
def ws(workspace: Path) -> Path:
    (workspace / "configs.py").write_text(textwrap.dedent(CONFIGS).lstrip())
    (workspace / "holders.py").write_text(textwrap.dedent(HOLDERS).lstrip())
    return workspace


def recipe(model: str, init: dict, *args) -> Recipe:
    return Recipe.from_dict({
        "name": "p", "framework": "fake", "model": model, "init": init, "inputs": {"args": list(args)},
    })


def config(target: str = "configs:Config", *args, **kwargs) -> dict:
    return {"kind": "call", "target": target, "args": list(args), "kwargs": kwargs}


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_workspace_config_object_builds_the_model(ws):
    c = run_capture(ws, recipe("holders:Configured", {"kwargs": {"config": config(factor=3.0, offset=1.0)}},
                               tensor(2, 3)))
    assert c.failure is None, c.failure
    assert [n.op for n in c.nodes] == ["mul", "add"]
    assert [n.inputs[1].literal for n in c.nodes] == [3.0, 1.0]
    # The target's file is a source: editing configs.py makes the graph stale.
    sources = {s.path: s.sha256 for s in c.sources}
    assert sources["configs.py"] == sha(ws / "configs.py")
    assert c.recipe["init"]["kwargs"]["config"] == {
        "kind": "call", "target": "configs:Config", "kwargs": {"factor": 3.0, "offset": 1.0},
    }


def test_a_target_named_by_path(ws):
    """A file no dotted module can name (``06_scales.py``) is a target by its path."""
    (ws / "setup").mkdir()
    (ws / "setup" / "06_scales.py").write_text("def triple():\n    return 3.0\n")
    c = run_capture(ws, recipe("holders:Configured", {"kwargs": {"config": config(
        factor=config("setup/06_scales.py:triple"))}}, tensor(2)))
    assert c.failure is None, c.failure
    assert c.nodes[0].inputs[1].literal == 3.0
    assert "setup/06_scales.py" in {s.path for s in c.sources}


def test_nested_calls_take_tensors_and_installed_targets(ws):
    table = config("configs:table", w=tensor(3, 4), scale=config("math:sqrt", 4.0))
    c = run_capture(ws, recipe("holders:WithTable", {"kwargs": {"table": table}}, tensor(2, 3)))
    assert c.failure is None, c.failure
    assert [n.op for n in c.nodes] == ["matmul", "mul"]
    assert c.nodes[1].inputs[1].literal == 2.0
    # A dotted attribute of an installed module, as in transformers:AutoConfig.from_pretrained.
    c = run_capture(ws, recipe("holders:Configured", {"kwargs": {"config": config(
        factor=config("builtins:float.fromhex", "0x1.8p1"))}}, tensor(2)))
    assert c.failure is None, c.failure
    assert c.nodes[0].inputs[1].literal == 3.0


@pytest.mark.parametrize(
    "value, stage, type_name, message",
    [
        pytest.param(config("configs:Missing"), "import", "AttributeError",
                     "profiles.p.init.kwargs.config.target: 'configs' has no attribute 'Missing'", id="no-attribute"),
        pytest.param(config("no_such_package:Config"), "import", "ModuleNotFoundError",
                     "profiles.p.init.kwargs.config.target: cannot import 'no_such_package'", id="no-module"),
        pytest.param(config("configs:NOT_CALLABLE"), "recipe", "CaptureError",
                     "profiles.p.init.kwargs.config.target: configs:NOT_CALLABLE is a int, which cannot be called",
                     id="not-callable"),
        pytest.param(config(factr=2.0), "recipe", "TypeError",
                     "profiles.p.init.kwargs.config: configs:Config does not take these arguments: "
                     "got an unexpected keyword argument 'factr'", id="wrong-keyword"),
        pytest.param(config(factor=config("configs:broken", 7)), "trace", "RuntimeError",
                     "profiles.p.init.kwargs.config.kwargs.factor: calling configs:broken raised RuntimeError: "
                     "the config library says no at depth 7", id="callee-raises"),
    ],
)
def test_failures_name_the_key_path(ws, value, stage, type_name, message):
    c = run_capture(ws, recipe("holders:Configured", {"kwargs": {"config": value}}, tensor(2)))
    f = c.failure
    assert f is not None and not c.nodes
    assert (f.stage, f.type) == (stage, type_name)
    assert f.message.startswith(message), f.message
    assert f.details["key_path"].startswith("profiles.p.init.kwargs.config")
    if stage == "trace":
        # The callee's own frames, and its file among the sources for the next save.
        assert [(fr.file, fr.function) for fr in f.frames][-1] == ("configs.py", "broken")
        assert "configs.py" in {s.path for s in c.sources}


def ref(target: str) -> dict:
    return {"kind": "ref", "target": target}


def test_a_ref_passes_the_class_itself(ws):
    c = run_capture(ws, recipe("holders:Built", {"kwargs": {"config_cls": ref("configs:Config"), "factor": 5.0}},
                               tensor(2)))
    assert c.failure is None, c.failure
    assert [n.op for n in c.nodes] == ["mul"] and c.nodes[0].inputs[1].literal == 5.0
    assert "configs.py" in {s.path for s in c.sources}  # a ref's file is a source, as a call's
    assert c.recipe["init"]["kwargs"]["config_cls"] == ref("configs:Config")


def test_a_ref_that_cannot_be_imported_names_the_key_path(ws):
    c = run_capture(ws, recipe("holders:Built", {"kwargs": {"config_cls": ref("configs:Mising"), "factor": 5.0}},
                               tensor(2)))
    f = c.failure
    assert f is not None and not c.nodes and (f.stage, f.type) == ("import", "AttributeError")
    assert f.message.startswith("profiles.p.init.kwargs.config_cls.target: 'configs' has no attribute 'Mising'")
    assert f.details["target"] == "configs:Mising"


def test_nothing_is_called_in_an_untrusted_workspace(ws, tmp_path):
    marker = tmp_path / "config-imported"
    r = recipe("holders:Configured", {"kwargs": {"config": config(factor=2.0)}}, tensor(2))
    c = run_capture(ws, r, trusted=False, env={"TV_CONFIG_MARKER": str(marker)})
    assert (c.failure.stage, c.failure.type) == ("trust", "WorkspaceNotTrusted")
    assert not marker.exists()
    # The same recipe, trusted: the marker proves the target's module runs then.
    assert run_capture(ws, r, env={"TV_CONFIG_MARKER": str(marker)}).failure is None
    assert marker.exists()
    # A ref imports its module as a call does: gated the same way.
    marker.unlink()
    named = recipe("holders:Built", {"kwargs": {"config_cls": ref("configs:Config"), "factor": 2.0}}, tensor(2))
    c = run_capture(ws, named, trusted=False, env={"TV_CONFIG_MARKER": str(marker)})
    assert (c.failure.stage, c.failure.type) == ("trust", "WorkspaceNotTrusted") and not marker.exists()
