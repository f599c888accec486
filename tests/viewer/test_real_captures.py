"""The checked-in real-model captures (``tests/viewer/real_models/captures/*.tvg``).

They were made by ``tests/viewer/real_models/make_captures.py`` from real library code
(Hugging Face ``transformers``' ResNet, GPT-2 and Llama, a Flax Linen ResNet-18 in the style
of Flax's ImageNet example with bound variables, a ViT written the way vit-pytorch writes it). These tests read them with the project's
graph-file reader only: no framework is imported, so they are fast. When one fails
because the format or the capture changed, regenerate the files (see the folder's
README.md) rather than loosening the test.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import msgpack
import pytest

from capture.graph import graphfile
from capture.graph.model import FORMAT_NAME, Capture, tree_leaves
from capture.recipe import RECIPES_FILE, load_recipes_table, profile_from_document
from capture.graph.freshness import file_sha256
from viewer.projection.projection import Projection

REAL = Path(__file__).resolve().parent / "real_models"
CAPTURES = REAL / "captures"
NAMES = ("resnet18_torch", "gpt2_torch", "resnet18_linen", "llama_torch", "vit_torch")
REGENERATE = "regenerate with: python tests/viewer/real_models/make_captures.py"


def load(name: str) -> Capture:
    return graphfile.read(CAPTURES / f"{name}.tvg")


def module_classes(capture: Capture) -> Counter:
    return Counter(g.attrs.get("class") for g in capture.groups if g.kind == "module")


def ops(capture: Capture) -> Counter:
    return Counter(n.op for n in capture.nodes)


def named_values(capture: Capture) -> dict[str, tuple[str, int]]:
    """``{name: (role, uses)}`` for every value the viewer names (values entering from outside)."""
    p = Projection(capture)
    out = {}
    for v in range(len(capture.values)):
        d = p.value(v)
        if d.get("role"):
            out[d["name"]] = (d["role"], d["uses_total"])
    return out


# --------------------------------------------------------------------------- the files


@pytest.mark.parametrize("name", NAMES)
def test_checked_in_file_has_the_current_format_version(name):
    data = (CAPTURES / f"{name}.tvg").read_bytes()
    assert len(data) < 1 << 20, "a checked-in capture should stay well under 1 MB"
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(data)
    head = unpacker.unpack()  # the header: the first of the file's two msgpack objects
    assert head["format"] == FORMAT_NAME
    assert head["version"] == graphfile.FILE_VERSION, (
        f"{name}.tvg is format version {head['version']}, the writer's is {graphfile.FILE_VERSION}: {REGENERATE}")
    capture = load(name)  # the hostile-file reader accepts it whole
    assert capture.failure is None and len(capture.nodes) > 0


@pytest.mark.parametrize("name", NAMES)
def test_capture_matches_its_recipe_and_sources(name):
    """The file was made from the profile and model source that are checked in beside it."""
    capture = load(name)
    doc, _ = load_recipes_table(REAL / RECIPES_FILE)
    recipe = profile_from_document(doc, name)
    assert capture.recipe == recipe.to_dict(), f"the profile {name} changed since {name}.tvg was made: {REGENERATE}"
    assert capture.sources, "a capture records the workspace files it came from"
    for source in capture.sources:
        path = REAL / source.path
        assert path.is_file(), f"{name}.tvg depends on {source.path}, which is gone: {REGENERATE}"
        assert file_sha256(path) == source.sha256, f"{source.path} changed since {name}.tvg was made: {REGENERATE}"


# --------------------------------------------------------------------------- each model


def test_resnet18_torch():
    c = load("resnet18_torch")
    assert (c.framework, c.backend) == ("torch", "torch_eager")
    assert c.coverage.scope == "eager_forward" and c.coverage.status == "complete"
    assert 60 <= len(c.nodes) <= 200
    classes = module_classes(c)
    assert classes["ResNetModel"] == 1 and classes["ResNetEmbeddings"] == 1
    assert classes["ResNetStage"] == 4 and classes["ResNetBasicLayer"] == 8  # ResNet-18: 2 basic blocks × 4 stages
    assert classes["ResNetShortCut"] == 3  # a projection where a stage changes width
    assert ops(c)["aten::convolution"] == 20
    stages = sorted(g.attrs["path"] for g in c.groups if g.attrs.get("class") == "ResNetStage")
    assert stages == [f"encoder.stages.{i}" for i in range(4)]
    (x,) = [c.values[v] for v in tree_leaves(c.inputs)]
    assert (x.shape, x.dtype) == ([1, 3, 32, 32], "float32")
    names = named_values(c)
    assert names["embedder.embedder.convolution.weight"] == ("param", 1)
    assert names["encoder.stages.3.layers.1.layer.1.convolution.weight"][0] == "param"
    assert names["embedder.embedder.normalization.running_mean"][0] == "buffer"
    roles = Counter(role for role, _ in names.values())
    assert roles["param"] == 60 and roles["buffer"] == 40 and roles["input"] == 1


def test_gpt2_torch():
    c = load("gpt2_torch")
    assert (c.framework, c.backend) == ("torch", "torch_eager")
    assert c.coverage.status == "complete"
    assert 350 <= len(c.nodes) <= 700
    classes = module_classes(c)
    assert classes["GPT2LMHeadModel"] == 1 and classes["GPT2Model"] == 1
    assert classes["GPT2Block"] == 12 and classes["GPT2Attention"] == 12 and classes["GPT2MLP"] == 12
    blocks = [g for g in c.groups if g.attrs.get("class") == "GPT2Block"]
    assert [g.attrs["path"] for g in blocks] == [f"transformer.h.{i}" for i in range(12)]
    assert len({g.parent for g in blocks}) == 1, "the 12 blocks are siblings"
    assert ops(c)["aten::native_layer_norm"] == 25  # 2 per block and the final ln_f
    (ids,) = [c.values[v] for v in tree_leaves(c.inputs)]
    assert (ids.shape, ids.dtype) == ([1, 8], "int64")
    (logits,) = [c.values[v] for v in tree_leaves(c.outputs)]
    assert logits.shape == [1, 8, 128]
    names = named_values(c)
    assert names["transformer.h.0.attn.c_attn.weight"][0] == "param"
    assert names["transformer.h.11.mlp.c_proj.bias"][0] == "param"
    assert names["transformer.wte.weight"] == ("param", 2)  # tied: the embedding and the LM head
    roles = Counter(role for role, _ in names.values())
    assert roles["param"] == 148 and roles["input"] == 1


def test_llama_torch():
    c = load("llama_torch")
    assert (c.framework, c.backend) == ("torch", "torch_eager") and c.coverage.status == "complete"
    assert 250 <= len(c.nodes) <= 500
    classes = module_classes(c)
    assert classes["LlamaForCausalLM"] == 1 and classes["LlamaModel"] == 1
    assert classes["LlamaDecoderLayer"] == 4 and classes["LlamaAttention"] == 4 and classes["LlamaRMSNorm"] == 9
    layers = [g for g in c.groups if g.attrs.get("class") == "LlamaDecoderLayer"]
    assert [g.attrs["path"] for g in layers] == [f"model.layers.{i}" for i in range(4)]
    assert len({g.parent for g in layers}) == 1, "the 4 layers are siblings"
    # layer 0 receives the hidden states produced before the rotary cos/sin, the later
    # layers after them: the order a block signature must not depend on
    p = Projection(c)
    for k, g in enumerate(layers):
        made_inside = [v for v in p.index.bin[g.id + 1] if p.index.producer[v] >= 0]
        first = p.index.first[g.id + 1]
        hidden = next(o.value for o in c.nodes[first].inputs if o.value is not None)
        assert hidden == (min(made_inside) if k == 0 else max(made_inside))
    assert ops(c)["aten::alias"] == 1  # Torch hands the logits back through an alias


def test_vit_torch():
    c = load("vit_torch")
    assert (c.framework, c.backend) == ("torch", "torch_eager") and c.coverage.status == "complete"
    classes = module_classes(c)
    assert classes["Attention"] == 12 and classes["FeedForward"] == 12 and classes["Transformer"] == 1
    (transformer,) = [g for g in c.groups if g.attrs.get("class") == "Transformer"]
    pairs = [g for g in c.groups if g.parent == transformer.id and g.kind == "module" and g.attrs.get("class") != "LayerNorm"]
    assert [g.attrs["class"] for g in pairs] == ["Attention", "FeedForward"] * 12
    adds = [n for n in c.nodes if n.group == transformer.id and n.op == "aten::add.Tensor"]
    assert len(adds) == 24, "the residual adds sit in the transformer, between the blocks"


def test_resnet18_linen_with_bound_variables():
    c = load("resnet18_linen")
    assert (c.framework, c.backend) == ("jax", "jaxpr")
    assert c.coverage.scope == "traced_program"
    assert c.meta["model_kind"] == "linen" and c.meta["state"] == "factory_variables"
    assert 180 <= len(c.nodes) <= 400
    # Linen module calls (recorded through nn.intercept_methods) are module groups, as in Torch
    modules = {g.id: g for g in c.groups if g.kind == "module"}
    assert not [g for g in c.groups if g.kind == "scope"]
    (root,) = [g for g in modules.values() if g.parent is None]
    assert (root.name, root.attrs["class"], root.attrs["path"]) == ("ResNet", "ResNet", "")
    blocks = [g for g in modules.values() if g.attrs["class"] == "ResNetBlock"]
    assert [(g.name, g.attrs["path"]) for g in blocks] == [(f"ResNetBlock_{i}", f"ResNetBlock_{i}") for i in range(8)]
    assert {g.parent for g in blocks} == {root.id}, "the 8 blocks are siblings under the model's call"
    assert module_classes(c)["Conv"] == 20 and module_classes(c)["BatchNorm"] == 20
    assert ops(c)["conv_general_dilated"] == 20
    assert {k for k, _ in c.inputs["dict"]} >= {"args", "kwargs", "variables"}
    names = named_values(c)
    roles = Counter(role for role, _ in names.values())
    assert roles["variable"] == 102 and roles["input"] == 1
    kernel = [n for n in names if n.endswith("params.conv_init.kernel")]
    stats = [n for n in names if n.endswith("batch_stats.ResNetBlock_7.BatchNorm_1.var")]
    assert len(kernel) == 1 and len(stats) == 1
    assert names[kernel[0]][0] == "variable"
    assert all(f.file == "resnet18_linen.py" for f in c.frames), "frames point into the model file, workspace-relative"



# --------------------------------------------------------------------------- library frames


@pytest.mark.parametrize("name, file", [
    ("gpt2_torch", "transformers/models/gpt2/modeling_gpt2.py"),
    ("resnet18_torch", "transformers/models/resnet/modeling_resnet.py"),
])
def test_library_models_link_every_node_to_library_code(name, file):
    """Models built from ``transformers`` run no workspace code in their forward: every
    node links to the innermost line of library code (absolute path, ``library``), and
    every module group to its class definition (issue 14)."""
    from viewer.projection.library_sources import short_path

    capture = load(name)
    framed = [capture.frames[n.frame] for n in capture.nodes if n.frame is not None]
    assert len(framed) >= 0.9 * len(capture.nodes), REGENERATE
    assert all(f.library and f.file.startswith("/") for f in framed)
    assert all(short_path(f.file).startswith("transformers/") for f in framed)
    assert Counter(short_path(f.file) for f in framed).most_common(1)[0][0] == file
    # Deduplicated by code location: node frames repeat across blocks (class frames add one per class).
    assert len({n.frame for n in capture.nodes}) < len(capture.nodes) / 4
    modules = [g for g in capture.groups if g.kind == "module"]
    assert modules and all(type(g.attrs.get("class_frame")) is int for g in modules)
    top = next(g for g in modules if g.parent is None)
    defined = capture.frames[top.attrs["class_frame"]]
    assert defined.library and short_path(defined.file).startswith("transformers/models/")
    assert defined.function == top.attrs["class"]
    assert capture.meta["environment"]["site_packages"]
    assert not any(s.path.startswith("/") for s in capture.sources)  # library files are not sources


def test_a_workspace_linen_model_keeps_workspace_frames():
    capture = load("resnet18_linen")
    framed = [capture.frames[n.frame] for n in capture.nodes if n.frame is not None]
    assert framed and not any(f.library for f in framed)
    assert {f.file for f in framed} == {"resnet18_linen.py"}
