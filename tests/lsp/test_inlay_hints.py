"""Inlay hints and the hover on assigned names, computed on real captures in this process
(Torch: measured; JAX: traced, a ``scan`` body as one traced iteration), placed on the
captured text and on edited text. The same flows over stdio are in
``test_inlay_hints_lsp.py``."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from capture.graph import graphfile
from capture_workspace import forget_workspace_modules, profile_table, run_framework, tensor, write
from hint_models import CNN
from tensorviz_lsp.backends import Pos, Span
from tensorviz_lsp.features import assigned_names
from tensorviz_lsp.features.captured_lines import FileLines, line_map
from tensorviz_lsp.records import Record
from tensorviz_lsp.features.hover import returned_values, value_of
from tensorviz_lsp.features.inlay_hints import compute_hints
from tensorviz_lsp.features.line_values import hint_label
from tensorviz_lsp.features.show_in_graph import Hit, summary
from capture.analysis.lines import LineIndex
from capture.analysis.analysis import Analysis

HAS_TORCH = importlib.util.find_spec("torch") is not None
HAS_JAX = importlib.util.find_spec("jax") is not None

RNN = '''
import jax
import jax.numpy as jnp


def rnn(h0, xs, w):
    def step(h, x):
        h = jnp.tanh(h @ w + x)
        return h, h.mean()

    h, ys = jax.lax.scan(step, h0, xs)
    h = jax.lax.fori_loop(0, 3, lambda i, c: c * 0.5, h)
    h = jax.lax.cond(h.sum() > 0, lambda a: a * 2, lambda a: a - 1, h)
    return jnp.concatenate([h, ys])
'''


class Lines:
    """The part of CapturedLines that hints read: one capture's lines of one file."""

    def __init__(self, rec: Record, idx: LineIndex, rel: str, captured: str) -> None:
        self.rec, self.idx, self.rel, self.captured = rec, idx, rel, captured.splitlines()

    def file_lines(self, path, text=None):
        return [FileLines(self.rec, self.idx.file(self.rel), line_map(self.captured, text.splitlines()))]


def _capture(fw, root: Path, rel: str, source: str, table: dict):
    write(root, {rel: source})
    try:
        cap, _ = run_framework(fw, root, table, None)
    finally:
        forget_workspace_modules(root)
    cap = graphfile.decode(graphfile.encode(cap))  # what the language server holds
    rec = Record(root, "p", (root / rel).as_uri(), "CNN", cap, {rel}, Span(Pos(0, 0), Pos(0, 1)), capture_id=1)
    text = (root / rel).read_text()
    return Lines(rec, LineIndex.build(Analysis(cap)), rel, text), text


def line_no(text: str, needle: str) -> int:
    """0-based line of the first line containing ``needle``."""
    return next(i for i, line in enumerate(text.splitlines()) if needle in line)


def by_line(hints) -> dict[int, tuple[str, str]]:
    return {h.position.line: (h.label, h.tooltip.value) for h in hints}


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    if not HAS_TORCH:
        pytest.skip("needs torch")
    from capture.torch import framework as fw

    root = tmp_path_factory.mktemp("cnn")
    return _capture(fw, root, "cnn.py", CNN, profile_table("cnn:CNN", args=[tensor([2, 3, 8, 8])]))


@pytest.mark.torch
def test_torch_hints_show_measured_values_at_the_end_of_each_line(cnn):
    lines, text = cnn
    path = lines.rec.root / "cnn.py"
    hints = compute_hints(lines, path, text)
    got = by_line(hints)
    src = text.splitlines()
    want = {
        "h = torch.relu(self.stem(x))": "f32[2,8,8,8]",
        "h = F.relu(self.norm(self.conv(x)))": "f32[2,8,8,8] ×3",
        "return x + h": "f32[2,8,8,8] ×3",
        "h = self.blocks(h)": "f32[2,8,8,8]",
        "pooled = h.mean(dim=(2, 3))": "f32[2,8]",
        "a, b = pooled.chunk(2, dim=1)": "→ f32[2,4] · f32[2,4]",
        "return self.head(pooled), a * b": "→ f32[2,10] · f32[2,4]",
    }
    assert {src[k].strip(): label for k, (label, _) in got.items()} == want
    for h in hints:  # at the end of the line's text, set off from it
        assert h.position.character == len(src[h.position.line]) and h.padding_left
    stem = got[line_no(text, "self.stem(x))")][1]
    assert stem.startswith("**TensorViz** · profile `p` (CNN, PyTorch), captured at ")
    # measured after the relu: nothing below 0; 2·8·8·8 float32 values are 4 KiB
    m = re.search(r"- `f32\[2,8,8,8\]` · 4 KiB · min (\S+) · max (\S+) · mean (\S+) · std (\S+) · NaN 0 · Inf 0", stem)
    assert m and float(m.group(1)) == 0.0 and float(m.group(2)) > 0, stem
    # what the call costs, beside its op count (issue 35): the stem's conv and relu
    cost = re.search(r"2 ops behind it \(([\d.]+) kFLOPs · ([\d.]+) KiB moved · (\d+) params; "
                     r"a multiply-add counts 2 FLOPs, bytes unfused\)\. Measured by running the model \(PyTorch\)\.", stem)
    assert cost, stem
    assert int(cost.group(3)) == 8 * 3 * 3 * 3 + 8  # the stem's weight and bias
    block = got[line_no(text, "self.norm(self.conv(x))")][1]
    assert "the line ran 3× (the first call is shown, in `blocks.0`)" in block, block
    assert "As of the last capture" not in block


