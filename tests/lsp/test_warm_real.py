"""The warm worker and recapture on save with the real server and the real JAX worker:
captures after the first run in children of one resident process, a save recaptures
from the saved file, and the resident process stops with the server."""

from __future__ import annotations

import importlib.util

import pytest

from processes import exited_async

from .conftest import DIAGNOSTICS, REAL_SERVER, SPEC_NET, SPEC_RECIPE, make_workspace, start_session, stop_session

pytestmark = [pytest.mark.asyncio, pytest.mark.jax,
              pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="needs jax")]

MODEL = "import os\nprint('model imported in', os.getpid(), 'child of', os.getppid(), flush=True)\n" + SPEC_NET


def _pids(session) -> list[tuple[int, int]]:
    out = []
    for m in session.client.log_messages:
        if "model imported in" in m.message:
            words = m.message.split()
            out.append((int(words[words.index("in") + 1]), int(words[-1])))
    return out


async def test_warm_recapture_on_save_and_shutdown(tmp_path, config_dir):
    ws = make_workspace(tmp_path / "ws", {"model.py": MODEL, ".tensorviz/recipes.toml": SPEC_RECIPE})
    s = await start_session(ws, config_dir, server=REAL_SERVER, init_options={"tensorviz": {"recaptureOnSave": True}})
    try:
        await s.execute("tensorviz.trustWorkspace")
        s.open("model.py")
        first = await s.execute("tensorviz.openGraph", {"uri": s.uri("model.py"), "symbol": "net"})
        assert first["ok"] is True, first
        second = await s.execute("tensorviz.openGraph", {"uri": s.uri("model.py"), "symbol": "net"})
        assert second["ok"] is True, second
        await s.logged("model imported in", after=1)
        (c1, parent1), (c2, parent2) = _pids(s)[:2]
        assert c1 != c2 and parent1 == parent2  # two children of one resident process
        resident = parent1
        # Edit and save: recaptured in the background, from the saved file, on the same
        # resident process; the stale diagnostic clears.
        edited = MODEL.replace("jnp.ones((3, 4))", "jnp.ones((3, 5))")
        s.replace("model.py", edited)
        await s.wait_for(lambda: s.diagnostics("model.py"), on=DIAGNOSTICS, what="stale diagnostic")
        s.save("model.py", edited)
        await s.logged("model imported in", after=2, timeout=120)
        c3, parent3 = _pids(s)[2]
        assert parent3 == resident and c3 not in (c1, c2)
        await s.wait_for(lambda: not s.diagnostics("model.py"), on=DIAGNOSTICS, what="stale diagnostic cleared", timeout=120)
        await s.logged("captured net", after=2)
    finally:
        await stop_session(s)
    assert await exited_async(resident, timeout=20), "the warm worker stops with the server"
