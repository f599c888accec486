"""``tensorviz.recaptureOnSave``: a save of a graph's source recaptures it in the
background (fake backends: the fake capture records the ``# marker NAME`` line of the
model file it read, and the fake viewer every ``add`` with what it ``replaces``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types

from .conftest import DIAGNOSTICS, LOG, SharedServer, start_session, stop_session

# One event loop for the module: its tests share a server per editor (SharedServer).
pytestmark = pytest.mark.asyncio(loop_scope="module")

ON = {"tensorviz": {"recaptureOnSave": True}}


def events(ws: Path, kind: str | None = None) -> list[dict]:
    p = ws / ".fake" / "viewer-events.jsonl"
    out = [json.loads(line) for line in p.read_text().splitlines()] if p.exists() else []
    return [e for e in out if kind is None or e["event"] == kind]


def behave(ws: Path, **behaviour) -> None:
    (ws / ".fake").mkdir(exist_ok=True)
    (ws / ".fake" / "capture.json").write_text(json.dumps(behaviour))


def marked(text: str, name: str) -> str:
    return text + f"\n# marker {name}\n"


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=["neovim", "vscode"])
async def server(request, tmp_path_factory):
    shared = await SharedServer.start(tmp_path_factory.mktemp("user-config"), editor=request.param, init_options=ON)
    yield shared
    await shared.stop()


@pytest_asyncio.fixture(loop_scope="module")
async def live(server, spec_workspace):
    """The module's server (recapture on save on) on this test's folder, its graph open."""
    s = await server.enter(spec_workspace)
    await s.execute("tensorviz.trustWorkspace")
    s.open("model.py")
    result = await s.execute("tensorviz.openGraph", {"uri": s.uri("model.py"), "symbol": "net"})
    assert result["ok"] is True
    yield s
    await server.leave(s)


async def added(session, n: int) -> list[dict]:
    return await session.wait_for(
        lambda: (adds := events(session.workspace, "add")) and len(adds) >= n and adds,
        on=LOG, what=f"{n} captures added to the viewer",
    )


async def test_a_save_recaptures_in_the_background_and_replaces_the_graph_in_place(live):
    ws = live.workspace
    text = (ws / "model.py").read_text()
    live.replace("model.py", marked(text, "two"))
    stale = await live.wait_for(lambda: live.diagnostics("model.py"), on=DIAGNOSTICS, what="stale diagnostic")
    assert stale[0].code == "stale-graph"
    live.save("model.py", marked(text, "two"))
    adds = await added(live, 2)
    assert adds[1]["data"]["replaces"] == adds[0]["data"]["id"]  # the viewer tab updates in place
    assert adds[1]["data"]["marker"] == "two"  # captured from the saved file
    await live.wait_for(lambda: not live.diagnostics("model.py"), on=DIAGNOSTICS, what="stale diagnostic cleared")
    # Progress in the editor, as a recapture.
    titles = [r.title for rs in live.client.progress_reports.values() for r in rs if isinstance(r, types.WorkDoneProgressBegin)]
    assert any("recapturing net" in t for t in titles), titles
    # No pop-up for a background capture, and the warm worker was asked for.
    assert live.client.prompts == []
    # (Trust is the session's first check, before the worker step the fake plays: a job
    # that reaches the fake has passed it.)
    job = json.loads((ws / ".fake" / "last-job.json").read_text())
    assert job == {"warm_idle_seconds": 600.0}


async def test_a_save_without_changes_or_of_another_file_starts_nothing(live):
    ws = live.workspace
    live.save("model.py", (ws / "model.py").read_text())  # saved as captured
    live.save("mlp.py", marked((ws / "mlp.py").read_text(), "x"))  # not a source of the graph
    await live.execute("tensorviz.trustWorkspace")  # a round trip: both saves were handled
    assert len(events(ws, "add")) == 1


async def test_saves_during_a_capture_are_coalesced_newest_wins(live):
    ws = live.workspace
    text = (ws / "model.py").read_text()
    behave(ws, sleep=3)
    live.save("model.py", marked(text, "a"))
    await live.logged("fake worker started")
    live.save("model.py", marked(text, "b"))
    live.save("model.py", marked(text, "c"))
    adds = await added(live, 2)
    await live.logged("recapturing net (profile jax_example) after a save", after=1)
    assert [a["data"]["marker"] for a in adds] == [None, "c"]
    # One line for the one cancel, with its one reason (issue 30: it used to say both
    # "cancelled by the user" and "a newer save supersedes it").
    (line,) = [m.message for m in live.client.log_messages if "cancelled" in m.message]
    assert re.search(r"recapture of net \(profile jax_example\) cancelled after [\d.]+ s: a newer save supersedes it$",
                     line), line
    # The cancelled run stopped its worker and said nothing to the viewer or the user.
    assert not events(ws, "capture-failed")
    assert not [m for m in live.messages() if "cancelled" in m]
    behave(ws)
    await live.execute("tensorviz.trustWorkspace")
    assert [a["data"]["marker"] for a in events(ws, "add")] == [None, "c"]


async def test_a_failed_recapture_keeps_the_old_graph_and_gives_the_diagnostic(live):
    ws = live.workspace
    text = (ws / "model.py").read_text()
    behave(ws, fail="shapes do not match")
    live.save("model.py", marked(text, "broken"))
    diags = await live.wait_for(
        lambda: [d for d in live.diagnostics("model.py") if d.code == "capture-trace"], on=DIAGNOSTICS,
        what="failure diagnostic",
    )
    assert "shapes do not match" in diags[0].message and diags[0].severity == types.DiagnosticSeverity.Error
    failed = events(ws, "capture-failed")
    assert failed and failed[-1]["data"]["profile"] == "jax_example"
    assert len(events(ws, "add")) == 1  # the old graph stays the one on screen
    assert not [m for m in live.messages() if "capture of net failed" in m]  # a diagnostic, not a pop-up
    # Fixed and saved: the new graph replaces the old one, every diagnostic clears.
    behave(ws)
    live.save("model.py", marked(text, "fixed"))
    adds = await added(live, 2)
    assert adds[1]["data"]["marker"] == "fixed" and adds[1]["data"]["replaces"] == adds[0]["data"]["id"]
    await live.wait_for(lambda: not live.diagnostics("model.py"), on=DIAGNOSTICS, what="all clear")


@pytest.mark.slow
async def test_off_by_default(spec_workspace, config_dir):
    s = await start_session(spec_workspace, config_dir)
    try:
        await s.execute("tensorviz.trustWorkspace")
        s.open("model.py")
        assert (await s.execute("tensorviz.openGraph", {"uri": s.uri("model.py"), "symbol": "net"}))["ok"] is True
        text = (spec_workspace / "model.py").read_text()
        s.replace("model.py", marked(text, "two"))
        s.save("model.py", marked(text, "two"))
        await s.wait_for(lambda: s.diagnostics("model.py"), on=DIAGNOSTICS, what="stale diagnostic")
        await s.execute("tensorviz.trustWorkspace")
        assert len(events(spec_workspace, "add")) == 1
    finally:
        await stop_session(s)


async def test_the_settings_parse_and_fall_back():
    from tensorviz_lsp.settings import Settings

    s = Settings.from_config({"tensorviz": {"recaptureOnSave": True, "warmWorkerIdleSeconds": 0}})
    assert s.recapture_on_save is True and s.warm_worker_idle_seconds == 0.0
    assert Settings().recapture_on_save is False and Settings().warm_worker_idle_seconds == 600.0
    warned = []
    s = Settings.from_config({"tensorviz": {"recaptureOnSave": "yes", "warmWorkerIdleSeconds": -1}}, warn=warned.append)
    assert (s.recapture_on_save, s.warm_worker_idle_seconds) == (False, 600.0)
    assert any("recaptureOnSave" in w for w in warned) and any("warmWorkerIdleSeconds" in w for w in warned)
