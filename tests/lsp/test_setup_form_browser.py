"""Open as Graph for a symbol with no saved profile, as a person sees it.

``tensorviz lsp`` over stdio (pytest-lsp), the spec's Flax ``MLP`` in ``model.py`` and no
recipes yet: the editor is asked to open the viewer's URL; in Debian's Chromium that page
shows the setup form (``width`` prefilled from the Linen annotation, the input ``x`` asking
for a shape), "Save & capture" writes ``.tensorviz/recipes.toml`` and the graph appears.

Also the contract between the language server's setup provider and the app's form
(``viewer/API.md``, setup), checked without a browser.

Screenshots of each step go to ``$TENSORVIZ_SCREENSHOTS`` (default: the test's tmp dir).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import tomllib
from pathlib import Path

import pytest
import pytest_asyncio

from tensorviz_lsp.backends import Candidate, Pos, RealBackends, Span
from tensorviz_lsp.features.setup_form import SetupContext, draft_recipe, setup_form

from .conftest import REAL_SERVER, SPEC_MLP, make_workspace, start_session, stop_session

HAS_JAX = importlib.util.find_spec("jax") is not None and importlib.util.find_spec("flax") is not None
CHROMIUM = "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else shutil.which("chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]

# ------------------------------------------------------------------ the contract (no browser)

# viewer/API.md, "Setup form content, as the browser app reads it".
INPUT_KEYS = {"name", "path", "kind", "shape", "dtype", "generator", "unknown", "annotation", "kwarg", "token", "text",
              "needed"}
FIELD_KEYS = {"name", "path", "type", "annotation", "default", "default_text", "value", "required", "choices", "help",
              "config", "text", "example", "suggested"}
# The answer's top-level keys, as viewer/API.md's `GET api/setup` line lists them (and the
# form's `symbol`), so that the document and this check cannot drift apart.
_SETUP_LINE = next(line for line in (Path(__file__).resolve().parents[2] / "viewer" / "API.md").read_text().splitlines()
                   if line.startswith("- `GET api/setup` → `{"))
TOP_KEYS = {k.rstrip("?") for k in re.findall(r"([a-z_]+\??)(?=[:,}])", _SETUP_LINE.split("→", 1)[1])} - {"null"} | {"symbol"}


def _mlp(setup_fields=None, inputs=None) -> Candidate:
    return Candidate(
        name="MLP", qualname="MLP", kind="linen_module", framework="jax",
        name_range=Span(Pos(2, 6), Pos(2, 9)), range=Span(Pos(2, 0), Pos(8, 0)),
        inputs=inputs or [{"name": "x", "kind": "positional", "annotation": None, "default": None, "required": True}],
        setup_fields=setup_fields or [
            {"name": "width", "kind": "positional", "annotation": "int", "default": "8", "default_value": 8,
             "default_is_literal": True, "required": False, "supplied_by": None},
        ],
    )


def _check_shape(form: dict) -> None:
    assert set(form) <= TOP_KEYS and "recipe" in form
    for inp in form["inputs"]:
        assert set(inp) <= INPUT_KEYS, set(inp) - INPUT_KEYS
        assert re.fullmatch(r"inputs\.(args\[\d+\]|kwargs\.\w+)", inp["path"])
        assert isinstance(inp["shape"], list) and isinstance(inp["unknown"], list)
        assert isinstance(inp["generator"], dict) and "kind" in inp["generator"]
    for f in form["fields"]:
        assert set(f) <= FIELD_KEYS, set(f) - FIELD_KEYS
        assert f["path"] == f"init.kwargs.{f['name']}"
        assert isinstance(f["type"], str)
    for need in form["needs"]:
        assert isinstance(need, str) or (set(need) == {"path", "message"} and need["message"])


def test_the_setup_provider_speaks_the_forms_contract(tmp_path):
    cand = _mlp()
    form = setup_form(SetupContext(tmp_path, "file:///ws/model.py", cand, "MLP", draft_recipe(cand, "model:MLP")))
    _check_shape(form)
    assert [(i["name"], i["path"], i["shape"]) for i in form["inputs"]] == [("x", "inputs.args[0]", [])]
    assert form["inputs"][0]["unknown"] and form["needs"]
    assert [(f["name"], f["type"], f["default"]) for f in form["fields"]] == [("width", "int", 8)]
    assert form["symbol"]["qualname"] == "MLP"


def test_a_saved_value_is_value_and_the_class_default_stays_default(tmp_path):
    cand = _mlp()
    recipe = draft_recipe(cand, "model:MLP")
    recipe["init"]["kwargs"] = {"width": 16}
    recipe["inputs"]["args"] = [{"kind": "tensor", "shape": [], "dtype": "float32", "generator": {"kind": "zeros"}}]
    form = setup_form(SetupContext(tmp_path, "file:///ws/model.py", cand, "mlp", recipe))
    _check_shape(form)
    (width,) = form["fields"]
    assert (width["default"], width["value"], width["required"]) == (8, 16, False)
    # A saved shape [] is a scalar, not an unknown shape.
    assert form["inputs"][0]["shape"] == [] and form["inputs"][0]["unknown"] == [] and form["needs"] == []


def test_a_failed_captures_needed_dimensions_become_path_and_message(tmp_path):
    cand = _mlp()
    recipe = draft_recipe(cand, "model:MLP")
    recipe["inputs"]["args"] = [{"kind": "tensor", "shape": [2, "batch"], "dtype": "float32", "generator": {"kind": "normal"}}]
    # What capture/session/runner.py puts in failure.details["needs"] (NeededDim.to_dict()).
    needed = [{"section": "inputs", "input": "args[0]", "path": "profiles.my.prof.inputs.args[0]", "axis": 1,
               "name": "batch", "shape": [2, "batch"], "dtype": "float32"}]
    form = setup_form(SetupContext(tmp_path, "file:///ws/model.py", cand, "my.prof", recipe, needed))
    _check_shape(form)
    assert form["needs"] == [{"path": "inputs.args[0].shape", "message": "x: dimension 1 (batch) of shape [2, batch] is unknown"}]
    assert form["inputs"][0]["unknown"] == ["batch"]


def test_literal_annotations_become_choices(tmp_path):
    cand = _mlp(setup_fields=[
        {"name": "act", "annotation": "Literal['relu', 'gelu']", "default": "'gelu'", "default_value": "gelu", "required": False},
        {"name": "heads", "annotation": "typing.Literal[1, 2, 4]", "default": None, "default_value": None, "required": True},
    ])
    form = setup_form(SetupContext(tmp_path, "file:///ws/model.py", cand, "MLP", draft_recipe(cand, "model:MLP")))
    _check_shape(form)
    act, heads = form["fields"]
    assert (act["type"], act["choices"], act["default"]) == ("str", ["relu", "gelu"], "gelu")
    assert (heads["type"], heads["choices"], heads["required"]) == ("int", [1, 2, 4], True)


def test_the_recipe_rules_error_paths_land_on_the_forms_controls(tmp_path):
    """Validation errors from the save hook carry paths the app matches to a control
    (longest prefix): ``inputs.args[0].shape``, ``inputs.args[0].dtype``, ``init.kwargs.width``."""
    cand = _mlp()
    form = setup_form(SetupContext(tmp_path, "file:///ws/model.py", cand, "MLP", draft_recipe(cand, "model:MLP")))
    controls = [i["path"] + suffix for i in form["inputs"] for suffix in (".shape", ".dtype", ".generator")]
    controls += [f["path"] for f in form["fields"]]
    norm = lambda p: re.sub(r"\[(\w+)\]", r".\1", p)  # noqa: E731 - as setup.js's controlFor
    backends = RealBackends()
    good = {**form["recipe"], "inputs": {"args": [{"kind": "tensor", "shape": [2, 3], "dtype": "float32",
                                                   "requires_grad": False, "generator": {"kind": "normal"}}], "kwargs": {}}}
    bad_shape = {**good, "inputs": {"args": [{**good["inputs"]["args"][0], "shape": [2, -3]}], "kwargs": {}}}
    bad_dtype = {**good, "inputs": {"args": [{**good["inputs"]["args"][0], "dtype": "float31"}], "kwargs": {}}}
    bad_width = {**good, "init": {"args": [], "kwargs": {"width": {"nested": 1}}}}
    for recipe, want in ((bad_shape, "inputs.args[0].shape"), (bad_dtype, "inputs.args[0].dtype"), (bad_width, "init.kwargs.width")):
        (error,) = backends.save_profile(tmp_path, "MLP", recipe)
        assert error["message"]
        best = max((c for c in controls if norm(error["path"]) == norm(c) or norm(error["path"]).startswith(norm(c) + ".")),
                   key=len, default=None)
        assert best == want, error
    assert backends.save_profile(tmp_path, "MLP", good) == []


# ------------------------------------------------------------------ the real thing, in Chromium


@pytest_asyncio.fixture
async def session(tmp_path, config_dir):
    ws = make_workspace(tmp_path / "ws", {"model.py": SPEC_MLP})
    s = await start_session(ws, config_dir, editor="neovim", server=REAL_SERVER)
    yield s
    await stop_session(s)


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.browser
@pytest.mark.jax
@pytest.mark.skipif(not HAS_JAX, reason="needs jax and flax")
@pytest.mark.skipif(CHROMIUM is None, reason="Debian's Chromium is not installed (apt-get install chromium)")
async def test_open_as_graph_without_a_profile_in_a_real_browser(session, tmp_path):
    async_api = pytest.importorskip("playwright.async_api", reason="playwright is not installed")
    shots = Path(os.environ.get("TENSORVIZ_SCREENSHOTS") or tmp_path / "shots")
    shots.mkdir(parents=True, exist_ok=True)
    recipes = session.workspace / ".tensorviz" / "recipes.toml"
    assert not recipes.exists()

    session.open("model.py")
    lenses = await session.lenses("model.py")
    assert [(l.command.title, l.command.arguments[0]["symbol"]) for l in lenses] == [("Open as Graph", "MLP")]
    session.answer("Trust Workspace")
    result = await session.execute(lenses[0].command.command, *lenses[0].command.arguments)
    assert result["ok"] is True and result["setup"] is True, session.logs()
    shown = session.client.shown_documents[-1]
    assert shown.external is True and shown.uri == result["url"]

    async with async_api.async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page(viewport={"width": 1400, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            await page.goto(shown.uri)

            # 1. The setup form, not "Could not load the graph".
            await page.locator("#setup").wait_for(state="visible", timeout=30_000)
            await page.wait_for_function("() => window.tensorviz && window.tensorviz.ready")
            await page.screenshot(path=str(shots / "1-setup-form.png"))
            assert await page.evaluate("() => window.tensorviz.error") is None
            assert await page.locator("[data-banner=load]").count() == 0
            assert await page.locator("#empty").is_visible()
            assert "no graph yet" in (await page.locator("#empty").inner_text()).lower()
            assert await page.locator("[data-field=width] input").input_value() == "8"
            shape = page.locator("[data-input=x] input[name=shape]")
            assert await shape.get_attribute("aria-invalid") == "true"
            assert await shape.input_value() == ""
            assert "needed" in await page.locator("[data-input=x]").inner_text()
            assert "x" in await page.locator("#setup-needs").inner_text()

            # 2. Fill in float32 [2, 3] and press "Save & capture".
            await shape.fill("2, 3")
            await page.select_option("[data-input=x] select[name=dtype]", "float32")
            assert await shape.get_attribute("aria-invalid") is None
            await page.screenshot(path=str(shots / "2-filled.png"))
            await page.click("#setup-save")
            await page.locator("[data-banner=progress]").wait_for(timeout=30_000)
            await page.screenshot(path=str(shots / "3-capturing.png"))

            # 3. The capture is ready: the page opens it and paints the graph.
            await page.wait_for_url(re.compile(r"\?capture=\d+"), timeout=180_000)
            await page.wait_for_function("() => window.tensorviz && window.tensorviz.ready", timeout=60_000)
            await page.wait_for_function("() => window.tensorviz.firstPaintMs !== null", timeout=60_000)
            await page.wait_for_timeout(200)
            await page.screenshot(path=str(shots / "4-graph.png"))
            assert await page.evaluate("() => window.tensorviz.error") is None, session.logs()
            assert await page.locator("#empty").is_hidden()
            assert await page.locator("[data-banner=failure]").count() == 0
            painted = await page.evaluate(
                """async () => {
                    await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
                    const c = document.getElementById('graph');
                    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                    let n = 0;
                    for (let i = 0; i < d.length; i += 4 * 7) {
                      if (Math.abs(d[i] - d[0]) + Math.abs(d[i + 1] - d[1]) + Math.abs(d[i + 2] - d[2]) > 30) n++;
                    }
                    return n;
                }"""
            )
            assert painted > 1000
            assert "MLP" in await page.locator("#title").inner_text()
            keys = await page.evaluate("() => window.tensorviz.keys()")
            assert any(k.startswith("n") for k in keys) and any(k.startswith("g") for k in keys), keys
            # A group is laid out on screen, with its label: the traced program's scope.
            rect = await page.evaluate("(k) => window.tensorviz.itemRect(k)", next(k for k in keys if k.startswith("g")))
            assert rect and rect["w"] > 40 and rect["h"] > 20
            assert errors == []
        finally:
            await browser.close()

    # 4. The profile is saved where the spec says, as the form described it.
    text = recipes.read_text()
    profiles = tomllib.loads(text)["profiles"]
    assert list(profiles) == ["MLP"], text
    mlp = profiles["MLP"]
    assert mlp["framework"] == "jax" and mlp["model"] == "model:MLP"
    assert mlp["inputs"]["args"][0]["shape"] == [2, 3] and mlp["inputs"]["args"][0]["dtype"] == "float32"
    assert mlp["init"]["kwargs"] == {"width": 8}


# ------------------------------------------------------------------ two models: the page's own profile


@pytest_asyncio.fixture
async def two_models(tmp_path, config_dir):
    from .conftest import SPEC_NET, SPEC_RECIPE

    ws = make_workspace(tmp_path / "ws2", {"model.py": SPEC_NET, "mlp.py": SPEC_MLP, ".tensorviz/recipes.toml": SPEC_RECIPE})
    s = await start_session(ws, config_dir, editor="neovim", server=REAL_SERVER)
    yield s
    await stop_session(s)


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.browser
@pytest.mark.jax
@pytest.mark.skipif(not HAS_JAX, reason="needs jax and flax")
@pytest.mark.skipif(CHROMIUM is None, reason="Debian's Chromium is not installed (apt-get install chromium)")
async def test_setup_and_capture_again_on_a_graph_page_act_on_that_graph(two_models, tmp_path):
    """``MLP``'s form was opened last; on ``net``'s graph page (profile ``jax_example``),
    Setup shows ``net``'s form and Save & capture captures ``net``, not ``MLP``."""
    async_api = pytest.importorskip("playwright.async_api", reason="playwright is not installed")
    s = two_models
    s.open("model.py")
    s.open("mlp.py")
    s.answer("Trust Workspace")
    setup = await s.execute("tensorviz.openGraph", {"uri": s.uri("mlp.py"), "symbol": "MLP"})
    assert setup["ok"] is True and setup["setup"] is True
    net = await s.execute("tensorviz.captureProfile", "jax_example")
    assert net["ok"] is True, s.logs()

    async with async_api.async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page(viewport={"width": 1400, "height": 900})
            await page.goto(net["url"])
            await page.wait_for_function("() => window.tensorviz && window.tensorviz.ready", timeout=60_000)
            assert "net" in await page.locator("#title").inner_text()
            await page.locator("#btn-setup").wait_for(state="visible", timeout=30_000)
            await page.click("#btn-setup")
            await page.locator("#setup").wait_for(state="visible")
            assert await page.locator("#setup-name").input_value() == "jax_example"
            assert "model:net" in await page.locator("#setup-title").inner_text()
            n = s.log_count("captured net:")
            await page.click("#setup-save")
            await s.logged("captured net:", after=n, timeout=180)
            assert "capturing MLP" not in s.logs()
        finally:
            await browser.close()
