"""Inlay hints and the hover with shapes over stdio, as an editor meets them: the real
server captures a Torch CNN in the real worker, tells the editor to refresh its hints,
and answers ``textDocument/inlayHint`` and ``textDocument/hover``; edits move, mark and
drop hints; a recapture makes them fresh. The fake-backend flows (settings, clients
without refresh support) run at the end, fast."""

from __future__ import annotations

import asyncio
import importlib.util
import re

import pytest
import pytest_asyncio
from lsprotocol import types

from .conftest import REAL_SERVER, SharedServers, make_workspace, start_session, stop_session
from hint_models import CNN, CNN_RECIPE

from .test_inlay_hints import line_no

# One event loop for the module: its fake-server tests share a server per editor.
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def servers(tmp_path_factory):
    shared = SharedServers(tmp_path_factory.mktemp("user-config"))
    yield shared
    await shared.stop()

HAS_TORCH = importlib.util.find_spec("torch") is not None

async def hints(s, rel: str, lines: int = 10_000) -> dict[int, types.InlayHint]:
    got = await s.client.text_document_inlay_hint_async(
        types.InlayHintParams(
            text_document=types.TextDocumentIdentifier(uri=s.uri(rel)),
            range=types.Range(types.Position(0, 0), types.Position(lines, 0)),
        )
    )
    return {h.position.line: h for h in got or []}


async def tooltip(s, hint: types.InlayHint) -> str:
    """The hint's tooltip: Neovim 0.11 advertises resolveSupport for it, so the server
    leaves it out of the hint and makes it on ``inlayHint/resolve``."""
    if hint.tooltip is None:
        hint = await s.client.inlay_hint_resolve_async(hint)
    return hint.tooltip.value


async def hover(s, rel: str, line: int, character: int) -> str | None:
    got = await s.client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=s.uri(rel)), position=types.Position(line, character))
    )
    return None if got is None else got.contents.value


async def refreshed(s, before: int) -> None:
    async def until():
        while len(s.client.inlay_hint_refreshes) <= before:
            s.client.inlay_hints_refreshed.clear()
            if len(s.client.inlay_hint_refreshes) > before:
                break
            await s.client.inlay_hints_refreshed.wait()

    try:
        await asyncio.wait_for(until(), 60)
    except TimeoutError:
        raise AssertionError(f"no workspace/inlayHint/refresh; log:\n{s.logs()}") from None


