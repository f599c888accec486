"""``--before`` (issue 49, item 3): calls made before construction for library state the
constructor reads, saved as ``init.before``; and the hint a failure that names such state
gets. A library of our own stands in for fairscale."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from capture.graph.model import Capture, Coverage, Failure, Frame
from tensorviz_lsp.cli import build_parser, main
from tensorviz_lsp.cli.commands import capture as capture_cmd
from tensorviz_lsp.setup.hints import MODEL_PARALLEL, before_hint, before_hint_text

PARALLEL = '''
_GROUP = None


def initialize_model_parallel(size):
    global _GROUP
    _GROUP = size


def get_model_parallel_world_size():
    assert _GROUP is not None, "model parallel group is not initialized"
    return _GROUP
'''

MODEL = '''
import torch
from torch import nn

from parallel import get_model_parallel_world_size


class Block(nn.Module):
    def __init__(self, dim: int = 8):
        super().__init__()
        self.up = nn.Linear(dim, 4 * dim // get_model_parallel_world_size())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.up(x).relu()
'''


@pytest.fixture
def ws(tmp_path, monkeypatch):
    (tmp_path / "parallel.py").write_text(PARALLEL)
    (tmp_path / "model.py").write_text(MODEL)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _recipe(argv: list[str]):
    return capture_cmd.shorthand_recipe(build_parser("capture").parse_args(["capture", *argv]))[1]


def test_before_is_saved_as_calls_in_order(ws):
    recipe = _recipe(["model.py:Block", "--input", "x=float32[2,8]",
                      "--before", "parallel.initialize_model_parallel(1)",
                      "--before", "torch.manual_seed(3)"])
    assert [c.to_dict() for c in recipe.init.before] == [
        {"kind": "call", "target": "parallel:initialize_model_parallel", "args": [1]},
        {"kind": "call", "target": "torch:manual_seed", "args": [3]},
    ]


@pytest.mark.parametrize("text, problem", [
    ("3", "a step before construction is a call"),
    ("parallel.initialize_model_parallel(", "not a value Python can read"),
])
def test_a_before_that_is_no_call_is_refused_naming_the_flag(ws, capsys, text, problem):
    assert main(["capture", "model.py:Block", "--input", "x=float32[2,8]", "--before", text]) == 2
    err = capsys.readouterr().err
    assert "--before" in err and problem in err
    assert not (ws / ".tensorviz").exists()


def test_before_needs_the_shorthand(ws, capsys):
    assert main(["capture", "--profile", "Block", "--before", "parallel.initialize_model_parallel(1)"]) == 2
    assert "--before" in capsys.readouterr().err


@pytest.mark.parametrize("message, calls", [
    ("AssertionError: model parallel group is not initialized", 2),
    ("tensor model parallel group is not initialized", 2),
    ("ValueError: Default process group has not been initialized, please make sure to call init_process_group.", 1),
    ("RuntimeError: shapes cannot be multiplied", 0),
])
def test_the_hint_for_state_set_up_outside_the_model(message, calls):
    found = before_hint(message)
    assert (len(found[1]) if found else 0) == calls
    if calls == 2:
        assert found[1][-1] == MODEL_PARALLEL


def test_the_failure_lines_carry_the_hint():
    f = Failure(type="AssertionError", message="model parallel group is not initialized", stage="trace",
                frames=[Frame(file="model.py", line=11, column=0, function="__init__")])
    cap = Capture(backend="torch_eager", framework="torch", framework_version="2", coverage=Coverage("eager_forward"),
                  failure=f)
    text = capture_cmd.describe_failure(cap)
    assert f"    hint: {before_hint_text(f.message)}" in text.splitlines()
    assert f"--before '{MODEL_PARALLEL}'" in text


@pytest.mark.slow
def test_the_capture_runs_the_call_before_building(ws):
    """End to end in the worker: without --before the capture fails with the hint; with it
    the graph is written."""
    import subprocess

    root = Path(__file__).resolve().parents[2]
    env_cmd = [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(root)!r}); "
               "from tensorviz_lsp.cli import main; sys.exit(main(sys.argv[1:]))"]
    failed = subprocess.run([*env_cmd, "capture", "model.py:Block", "--input", "x=float32[2,8]"], cwd=ws,
                            capture_output=True, text=True, timeout=300)
    assert failed.returncode == 1 and "hint: the model's layers read model-parallel groups" in failed.stderr
    ok = subprocess.run([*env_cmd, "capture", "model.py:Block", "--input", "x=float32[2,8]",
                         "--before", "parallel.initialize_model_parallel(2)"], cwd=ws, capture_output=True, text=True,
                        timeout=300)
    assert ok.returncode == 0, ok.stderr


def test_a_torchvision_built_for_another_torch_is_named():
    from tensorviz_lsp.setup.hints import failure_hint

    message = ("RuntimeError: operator torchvision::nms does not exist")
    f = Failure(type="RuntimeError", message=message, stage="import",
                frames=[Frame(file="timm/layers/x.py", line=3, column=0, function="<module>", library=True)])
    cap = Capture(backend="torch_eager", framework="torch", framework_version="2", coverage=Coverage("eager_forward"),
                  failure=f)
    text = capture_cmd.describe_failure(cap)
    assert "hint: torchvision was built for another Torch than the installed one (its compiled operator " \
           "torchvision::nms is missing)" in text
    assert failure_hint("RuntimeError: mat1 and mat2 shapes cannot be multiplied") is None


@pytest.mark.parametrize("torch_version, release, index", [
    ("2.13.0+cpu", "torchvision==0.28.0", True),
    ("2.12.1", "torchvision==0.27.1", False),
    (None, "torchvision==<the release paired with your torch>", False),
])
def test_the_torchvision_hint_names_the_paired_release_and_the_cpu_build(torch_version, release, index):
    """timm beside a CUDA torchvision from PyPI and a CPU-only torch: the release paired with
    the installed torch, from PyTorch's CPU index for a +cpu torch."""
    from tensorviz_lsp.setup.hints import build_mismatch_hint

    hint = build_mismatch_hint("RuntimeError: operator torchvision::nms does not exist", torch_version)
    assert f"'{release}'" in hint
    assert ("--index-url https://download.pytorch.org/whl/cpu" in hint) == index
    assert ("a CUDA build beside the CPU-only torch" in hint) == index
    assert "python -m pip uninstall torchvision also does" in hint


