"""The server's own logic over stdio, with fake discovery/worker/viewer (fast).

The same flows run against the real pieces in ``test_e2e_real.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types

from processes import exited_async

from .conftest import (
    DIAGNOSTICS,
    LOG,
    PROGRESS,
    SPEC_RECIPE,
    SharedServer,
    start_session,
    stop_session,
    trusted_in_store,
)

# One event loop for the module: its tests share a server per editor (SharedServer).
pytestmark = pytest.mark.asyncio(loop_scope="module")

EDITORS = ["neovim", "vscode"]


def viewer_events(ws: Path) -> list[dict]:
    p = ws / ".fake" / "viewer-events.jsonl"
    return [json.loads(line) for line in p.read_text().splitlines()] if p.exists() else []


def behave(ws: Path, **behaviour) -> None:
    (ws / ".fake").mkdir(exist_ok=True)
    (ws / ".fake" / "capture.json").write_text(json.dumps(behaviour))


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=EDITORS)
async def server(request, tmp_path_factory):
    shared = await SharedServer.start(tmp_path_factory.mktemp("user-config"), editor=request.param)
    yield shared
    await shared.stop()


@pytest_asyncio.fixture(loop_scope="module")
async def session(server, spec_workspace):
    """The module's server for this editor, on this test's own folder."""
    s = await server.enter(spec_workspace)
    yield s
    await server.leave(s)


async def test_lenses_show_the_saved_profile(session):
    session.open("model.py")
    session.open("mlp.py")
    lenses = await session.lenses("model.py")
    assert [(l.command.title, l.range.start.line) for l in lenses] == [("Open as Graph (jax_example)", 4)]
    assert lenses[0].command.command == "tensorviz.openGraph"
    assert list(lenses[0].command.arguments) == [{"uri": session.uri("model.py"), "symbol": "net", "profile": "jax_example"}]
    mlp = await session.lenses("mlp.py")
    assert [l.command.title for l in mlp] == ["Open as Graph"]


async def test_code_actions_for_helix(session):
    session.open("model.py")
    actions = await session.client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=session.uri("model.py")),
            range=types.Range(types.Position(4, 5), types.Position(4, 5)),
            context=types.CodeActionContext(diagnostics=[]),
        )
    )
    assert [a.title for a in actions] == ["Open as Graph (jax_example): net"]
    # lsprotocol's client-side hook structures any object with a "command" key as a
    # Command, so a CodeAction arrives with its command object as text.
    command = actions[0].command
    if isinstance(command, str):
        import ast

        command = ast.literal_eval(command)
        assert command["command"] == "tensorviz.openGraph"
    else:
        assert command.command == "tensorviz.openGraph"


async def test_lenses_follow_typing_and_keep_last_good_result(session):
    uri = session.open("model.py")
    text = (session.workspace / "model.py").read_text()
    session.replace("model.py", "\n\n" + text)
    lenses = await session.lenses("model.py")
    assert [l.range.start.line for l in lenses] == [6]
    session.replace("model.py", "\n\n" + text + "\nSYNTAX ERROR (\n")
    lenses = await session.lenses("model.py")
    assert [l.range.start.line for l in lenses] == [6], "mid-edit text keeps the last good lenses"
    assert uri


async def test_untrusted_workspace_runs_nothing_then_trust_and_capture(session):
    session.open("model.py")
    session.answer("Cancel")
    result = await session.execute("tensorviz.openGraph", {"uri": session.uri("model.py"), "symbol": "net"})
    assert result.reason == "untrusted" if hasattr(result, "reason") else result["reason"] == "untrusted"
    assert viewer_events(session.workspace) == [], "nothing captured, viewer never started"
    assert any("not trusted" in m for m in session.messages())
    prompt = session.client.prompts[-1]
    assert str(session.workspace) in prompt.message and "trust" in prompt.message.lower()
    assert trusted_in_store(session.config_dir, session.workspace) is None, "declined: nothing stored"

    session.answer("Trust Workspace")
    result = await session.execute("tensorviz.openGraph", {"uri": session.uri("model.py"), "symbol": "net"})
    assert _get(result, "ok") is True
    url = _get(result, "url")
    assert url.startswith("http://127.0.0.1:")
    shown = session.client.shown_documents[-1]
    assert shown.uri == url and shown.external is True
    stored = json.loads((session.config_dir / "trust.json").read_text())
    assert stored["workspaces"][str(session.workspace.resolve())]["trusted"] is True
    assert not list(session.workspace.rglob("trust.json")), "trust is never stored in the workspace"
    # Second time: no prompt.
    n = len(session.client.prompts)
    await session.execute("tensorviz.openGraph", {"uri": session.uri("model.py"), "symbol": "net"})
    assert len(session.client.prompts) == n


async def test_trust_command_then_progress_reports(session):
    await session.execute("tensorviz.trustWorkspace")
    session.open("model.py")
    result = await session.execute("tensorviz.openGraph", session.uri("model.py"), "net")
    assert _get(result, "ok") is True
    assert session.client.prompts == []
    reports = [r for rs in session.client.progress_reports.values() for r in rs]
    assert isinstance(reports[0], types.WorkDoneProgressBegin) and reports[0].cancellable
    assert "capturing net" in reports[0].title
    assert isinstance(reports[-1], types.WorkDoneProgressEnd)


async def test_dirty_buffer_refuses_capture(session):
    await session.execute("tensorviz.trustWorkspace")
    (session.workspace / "helper.py").write_text("SCALE = 2\n")
    (session.workspace / "model.py").write_text("import helper\n" + (session.workspace / "model.py").read_text())
    session.open("model.py")
    session.open("helper.py")
    session.replace("helper.py", "SCALE = 3\n")
    result = await session.execute("tensorviz.openGraph", {"uri": session.uri("model.py"), "symbol": "net"})
    assert _get(result, "reason") == "unsaved"
    assert any("save helper.py first" in m for m in session.messages())
    assert viewer_events(session.workspace) == []


async def test_a_viewer_that_cannot_listen_still_lands_the_capture(session):
    """No loopback socket (errno 97, as in a sandbox): the graph file is written, the answer
    and the message say so, and name how to open it; no traceback (issue 47)."""
    await session.execute("tensorviz.trustWorkspace")
    session.open("model.py")
    (session.workspace / ".fake").mkdir(exist_ok=True)
    (session.workspace / ".fake" / "viewer-unavailable").write_text("")
    result = await session.execute("tensorviz.openGraph", {"uri": session.uri("model.py"), "symbol": "net"})
    assert _get(result, "ok") is False and _get(result, "reason") == "viewer-unavailable"
    saved = Path(_get(result, "file"))
    assert saved.is_file() and saved.suffix == ".tvg"
    message = _get(result, "message")
    assert "Address family not supported" in message and f"tensorviz view {saved}" in message
    assert "Traceback" not in message
    assert any("cannot listen" in m and "Traceback" not in m for m in session.messages())
    assert viewer_events(session.workspace) == []


async def test_stale_diagnostic_after_edit_cleared_by_recapture(session):
    await session.execute("tensorviz.trustWorkspace")
    session.open("model.py")
    result = await session.execute("tensorviz.openGraph", {"uri": session.uri("model.py"), "symbol": "net"})
    assert _get(result, "ok") is True
    assert session.diagnostics("model.py") == []
    text = (session.workspace / "model.py").read_text()
    session.replace("model.py", text.replace("(3, 4)", "(3, 5)"))
    diags = await session.wait_for(lambda: session.diagnostics("model.py"), on=DIAGNOSTICS, what="stale diagnostic")
    assert diags[0].code == "stale-graph" and "model.py changed" in diags[0].message
    assert diags[0].range.start == types.Position(4, 4) and diags[0].range.end == types.Position(4, 7)
    await session.logged('fake viewer: stale {"files": ["model.py"]')
    # Undo: fresh again.
    session.replace("model.py", text)
    await session.wait_for(lambda: not session.diagnostics("model.py"), on=DIAGNOSTICS, what="fresh after undo")
    await session.logged("fake viewer: fresh")
    # Change on disk (another tool), then recapture: cleared.
    session.client.text_document_did_close(
        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=session.uri("model.py")))
    )
    (session.workspace / "model.py").write_text(text + "\n# edited elsewhere\n")
    session.disk_changed("model.py")
    await session.wait_for(lambda: session.diagnostics("model.py"), on=DIAGNOSTICS, what="stale after disk change")
    session.open("model.py")
    result = await session.execute("tensorviz.openGraph", {"uri": session.uri("model.py"), "symbol": "net"})
    assert _get(result, "ok") is True
    await session.wait_for(lambda: not session.diagnostics("model.py"), on=DIAGNOSTICS, what="cleared by recapture")


async def test_recipe_error_diagnostic_with_line(session):
    bad = SPEC_RECIPE + "\n[profiles.broken]\nkind = \"model\"\n"
    (session.workspace / ".tensorviz" / "recipes.toml").write_text(bad)
    session.disk_changed(".tensorviz/recipes.toml")
    diags = await session.wait_for(lambda: session.diagnostics(".tensorviz/recipes.toml"), on=DIAGNOSTICS, what="recipe diagnostic")
    assert diags[0].range.start.line == bad.splitlines().index("[profiles.broken]")
    assert "profiles.broken.model" in diags[0].message


async def test_failed_capture_diagnostic(session):
    await session.execute("tensorviz.trustWorkspace")
    behave(session.workspace, fail="shapes do not match")
    session.open("model.py")
    result = await session.execute("tensorviz.openGraph", {"uri": session.uri("model.py"), "symbol": "net"})
    assert _get(result, "ok") is False
    diags = await session.wait_for(lambda: session.diagnostics("model.py"), on=DIAGNOSTICS, what="failure diagnostic")
    assert "shapes do not match" in diags[0].message and diags[0].severity == types.DiagnosticSeverity.Error
    behave(session.workspace)
    result = await session.execute("tensorviz.openGraph", {"uri": session.uri("model.py"), "symbol": "net"})
    await session.wait_for(lambda: not session.diagnostics("model.py"), on=DIAGNOSTICS, what="failure cleared")


async def test_an_unsupported_torch_is_a_dependencies_failure_not_a_setup_form(session):
    """Regression (issue 27): the worker's Torch floor check gives a ``dependencies``
    failure whose details say ``needed: ">=2.13"``; that is a version, never input
    dimensions. The user used to get "needs input dimensions" and a setup form whose
    needs were ['>', '=', '2', ...]."""
    await session.execute("tensorviz.trustWorkspace")
    behave(session.workspace, torch_version="2.1.2+cu118")
    session.open("model.py")
    result = await session.execute("tensorviz.openGraph", {"uri": session.uri("model.py"), "symbol": "net"})
    assert _get(result, "ok") is False and _get(result, "reason") == "dependencies"
    assert not _get(result, "setup"), "no setup form"
    assert _get(_get(result, "details"), "needed").startswith(">=")
    assert session.client.shown_documents == [], "nothing opened: no form, no graph"
    assert not [m for m in session.messages() if "input dimensions" in m]
    assert session.client.prompts == [], "nothing to install: an upgrade is the user's call"
    (diag,) = await session.wait_for(lambda: session.diagnostics("model.py"), on=DIAGNOSTICS, what="failure diagnostic")
    assert diag.code == "capture-dependencies"
    assert "UnsupportedVersion" in diag.message and "2.1.2+cu118" in diag.message and "torch>=" in diag.message


async def test_deep_recursion_diagnostic_says_how_many_repeats(session):
    """A RecursionError's thousand frames: the diagnostic says the count (as Python's
    traceback does) and its related locations are the distinct frames, not 5 copies."""
    await session.execute("tensorviz.trustWorkspace")
    behave(session.workspace, recursion=990)
    session.open("model.py")
    result = await session.execute("tensorviz.openGraph", {"uri": session.uri("model.py"), "symbol": "net"})
    assert _get(result, "ok") is False
    diags = await session.wait_for(lambda: session.diagnostics("model.py"), on=DIAGNOSTICS, what="failure diagnostic")
    # On the line that raised (issue 30 item 3), and a hint on the symbol pointing there.
    (diag,) = [d for d in diags if d.severity == types.DiagnosticSeverity.Error]
    assert diag.range.start.line == 5
    assert diag.message.endswith("RecursionError: maximum recursion depth exceeded "
                                 "(recursion: line repeated 987 more times after model.py:6 in deep)"), diag.message
    related = [(r.location.range.start.line, r.message) for r in diag.related_information]
    assert related == [(2, "model.py:3 in net"), (5, "model.py:6 in deep"), (5, "model.py:6 in deep"),
                       (5, "model.py:6 in deep [Previous line repeated 987 more times]")]
    (hint,) = [d for d in diags if d.severity == types.DiagnosticSeverity.Hint]
    assert hint.range.start.line == 4 and hint.message == "capture of jax_example failed, see line 6 (RecursionError)"


@pytest.mark.slow
async def test_dependency_install_declined_then_accepted(spec_workspace, config_dir):
    ws = spec_workspace
    behave(ws, missing=["jax", "flax"])
    marker = ws / ".fake" / "installed"
    fake_install = [sys.executable, "-c", f"import sys; print('installing', sys.argv[1:]); open({str(marker)!r}, 'w').write('ok')", "{packages}"]
    s = await start_session(ws, config_dir, init_options={"tensorviz": {"installCommand": fake_install}})
    try:
        await s.execute("tensorviz.trustWorkspace")
        s.open("model.py")
        s.answer("Cancel")
        result = await s.execute("tensorviz.openGraph", {"uri": s.uri("model.py"), "symbol": "net"})
        assert _get(result, "reason") == "dependencies" and _get(result, "installed") is False
        prompt = s.client.prompts[-1].message
        assert "jax, flax" in prompt and sys.executable in prompt and "[install]" not in s.logs()
        assert not marker.exists(), "declined: nothing installed"
        assert any("nothing was installed" in m for m in s.messages())

        s.answer("Install")
        result = await s.execute("tensorviz.openGraph", {"uri": s.uri("model.py"), "symbol": "net"})
        assert marker.exists(), "accepted: the reviewed command ran"
        assert _get(result, "ok") is True, "and the capture was retried"
        await s.logged("[install] installing ['jax', 'flax']")
    finally:
        await stop_session(s)


@pytest.mark.slow
async def test_failed_install_is_reported(spec_workspace, config_dir):
    behave(spec_workspace, missing=["jax"])
    failing = [sys.executable, "-c", "import sys; print('no such package'); sys.exit(3)"]
    s = await start_session(spec_workspace, config_dir, init_options={"installCommand": failing})
    try:
        await s.execute("tensorviz.trustWorkspace")
        s.open("model.py")
        s.answer("Install")
        result = await s.execute("tensorviz.openGraph", {"uri": s.uri("model.py"), "symbol": "net"})
        assert _get(result, "ok") is False
        assert any("failed (exit status 3)" in m for m in s.messages())
    finally:
        await stop_session(s)


async def test_cancel_kills_the_worker(session):
    await session.execute("tensorviz.trustWorkspace")
    behave(session.workspace, sleep=60)
    session.open("model.py")
    import asyncio

    task = asyncio.ensure_future(session.execute("tensorviz.openGraph", {"uri": session.uri("model.py"), "symbol": "net"}))
    pid = int((await session.logged("fake worker started: pid ")).rsplit(" ", 1)[1])
    token = await session.wait_for(lambda: next(iter(session.client.progress_reports), None), on=PROGRESS,
                                   what="progress")
    session.client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    result = await asyncio.wait_for(task, 30)
    assert _get(result, "reason") == "cancelled"
    assert await exited_async(pid, timeout=30), "the worker was killed"


async def test_reveal_shows_the_frame_range(session):
    await session.execute("tensorviz.trustWorkspace")
    session.open("model.py")
    await session.execute("tensorviz.openGraph", {"uri": session.uri("model.py"), "symbol": "net"})
    result = await session.execute("fake.reveal", {"file": "model.py", "line": 6, "column": 11, "function": "net"})
    assert _get(result, "handled") == "editor"
    shown = session.client.shown_documents[-1]
    assert shown.uri == session.uri("model.py") and shown.take_focus is True and not shown.external
    assert shown.selection == types.Range(types.Position(5, 11), types.Position(5, 44))


async def test_reveal_opens_a_library_file_by_its_absolute_path(session, tmp_path):
    """Go-to-source on a library frame (installed code, absolute path) opens that file in
    the editor (window/showDocument with its file URI); read-only is the editor's business."""
    lib = tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / "somelib" / "layers.py"
    lib.parent.mkdir(parents=True)
    lib.write_text("class Layer:\n    def forward(self, x):\n        return x * 2\n")
    await session.execute("tensorviz.trustWorkspace")
    session.open("model.py")
    await session.execute("tensorviz.openGraph", {"uri": session.uri("model.py"), "symbol": "net"})
    frame = {"file": str(lib), "line": 3, "column": 8, "function": "Layer.forward", "library": True}
    result = await session.execute("fake.reveal", frame)
    assert _get(result, "handled") == "editor"
    shown = session.client.shown_documents[-1]
    assert shown.uri == lib.resolve().as_uri() and not shown.external
    assert shown.selection == types.Range(types.Position(2, 8), types.Position(2, 20))