@pytest.mark.slow
@pytest.mark.torch
@pytest.mark.skipif(not HAS_TORCH, reason="needs torch")
async def test_torch_cnn_hints_refresh_stale_and_recapture(tmp_path, config_dir):
    text = CNN.lstrip()
    ws = make_workspace(tmp_path / "ws", {"cnn.py": text, ".tensorviz/recipes.toml": CNN_RECIPE})
    s = await start_session(ws, config_dir, editor="neovim", server=REAL_SERVER)
    try:
        s.open("cnn.py")
        assert await hints(s, "cnn.py") == {}, "nothing captured yet: no hints"
        s.answer("Trust Workspace")
        before = len(s.client.inlay_hint_refreshes)
        result = await s.execute("tensorviz.openGraph", {"uri": s.uri("cnn.py"), "symbol": "CNN"}, timeout=180)
        assert result["ok"] is True, s.logs()
        await refreshed(s, before)

        got = await hints(s, "cnn.py")
        src = text.splitlines()
        assert {src[k].strip(): h.label for k, h in got.items()} == {
            "h = torch.relu(self.stem(x))": "f32[2,8,8,8]",
            "h = F.relu(self.norm(self.conv(x)))": "f32[2,8,8,8] ×3",
            "return x + h": "f32[2,8,8,8] ×3",
            "h = self.blocks(h)": "f32[2,8,8,8]",
            "pooled = h.mean(dim=(2, 3))": "f32[2,8]",
            "a, b = pooled.chunk(2, dim=1)": "→ f32[2,4] · f32[2,4]",
            "return self.head(pooled), a * b": "→ f32[2,10] · f32[2,4]",
        }
        stem = got[line_no(text, "self.stem(x))")]
        assert stem.position.character == len(src[stem.position.line]) and stem.padding_left
        assert stem.tooltip is None and stem.data, "resolved on demand (Neovim resolves tooltips)"
        tip = await tooltip(s, stem)
        assert tip.startswith("**TensorViz** · profile `cnn` (CNN, PyTorch), captured at "), tip
        assert re.search(r"`f32\[2,8,8,8\]` · 4 KiB · min 0 · max \S+ · mean \S+ · std \S+ · NaN 0 · Inf 0", tip), tip
        assert re.search(r"2 ops behind it \([\d.]+ kFLOPs · [\d.]+ KiB moved · 224 params; a multiply-add counts 2 "
                         r"FLOPs, bytes unfused\)\. Measured by running the model \(PyTorch\)\.", tip), tip
        block = await tooltip(s, got[line_no(text, "self.norm(self.conv(x))")])
        assert "the line ran 3× (the first call is shown, in `blocks.0`)" in block
        # a range asks for its lines only
        k = line_no(text, "pooled = h.mean")
        part = await s.client.text_document_inlay_hint_async(types.InlayHintParams(
            text_document=types.TextDocumentIdentifier(uri=s.uri("cnn.py")),
            range=types.Range(types.Position(k, 0), types.Position(k, 0))))
        assert [h.label for h in part] == ["f32[2,8]"]

        # hover: `b` of `a, b = …`, and `h` where it is used
        ab = line_no(text, "a, b = pooled.chunk")
        said = await hover(s, "cnn.py", ab, src[ab].index("b ="))
        assert f"`b`, assigned on line {ab + 1}, result 2 of 2:\n- `b`: `f32[2,4]` · float32 · 32 B · min" in said, said
        said = await hover(s, "cnn.py", k, src[k].index("h.mean"))
        assert "`h`, assigned on line %d:\n- `h`: `f32[2,8,8,8]`" % (line_no(text, "h = self.blocks(h)") + 1) in said

        # an edit above: lines below move and are stale, the edited line has none
        edited = list(src)
        fwd = [i for i, line in enumerate(edited) if line.strip() == "def forward(self, x):"][1]
        edited.insert(fwd, "    # the forward pass")
        pooled = next(i for i, line in enumerate(edited) if "pooled = h.mean" in line)
        edited[pooled] = edited[pooled].replace("h.mean", "h.amax")
        before = len(s.client.inlay_hint_refreshes)
        s.replace("cnn.py", "\n".join(edited) + "\n")
        await refreshed(s, before)  # the capture turned stale
        got = await hints(s, "cnn.py")
        assert pooled not in got
        stem = got[next(i for i, line in enumerate(edited) if "self.stem(x))" in line)]
        assert stem.label == "f32[2,8,8,8] (stale)"
        tip = await tooltip(s, stem)
        assert "**As of the last capture**" in tip and "Changed since: `cnn.py`." in tip
        assert got[pooled + 1].label == "→ f32[2,4] · f32[2,4] (stale)"

        # saved and captured again: fresh, and the edited line has its hint back
        before = len(s.client.inlay_hint_refreshes)
        s.save("cnn.py", "\n".join(edited) + "\n")
        result = await s.execute("tensorviz.openGraph", {"uri": s.uri("cnn.py"), "symbol": "CNN"}, timeout=180)
        assert result["ok"] is True, s.logs()
        await refreshed(s, before)
        got = await hints(s, "cnn.py")
        assert got[pooled].label == "f32[2,8]" and got[pooled + 1].label == "→ f32[2,4] · f32[2,4]"
        assert not any("stale" in h.label for h in got.values())
    finally:
        await stop_session(s)


# -- fake backends: settings and clients ----------------------------------------------

FAKE_MODEL = "@jax.jit\ndef net(x):\n    return x\n" + "".join(
    f"y{i} = {i}" + ("  # Größe 😀" if i == 41 else "") + "\n" for i in range(3, 90))
FAKE_RECIPE = """
[profiles.layer]
kind = "model"
framework = "jax"
model = "model.layer4:net"
mode = "eval"
device = "cpu"
grad_enabled = false
seed = 0
init = { args = [], kwargs = {} }
inputs = { args = [{ kind = "tensor", shape = [2, 3], dtype = "float32", requires_grad = false, generator = { kind = "full", value = 1 } }], kwargs = {} }
"""


def fake_workspace(tmp_path):
    # The fake worker's synthetic capture (10 ops) has frames in model/layer3..6.py; the
    # profile's module, model/layer4.py, is its source, with ops on lines 42, 49 and 63.
    return make_workspace(tmp_path / "ws", {"model/layer4.py": FAKE_MODEL, ".tensorviz/recipes.toml": "version = 1\n" + FAKE_RECIPE})


@pytest.mark.parametrize("editor", ["neovim", "vscode"])
async def test_fake_capture_hints_with_and_without_refresh_support(tmp_path, servers, editor):
    s = await servers.enter(fake_workspace(tmp_path), editor=editor)
    try:
        s.open("model/layer4.py")
        await s.execute("tensorviz.trustWorkspace")
        result = await s.execute("tensorviz.openGraph", {"uri": s.uri("model/layer4.py"), "symbol": "net"})
        assert result["ok"] is True, s.logs()
        got = await hints(s, "model/layer4.py")
        assert sorted(got) == [41, 48, 62]
        assert all(h.label.startswith("f32[128") for h in got.values())
        # at the end of the line, in the unit the client negotiated (Neovim: UTF-8 bytes)
        line = FAKE_MODEL.splitlines()[41]
        assert line.endswith("😀")
        width = len(line.encode("utf-8")) if editor == "neovim" else len(line.encode("utf-16-le")) // 2
        assert got[41].position.character == width and got[48].position.character == len("y48 = 48")
        first = next(iter(got.values()))
        if editor == "neovim":  # advertises workspace.inlayHint.refreshSupport and resolveSupport
            await refreshed(s, 0)  # a request of its own: it may come after openGraph's answer
            assert len(s.client.inlay_hint_refreshes) == 1
            assert first.tooltip is None
        else:  # the recorded VS Code capabilities advertise neither: nothing is sent, tooltips inline
            assert s.client.inlay_hint_refreshes == []
            assert first.tooltip is not None
        assert "Traced by JAX, not measured" in await tooltip(s, first)
    finally:
        await servers.leave(s)