@pytest.mark.torch
def test_torch_hints_after_edits_move_go_stale_and_leave_changed_lines(cnn):
    lines, text = cnn
    path = lines.rec.root / "cnn.py"
    src = text.splitlines()
    k = [i for i, s in enumerate(src) if s.strip() == "def forward(self, x):"][1]  # CNN.forward
    edited = src[:k] + ["    # a comment above the forward"] + src[k:]
    pooled = next(i for i, s in enumerate(edited) if "pooled = h.mean" in s)
    edited[pooled] = edited[pooled].replace("h.mean", "h.amax")
    got = by_line(compute_hints(lines, path, "\n".join(edited) + "\n"))
    assert pooled not in got, "an edited line loses its hint"
    stem = next(i for i, s in enumerate(edited) if "self.stem(x))" in s)
    assert got[stem][0] == "f32[2,8,8,8] (stale)"
    assert "**As of the last capture**" in got[stem][1] and "Changed since: `cnn.py`." in got[stem][1]
    # lines above the edit keep their place; below it, they moved down by one
    block = line_no(text, "self.norm(self.conv(x))")
    assert got[block][0] == "f32[2,8,8,8] ×3 (stale)"
    assert got[line_no(text, "a, b = pooled.chunk") + 1][0] == "→ f32[2,4] · f32[2,4] (stale)"


@pytest.mark.torch
def test_hover_on_an_assigned_name_and_on_a_later_use(cnn):
    lines, text = cnn
    path = lines.rec.root / "cnn.py"
    names = assigned_names.parse(text)
    fls = lines.file_lines(path, text)
    ab = line_no(text, "a, b = pooled.chunk")
    col = text.splitlines()[ab].index("b =")
    hit = names.at(ab + 1, col)
    assert hit is not None and (hit.target.index, hit.target.count) == (1, 2)
    said = value_of(fls, hit.target, path)
    assert "`b`, assigned on line %d, result 2 of 2:\n- `b`: `f32[2,4]` · float32 · 32 B · min" % (ab + 1) in said, said
    # `h` used in `pooled = h.mean(...)`: the assignment above it, `h = self.blocks(h)`
    use = line_no(text, "pooled = h.mean")
    hit = names.at(use + 1, text.splitlines()[use].index("h.mean"))
    assert hit.is_use and hit.target.first == line_no(text, "h = self.blocks(h)") + 1
    said = value_of(fls, hit.target, path)
    assert "`h`, assigned on line %d:\n- `h`: `f32[2,8,8,8]` · float32 · 4 KiB" % hit.target.first in said, said
    # the `return` keyword: what the line hands back
    ret = line_no(text, "return self.head(pooled), a * b")
    hit = names.at(ret + 1, text.splitlines()[ret].index("return") + 2)
    said = value_of(fls, hit.target, path)
    assert f"`return` on line {ret + 1} hands back:\n- `f32[2,10]` · float32 · 80 B" in said, said
    assert "\n- `f32[2,4]` · float32 · 32 B" in said
    # not a name: nothing
    assert names.at(use + 1, text.splitlines()[use].index("(dim")) is None