@pytest.mark.slow
async def test_show_document_fallback_message(spec_workspace, config_dir):
    s = await start_session(spec_workspace, config_dir, capabilities=types.ClientCapabilities())
    try:
        await s.execute("tensorviz.trustWorkspace")
        s.open("model.py")
        result = await s.execute("tensorviz.openGraph", {"uri": s.uri("model.py"), "symbol": "net"})
        url = _get(result, "url")
        assert s.client.shown_documents == []
        assert any(url in m for m in s.messages())
        await s.logged(url)
    finally:
        await stop_session(s)


@pytest.mark.slow
async def test_bad_setting_logged_and_default_used(spec_workspace, config_dir):
    s = await start_session(spec_workspace, config_dir, init_options={"tensorviz": {"captureTimeout": "soon", "python": 42}})
    try:
        await s.logged("captureTimeout")
        await s.logged("tensorviz.python = 42 ignored")
        # The interpreter is reported by the `initialized` fan-out, after the settings warnings.
        await s.logged(f"{sys.executable} (server)")
    finally:
        await stop_session(s)


@pytest.mark.slow
async def test_interpreter_from_configuration_per_folder(tmp_path, config_dir):
    from .conftest import SPEC_NET, make_workspace

    a = make_workspace(tmp_path / "a", {"model.py": SPEC_NET})
    b = make_workspace(tmp_path / "b", {"model.py": SPEC_NET, ".venv/bin/python": "#!/bin/sh\n"})
    os.chmod(b / ".venv/bin/python", 0o755)
    s = await start_session(
        a, config_dir, folders=[a, b], configuration={a.as_uri(): {"tensorviz": {"python": "/opt/py/bin/python3"}}}
    )
    try:
        # One log message per folder: each may reach the client on its own, so wait for both.
        await s.logged("/opt/py/bin/python3 (setting, not found)")
        await s.logged(f"{b}/.venv/bin/python (.venv)")
        await s.execute("tensorviz.trustWorkspace", {"folder": a.as_uri()})
        s.open("model.py")
        (a / ".tensorviz").mkdir()
        (a / ".tensorviz" / "recipes.toml").write_text(SPEC_RECIPE)
        result = await s.execute("tensorviz.openGraph", {"uri": s.uri("model.py"), "symbol": "net"})
        assert _get(result, "reason") == "interpreter"
        assert any("/opt/py/bin/python3" in m and "does not exist" in m for m in s.messages())
    finally:
        await stop_session(s)


