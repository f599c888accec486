"""A Torch checkpoint named by a profile is a capture source: replacing it on disk (a
watched-file event) marks the graph stale, naming the file. A checkpoint or fixture the
worker would refuse (absent, a symlink leading out) is a diagnostic on its recipe line."""

from __future__ import annotations

import pytest
import pytest_asyncio

from tensorviz_lsp.features.recipes import SAVED_FILES_GLOB, saved_file_issues

from .conftest import DIAGNOSTICS, make_workspace, start_session, stop_session

pytestmark = pytest.mark.asyncio

MODEL = '''import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)
'''

RECIPES = '''version = 1

[profiles.trained]
model = "tmodel:Net"
init = { args = [], kwargs = {}, checkpoint = "runs/best.pt" }
inputs = { args = [{ kind = "tensor", shape = [2, 4], dtype = "float32" }], kwargs = {} }
'''


@pytest_asyncio.fixture
async def session(tmp_path, config_dir):
    ws = make_workspace(tmp_path / "ws", {"tmodel.py": MODEL, ".tensorviz/recipes.toml": RECIPES})
    (ws / "runs").mkdir()
    (ws / "runs" / "best.pt").write_bytes(b"epoch 1 weights")
    s = await start_session(ws, config_dir)
    yield s
    await stop_session(s)


async def test_the_watched_files_include_checkpoints_and_fixtures():
    assert SAVED_FILES_GLOB == "**/*.{bin,npz,pt,pth,safetensors}"


@pytest.mark.slow
async def test_a_replaced_checkpoint_makes_the_graph_stale(session):
    await session.execute("tensorviz.trustWorkspace")
    session.open("tmodel.py")
    result = await session.execute("tensorviz.openGraph", {"uri": session.uri("tmodel.py"), "symbol": "Net"})
    assert getattr(result, "ok", None) is True or (isinstance(result, dict) and result.get("ok") is True)
    assert session.diagnostics("tmodel.py") == []
    (session.workspace / "runs" / "best.pt").write_bytes(b"epoch 2 weights")
    session.disk_changed("runs/best.pt")
    diags = await session.wait_for(lambda: session.diagnostics("tmodel.py"), on=DIAGNOSTICS, what="stale diagnostic")
    assert diags[0].code == "stale-graph" and "runs/best.pt changed since it was captured" in diags[0].message
    # The same bytes again: fresh.
    (session.workspace / "runs" / "best.pt").write_bytes(b"epoch 1 weights")
    session.disk_changed("runs/best.pt")
    await session.wait_for(lambda: not session.diagnostics("tmodel.py"), on=DIAGNOSTICS, what="fresh again")


def _issues(root, text):
    return [(i.path, i.line, i.message) for i in saved_file_issues(root, text)]


async def test_saved_file_issues(tmp_path, tmp_path_factory):
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "best.pt").write_bytes(b"x")
    outside = tmp_path_factory.mktemp("elsewhere") / "batch.npz"
    outside.write_bytes(b"x")
    (tmp_path / "batch.npz").symlink_to(outside)
    (tmp_path / "dir.pt").mkdir()
    text = (
        'version = 1\n[profiles.ok]\nmodel = "m:N"\ninit = { checkpoint = "runs/best.pt" }\n'
        '[profiles.gone]\nmodel = "m:N"\ninit = { checkpoint = "runs/last.pt" }\n'
        '[profiles.out]\nmodel = "m:N"\n\n[profiles.out.inputs]\nfixture = "batch.npz"\n'
        '[profiles.dir]\nmodel = "m:N"\ninit = { checkpoint = "dir.pt" }\n'
        '[profiles.jax]\nframework = "jax"\nmodel = "m:N"\ninit = { checkpoint = "nope.pt" }\n'
    )
    assert _issues(tmp_path, text) == [
        ("profiles.gone.init.checkpoint", 7,
         "profiles.gone.init.checkpoint: no checkpoint file runs/last.pt in the workspace (capture needs it)"),
        ("profiles.out.inputs.fixture", 12,
         f"profiles.out.inputs.fixture: batch.npz leads outside the workspace (to {outside}); fixture files must "
         "live inside it"),
        ("profiles.dir.init.checkpoint", 15, "profiles.dir.init.checkpoint: dir.pt is not a regular file"),
    ]  # the JAX profile is invalid as a recipe: its own diagnostic says so


@pytest.mark.slow
async def test_a_missing_checkpoint_is_a_diagnostic_until_it_appears(tmp_path, config_dir):
    ws = make_workspace(tmp_path / "ws", {"tmodel.py": MODEL, ".tensorviz/recipes.toml": RECIPES})
    s = await start_session(ws, config_dir)
    try:
        recipes = ".tensorviz/recipes.toml"
        diags = await s.wait_for(lambda: s.diagnostics(recipes), on=DIAGNOSTICS, what="missing checkpoint")
        assert diags[0].code == "invalid-recipe" and diags[0].range.start.line == 4
        assert "no checkpoint file runs/best.pt in the workspace" in diags[0].message
        (ws / "runs").mkdir()
        (ws / "runs" / "best.pt").write_bytes(b"weights")
        s.disk_changed("runs/best.pt")
        await s.wait_for(lambda: not s.diagnostics(recipes), on=DIAGNOSTICS, what="cleared once the file exists")
    finally:
        await stop_session(s)


async def test_a_fixture_asks_for_no_input_shapes_in_the_setup_form(tmp_path):
    from tensorviz_lsp.backends import Candidate, Pos, Span
    from tensorviz_lsp.features.setup_form import SetupContext, setup_form

    cand = Candidate(
        name="Net", qualname="Net", kind="torch_module", framework="torch",
        name_range=Span(Pos(4, 6), Pos(4, 9)), range=Span(Pos(4, 0), Pos(11, 0)),
        inputs=[{"name": "x", "kind": "positional", "annotation": None, "default": None, "required": True}],
        setup_fields=[],
    )
    recipe = {"name": "trained", "model": "tmodel:Net", "framework": "torch",
              "init": {"args": [], "kwargs": {}, "checkpoint": "runs/best.pt", "strict": True},
              "inputs": {"fixture": "data/batch.pt"}}
    form = setup_form(SetupContext(tmp_path, "file:///ws/tmodel.py", cand, "trained", recipe))
    assert form["needs"] == []
    assert form["recipe"]["inputs"] == {"fixture": "data/batch.pt"}
    literal = {**recipe, "inputs": {"args": [], "kwargs": {}}}
    assert setup_form(SetupContext(tmp_path, "file:///ws/tmodel.py", cand, "trained", literal))["needs"]
