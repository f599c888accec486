"""End to end over stdio with the real pieces: discovery, recipes, the capture worker
(JAX and PyTorch, in this interpreter or a throwaway one) and the loopback viewer
server, with the recorded client capabilities of Neovim 0.11 and VS Code."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import urllib.error
import urllib.request

import pytest
import pytest_asyncio
from lsprotocol import types

from interpreters import make_venv
from processes import exited_async

from .conftest import DIAGNOSTICS, REAL_SERVER, SPEC_NET, SPEC_RECIPE, make_workspace, start_session, stop_session

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]

HAS_JAX = importlib.util.find_spec("jax") is not None and importlib.util.find_spec("flax") is not None
HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_jax = [pytest.mark.jax, pytest.mark.skipif(not HAS_JAX, reason="needs jax and flax")]


def _get(url: str, method: str = "GET", body: dict | None = None) -> tuple[int, bytes]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""


def _split(url: str) -> tuple[str, str, str]:
    """``http://127.0.0.1:P/TOKEN/?capture=N`` → (origin + '/', token, N)."""
    base, _, query = url.partition("?")
    origin, token = base.rstrip("/").rsplit("/", 1)
    return origin + "/", token, query.partition("=")[2]


@pytest_asyncio.fixture(params=["neovim", "vscode"])
async def real(request, spec_workspace, config_dir):
    s = await start_session(spec_workspace, config_dir, editor=request.param, server=REAL_SERVER)
    yield s
    await stop_session(s)


async def test_lenses_on_the_spec_examples(real):
    real.open("model.py")
    real.open("mlp.py")
    net = await real.lenses("model.py")
    assert [(l.command.title, l.range.start.line, l.range.start.character) for l in net] == [
        ("Open as Graph (jax_example)", 4, 4)
    ]
    mlp = await real.lenses("mlp.py")
    assert [(l.command.title, l.range.start.line) for l in mlp] == [("Open as Graph", 2)]
    assert list(mlp[0].command.arguments)[0]["symbol"] == "MLP"


async def test_lenses_follow_an_edit(real):
    real.open("model.py")
    text = (real.workspace / "model.py").read_text()
    real.replace("model.py", text + "\n\n@jax.jit\ndef other(y):\n    return jnp.sin(y)\n")
    lenses = await real.lenses("model.py")
    assert [l.command.arguments[0]["symbol"] for l in lenses] == ["net", "other"]


async def test_untrusted_refusal_runs_nothing(real):
    real.open("model.py")
    real.answer("Cancel")
    result = await real.execute("tensorviz.openGraph", {"uri": real.uri("model.py"), "symbol": "net"})
    assert result["reason"] == "untrusted"
    assert real.client.shown_documents == []
    assert not (real.config_dir / "trust.json").exists()


async def test_dirty_buffer_refusal(real):
    real.answer("Trust Workspace")
    real.open("model.py")
    real.replace("model.py", SPEC_NET.replace("(3, 4)", "(3, 8)"))
    result = await real.execute("tensorviz.openGraph", {"uri": real.uri("model.py"), "symbol": "net"})
    assert result["reason"] == "unsaved"
    assert any("save model.py first" in m for m in real.messages())
    assert real.client.shown_documents == []


async def test_recipe_error_diagnostic_with_its_line(real):
    bad = SPEC_RECIPE.replace('dtype = "float32"', 'dtype = "float31"')
    (real.workspace / ".tensorviz" / "recipes.toml").write_text(bad)
    real.disk_changed(".tensorviz/recipes.toml")
    diags = await real.wait_for(lambda: real.diagnostics(".tensorviz/recipes.toml"), on=DIAGNOSTICS, what="recipe diagnostic")
    line = next(i for i, l in enumerate(bad.splitlines()) if "float31" in l)
    assert diags[0].range.start.line == line
    assert "dtype" in diags[0].message and diags[0].severity == types.DiagnosticSeverity.Error
    # Fixed in the editor (unsaved): checked as typed.
    real.open(".tensorviz/recipes.toml", bad)
    real.replace(".tensorviz/recipes.toml", SPEC_RECIPE)
    await real.wait_for(lambda: not real.diagnostics(".tensorviz/recipes.toml"), on=DIAGNOSTICS, what="cleared")