@pytest.mark.slow
async def test_shutdown_stops_the_viewer(spec_workspace, config_dir):
    s = await start_session(spec_workspace, config_dir)
    await s.execute("tensorviz.trustWorkspace")
    s.open("model.py")
    await s.execute("tensorviz.openGraph", {"uri": s.uri("model.py"), "symbol": "net"})
    await stop_session(s)
    assert viewer_events(spec_workspace)[-1]["event"] == "stopped"


def _get(result, key):
    if isinstance(result, dict):
        return result.get(key)
    return getattr(result, key, None)


@pytest.mark.slow
async def test_multi_root_trust_and_profiles_are_per_folder(tmp_path, config_dir):
    from .conftest import SPEC_NET, make_workspace

    a = make_workspace(tmp_path / "a", {"model.py": SPEC_NET, ".tensorviz/recipes.toml": SPEC_RECIPE})
    b = make_workspace(
        tmp_path / "b",
        {"model.py": SPEC_NET, ".tensorviz/recipes.toml": SPEC_RECIPE.replace("jax_example", "b_profile")},
    )
    s = await start_session(a, config_dir, folders=[a, b])
    try:
        await s.execute("tensorviz.trustWorkspace", {"folder": a.as_uri()})
        uri_a, uri_b = (a / "model.py").as_uri(), (b / "model.py").as_uri()
        s.open("model.py")
        s.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(uri=uri_b, language_id="python", version=1, text=SPEC_NET)
            )
        )
        lens_b = await s.client.text_document_code_lens_async(
            types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri_b))
        )
        assert lens_b[0].command.title == "Open as Graph (b_profile)"
        s.answer("Cancel")
        result = await s.execute("tensorviz.openGraph", {"uri": uri_b, "symbol": "net"})
        assert _get(result, "reason") == "untrusted" and str(b) in s.client.prompts[-1].message
        result = await s.execute("tensorviz.openGraph", {"uri": uri_a, "symbol": "net"})
        assert _get(result, "ok") is True and len(s.client.prompts) == 1
    finally:
        await stop_session(s)


