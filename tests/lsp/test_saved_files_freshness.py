"""A Torch checkpoint named by a profile is a capture source: replacing it on disk (a
watched-file event) marks the graph stale, naming the file."""

from __future__ import annotations

import pytest
import pytest_asyncio

from tensorviz_lsp.features.recipes import SAVED_FILES_GLOB

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