def test_a_mesh_given_with_a_failed_attempt_is_not_kept(ws, capsys):
    """Issue 49: a --mesh saved by an attempt that failed stayed in the profile, and the
    next attempt without --mesh ran under it (its legend over the model)."""
    from tensorviz_lsp.recipes_store import existing_profile, save_profile

    args = build_parser("capture").parse_args(["capture", "model.py:Block", "--input", "x=float32[2,8]",
                                              "--mesh", "data=2"])
    _, recipe, _ = capture_cmd.shorthand_recipe(args)
    save_profile(ws, recipe)
    assert existing_profile(ws, recipe.name).mesh is not None
    assert args._mesh_before == (None, True)
    capture_cmd._drop_failed_mesh(args, ws, recipe.name)
    assert existing_profile(ws, recipe.name).mesh is None
    assert "the --mesh of this failed attempt is not kept in profile Block" in capsys.readouterr().err
    # Without --mesh given now, a saved mesh is the user's: kept.
    save_profile(ws, recipe)
    plain = build_parser("capture").parse_args(["capture", "model.py:Block", "--input", "x=float32[2,8]"])
    capture_cmd.shorthand_recipe(plain)
    capture_cmd._drop_failed_mesh(plain, ws, recipe.name)
    assert existing_profile(ws, recipe.name).mesh is not None