# -- a changed saved setup marks the graph stale (the spec: "Changing any such value
# requires another trace") ----------------------------------------------------------

RECIPE_LABEL = ".tensorviz/recipes.toml (profile jax_example changed)"


def _stale_events(ws: Path) -> list[dict]:
    return [e for e in viewer_events(ws) if e["event"] in ("stale", "fresh")]


async def test_changed_profile_marks_the_graph_stale(session):
    await session.execute("tensorviz.trustWorkspace")
    session.open("model.py")
    result = await session.execute("tensorviz.openGraph", {"uri": session.uri("model.py"), "symbol": "net"})
    assert _get(result, "ok") is True
    ws = session.workspace
    recipes = ".tensorviz/recipes.toml"

    # Edits that leave the profile as captured change nothing: a comment, another profile.
    same = "# my setups\n" + SPEC_RECIPE + '\n[profiles.other]\nmodel = "model:net"\n'
    session.open(recipes, SPEC_RECIPE)
    session.replace(recipes, same)
    # A changed shape in the open (unsaved) buffer: stale, naming the profile.
    changed = same.replace("shape = [2, 3]", "shape = [4, 3]")
    session.replace(recipes, changed)
    diags = await session.wait_for(lambda: session.diagnostics("model.py"), on=DIAGNOSTICS, what="stale diagnostic")
    assert diags[0].code == "stale-graph" and RECIPE_LABEL in diags[0].message
    assert diags[0].range.start == types.Position(4, 4)
    assert diags[0].data["files"] == [RECIPE_LABEL]
    await session.logged("fake viewer: stale")
    assert _stale_events(ws)[-1]["event"] == "stale" and _stale_events(ws)[-1]["data"]["files"] == [RECIPE_LABEL]
    assert [e["event"] for e in _stale_events(ws)] == ["stale"], "the comment and the other profile did not count"

    # Reverting (in the buffer) clears it.
    session.replace(recipes, same)
    await session.wait_for(lambda: not session.diagnostics("model.py"), on=DIAGNOSTICS, what="fresh after revert")
    await session.logged("fake viewer: fresh")
    assert _stale_events(ws)[-1]["event"] == "fresh"

    # Mid-edit text that is not TOML keeps the last verdict (no flicker).
    session.replace(recipes, same + "\n[profiles.\n")
    session.replace(recipes, same)

    # Changed on disk (buffer closed), then a model edit too: both named; a recapture clears.
    session.client.text_document_did_close(
        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=session.uri(recipes)))
    )
    (ws / recipes).write_text(SPEC_RECIPE.replace('device = "cpu"', 'device = "cuda:0"'))
    session.disk_changed(recipes)
    diags = await session.wait_for(lambda: session.diagnostics("model.py"), on=DIAGNOSTICS, what="stale after a disk change")
    assert RECIPE_LABEL in diags[0].message
    text = (ws / "model.py").read_text()
    session.replace("model.py", text.replace("(3, 4)", "(3, 5)"))
    await session.wait_for(
        lambda: _stale_events(ws)[-1]["data"].get("files") == ["model.py", RECIPE_LABEL], on=LOG, what="both named"
    )
    # The viewer event is written before the diagnostic is sent: wait for the diagnostic too.
    diags = await session.wait_for(
        lambda: [d for d in session.diagnostics("model.py") if "model.py changed" in d.message],
        on=DIAGNOSTICS, what="both in the diagnostic",
    )
    assert RECIPE_LABEL in diags[0].message
    session.replace("model.py", text)
    await session.wait_for(lambda: _stale_events(ws)[-1]["data"].get("files") == [RECIPE_LABEL], on=LOG,
                           what="model undone")
    result = await session.execute("tensorviz.openGraph", {"uri": session.uri("model.py"), "symbol": "net"})
    assert _get(result, "ok") is True
    await session.wait_for(lambda: not session.diagnostics("model.py"), on=DIAGNOSTICS, what="cleared by recapture")

    # didSave of the recipes file counts as well (the buffer is closed: the disk is
    # read); removing the profile says so.
    session.save(recipes, "version = 1\n")
    diags = await session.wait_for(lambda: session.diagnostics("model.py"), on=DIAGNOSTICS, what="stale after removal")
    assert ".tensorviz/recipes.toml (profile jax_example removed)" in diags[0].message