@pytest.mark.jax
@pytest.mark.skipif(not HAS_JAX, reason="needs jax")
def test_jax_hints_are_traced_and_a_scan_body_line_is_one_traced_iteration(tmp_path):
    from capture.jax import framework as fw

    table = profile_table("rnn:rnn", framework="jax", args=[tensor([4]), tensor([5, 4]), tensor([4, 4])])
    lines, text = _capture(fw, tmp_path, "rnn.py", RNN, table)
    got = by_line(compute_hints(lines, tmp_path / "rnn.py", text))
    body = got[line_no(text, "h = jnp.tanh(h @ w + x)")]
    assert body[0] == "f32[4]"
    assert "Inside the `scan` body: one iteration, as traced; not executed" in body[1], body[1]
    assert "nothing here was computed" in body[1] and "min" not in body[1]
    outer = got[line_no(text, "h, ys = jax.lax.scan(step, h0, xs)")]
    assert outer[0] == "→ f32[4] · f32[5]"
    assert "Traced by JAX, not measured" in outer[1] and "min" not in outer[1]
    assert got[line_no(text, "return jnp.concatenate")][0] == "f32[9]"
    # the line ran once: its ops inside the loop's and the branches' templates are no
    # extra runs, and the loop's dropped counter is not what it produced
    for needle in ("jax.lax.fori_loop(", "jax.lax.cond("):
        label, tip = got[line_no(text, needle)]
        assert label == "f32[4]", (needle, label)
        assert "also part of an unexecuted control-flow body" in tip, tip


@pytest.mark.parametrize(
    "labels,calls,stale,bad,want",
    [
        pytest.param(["f32[2,8]"], 1, False, None, "f32[2,8]", id="one"),
        pytest.param(["f32[2,8]", "i32[2]"], 1, False, None, "→ f32[2,8] · i32[2]", id="two"),
        pytest.param(["a", "b", "c", "d", "e"], 1, False, None, "→ a · b · c +2", id="plus-n"),
        pytest.param(["f32[2,16]"], 12, False, None, "f32[2,16] ×12", id="repeated"),
        pytest.param(["f32[2,16]"], 12, True, None, "f32[2,16] ×12 (stale)", id="repeated-stale"),
        pytest.param(["f32[2,3]"], 1, True, "NaN", "f32[2,3] ⚠ NaN (stale)", id="nan-stale"),
    ],
)
def test_hint_labels(labels, calls, stale, bad, want):
    assert hint_label(labels, calls, stale, bad) == want


NAN_MODEL = """
import torch
from torch import nn


class Logs(nn.Module):
    def forward(self, x):
        ok = torch.exp(x)
        bad = torch.log(x - 1.0)
        return ok / torch.zeros_like(x), bad
"""


@pytest.mark.torch
def test_a_line_that_made_nan_or_inf_says_so(tmp_path):
    if not HAS_TORCH:
        pytest.skip("needs torch")
    from capture.torch import framework as fw

    table = profile_table("logs:Logs", args=[tensor([2, 3], generator={"kind": "full", "value": 0.5})])
    lines, text = _capture(fw, tmp_path, "logs.py", NAN_MODEL, table)
    got = by_line(compute_hints(lines, tmp_path / "logs.py", text))
    assert got[line_no(text, "ok = torch.exp(x)")][0] == "f32[2,3]"
    label, tip = got[line_no(text, "bad = torch.log")]
    assert label == "f32[2,3] ⚠ NaN" and "no finite values · NaN 6 · Inf 0" in tip, tip
    # `bad` is handed on, not made here: the line made one value, all Inf
    label, tip = got[line_no(text, "return ok / torch.zeros_like(x)")]
    assert label == "f32[2,3] ⚠ Inf" and "no finite values · NaN 0 · Inf 6" in tip, tip


# nanoGPT-style: an eval-mode Dropout on the embedding line (a module call that runs no
# op), and a forward that returns a tensor and None from a line that runs nothing itself.
LM = '''
import torch
from torch import nn
import torch.nn.functional as F


class LM(nn.Module):
    def __init__(self, vocab=11, dim=8):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.drop = nn.Dropout(0.1)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx, targets=None):
        x = self.drop(self.wte(idx) * 2.0)
        if targets is not None:
            logits = self.head(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        else:
            logits = self.head(x[:, [-1], :])
            loss = None
        return logits, loss
'''


