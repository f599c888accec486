"""The language server reads a workspace's files before trust (issue 29 item 2): with
``.tensorviz/recipes.toml`` a FIFO, a link to ``/dev/zero`` or a link out of the
workspace, and a FIFO ``.py`` beside the model, lenses and hover are answered at once and
the server keeps serving (a FIFO had blocked the whole server; ``/dev/zero`` grew it past
2.7 GB)."""

from __future__ import annotations

import asyncio
import os
import sys

import pytest
from lsprotocol import types

from .conftest import REAL_SERVER, make_workspace, start_session, stop_session

pytestmark = [pytest.mark.asyncio,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs POSIX special files"),
              pytest.mark.slow]

MODEL = """\
import torch.nn as nn


class Net(nn.Module):
    def forward(self, x):
        return x
"""


def hostile_recipes(ws, how: str, tmp_path) -> None:
    folder = ws / ".tensorviz"
    folder.mkdir()
    if how == "fifo":
        os.mkfifo(folder / "recipes.toml")
    elif how == "dev-zero":
        os.symlink("/dev/zero", folder / "recipes.toml")
    else:
        secret = tmp_path / "shadow"
        secret.write_text("root:$6$saltsalt$" + "x" * 80 + ":19000:0:99999:7:::\n")
        os.symlink(secret, folder / "recipes.toml")


async def hover(s, rel: str, line: int, character: int):
    return await s.client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=s.uri(rel)),
                          position=types.Position(line, character)))


@pytest.mark.parametrize("how", ["fifo", "dev-zero", "link-out"])
async def test_lenses_and_hover_answer_with_hostile_special_files(tmp_path, config_dir, how):
    ws = make_workspace(tmp_path / "ws", {"model.py": MODEL})
    hostile_recipes(ws, how, tmp_path)
    os.mkfifo(ws / "other.py")
    s = await start_session(ws, config_dir, server=REAL_SERVER)
    try:
        s.open("model.py")
        lenses = await asyncio.wait_for(s.lenses("model.py"), 20)
        assert [l.command.title for l in lenses] == ["Open as Graph"]
        assert (await asyncio.wait_for(hover(s, "model.py", 3, 7), 20)) is not None
        # Never opened: read from the disk, where it is a FIFO.
        assert not await asyncio.wait_for(s.lenses("other.py"), 20)
        assert await asyncio.wait_for(hover(s, "other.py", 0, 0), 20) is None
        # Still serving, and no diagnostic speaks of what the link points to.
        assert [l.command.title for l in await asyncio.wait_for(s.lenses("model.py"), 20)] == ["Open as Graph"]
        assert s.diagnostics(".tensorviz/recipes.toml") == []
    finally:
        await stop_session(s)