@pytest.mark.parametrize("_", [None], ids=["jax"])
@pytest.mark.jax
@pytest.mark.skipif(not HAS_JAX, reason="needs jax and flax")
async def test_capture_url_serves_graph_reveal_and_stale(real, _):
    real.open("model.py")
    real.answer("Trust Workspace")
    result = await real.execute("tensorviz.openGraph", {"uri": real.uri("model.py"), "symbol": "net"}, timeout=180)
    assert result["ok"] is True, real.logs()
    url = result["url"]
    shown = real.client.shown_documents[-1]
    assert shown.uri == url and shown.external is True
    origin, token, cid = _split(url)
    status, body = await asyncio.to_thread(_get, url)
    assert status == 200 and b"<html" in body.lower()
    status, body = await asyncio.to_thread(_get, f"{origin}{token}/api/capture?capture={cid}")
    capture = json.loads(body)
    assert capture["backend"] == "jaxpr" and capture["counts"]["nodes"] > 0 and capture["failure"] is None
    assert (await asyncio.to_thread(_get, f"{origin}api/capture"))[0] == 403
    assert (await asyncio.to_thread(_get, origin))[0] == 403
    reports = [r for rs in real.client.progress_reports.values() for r in rs]
    assert any(isinstance(r, types.WorkDoneProgressBegin) and r.cancellable for r in reports)

    # Reveal: the viewer asks for a node's frame; the editor is shown that line.
    status, body = await asyncio.to_thread(_get, f"{origin}{token}/api/nodes?offset=0&limit=50&capture={cid}")
    frame = None
    for node in json.loads(body).get("nodes", json.loads(body).get("items", [])):
        status, detail = await asyncio.to_thread(_get, f"{origin}{token}/api/node?id={node['id']}&capture={cid}")
        frame = json.loads(detail).get("frame")
        if frame and frame["file"].endswith("model.py"):
            break
    assert frame is not None and frame["file"].endswith("model.py"), "a node of net carries its source frame"
    n = len(real.client.shown_documents)
    status, body = await asyncio.to_thread(_get, f"{origin}{token}/api/reveal", "POST", {"frame": frame})
    assert status == 200 and json.loads(body)["handled"] == "editor"
    shown = real.client.shown_documents[n]
    assert shown.uri == real.uri("model.py") and shown.take_focus is True and not shown.external
    assert shown.selection.start.line == frame["line"] - 1
    assert shown.selection.start.character == frame["column"]
    assert frame["line"] == 6  # `return jax.nn.relu(x @ jnp.ones((3, 4)))`

    # Stale after an edit in the buffer; the viewer says so too; a recapture clears it.
    real.replace("model.py", SPEC_NET.replace("(3, 4)", "(3, 5)"))
    diags = await real.wait_for(lambda: real.diagnostics("model.py"), on=DIAGNOSTICS, what="stale diagnostic")
    assert diags[0].code == "stale-graph" and "model.py changed" in diags[0].message
    assert (diags[0].range.start.line, diags[0].range.start.character) == (4, 4)
    status, body = await asyncio.to_thread(_get, f"{origin}{token}/api/capture?capture={cid}")
    assert json.loads(body)["stale"]["files"] == ["model.py"]
    real.save("model.py", SPEC_NET.replace("(3, 4)", "(3, 5)"))
    result = await real.execute("tensorviz.openGraph", {"uri": real.uri("model.py"), "symbol": "net"}, timeout=180)
    assert result["ok"] is True
    await real.wait_for(lambda: not real.diagnostics("model.py"), on=DIAGNOSTICS, what="cleared by recapture")


@pytest.mark.jax
@pytest.mark.skipif(not HAS_JAX, reason="needs jax and flax")
async def test_cancel_kills_the_real_worker(tmp_path, config_dir):
    # The model says where it is stuck on its output, which reaches the editor's log.
    slow = (
        "import os, time\n"
        "print('importing model.py in worker', os.getpid(), flush=True)\n"
        "time.sleep(120)\n" + SPEC_NET
    )
    ws = make_workspace(tmp_path / "ws", {"model.py": slow, ".tensorviz/recipes.toml": SPEC_RECIPE})
    s = await start_session(ws, config_dir, server=REAL_SERVER)
    try:
        await s.execute("tensorviz.trustWorkspace")
        s.open("model.py")
        task = asyncio.ensure_future(s.execute("tensorviz.openGraph", {"uri": s.uri("model.py"), "symbol": "net"}))
        line = await s.logged("importing model.py in worker", timeout=60)
        pid = int(line.rsplit(" ", 1)[1])
        token = next(iter(s.client.progress_reports))
        s.client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
        result = await asyncio.wait_for(task, 60)
        assert result["reason"] == "cancelled"
        assert await exited_async(pid, timeout=20), "the worker was killed"
        assert any("cancelled" in m for m in s.messages())
    finally:
        await stop_session(s)