async def test_the_setting_turns_hints_off(tmp_path, servers):
    ws = fake_workspace(tmp_path)
    s = await servers.enter(ws, editor="neovim", configuration={"tensorviz": {"inlayHints": False}})
    try:
        s.open("model/layer4.py")
        await s.execute("tensorviz.trustWorkspace")
        result = await s.execute("tensorviz.openGraph", {"uri": s.uri("model/layer4.py"), "symbol": "net"})
        assert result["ok"] is True, s.logs()
        assert await hints(s, "model/layer4.py") == {}
        s.client.set_configuration({"tensorviz": {"inlayHints": True}}, scope_uri=ws.as_uri())
        before = len(s.client.inlay_hint_refreshes)
        s.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
        await refreshed(s, before)
        assert await hints(s, "model/layer4.py")
    finally:
        await servers.leave(s)



async def test_two_profiles_of_one_file_give_one_hint_per_line_naming_the_other(tmp_path, servers):
    ws = fake_workspace(tmp_path)
    recipes = ws / ".tensorviz" / "recipes.toml"
    recipes.write_text(recipes.read_text() + FAKE_RECIPE.replace("profiles.layer", "profiles.again"))
    s = await servers.enter(ws, editor="vscode")
    try:
        s.open("model/layer4.py")
        await s.execute("tensorviz.trustWorkspace")
        for profile in ("layer", "again"):
            result = await s.execute("tensorviz.captureProfile", profile)
            assert result["ok"] is True, s.logs()
        got = await hints(s, "model/layer4.py")
        assert sorted(got) == [41, 48, 62]  # once per line, not once per profile
        tip = got[41].tooltip.value
        assert tip.startswith("**TensorViz** · profile `again`"), tip  # the newest capture's
        assert re.search(r"Also run by profile `layer` \(captured at [\d:]+\): the same values", tip), tip
    finally:
        await servers.leave(s)


async def test_hover_on_an_assigned_name_and_on_a_candidate(tmp_path, servers):
    s = await servers.enter(fake_workspace(tmp_path), editor="neovim")
    try:
        s.open("model/layer4.py")
        assert await hover(s, "model/layer4.py", 41, 1) is None, "nothing captured yet"
        await s.execute("tensorviz.trustWorkspace")
        result = await s.execute("tensorviz.captureProfile", "layer")
        assert result["ok"] is True, s.logs()
        # line 42 of model/layer4.py is `y41 = 41`, where the synthetic capture ran ops
        said = await hover(s, "model/layer4.py", 41, 1)
        assert said.startswith("**TensorViz** · profile `layer` (net, JAX), captured at "), said
        assert "`y41`, assigned on line 42:\n- `y41`: `f32[128,128]` · float32" in said, said
        assert "Traced by JAX, not measured" in said
        assert await hover(s, "model/layer4.py", 42, 1) is None  # `y42 = 42`: no ops there
        # the candidate's name: its own hover, unchanged
        net = await hover(s, "model/layer4.py", 1, 5)
        assert net.startswith("**TensorViz** · `net`: JAX function (jax)") and "Profile `layer`" in net
        assert "assigned on line" not in net
    finally:
        await servers.leave(s)


async def test_a_changed_profile_marks_the_hints_stale_and_refreshes_them(tmp_path, servers):
    ws = fake_workspace(tmp_path)
    s = await servers.enter(ws, editor="neovim")
    try:
        s.open("model/layer4.py")
        await s.execute("tensorviz.trustWorkspace")
        result = await s.execute("tensorviz.captureProfile", "layer")
        assert result["ok"] is True, s.logs()
        assert [h.label for h in (await hints(s, "model/layer4.py")).values()] == ["f32[128,128]"] * 3
        before = len(s.client.inlay_hint_refreshes)
        recipes = ws / ".tensorviz" / "recipes.toml"
        recipes.write_text(recipes.read_text().replace("shape = [2, 3]", "shape = [2, 5]"))
        s.disk_changed(".tensorviz/recipes.toml")
        await refreshed(s, before)  # the graph turned stale: the editor is told
        got = await hints(s, "model/layer4.py")
        assert sorted(got) == [41, 48, 62], "the file itself did not change: every line keeps its hint"
        assert [h.label for h in got.values()] == ["f32[128,128] (stale)"] * 3
        tip = await tooltip(s, got[41])
        assert "Changed since: .tensorviz/recipes.toml (profile layer changed)." in tip, tip
    finally:
        await servers.leave(s)
