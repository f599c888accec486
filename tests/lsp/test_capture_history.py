"""The language server keeps each successful capture in the workspace's history
(``.tensorviz/captures/history/PROFILE/``) and hands the viewer the previous one as the
diff baseline (fake worker and viewer: fast)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import start_session, stop_session

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]

PROFILE = "jax_example"  # the spec recipe's profile for model.py:net


def _adds(ws: Path) -> list[dict]:
    p = ws / ".fake" / "viewer-events.jsonl"
    events = [json.loads(line) for line in p.read_text().splitlines()] if p.exists() else []
    return [e["data"] for e in events if e["event"] == "add"]


def _kept(ws: Path) -> list[str]:
    folder = ws / ".tensorviz" / "captures" / "history" / PROFILE
    return sorted(p.name for p in folder.glob("*.tvg")) if folder.exists() else []


async def _open(session) -> dict:
    result = await session.execute("tensorviz.openGraph", {"uri": session.uri("model.py"), "symbol": "net"})
    return result if isinstance(result, dict) else vars(result)


async def test_captures_are_kept_and_the_previous_one_is_offered(spec_workspace, config_dir):
    session = await start_session(spec_workspace, config_dir)
    try:
        await session.execute("tensorviz.trustWorkspace")
        session.open("model.py")
        assert (await _open(session))["ok"] is True
        ws = session.workspace
        assert len(_kept(ws)) == 1
        assert "baseline" not in _adds(ws)[-1]  # nothing before the first capture
        assert (await _open(session))["ok"] is True
        assert len(_kept(ws)) == 2
        baseline = _adds(ws)[-1]["baseline"]
        assert baseline["label"].startswith(f"previous capture of {PROFILE} (") and baseline["nodes"] == 10
        # A failed capture is not kept: the previous graph stays the one to compare with.
        (ws / ".fake").mkdir(exist_ok=True)
        (ws / ".fake" / "capture.json").write_text(json.dumps({"fail": "boom"}))
        assert (await _open(session))["ok"] is False
        assert len(_kept(ws)) == 2
    finally:
        await stop_session(session)


async def test_the_history_setting_bounds_what_is_kept(spec_workspace, config_dir):
    session = await start_session(spec_workspace, config_dir, init_options={"tensorviz": {"historyCaptures": 3}})
    try:
        await session.execute("tensorviz.trustWorkspace")
        session.open("model.py")
        for _ in range(5):
            assert (await _open(session))["ok"] is True
        kept = _kept(session.workspace)
        assert len(kept) == 3 and kept[0].startswith("000003-") and kept[-1].startswith("000005-")
    finally:
        await stop_session(session)