async def test_dependency_flow_with_an_interpreter_lacking_jax(tmp_path, config_dir):
    bare = make_venv(tmp_path / "bare-venv", see_running_packages=False)  # no jax, no msgpack
    ws = make_workspace(tmp_path / "ws", {"model.py": SPEC_NET, ".tensorviz/recipes.toml": SPEC_RECIPE})
    marker = tmp_path / "installed.txt"
    # The reviewed command, made harmless: it records what it was asked to install.
    fake_pip = [
        sys.executable, "-c",
        f"import sys; print('would install', *sys.argv[1:]); open({str(marker)!r}, 'w').write(' '.join(sys.argv[1:]))",
        "{packages}",
    ]
    s = await start_session(
        ws, config_dir, server=REAL_SERVER,
        init_options={"tensorviz": {"python": str(bare), "installCommand": fake_pip}},
    )
    try:
        await s.execute("tensorviz.trustWorkspace")
        s.open("model.py")
        s.answer("Cancel")
        result = await s.execute("tensorviz.openGraph", {"uri": s.uri("model.py"), "symbol": "net"})
        assert result["reason"] == "dependencies" and result["installed"] is False
        prompt = s.client.prompts[-1].message
        assert str(bare) in prompt and "jax" in prompt
        assert not marker.exists(), "declined: nothing ran"

        s.answer("Install")
        result = await s.execute("tensorviz.openGraph", {"uri": s.uri("model.py"), "symbol": "net"})
        assert marker.exists(), "accepted: the reviewed command ran"
        assert "jax" in marker.read_text().split()
        await s.logged("[install] would install")
        # The fake installed nothing, so the retry still lacks jax: reported, not asked again.
        assert result["ok"] is False and result["reason"] == "dependencies"
        assert any("still missing" in m for m in s.messages())
    finally:
        await stop_session(s)


async def test_default_install_command_shows_interpreter_and_packages(tmp_path, config_dir):
    venv = tmp_path / "bare-venv"
    make_venv(venv, see_running_packages=False)
    ws = make_workspace(tmp_path / "ws", {"model.py": SPEC_NET, ".tensorviz/recipes.toml": SPEC_RECIPE})
    s = await start_session(ws, config_dir, server=REAL_SERVER, init_options={"tensorviz": {"python": str(venv / "bin" / "python")}})
    try:
        await s.execute("tensorviz.trustWorkspace")
        s.open("model.py")
        s.answer("Cancel")
        await s.execute("tensorviz.openGraph", {"uri": s.uri("model.py"), "symbol": "net"})
        prompt = s.client.prompts[-1].message
        assert f"{venv}/bin/python -m pip install" in prompt and "jax" in prompt
    finally:
        await stop_session(s)