@pytest.mark.slow
async def test_profile_change_in_another_folder_does_not_count(tmp_path, config_dir):
    from .conftest import SPEC_NET, make_workspace

    a = make_workspace(tmp_path / "a", {"model.py": SPEC_NET, ".tensorviz/recipes.toml": SPEC_RECIPE})
    b = make_workspace(tmp_path / "b", {"model.py": SPEC_NET, ".tensorviz/recipes.toml": SPEC_RECIPE})
    s = await start_session(a, config_dir, folders=[a, b])
    try:
        await s.execute("tensorviz.trustWorkspace", {"folder": a.as_uri()})
        s.open("model.py")
        assert _get(await s.execute("tensorviz.openGraph", {"uri": s.uri("model.py"), "symbol": "net"}), "ok") is True
        (b / ".tensorviz" / "recipes.toml").write_text(SPEC_RECIPE.replace("seed = 0", "seed = 1"))
        s.client.workspace_did_change_watched_files(
            types.DidChangeWatchedFilesParams(
                changes=[types.FileEvent(uri=(b / ".tensorviz/recipes.toml").as_uri(), type=types.FileChangeType.Changed)]
            )
        )
        (a / ".tensorviz" / "recipes.toml").write_text(SPEC_RECIPE.replace("seed = 0", "seed = 2"))
        s.disk_changed(".tensorviz/recipes.toml")
        diags = await s.wait_for(lambda: s.diagnostics("model.py"), on=DIAGNOSTICS, what="stale in a")
        assert RECIPE_LABEL in diags[0].message
        await s.logged("fake viewer: stale")
        assert [e["data"]["files"] for e in _stale_events(a)] == [[RECIPE_LABEL]]
        assert _stale_events(b) == []
    finally:
        await stop_session(s)


# -- tensorviz.captureEnv --------------------------------------------------------------


@pytest.mark.slow
async def test_capture_env_setting_reaches_the_worker_per_folder(tmp_path, config_dir):
    from .conftest import SPEC_NET, make_workspace

    a = make_workspace(tmp_path / "a", {"model.py": SPEC_NET, ".tensorviz/recipes.toml": SPEC_RECIPE})
    b = make_workspace(tmp_path / "b", {"model.py": SPEC_NET, ".tensorviz/recipes.toml": SPEC_RECIPE})
    s = await start_session(
        a, config_dir, folders=[a, b],
        configuration={
            a.as_uri(): {"tensorviz": {"captureEnv": {"JAX_ENABLE_X64": "1", "XLA_FLAGS": "--xla_dump_to=/tmp/x"}}},
            b.as_uri(): {"tensorviz": {"captureEnv": {"JAX_ENABLE_X64": True, "1BAD": "x"}}},
        },
    )
    try:
        for folder in (a, b):
            await s.execute("tensorviz.trustWorkspace", {"folder": folder.as_uri()})
            uri = (folder / "model.py").as_uri()
            s.client.text_document_did_open(
                types.DidOpenTextDocumentParams(
                    text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=SPEC_NET)
                )
            )
            assert _get(await s.execute("tensorviz.openGraph", {"uri": uri, "symbol": "net"}), "ok") is True
        assert json.loads((a / ".fake" / "last-env.json").read_text()) == {
            "JAX_ENABLE_X64": "1", "XLA_FLAGS": "--xla_dump_to=/tmp/x"
        }
        # b's mapping is invalid: logged, and ignored as a whole.
        assert json.loads((b / ".fake" / "last-env.json").read_text()) == {}
        assert "ignored" in await s.logged("tensorviz.captureEnv")
    finally:
        await stop_session(s)


