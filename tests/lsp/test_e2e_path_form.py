"""Any file as a model, from the editor (real server, discovery and worker): a lens on
``scripts/06_scan_over_layers.py`` (a script folder, a name no module can have) opens
the setup form with the path form, the saved profile captures, the lens names it, and
an edit of that file marks the graph stale."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import tomllib

import pytest
import pytest_asyncio

from .conftest import DIAGNOSTICS, REAL_SERVER, SPEC_MLP, make_workspace, start_session, stop_session
from .test_e2e_real import _get, _split

pytestmark = [pytest.mark.asyncio, pytest.mark.jax,
              pytest.mark.skipif(importlib.util.find_spec("flax") is None, reason="needs jax and flax"),
              pytest.mark.slow]

MODEL = "scripts/06_scan_over_layers.py"
# A helper beside it, imported the way a script imports its siblings.
HELPERS = "def hidden_width():\n    return 16\n"
SOURCE = SPEC_MLP.replace("    width: int = 8\n", "    width: int = 8\n") + (
    "\n\nfrom layer_sizes import hidden_width\n\n"
    "class Wide(nn.Module):\n"
    "    @nn.compact\n"
    "    def __call__(self, x):\n"
    "        return nn.Dense(4)(nn.relu(nn.Dense(hidden_width())(x)))\n"
)


@pytest_asyncio.fixture
async def session(tmp_path, config_dir):
    ws = make_workspace(tmp_path / "ws", {MODEL: SOURCE, "scripts/layer_sizes.py": HELPERS})
    s = await start_session(ws, config_dir, editor="neovim", server=REAL_SERVER)
    yield s
    await stop_session(s)


async def test_a_lens_on_a_path_form_file_saves_a_working_recipe_and_goes_stale(session):
    session.open(MODEL)
    lenses = await session.lenses(MODEL)
    assert [lens.command.title for lens in lenses] == ["Open as Graph", "Open as Graph"]
    session.answer("Trust Workspace")
    result = await session.execute("tensorviz.openGraph", {"uri": session.uri(MODEL), "symbol": "Wide"})
    assert result["ok"] is True and result["setup"] is True, session.logs()
    origin, token, _ = _split(result["url"])
    status, body = await asyncio.to_thread(_get, f"{origin}{token}/api/setup")
    form = json.loads(body)
    assert form["recipe"]["model"] == f"{MODEL}:Wide" and form["recipe"]["framework"] == "jax"

    recipe = dict(form["recipe"])
    recipe["inputs"] = {"args": [{"kind": "tensor", "shape": [2, 3], "dtype": "float32", "requires_grad": False,
                                  "generator": {"kind": "normal"}}], "kwargs": {}}
    status, body = await asyncio.to_thread(_get, f"{origin}{token}/api/profile", "POST", {"name": "wide", "recipe": recipe})
    assert status == 200 and json.loads(body) == {"ok": True}, body
    saved = tomllib.loads((session.workspace / ".tensorviz" / "recipes.toml").read_text())["profiles"]["wide"]
    assert saved["model"] == f"{MODEL}:Wide"
    lenses = await session.lenses(MODEL)
    assert [lens.command.title for lens in lenses] == ["Open as Graph", "Open as Graph (wide)"]

    # Capturing through the lens now uses the saved profile (no setup form).
    result = await session.execute("tensorviz.openGraph", {"uri": session.uri(MODEL), "symbol": "Wide"}, timeout=180)
    assert result["ok"] is True and not result.get("setup"), session.logs()
    origin, token, cid = _split(result["url"])
    status, body = await asyncio.to_thread(_get, f"{origin}{token}/api/capture?capture={cid}")
    capture = json.loads(body)
    assert capture["failure"] is None and capture["counts"]["nodes"] > 0
    assert capture["recipe"]["model"] == f"{MODEL}:Wide"
    assert not session.diagnostics(".tensorviz/recipes.toml")

    # An edit of the path-form file (in the buffer) marks the graph stale, by name.
    session.replace(MODEL, SOURCE.replace("nn.Dense(4)(nn.relu(nn.Dense(hidden_width", "nn.Dense(5)(nn.relu(nn.Dense(hidden_width"))
    diags = await session.wait_for(lambda: session.diagnostics(MODEL), on=DIAGNOSTICS, what="stale diagnostic")
    assert diags[0].code == "stale-graph" and f"{MODEL} changed" in diags[0].message
    status, body = await asyncio.to_thread(_get, f"{origin}{token}/api/capture?capture={cid}")
    assert json.loads(body)["stale"]["files"] == [MODEL]
    # ... and so does an edit of its sibling module, saved on disk.
    session.replace(MODEL, SOURCE)
    await session.wait_for(lambda: not session.diagnostics(MODEL), on=DIAGNOSTICS, what="undone")
    (session.workspace / "scripts" / "layer_sizes.py").write_text(HELPERS.replace("16", "32"))
    session.disk_changed("scripts/layer_sizes.py")
    diags = await session.wait_for(lambda: session.diagnostics(MODEL), on=DIAGNOSTICS, what="stale after a sibling edit")
    assert "scripts/layer_sizes.py changed" in diags[0].message


async def test_a_missing_path_form_file_is_a_recipe_diagnostic(session):
    text = ('version = 1\n\n[profiles.gone]\nframework = "jax"\nmodel = "scripts/gone.py:Net"\n\n'
            '[profiles.out]\nframework = "jax"\nmodel = "../outside.py:Net"\n')
    session.open(".tensorviz/recipes.toml", text)
    await session.wait_for(lambda: len(session.diagnostics(".tensorviz/recipes.toml")) >= 2 or None,
                           on=DIAGNOSTICS, what="recipe diagnostics")
    assert len(session.diagnostics(".tensorviz/recipes.toml")) == 2
    got = sorted((d.range.start.line, d.message) for d in session.diagnostics(".tensorviz/recipes.toml"))
    assert got[0][0] == 4 and "no file 'scripts/gone.py' in the workspace" in got[0][1]
    assert got[1][0] == 8 and "leaves the workspace ('..')" in got[1][1]


async def test_a_profile_saved_in_the_other_form_still_names_the_lens(tmp_path, config_dir):
    """A script-folder file is written in the path form now; a profile saved earlier with
    its dotted (namespace-package) name is still the lens's profile, and vice versa."""
    recipes = ('version = 1\n\n[profiles.old]\nframework = "jax"\nmodel = "scripts.mlp:MLP"\n\n'
               '[profiles.bypath]\nframework = "jax"\nmodel = "pkg/mlp.py:MLP"\n')
    ws = make_workspace(tmp_path / "ws2", {"scripts/mlp.py": SPEC_MLP, "pkg/__init__.py": "", "pkg/mlp.py": SPEC_MLP,
                                           ".tensorviz/recipes.toml": recipes})
    s = await start_session(ws, config_dir, editor="neovim", server=REAL_SERVER)
    try:
        s.open("scripts/mlp.py")
        s.open("pkg/mlp.py")
        assert [lens.command.title for lens in await s.lenses("scripts/mlp.py")] == ["Open as Graph (old)"]
        assert [lens.command.title for lens in await s.lenses("pkg/mlp.py")] == ["Open as Graph (bypath)"]
    finally:
        await stop_session(s)
