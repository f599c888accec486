"""Show in Graph (code action and ``tensorviz.showInGraph``) and follow-cursor, through the
real server with fake discovery/worker/viewer (issue 18 items 3 and 4).

The fake worker's capture runs the lines ``.fake/capture.json`` names (``lines``); its
line index is the real one (capture/analysis/lines.py). ``.fake/pages.json`` plays open viewer pages.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types

from .conftest import SPEC_RECIPE, SharedServer, start_session, stop_session
from .test_server_fakes import _get, behave, viewer_events

# One event loop for the module: its tests share a server (SharedServer).
pytestmark = pytest.mark.asyncio(loop_scope="module")

# SPEC_NET: line 6 (0-based 5) is `return jax.nn.relu(x @ jnp.ones((3, 4)))`, line 5 `def net(x):`.
BODY0, DEF0 = 5, 4
SECOND = SPEC_RECIPE.replace("[profiles.jax_example]", "[profiles.second]", 1)
SECOND = SECOND[SECOND.index("[profiles.second]"):]


def pages(ws: Path, **open_pages: int) -> None:
    (ws / ".fake").mkdir(exist_ok=True)
    (ws / ".fake" / "pages.json").write_text(json.dumps({k.lstrip("c"): v for k, v in open_pages.items()}))


async def actions(s, rel_or_uri: str, line: int, character: int = 4) -> list[types.CodeAction]:
    uri = rel_or_uri if "://" in rel_or_uri else s.uri(rel_or_uri)
    got = await s.client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(types.Position(line, character), types.Position(line, character)),
            context=types.CodeActionContext(diagnostics=[]),
        )
    )
    return [a for a in got or [] if a.title.startswith("Show in Graph")]


def command_of(action: types.CodeAction) -> dict:
    command = action.command
    if isinstance(command, str):  # lsprotocol's client hook: see test_code_actions_for_helix
        import ast

        return ast.literal_eval(command)
    return {"command": command.command, "arguments": list(command.arguments)}


async def captured(s, **behaviour) -> None:
    behave(s.workspace, lines=[6], **behaviour)
    await s.execute("tensorviz.trustWorkspace")
    s.open("model.py")
    result = await s.execute("tensorviz.openGraph", {"uri": s.uri("model.py"), "symbol": "net"})
    assert _get(result, "ok") is True


def events(ws: Path, name: str) -> list[dict]:
    return [e["data"] for e in viewer_events(ws) if e["event"] == name]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(tmp_path_factory):
    shared = await SharedServer.start(tmp_path_factory.mktemp("user-config"), editor="neovim")
    yield shared
    await shared.stop()


@pytest_asyncio.fixture(loop_scope="module")
async def session(server, spec_workspace):
    """The module's server (Neovim) on this test's own folder."""
    s = await server.enter(spec_workspace)
    yield s
    await server.leave(s)


FOLLOW = {"tensorviz": {"followCursor": True}}


@pytest_asyncio.fixture(loop_scope="module")
async def following(server, spec_workspace):
    """The same, with ``tensorviz.followCursor`` on for this folder."""
    s = await server.enter(spec_workspace, configuration=FOLLOW)
    yield s
    await server.leave(s)


async def test_code_action_only_on_captured_lines(session, tmp_path):
    session.open("model.py")
    assert await actions(session, "model.py", BODY0) == [], "nothing captured yet"
    await captured(session)
    got = await actions(session, "model.py", BODY0)
    # the fake capture: 10 ops, 5 in each of two scope groups, all on line 6 -> two calls
    assert [a.title for a in got] == ["Show in Graph (profile jax_example: 5 ops ×2)"]
    assert command_of(got[0]) == {"command": "tensorviz.showInGraph", "arguments": [
        {"uri": session.uri("model.py"), "line": BODY0, "profile": "jax_example"}]} or \
        command_of(got[0])["arguments"] == [{"uri": session.uri("model.py"), "line": BODY0, "profile": "jax_example"}]
    assert await actions(session, "model.py", DEF0) == [], "the def line produced nothing"
    # the same text outside the workspace (a library's copy): no capture ran it
    lib = tmp_path / "site-packages" / "model.py"
    lib.parent.mkdir()
    lib.write_text((session.workspace / "model.py").read_text())
    assert await actions(session, lib.as_uri(), BODY0) == []
    # an edit above the line moves the action with it, marked as of the capture
    text = (session.workspace / "model.py").read_text()
    session.replace("model.py", "# a comment\n" + text)
    assert await actions(session, "model.py", BODY0) == []
    moved = await actions(session, "model.py", BODY0 + 1)
    assert [a.title for a in moved] == ["Show in Graph (profile jax_example: 5 ops ×2 · as of the last capture)"]


async def test_command_opens_url_without_a_page_and_focuses_an_open_page(session):
    await captured(session)
    result = await session.execute("tensorviz.showInGraph", session.uri("model.py"), BODY0)
    assert _get(result, "ok") is True and _get(result, "shown") == "url"
    url = _get(result, "url")
    assert url == "http://127.0.0.1:9/tok/?capture=1&show=model.py:6"
    assert session.client.shown_documents[-1].uri == url
    assert _get(result, "calls") == 2 and len(_get(result, "keys")) == 5
    assert events(session.workspace, "show") == []

    pages(session.workspace, c1=1)
    n_docs = len(session.client.shown_documents)
    result = await session.execute("tensorviz.showInGraph", {"uri": str(session.workspace / "model.py"),
                                                             "line": BODY0, "call": 1})
    assert _get(result, "shown") == "page"
    assert len(session.client.shown_documents) == n_docs, "an open page is focused, no new tab"
    [show] = events(session.workspace, "show")
    assert show["capture"] == 1 and show["file"] == "model.py" and show["line"] == 6
    assert show["call"] == 1 and show["calls"] == 2
    assert show["keys"] == _get(result, "keys") and all(k.startswith("n") for k in show["keys"])
    first = await session.execute("tensorviz.showInGraph", session.uri("model.py"), BODY0)
    assert set(_get(first, "keys")).isdisjoint(show["keys"]), "call 1 is the other block's ops"

    # a line that produced nothing: said, nothing shown
    result = await session.execute("tensorviz.showInGraph", session.uri("model.py"), DEF0)
    assert _get(result, "reason") == "no-nodes"
    assert any("model.py:5 produced no nodes" in m for m in session.messages())
    result = await session.execute("tensorviz.showInGraph", session.uri("model.py"), BODY0, "nope")
    assert _get(result, "reason") == "not-in-profile"
    result = await session.execute("tensorviz.showInGraph", session.uri("model.py"))
    assert _get(result, "ok") is False and "0-based line" in _get(result, "error")


async def test_several_profiles_ask_unless_a_page_shows_one(session):
    (session.workspace / ".tensorviz" / "recipes.toml").write_text(SPEC_RECIPE + "\n" + SECOND)
    await captured(session)
    result = await session.execute("tensorviz.captureProfile", "second")
    assert _get(result, "ok") is True and _get(result, "capture") == 2
    got = await actions(session, "model.py", BODY0)
    assert sorted(a.title for a in got) == ["Show in Graph (profile jax_example: 5 ops ×2)",
                                            "Show in Graph (profile second: 5 ops ×2)"]
    # no page open: asked, the last opened first; the answer is used
    session.answer("jax_example")
    result = await session.execute("tensorviz.showInGraph", session.uri("model.py"), BODY0)
    prompt = session.client.prompts[-1]
    assert "model.py:6" in prompt.message and [a.title for a in prompt.actions] == ["second", "jax_example"]
    assert _get(result, "profile") == "jax_example" and _get(result, "url").endswith("?capture=1&show=model.py:6")
    # dismissed: nothing
    n = len(session.client.shown_documents)
    result = await session.execute("tensorviz.showInGraph", session.uri("model.py"), BODY0)
    assert _get(result, "reason") == "cancelled" and len(session.client.shown_documents) == n
    # a page shows capture 1: that one, without asking
    pages(session.workspace, c1=1)
    asked = len(session.client.prompts)
    result = await session.execute("tensorviz.showInGraph", session.uri("model.py"), BODY0)
    assert _get(result, "profile") == "jax_example" and _get(result, "shown") == "page"
    assert len(session.client.prompts) == asked


async def highlight(s, line: int) -> None:
    got = await s.client.text_document_document_highlight_async(
        types.DocumentHighlightParams(text_document=types.TextDocumentIdentifier(uri=s.uri("model.py")),
                                      position=types.Position(line, 4)))
    assert not got, "follow-cursor answers with no highlights"


# The debounce's own word (debug log lines the fake server forwards): a move that will be
# told once the cursor rests, and a push that told the pages. Awaited, never slept past.
WILL_TELL = "follow-cursor: line "
TOLD = " told: "


def told_count(s) -> int:
    return s.log_count(TOLD)


async def told(s, line: int, *, after: int) -> str:
    """The next push past ``after`` earlier ones; it must be for 1-based ``line``."""
    message = await s.logged(TOLD, after=after, timeout=30)
    assert message.startswith(f"follow-cursor: line {line} of "), message
    return message


async def nothing_scheduled(s, since: int) -> None:
    """No move since ``since`` earlier ``WILL_TELL`` logs will be told: after one more round
    trip (the server logs a move before it answers the request after it), none came."""
    await s.client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=s.uri("model.py")), position=types.Position(0, 0)))
    scheduled = [m for m in (m.message for m in s.client.log_messages) if m.startswith(WILL_TELL) and TOLD not in m]
    assert scheduled[since:] == [], scheduled[since:]


def will_tell_count(s) -> int:
    return sum(m.message.startswith(WILL_TELL) and TOLD not in m.message for m in s.client.log_messages)


async def test_follow_cursor_off_publishes_nothing(session):
    await captured(session)
    pages(session.workspace, c1=1)
    for line in (BODY0, DEF0, BODY0):
        await highlight(session, line)
    await nothing_scheduled(session, 0)  # off: no move is ever told
    assert events(session.workspace, "cursor") == []


async def test_follow_cursor_debounces_to_the_latest_line(following):
    s = following
    await captured(s)
    await highlight(s, BODY0)
    await told(s, 6, after=0)
    assert events(s.workspace, "cursor") == [], "no page open: nothing to tell"
    pages(s.workspace, c1=1)
    before = told_count(s)
    for line in (DEF0, BODY0, DEF0, 0, DEF0, BODY0):  # quick moves, the last on line 6
        await highlight(s, line)
    await told(s, 6, after=before)
    got = events(s.workspace, "cursor")
    assert len(got) == 1, got
    assert got[0]["capture"] == 1 and got[0]["file"] == "model.py" and got[0]["line"] == 6
    assert len(got[0]["keys"]) == 5
    scheduled = will_tell_count(s)
    await highlight(s, BODY0)  # the same line again: nothing new
    assert will_tell_count(s) == scheduled
    await highlight(s, DEF0)  # a line that produced nothing: the outline is cleared
    await told(s, 5, after=before + 1)
    got = events(s.workspace, "cursor")
    assert len(got) == 2 and got[1]["keys"] == [] and got[1]["capture"] == 1
    assert told_count(s) == before + 2, "one push for the quick moves, one for the last"
    assert events(s.workspace, "add") and len(events(s.workspace, "add")) == 1, "never a recapture"


@pytest.mark.slow
async def test_follow_cursor_from_the_clients_own_notification(spec_workspace, config_dir):
    """``tensorviz/cursor {uri, line}``, which the VS Code extension sends on every selection
    change, goes through the same debounce; malformed ones are ignored."""
    s = await start_session(spec_workspace, config_dir, editor="vscode",
                            init_options={"tensorviz": {"followCursor": True}})
    try:
        await captured(s)
        pages(s.workspace, c1=1)
        uri = s.uri("model.py")
        s.client.protocol.notify("tensorviz/cursor", {"uri": uri, "line": "five"})
        s.client.protocol.notify("tensorviz/cursor", {"line": BODY0})
        for line in (DEF0, BODY0, DEF0, BODY0):
            s.client.protocol.notify("tensorviz/cursor", {"uri": uri, "line": line})
        await highlight(s, BODY0)  # a round trip: the notifications before it were handled
        await told(s, 6, after=0)
        got = events(s.workspace, "cursor")
        assert [(e["line"], len(e["keys"])) for e in got] == [(6, 5)]
        assert told_count(s) == 1
    finally:
        await stop_session(s)


async def test_turning_follow_cursor_off_clears_the_outline(following):
    s = following
    await captured(s)
    pages(s.workspace, c1=1)
    await highlight(s, BODY0)
    await told(s, 6, after=0)
    assert [len(e["keys"]) for e in events(s.workspace, "cursor")] == [5]
    s.client.set_configuration({"tensorviz": {"followCursor": False}}, scope_uri=s.workspace.as_uri())
    s.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    await s.wait_for(lambda: len(events(s.workspace, "cursor")) == 2, on="window/logMessage", timeout=10,
                     what="the outline cleared")
    assert events(s.workspace, "cursor")[1]["keys"] == []
    scheduled = will_tell_count(s)
    await highlight(s, DEF0)
    await highlight(s, BODY0)
    await nothing_scheduled(s, scheduled)
    assert len(events(s.workspace, "cursor")) == 2, "off: nothing more"