# ------------------------------------------------------------------ Helix's :lsp-workspace-command


def helix_arguments(rest: str) -> list:
    """What Helix sends for ``:lsp-workspace-command NAME REST``: REST read as a stream of
    JSON values (serde_json's StreamDeserializer); anything else is refused and the
    command is never sent."""
    decoder, out, i = json.JSONDecoder(), [], 0
    while i < len(rest):
        if rest[i].isspace():
            i += 1
            continue
        value, i = decoder.raw_decode(rest, i)  # ValueError: Helix refuses the line
        out.append(value)
    return out


async def test_an_unquoted_word_is_not_sent_by_helix():
    with pytest.raises(ValueError):
        helix_arguments("jax_example")
    assert helix_arguments('"jax_example"') == ["jax_example"]
    assert helix_arguments('{"profile": "jax_example"}') == [{"profile": "jax_example"}]


async def test_every_helix_command_line_in_the_docs_is_json():
    docs = (Path(__file__).resolve().parents[2] / "docs" / "editors.md").read_text()
    lines = [l.strip() for l in docs.splitlines() if l.strip().startswith(":lsp-workspace-command tensorviz.")]
    assert len(lines) >= 5
    for line in lines:
        _, name, *rest = line.split(None, 2)
        helix_arguments(rest[0] if rest else "")  # raises for what Helix would refuse


@pytest.mark.parametrize(
    "rest",
    [
        pytest.param('"jax_example"', id="string"),
        pytest.param('{"profile": "jax_example"}', id="object"),
        pytest.param('["jax_example"]', id="list"),
    ],
)
async def test_helix_capture_profile_forms(session, rest):
    await session.execute("tensorviz.trustWorkspace")
    result = await session.execute("tensorviz.captureProfile", *helix_arguments(rest))
    assert _get(result, "ok") is True, session.logs()


@pytest.mark.parametrize(
    "rest",
    [
        pytest.param('"/opt/py/bin/python3"', id="string"),
        pytest.param('{"path": "/opt/py/bin/python3"}', id="path"),
        pytest.param('{"python": "/opt/py/bin/python3"}', id="python"),
    ],
)
async def test_helix_select_interpreter_forms(session, rest):
    result = await session.execute("tensorviz.selectInterpreter", *helix_arguments(rest))
    assert _get(result, "python") == "/opt/py/bin/python3", session.logs()


# ------------------------------------------------------------------ what the log says


async def test_a_bad_argument_is_one_clear_line_without_a_traceback(session):
    result = await session.execute("tensorviz.captureProfile", {"profile": 5})
    assert _get(result, "ok") is False
    assert [m for m in session.messages() if "captureProfile" in m] == ["TensorViz: tensorviz.captureProfile needs a profile name"]
    result = await session.execute("tensorviz.captureProfile", 1, 2, 3)
    assert "tensorviz.captureProfile takes" in _get(result, "error")
    assert "Traceback" not in session.logs()
    assert session.log_count("needs a profile name") == 1


async def test_the_viewer_url_reaches_a_default_neovim_log_and_show_viewer_reopens_it(session):
    await session.execute("tensorviz.trustWorkspace")
    result = await session.execute("tensorviz.captureProfile", "jax_example")
    url = _get(result, "url")
    # Neovim keeps window/logMessage from Warning up by default: the URL is there, once.
    logged = [m for m in session.client.log_messages if url in m.message]
    assert len(logged) == 1 and logged[0].type <= types.MessageType.Warning, logged
    n = len(session.client.shown_documents)
    again = await session.execute("tensorviz.showViewer", "jax_example")
    assert _get(again, "ok") is True and _get(again, "url") == url
    assert len(session.client.shown_documents) == n + 1 and session.client.shown_documents[-1].uri == url
    last = await session.execute("tensorviz.showViewer")
    assert _get(last, "url") == url
    missing = await session.execute("tensorviz.showViewer", {"profile": "nope"})
    assert _get(missing, "ok") is False
    assert any("no graph of profile 'nope'" in m for m in session.messages())
    # Nothing was captured again.
    assert sum(e.get("event") == "add" for e in viewer_events(session.workspace)) == 1


async def test_a_failed_capture_diagnostic_says_it_is_old_once_its_source_changes(session):
    await session.execute("tensorviz.trustWorkspace")
    behave(session.workspace, fail="shapes do not match")
    session.open("model.py")
    result = await session.execute("tensorviz.openGraph", {"uri": session.uri("model.py"), "symbol": "net"})
    assert _get(result, "ok") is False
    (diag,) = await session.wait_for(lambda: session.diagnostics("model.py"), on=DIAGNOSTICS, what="failure diagnostic")
    assert diag.severity == types.DiagnosticSeverity.Error and not diag.message.startswith("From the last capture")
    text = (session.workspace / "model.py").read_text()
    session.replace("model.py", text + "\n# fixed\n")
    (marked,) = await session.wait_for(
        lambda: [d for d in session.diagnostics("model.py") if d.message.startswith("From the last capture at ")],
        on=DIAGNOSTICS, what="the failure marked as from the last capture",
    )
    assert re.match(r"From the last capture at \d\d:\d\d; model\.py changed since: .*shapes do not match", marked.message)
    assert marked.severity == types.DiagnosticSeverity.Warning
    assert len(session.diagnostics("model.py")) == 1


