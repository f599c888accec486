"""Commands a client may send with arguments it should not (issue 39 item 6), over stdio
with the fake worker: trust only for the workspace's own folders, an interpreter that
does not exist is not saved, and a graph that could not be written is no success."""

from __future__ import annotations

import json

import pytest
import pytest_asyncio

from .conftest import start_session, stop_session

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]  # a server of their own each (fresh trust and state)


def _get(result, key):
    return result[key] if isinstance(result, dict) else getattr(result, key)


@pytest_asyncio.fixture
async def session(spec_workspace, config_dir):
    s = await start_session(spec_workspace, config_dir)
    yield s
    await stop_session(s)


def _stored(config_dir, name: str) -> dict:
    path = config_dir / name
    return json.loads(path.read_text()) if path.exists() else {}


@pytest.mark.parametrize("folder", ["/etc", "outside"])
async def test_only_a_folder_of_the_workspace_can_be_trusted(session, tmp_path, folder):
    if folder == "outside":
        (tmp_path / "elsewhere").mkdir()
        folder = str(tmp_path / "elsewhere")
    result = await session.execute("tensorviz.trustWorkspace", {"folder": folder})
    assert _get(result, "ok") is False and _get(result, "reason") == "not-a-workspace-folder", result
    assert folder not in json.dumps(_stored(session.config_dir, "trust.json"))
    assert any("not a folder of this workspace" in m for m in session.messages())
    # The workspace's own folder (or a file in it) still can be.
    result = await session.execute("tensorviz.trustWorkspace", {"folder": session.uri("model.py")})
    assert _get(result, "ok") is True
    assert str(session.workspace.resolve()) in _stored(session.config_dir, "trust.json")["workspaces"]


async def test_an_interpreter_that_does_not_exist_is_not_saved(session, tmp_path):
    good = await session.execute("tensorviz.selectInterpreter", {"python": "python3"})
    assert _get(good, "ok") is True
    before = _stored(session.config_dir / "state", "interpreters.json")
    assert before
    result = await session.execute("tensorviz.selectInterpreter", {"python": str(tmp_path / "no" / "python")})
    assert _get(result, "ok") is False and _get(result, "reason") == "not-executable", result
    assert _stored(session.config_dir / "state", "interpreters.json") == before  # the earlier choice stands
    assert _get(result, "current") == _get(good, "python")
    assert any("not an executable file" in m for m in session.messages())


async def test_a_graph_that_could_not_be_written_is_no_success(session):
    await session.execute("tensorviz.trustWorkspace")
    captures = session.workspace / ".tensorviz" / "captures"
    captures.parent.mkdir(exist_ok=True)
    captures.write_text("a file where the captures folder goes: every write fails")
    result = await session.execute("tensorviz.openGraph", {"uri": session.uri("model.py"), "symbol": "net"})
    assert _get(result, "ok") is False and _get(result, "reason") == "not-saved", result
    assert _get(result, "file") is None
    assert "cannot write" in _get(result, "message"), result
    assert _get(result, "url").startswith("http://127.0.0.1:")  # the graph is still shown
    assert any("was not saved" in m for m in session.messages())