@pytest.mark.jax
@pytest.mark.skipif(not HAS_JAX, reason="needs jax and flax")
async def test_setup_form_for_a_symbol_without_profile(real):
    """MLP has no saved profile: the viewer's setup form opens, prefilled from discovery
    (the Linen field ``width``), asks for the input's shape; saving and capturing there
    writes the profile, updates the lens title and produces the graph."""
    real.open("mlp.py")
    real.answer("Trust Workspace")
    result = await real.execute("tensorviz.openGraph", {"uri": real.uri("mlp.py"), "symbol": "MLP"})
    assert result["ok"] is True and result["setup"] is True
    url = result["url"]
    assert real.client.shown_documents[-1].uri == url and real.client.shown_documents[-1].external
    origin, token, _ = _split(url)
    status, body = await asyncio.to_thread(_get, f"{origin}{token}/api/setup")
    assert status == 200, body
    form = json.loads(body)
    assert form["recipe"]["model"] == "mlp:MLP" and form["recipe"]["framework"] == "jax"
    assert [i["name"] for i in form["inputs"]] == ["x"] and form["inputs"][0]["unknown"]
    assert form["needs"], "the unknown shape is asked for"
    assert [(f["name"], f["default"]) for f in form["fields"]] == [("width", 8)]

    recipe = dict(form["recipe"])
    recipe["inputs"] = {"args": [{"kind": "tensor", "shape": [2, 3], "dtype": "float32", "requires_grad": False,
                                  "generator": {"kind": "normal"}}], "kwargs": {}}
    recipe["init"] = {"args": [], "kwargs": {"width": 16}}
    status, body = await asyncio.to_thread(_get, f"{origin}{token}/api/profile", "POST", {"name": "mlp_example", "recipe": recipe})
    assert status == 200 and json.loads(body) == {"ok": True}, body
    assert "[profiles.mlp_example]" in (real.workspace / ".tensorviz" / "recipes.toml").read_text()
    assert "[profiles.jax_example]" in (real.workspace / ".tensorviz" / "recipes.toml").read_text()

    # The save handler queued the recipes check on the server's loop before it answered
    # the POST, so that check runs before this later request: the title is already new.
    lenses = await real.lenses("mlp.py")
    assert lenses[0].command.title == "Open as Graph (mlp_example)"

    status, body = await asyncio.to_thread(_get, f"{origin}{token}/api/capture", "POST", {"profile": "mlp_example"})
    assert status == 200 and json.loads(body)["started"] is True
    # The server logs "captured MLP: N nodes" once the viewer holds the capture.
    await real.logged("captured MLP:", timeout=180)
    status, body = await asyncio.to_thread(_get, f"{origin}{token}/api/capture")
    capture = json.loads(body)
    assert status == 200 and capture["failure"] is None and capture["counts"]["nodes"] > 0, real.logs()


X64_RECIPE = SPEC_RECIPE.replace('dtype = "float32"', 'dtype = "float64"')


@pytest.mark.jax
@pytest.mark.skipif(not HAS_JAX, reason="needs jax and flax")
async def test_capture_env_setting_enables_x64_and_a_changed_profile_is_stale(tmp_path, config_dir, monkeypatch):
    """A float64 input needs JAX_ENABLE_X64=1 in the capture environment: refused without
    the per-folder ``tensorviz.captureEnv`` setting, traced with it. Then the saved profile
    changes on disk: the graph is stale (diagnostic and viewer), and fresh when reverted."""
    from capture.graph import graphfile

    monkeypatch.delenv("JAX_ENABLE_X64", raising=False)
    ws = make_workspace(tmp_path / "ws", {"model.py": SPEC_NET, ".tensorviz/recipes.toml": X64_RECIPE})
    s = await start_session(ws, config_dir, server=REAL_SERVER, configuration={ws.as_uri(): {"tensorviz": {}}})
    try:
        await s.execute("tensorviz.trustWorkspace")
        s.open("model.py")
        result = await s.execute("tensorviz.openGraph", {"uri": s.uri("model.py"), "symbol": "net"}, timeout=180)
        assert result["ok"] is False and "JAX_ENABLE_X64=1" in result["message"], result
        diags = await s.wait_for(lambda: s.diagnostics("model.py"), on=DIAGNOSTICS, what="failure diagnostic")
        assert "JAX_ENABLE_X64" in diags[0].message and "tensorviz.captureEnv" in diags[0].message

        s.client.set_configuration({"tensorviz": {"captureEnv": {"JAX_ENABLE_X64": "1"}}}, scope_uri=ws.as_uri())
        # The server pulls the new configuration (workspace/configuration), applies it,
        # then reports each folder's interpreter again: that report says it applied.
        reports = s.log_count("capture interpreter for")
        s.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
        await s.logged("capture interpreter for", after=reports)
        result = await s.execute("tensorviz.openGraph", {"uri": s.uri("model.py"), "symbol": "net"}, timeout=180)
        assert result["ok"] is True, s.logs()
        await s.wait_for(lambda: not s.diagnostics("model.py"), on=DIAGNOSTICS, what="failure cleared")
        capture = graphfile.read(result["file"])
        assert capture.failure is None and {v.dtype for v in capture.values} >= {"float64"}
        assert capture.recipe["inputs"]["args"][0]["dtype"] == "float64"

        # The saved setup changes on disk: the graph is stale; reverting makes it fresh.
        recipes = ws / ".tensorviz" / "recipes.toml"
        recipes.write_text(X64_RECIPE.replace("shape = [2, 3]", "shape = [5, 3]"))
        s.disk_changed(".tensorviz/recipes.toml")
        label = ".tensorviz/recipes.toml (profile jax_example changed)"
        diags = await s.wait_for(lambda: s.diagnostics("model.py"), on=DIAGNOSTICS, what="stale diagnostic")
        assert diags[0].code == "stale-graph" and label in diags[0].message
        origin, token, cid = _split(result["url"])
        status, body = await asyncio.to_thread(_get, f"{origin}{token}/api/capture?capture={cid}")
        assert json.loads(body)["stale"] == {"files": [label]}
        recipes.write_text(X64_RECIPE)
        s.disk_changed(".tensorviz/recipes.toml")
        await s.wait_for(lambda: not s.diagnostics("model.py"), on=DIAGNOSTICS, what="fresh after revert")
        status, body = await asyncio.to_thread(_get, f"{origin}{token}/api/capture?capture={cid}")
        assert json.loads(body)["stale"] is None
    finally:
        await stop_session(s)


