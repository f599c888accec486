"""The warm worker and recapture on save with the real server and the real JAX worker:
captures after the first run in children of one resident process, a save recaptures
from the saved file, and the resident process stops with the server; the first capture
in a trusted folder runs on the resident process its open model file preloaded."""

from __future__ import annotations

import importlib.util
import re

import pytest

from processes import exited_async
from tensorviz_lsp.trust import TrustStore

from .conftest import DIAGNOSTICS, REAL_SERVER, SPEC_NET, SPEC_RECIPE, make_workspace, start_session, stop_session

pytestmark = [pytest.mark.asyncio, pytest.mark.jax,
              pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="needs jax"),
              pytest.mark.slow]

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


# A library the model imports that takes a while to load, and writes who loaded it.
SLOW_LIBRARY = """\
import os, time
time.sleep(float(os.environ["TV_SLOW_S"]))
with open(os.environ["TV_IMPORTS"], "a") as fh:
    fh.write(f"tvslow {os.getpid()}\\n")
"""
USES_SLOW = ("import os\nimport tvslow\n\nwith open(os.environ['TV_IMPORTS'], 'a') as fh:\n"
             "    fh.write(f'model {os.getpid()} {os.getppid()}\\n')\n\n" + SPEC_NET)


async def test_the_first_capture_runs_on_the_worker_its_open_model_file_preloaded(tmp_path, config_dir):
    """Issue 30 item 1: in a folder trusted earlier, opening a model file starts the warm
    worker importing JAX and the libraries the file imports; Open as Graph during that
    preload waits for the rest of it (no second worker) and runs in a child of it, where
    the library is already loaded."""
    lib = tmp_path / "libs"
    lib.mkdir()
    (lib / "tvslow.py").write_text(SLOW_LIBRARY)
    imports = tmp_path / "imports.txt"
    ws = make_workspace(tmp_path / "ws", {"model.py": USES_SLOW, ".tensorviz/recipes.toml": SPEC_RECIPE})
    TrustStore(config_dir / "trust.json").set_trusted(ws)
    env = {"PYTHONPATH": str(lib), "TV_IMPORTS": str(imports), "TV_SLOW_S": "6"}
    s = await start_session(ws, config_dir, server=REAL_SERVER, init_options={"tensorviz": {"captureEnv": env}})
    try:
        s.open("model.py")
        started = await s.logged("warm worker started for", timeout=60)
        resident = int(re.search(r"\(pid (\d+)\)$", started).group(1))
        asked = await s.logged(f"warm worker for {ws.resolve()} started: importing")
        assert asked.endswith("importing jax, tvslow"), asked
        result = await s.execute("tensorviz.openGraph", {"uri": s.uri("model.py"), "symbol": "net"})
        assert result["ok"] is True, result
        rows = [line.split() for line in imports.read_text().splitlines()]
        # tvslow loaded once, in the resident process; the model in a child of it.
        (model,) = [r for r in rows if r[0] == "model"]
        assert rows == [["tvslow", str(resident)], model] and model[2] == str(resident) and model[1] != str(resident)
        assert s.log_count("warm worker started for") == 1
        # It came while tvslow was still loading (6 s), and said that it waited for it.
        said = [getattr(r, "message", None) or "" for rs in s.client.progress_reports.values() for r in rs]
        assert any(m.startswith("finishing the warm worker's imports (started when the model file was opened)")
                   for m in said), said
    finally:
        await stop_session(s)
    assert await exited_async(resident, timeout=20), "the warm worker stops with the server"