async def test_a_recapture_leaves_the_old_tab_stale(session):
    """The old capture's tab still shows the old graph: it keeps its STALE banner (no
    "fresh" for it); the new capture is announced to it instead."""
    await session.execute("tensorviz.trustWorkspace")
    session.open("model.py")
    first = await session.execute("tensorviz.openGraph", {"uri": session.uri("model.py"), "symbol": "net"})
    assert _get(first, "ok") is True
    ws = session.workspace
    text = (ws / "model.py").read_text()
    session.replace("model.py", text.replace("(3, 4)", "(3, 5)"))
    session.save("model.py", text.replace("(3, 4)", "(3, 5)"))
    await session.wait_for(lambda: session.diagnostics("model.py"), on=DIAGNOSTICS, what="stale diagnostic")
    await session.logged("fake viewer: stale")
    old_id = _stale_events(ws)[-1]["data"]["capture"]
    second = await session.execute("tensorviz.openGraph", {"uri": session.uri("model.py"), "symbol": "net"})
    assert _get(second, "ok") is True and _get(second, "capture") != old_id
    await session.wait_for(lambda: not session.diagnostics("model.py"), on=DIAGNOSTICS, what="cleared by recapture")
    fresh_for_old = [e for e in _stale_events(ws) if e["event"] == "fresh" and e["data"].get("capture") == old_id]
    assert fresh_for_old == [], viewer_events(ws)


def _unreadable(session, rel: str) -> list[types.Diagnostic]:
    return [d for d in session.diagnostics(rel) if d.code == "unreadable-source"]


async def test_a_file_opened_with_a_syntax_error_has_lenses_above_it_and_a_diagnostic_there(session):
    text = (session.workspace / "model.py").read_text()
    broken = text + "\n\ndef later(:\n    SYNTAX ERROR\n"
    session.open("model.py", broken)
    lenses = await session.lenses("model.py")
    assert [l.range.start.line for l in lenses] == [4], "the definition above the error keeps its lens"
    diags = await session.wait_for(lambda: _unreadable(session, "model.py"), on=DIAGNOSTICS, what="unreadable diagnostic")
    where = diags[0].range.start
    lines = broken.splitlines()
    assert (where.line, where.character) == (lines.index("def later(:"), len("def later(")), diags[0]
    assert f"line {where.line + 1}, column {where.character + 1}" in diags[0].message
    assert "cannot read" in diags[0].message and diags[0].severity == types.DiagnosticSeverity.Warning


async def test_a_syntax_error_keeps_the_unchanged_lenses_moved_with_their_lines_until_fixed(session):
    text = (session.workspace / "model.py").read_text()
    session.open("model.py", text + "\n@jax.jit\ndef second(x):\n    return x\n")
    assert [l.range.start.line for l in await session.lenses("model.py")] == [4, 8]
    # Two lines added above (net moves), an error inside net: only `second`, unchanged, keeps its lens.
    lines = text.splitlines()
    body = lines.index("    return jax.nn.relu(x @ jnp.ones((3, 4)))")
    lines[body] = "    return jax.nn.relu(x @ SYNTAX ERROR ((3, 4)))"
    broken = "\n".join(["# one", "# two", *lines]) + "\n\n@jax.jit\ndef second(x):\n    return x\n"
    session.replace("model.py", broken)
    lenses = await session.lenses("model.py")
    assert [(l.command.arguments[0]["symbol"], l.range.start.line) for l in lenses] == [("second", broken.splitlines().index("def second(x):"))]
    diags = await session.wait_for(lambda: _unreadable(session, "model.py"), on=DIAGNOSTICS, what="unreadable diagnostic")
    assert diags[0].range.start.line == body + 2
    session.replace("model.py", text)
    assert [l.range.start.line for l in await session.lenses("model.py")] == [4]
    await session.wait_for(lambda: not _unreadable(session, "model.py"), on=DIAGNOSTICS, what="cleared once it parses")


async def test_recipe_diagnostics_report_every_problem_and_a_model_its_module_lacks(session):
    bad = SPEC_RECIPE + (
        '\n[profiles.two]\nmodel = "model:nett"\nseed = -1\nmode = "bogus"\n'
        '\n[profiles.fine]\nmodel = "mlp:MLP"\n'
    )
    (session.workspace / ".tensorviz" / "recipes.toml").write_text(bad)
    session.disk_changed(".tensorviz/recipes.toml")
    diags = await session.wait_for(lambda: session.diagnostics(".tensorviz/recipes.toml"), on=DIAGNOSTICS, what="recipe diagnostics")
    lines = bad.splitlines()
    found = sorted((d.range.start.line, d.message) for d in diags)
    assert [line for line, _ in found] == [
        lines.index('model = "model:nett"'), lines.index("seed = -1"), lines.index('mode = "bogus"')
    ], found
    assert "no 'nett'" in found[0][1] and "net" in found[0][1].split("defines", 1)[1]
    assert "profiles.two.seed" in found[1][1] and "profiles.two.mode" in found[2][1]


async def test_the_interpreter_picker_lists_each_interpreter_once_after_a_default_entry(session):
    venv = session.workspace / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)  # a venv's python links to its base interpreter
    venv_path = str(venv / "python")
    # A choice spelled differently from the .venv path the picker finds.
    chosen = await session.execute("tensorviz.selectInterpreter", "./.venv/bin/../bin/python")
    assert _get(chosen, "ok") is True, session.logs()
    session.answer(None)
    assert _get(await session.execute("tensorviz.selectInterpreter"), "ok") is False
    titles = [a.title for a in session.client.prompts[-1].actions]
    assert titles[0] == f"default ({venv_path} (.venv))", titles
    assert titles.count(venv_path) == 1, titles
    # Not merged with the interpreter it links to: a different environment.
    assert os.path.normpath(sys.executable) in titles and len(titles) == len(set(titles))
    session.answer(titles[0])
    reset = await session.execute("tensorviz.selectInterpreter")
    assert (_get(reset, "python"), _get(reset, "origin")) == (venv_path, ".venv")
    session.answer(os.path.normpath(sys.executable))
    picked = await session.execute("tensorviz.selectInterpreter")
    assert (_get(picked, "python"), _get(picked, "origin")) == (os.path.normpath(sys.executable), "selected")