@pytest.mark.torch
def test_a_module_call_that_ran_no_op_is_no_run_and_return_hands_back_its_names(tmp_path):
    if not HAS_TORCH:
        pytest.skip("needs torch")
    from capture.torch import framework as fw

    table = profile_table("lm:LM", args=[tensor([2, 5], "int64", generator={"kind": "randint", "low": 0, "high": 11})])
    lines, text = _capture(fw, tmp_path, "lm.py", LM, table)
    path = tmp_path / "lm.py"
    got = by_line(compute_hints(lines, path, text))
    # The Dropout ran no op: the line ran once, not "×2" (issue 30), and is no template.
    label, tip = got[line_no(text, "x = self.drop(")]
    assert label == "f32[2,5,8]", label
    # the embedding (11·8 = 88 parameters, a gather: no FLOPs) and the multiply (80 elements)
    assert "2 ops behind it (80 FLOPs · " in tip and " · 88 params; a multiply-add counts 2 FLOPs" in tip, tip
    assert "). Measured" in tip and "ran 2×" not in tip and "control-flow" not in tip, tip
    # The line's one call holds the Dropout too (what Show in Graph outlines), and the
    # Show in Graph title counts one run: "2 ops", no "×2" (issue 30).
    entry = lines.idx.at("lm.py", line_no(text, "x = self.drop(") + 1)
    (call,) = entry.calls
    names_called = [lines.rec.capture.groups[g].name for g in call.groups]
    assert names_called == ["wte", "drop"] and call.ops == 2, names_called
    assert summary(Hit(lines=None, entry=entry)) == "2 ops"  # type: ignore[arg-type]
    # Hover on `return logits, loss`: the line ran nothing; it hands back `logits`'s value.
    names = assigned_names.parse(text)
    ret = line_no(text, "return logits, loss")
    hit = names.at(ret + 1, text.splitlines()[ret].index("return") + 2)
    fls = lines.file_lines(path, text)
    assert value_of(fls, hit.target, path) is None
    said = returned_values(fls, names, hit.target, path)
    logits = line_no(text, "logits = self.head(x[:, [-1], :])") + 1
    assert f"`return` on line {ret + 1} hands back:\n- `logits`: `f32[2,1,11]` · float32 · 88 B · min" in said, said
    assert f"(line {logits})\n- `loss` (line {logits + 1}): no value captured (not a tensor the model computed)" in said
    assert said.endswith("Measured by running the model (PyTorch).")


def test_assigned_names_tuple_starred_attribute_and_multiline():
    text = (
        "def f(self, z):\n"
        "    first, *rest = z.unbind(0)\n"
        "    self.cache = torch.cat([\n"
        "        z,\n"
        "        z], 1)\n"
        "    return self.cache\n"
    )
    names = assigned_names.parse(text)
    first = names.at(2, 5)
    assert first.target.name == "first" and first.target.index is None  # starred: no place
    cache = names.at(3, text.splitlines()[2].index("cache"))
    assert (cache.target.name, cache.target.first, cache.target.last) == (".cache", 3, 5)
    use = names.at(6, text.splitlines()[5].index("cache"))
    assert use.is_use and use.target.first == 3
    assert assigned_names.parse("x = (\n") is None  # mid-edit: no names, no error


def test_the_vscode_extension_contributes_the_setting():
    pkg = json.loads((Path(__file__).resolve().parents[2] / "editors" / "vscode" / "package.json").read_text())
    prop = pkg["contributes"]["configuration"]["properties"]["tensorviz.inlayHints"]
    assert prop["type"] == "boolean" and prop["default"] is True and prop["scope"] == "resource"


REAL = Path(__file__).resolve().parents[1] / "viewer" / "real_models"


def test_hints_on_the_checked_in_flax_linen_resnet18():
    """The Flax ImageNet-example-style ResNet-18 (tests/viewer/real_models), as captured:
    module calls show their outputs, the block loop its 8 blocks, nothing is measured."""
    cap = graphfile.read(REAL / "captures" / "resnet18_linen.tvg")
    text = (REAL / "resnet18_linen.py").read_text()
    rec = Record(REAL, "resnet", (REAL / "resnet18_linen.py").as_uri(), "ResNet", cap, {"resnet18_linen.py"},
                 Span(Pos(0, 0), Pos(0, 1)), capture_id=1)
    lines = Lines(rec, LineIndex.build(Analysis(cap)), "resnet18_linen.py", text)
    got = by_line(compute_hints(lines, REAL / "resnet18_linen.py", text))
    assert got[line_no(text, 'name="conv_init"')][0] == "f32[1,16,16,8]"
    loop, tip = got[line_no(text, "x = self.block_cls(")]
    assert loop == "f32[1,8,8,8] ×8"
    assert "profile `resnet` (ResNet, JAX)" in tip and "Traced by JAX, not measured" in tip and "min" not in tip
    assert got[line_no(text, "x = jnp.mean(x, axis=(1, 2))")][0] == "f32[1,64]"
    assert all(" ⚠ " not in label for label, _ in got.values())  # nothing measured, nothing flagged