# -- PyTorch: the framework a recipe gets when it names none ---------------------------

TORCH_MODEL = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, width: int = 4):
        super().__init__()
        self.fc = nn.Linear(3, width)

    def forward(self, x):
        return torch.relu(self.fc(x))
"""

TORCH_RECIPE = """\
version = 1

[profiles.torch_example]
kind = "model"
model = "model:Net"
mode = "eval"
device = "cpu"
grad_enabled = false
seed = 0
init = { args = [], kwargs = { width = 4 } }
inputs = { args = [{ kind = "tensor", shape = [2, 3], dtype = "float32", requires_grad = false, generator = { kind = "normal" } }], kwargs = {} }
"""


@pytest.mark.torch
@pytest.mark.skipif(not HAS_TORCH, reason="needs torch")
@pytest.mark.parametrize("editor", ["neovim", "vscode"])
async def test_torch_module_lens_trust_capture_view_and_reveal(tmp_path, config_dir, editor):
    """A torch.nn.Module, as a user meets it: the lens names its saved profile, the
    first capture asks for trust, the eager forward runs in the real worker, the editor
    is shown the viewer's URL, and a node's source link comes back to the editor."""
    ws = make_workspace(tmp_path / "ws", {"model.py": TORCH_MODEL, ".tensorviz/recipes.toml": TORCH_RECIPE})
    s = await start_session(ws, config_dir, editor=editor, server=REAL_SERVER)
    try:
        s.open("model.py")
        (lens,) = await s.lenses("model.py")
        assert lens.command.title == "Open as Graph (torch_example)"
        assert (lens.range.start.line, lens.range.start.character) == (4, 6)
        assert list(lens.command.arguments) == [{"uri": s.uri("model.py"), "symbol": "Net", "profile": "torch_example"}]

        s.answer("Trust Workspace")
        result = await s.execute(lens.command.command, *lens.command.arguments, timeout=180)
        assert result["ok"] is True, s.logs()
        assert len(s.client.prompts) == 1 and "trust" in s.client.prompts[0].message.lower()
        assert (config_dir / "trust.json").exists()
        url = result["url"]
        shown = s.client.shown_documents[-1]
        assert shown.uri == url and shown.external is True
        reports = [r for rs in s.client.progress_reports.values() for r in rs]
        assert isinstance(reports[0], types.WorkDoneProgressBegin) and reports[0].cancellable
        assert isinstance(reports[-1], types.WorkDoneProgressEnd)

        origin, token, cid = _split(url)
        status, body = await asyncio.to_thread(_get, url)
        assert status == 200 and b"<html" in body.lower()
        status, body = await asyncio.to_thread(_get, f"{origin}{token}/api/capture?capture={cid}")
        capture = json.loads(body)
        assert capture["failure"] is None and capture["framework"] == "torch" and capture["backend"] == "torch_eager"
        assert capture["coverage"] == {"scope": "eager_forward", "status": "complete", "reasons": [], "effects": "none"}
        assert capture["recipe"]["model"] == "model:Net" and capture["recipe"]["framework"] == "torch"
        assert capture["outputs"]["label"] == "f32[2,4]" and capture["outputs"]["measured"]["device"] == "cpu"
        assert [src["path"] for src in capture["sources"]] == ["model.py"]
        status, body = await asyncio.to_thread(_get, f"{origin}{token}/api/children?group=-1&capture={cid}")
        (net,) = json.loads(body)["items"]
        assert (net["kind"], net["label"], net["class"]) == ("module", "Net", "Net")
        status, body = await asyncio.to_thread(_get, f"{origin}{token}/api/nodes?offset=0&limit=50&capture={cid}")
        nodes = json.loads(body)["nodes"]
        assert [n["op"] for n in nodes] == ["aten::t", "aten::addmm", "aten::relu"]

        # Reveal the relu: the editor is shown the forward's line.
        relu = nodes[-1]["id"]
        status, body = await asyncio.to_thread(_get, f"{origin}{token}/api/node?id={relu}&capture={cid}")
        frame = json.loads(body)["frame"]
        assert (frame["file"], frame["line"], frame["function"]) == ("model.py", 11, "Net.forward")
        status, body = await asyncio.to_thread(_get, f"{origin}{token}/api/reveal", "POST", {"frame": frame})
        assert status == 200 and json.loads(body)["handled"] == "editor"
        shown = s.client.shown_documents[-1]
        assert shown.uri == s.uri("model.py") and shown.take_focus is True and not shown.external
        assert shown.selection.start.line == 10

        # An edit makes it stale, in the editor and the viewer.
        s.replace("model.py", TORCH_MODEL.replace("torch.relu", "torch.tanh"))
        diags = await s.wait_for(lambda: s.diagnostics("model.py"), on=DIAGNOSTICS, what="stale diagnostic")
        assert diags[0].code == "stale-graph" and "model.py changed" in diags[0].message
        assert (diags[0].range.start.line, diags[0].range.start.character) == (4, 6)
    finally:
        await stop_session(s)


@pytest.mark.jax
@pytest.mark.skipif(not HAS_JAX, reason="needs jax and flax")
async def test_setup_and_capture_again_act_on_the_profile_asked_for(real):
    """Two models: ``net`` (saved profile ``jax_example``) and ``MLP`` (no profile, its
    form opened last). A page showing ``net``'s graph asks ``api/setup?profile=jax_example``
    and gets ``net``'s form, not the folder's last form; "Capture again" there captures
    ``net``; saving ``net``'s form leaves the last form (``MLP``) as it was."""
    real.open("model.py")
    real.open("mlp.py")
    real.answer("Trust Workspace")
    result = await real.execute("tensorviz.openGraph", {"uri": real.uri("mlp.py"), "symbol": "MLP"})
    assert result["ok"] is True and result["setup"] is True
    origin, token, _ = _split(result["url"])
    api = f"{origin}{token}/api"

    status, body = await asyncio.to_thread(_get, f"{api}/setup?profile=jax_example")
    assert status == 200, body
    form = json.loads(body)
    assert form["profile"] == "jax_example" and form["symbol"]["qualname"] == "net", form
    assert form["recipe"]["model"] == "model:net"
    assert [i["name"] for i in form["inputs"]] == ["x"] and form["inputs"][0]["shape"] == [2, 3]
    assert not form["needs"]

    # Without a profile: the last form, as before (the page of a symbol with no graph yet).
    status, body = await asyncio.to_thread(_get, f"{api}/setup")
    assert status == 200 and json.loads(body)["symbol"]["qualname"] == "MLP"
    # A profile nobody saved: no form (the button stays hidden), never another model's.
    status, _ = await asyncio.to_thread(_get, f"{api}/setup?profile=nope")
    assert status == 404

    # Saving net's form (from net's page) does not turn the last form into net.
    status, body = await asyncio.to_thread(_get, f"{api}/profile", "POST", {"name": "jax_example", "recipe": form["recipe"]})
    assert status == 200 and json.loads(body) == {"ok": True}, body
    status, body = await asyncio.to_thread(_get, f"{api}/setup")
    assert json.loads(body)["symbol"]["qualname"] == "MLP"

    # "Capture again" on net's page captures net, and opens no new browser tab.
    shown = len(real.client.shown_documents)
    status, body = await asyncio.to_thread(_get, f"{api}/capture", "POST", {"profile": "jax_example"})
    assert status == 200 and json.loads(body)["started"] is True
    await real.logged("captured net:", timeout=180)
    assert "capturing MLP" not in real.logs()
    assert len(real.client.shown_documents) == shown
    status, body = await asyncio.to_thread(_get, f"{api}/capture")
    capture = json.loads(body)
    assert status == 200 and capture["failure"] is None and capture["recipe"]["name"] == "jax_example", capture.get("recipe")