async def _hover(session, rel: str, line: int, character: int) -> str | None:
    result = await session.client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=session.uri(rel)),
                          position=types.Position(line, character))
    )
    return None if result is None else result.contents.value


async def test_hover_says_what_tensorviz_knows_and_symbols_list_the_candidates(session):
    session.open("model.py")
    session.open("mlp.py")
    before = await _hover(session, "model.py", 4, 5)
    assert before.startswith("**TensorViz** · `net`: JAX function (jax)"), before
    assert "Profile `jax_example`" in before and "Not captured in this session yet." in before
    assert await _hover(session, "model.py", 0, 0) is None  # not on a candidate
    mlp = await _hover(session, "mlp.py", 2, 7)  # this fake's discovery: every class is a Torch module
    assert mlp.startswith("**TensorViz** · `MLP`: PyTorch module (torch)") and "Inputs: `x`" in mlp, mlp
    assert "No saved profile" in mlp

    await session.execute("tensorviz.trustWorkspace")
    result = await session.execute("tensorviz.openGraph", {"uri": session.uri("model.py"), "symbol": "net"})
    assert _get(result, "ok") is True, session.logs()
    nodes = _get(result, "nodes")
    after = await _hover(session, "model.py", 4, 5)
    assert re.search(rf"Last capture at \d\d:\d\d: {nodes:,} ops?\b.*; fresh$", after), after
    text = (session.workspace / "model.py").read_text()
    session.replace("model.py", text.replace("(3, 4)", "(3, 5)"))
    await session.wait_for(lambda: session.diagnostics("model.py"), on=DIAGNOSTICS, what="stale diagnostic")
    assert (await _hover(session, "model.py", 4, 5)).endswith("stale: model.py changed since")

    symbols = await session.client.text_document_document_symbol_async(
        types.DocumentSymbolParams(text_document=types.TextDocumentIdentifier(uri=session.uri("mlp.py")))
    )
    assert [(s.name, s.kind, s.detail, s.selection_range.start.line) for s in symbols] == [
        ("MLP", types.SymbolKind.Class, "PyTorch module", 2)
    ]


async def test_a_saved_profile_refreshes_lens_titles_where_the_client_takes_refreshes(session, request):
    session.open("mlp.py")
    assert [l.command.title for l in await session.lenses("mlp.py")] == ["Open as Graph"]
    refreshes = len(session.client.lens_refreshes)
    session.client.lens_refreshed.clear()
    recipes = session.workspace / ".tensorviz" / "recipes.toml"
    recipes.write_text(recipes.read_text() + '\n[profiles.mlp_setup]\nmodel = "mlp:MLP"\nframework = "jax"\n'
                       '[profiles.mlp_setup.inputs]\nargs = [{ dtype = "float32", shape = [2, 3] }]\n')
    session.disk_changed(".tensorviz/recipes.toml")
    if "vscode" in request.node.name:  # advertises workspace.codeLens.refreshSupport
        await asyncio.wait_for(session.client.lens_refreshed.wait(), 30)
        assert [l.command.title for l in await session.lenses("mlp.py")] == ["Open as Graph (mlp_setup)"]
        return
    # Neovim 0.11 does not advertise it: nothing is sent, and a lens request (what the
    # documented autocommands make) gets the new title once the change is handled.
    for _ in range(200):
        if [l.command.title for l in await session.lenses("mlp.py")] == ["Open as Graph (mlp_setup)"]:
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the lens title never named the new profile")
    assert len(session.client.lens_refreshes) == refreshes


async def test_installing_into_the_workspaces_own_interpreter_needs_trust_first(session):
    venv = session.workspace / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    session.answer("Cancel")  # the trust prompt
    result = await session.execute("tensorviz.installDependencies", {"packages": ["tensorviz-no-such-package"]})
    assert _get(result, "ok") is False
    (prompt,) = session.client.prompts
    assert "Do you trust this workspace?" in prompt.message and str(venv / "python") in prompt.message
    assert "inside the workspace" in prompt.message
    assert not trusted_in_store(session.config_dir, session.workspace)
    # Trusted, it goes on to the reviewed install prompt (declined here: nothing runs).
    session.answer("Trust Workspace", "Cancel")
    result = await session.execute("tensorviz.installDependencies", {"packages": ["tensorviz-no-such-package"]})
    assert _get(result, "ok") is False
    trust_prompt, install_prompt = session.client.prompts[1:]
    assert "Do you trust this workspace?" in trust_prompt.message
    assert "pip install tensorviz-no-such-package" in install_prompt.message


async def test_the_viewer_says_the_capture_waits_for_the_trust_answer(session):
    """Issue 49: with the browser open (the setup form's Save and capture), a capture of an
    untrusted folder says in the viewer that it waits for the answer in the editor."""
    session.open("model.py")
    await session.execute("tensorviz.trustWorkspace")
    first = await session.execute("tensorviz.openGraph", {"uri": session.uri("model.py"), "symbol": "net"})
    assert _get(first, "ok") is True  # the viewer runs now
    store = session.config_dir / "trust.json"
    data = json.loads(store.read_text())
    data["workspaces"][str(session.workspace.resolve())]["trusted"] = False
    store.write_text(json.dumps(data))
    session.answer("Cancel")
    await session.execute("tensorviz.openGraph", {"uri": session.uri("model.py"), "symbol": "net"})
    waiting = [e for e in viewer_events(session.workspace)
               if e.get("event") == "progress" and (e.get("data") or {}).get("waiting") == "trust"]
    assert waiting, viewer_events(session.workspace)
    assert "Waiting for your answer in the editor" in waiting[-1]["data"]["message"]
