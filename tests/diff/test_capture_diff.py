"""``capture.graph.diff`` on real captures (``models/captures``, made by ``models/make_captures.py``
from a GPT-2 built from a ``transformers`` config, a Torch MLP and its edit, a Flax Linen
MLP at two widths) and on small built-in-memory captures for the matching rules: groups by
path, nodes by their place in their group, never by id."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from capture.graph import graphfile
from capture.graph.diff import DiffError, diff, summary, to_json
from capture.graph.model import Capture, Coverage, Failure, Group, Node, Operand, Value

CAPTURES = Path(__file__).resolve().parent / "models" / "captures"
ROOT = Path(__file__).resolve().parents[2]


def _read(name: str) -> Capture:
    return graphfile.read(CAPTURES / f"{name}.tvg")


def _json(a: str, b: str) -> dict:
    return to_json(diff(_read(a), _read(b), label_a=a, label_b=b))


# --------------------------------------------------------------------------- real models


def test_a_third_gpt2_block_is_one_added_group_named_by_its_path():
    d = _json("gpt2_2_layers", "gpt2_3_layers")
    assert not d["same"]
    assert d["groups"] == [{
        "path": "lm.transformer.h.2", "status": "added", "kind": "module", "name": "h.2",
        "class": "GPT2Block", "subtree": {"groups": 12, "nodes": 35, "parameters": 12},
    }]
    # Nothing else: no node of the shared blocks, the embeddings or the head changed, and
    # the block's parameters are counted in its subtree, not listed again.
    assert d["nodes"] == [] and d["capture"] == {}
    assert d["parameters"] == {"added": [], "removed": [], "changed": []}


def test_removing_a_block_is_the_mirror_image():
    d = _json("gpt2_3_layers", "gpt2_2_layers")
    assert [(g["path"], g["status"]) for g in d["groups"]] == [("lm.transformer.h.2", "removed")]
    assert d["nodes"] == []


def test_a_wider_hidden_size_lists_changed_shapes_and_parameter_tensors():
    d = _json("gpt2_2_layers", "gpt2_wider")
    # Same structure: nothing added or removed, only changes.
    assert {g["status"] for g in d["groups"]} == {"changed"}
    assert {n["status"] for n in d["nodes"]} == {"changed"}
    c_attn = [n for n in d["nodes"] if n["group"] == "lm.transformer.h.0.attn.c_attn" and n["op"] == "aten::addmm"]
    assert len(c_attn) == 1
    ch = c_attn[0]["changes"]
    assert ch["shapes"] == {"a": [[8, 192]], "b": [[8, 288]]}
    weights = {w["name"]: (w["a"]["shape"], w["b"]["shape"]) for w in ch["weights"]}
    assert weights["lm.transformer.h.0.attn.c_attn.weight"] == ([64, 192], [96, 288])
    assert "op" not in ch and "dtypes" not in ch
    changed = {p["name"]: (p["a"]["shape"], p["b"]["shape"]) for p in d["parameters"]["changed"]}
    assert changed["lm.transformer.wte.weight"] == ([128, 64], [128, 96])
    assert changed["lm.transformer.h.1.ln_2.bias"] == ([64], [96])
    # The position embedding's ops do not depend on the width beyond their output.
    assert "lm.transformer.wpe" in {g["path"] for g in d["groups"]}
    # Every changed group is named by its module path.
    assert all(g["path"].startswith("lm") for g in d["groups"])


def test_one_inserted_torch_op_is_one_added_node():
    d = _json("mlp", "mlp_edited")
    assert d["nodes"] == [{"group": "", "status": "added", "op": "aten::relu", "index_a": None, "index_b": 1}]
    assert [(g["path"], g["status"], g["nodes"]) for g in d["groups"]] == [
        ("", "changed", {"added": 1, "removed": 0, "changed": 0})
    ]


def test_identical_captures_have_no_changes():
    for name in ("gpt2_3_layers", "mlp", "flax_mlp_16"):
        d = _json(name, name)
        assert d["same"] and d["groups"] == [] and d["nodes"] == []
        assert set(d["counts"].values()) == {0}


def test_a_flax_mlp_with_a_wider_layer_changes_its_dense_layers():
    d = _json("flax_mlp_16", "flax_mlp_32")
    paths = [g["path"] for g in d["groups"]]
    assert "MLP/Dense_1" in paths and "MLP/Dense_2" in paths and "MLP/Dense_0" not in paths
    assert all(g["status"] == "changed" for g in d["groups"])
    dots = {n["group"]: n["changes"] for n in d["nodes"] if n["op"] == "dot_general"}
    assert dots["MLP/Dense_1"]["shapes"] == {"a": [[2, 16]], "b": [[2, 32]]}
    # The next layer's output is the same: only its kernel changed.
    assert "shapes" not in dots["MLP/Dense_2"]
    assert dots["MLP/Dense_2"]["weights"] == [
        {"name": "params.Dense_2.kernel", "a": {"dtype": "float32", "shape": [16, 4]},
         "b": {"dtype": "float32", "shape": [32, 4]}}
    ]
    changed = sorted(p["name"] for p in d["parameters"]["changed"])
    assert changed == ["params.Dense_1.bias", "params.Dense_1.kernel", "params.Dense_2.kernel"]


def test_the_summary_reads_as_a_list_of_changes():
    text = summary(diff(_read("gpt2_2_layers"), _read("gpt2_3_layers"), label_a="before.tvg", label_b="after.tvg"))
    assert "A: before.tvg (torch" in text and "B: after.tvg" in text
    assert "+ group lm.transformer.h.2 (module GPT2Block): 35 nodes, 12 groups, 12 parameter tensors" in text
    assert text.rstrip().endswith("parameters 0 added, 0 removed, 0 changed")
    same = summary(diff(_read("mlp"), _read("mlp")))
    assert "no differences" in same


def test_the_json_is_stable_and_plain():
    a, b = _read("gpt2_2_layers"), _read("gpt2_wider")
    first = json.dumps(to_json(diff(a, b)), sort_keys=True)
    again = json.dumps(to_json(diff(_read("gpt2_2_layers"), _read("gpt2_wider"))), sort_keys=True)
    assert first == again
    d = to_json(diff(a, b))
    assert d["format"] == "tensorviz-diff" and d["version"] == 1
    # No ids unless asked: they mean nothing outside the two files.
    assert all("a" not in g and "b" not in g for g in d["groups"])


# --------------------------------------------------------------------------- matching rules


def _cap(groups: list[Group], ops: list[tuple[str, int | None, list[int]]], *, framework: str = "torch") -> Capture:
    """A small capture: ``ops`` = (op, group, output shape); each op consumes the last value."""
    values = [Value(0, [2, 3], "float32")]
    nodes = []
    for i, (op, g, shape) in enumerate(ops):
        values.append(Value(len(values), shape, "float32"))
        nodes.append(Node(i, op, [Operand(0, len(values) - 2)], [len(values) - 1], {}, g))
    return Capture(backend="test", framework=framework, framework_version="0", coverage=Coverage("test"),
                   values=values, nodes=nodes, groups=groups, inputs={"value": 0}, outputs={"value": len(values) - 1})


def _mod(i: int, path: str, parent: int | None, cls: str = "Linear") -> Group:
    return Group(i, "module", path.rsplit(".", 1)[-1] or "Net", parent, {"path": path, "class": cls, "call": 0})


def test_groups_are_matched_by_path_not_by_id():
    a = _cap([_mod(0, "", None), _mod(1, "fc1", 0), _mod(2, "fc2", 0)],
             [("aten::addmm", 1, [2, 4]), ("aten::addmm", 2, [2, 4])])
    # B lists the same modules in another order, so every id differs.
    b = _cap([_mod(0, "", None), _mod(1, "fc2", 0), _mod(2, "fc1", 0)],
             [("aten::addmm", 2, [2, 4]), ("aten::addmm", 1, [2, 4])])
    assert diff(a, b).same


def test_an_inserted_op_does_not_shift_the_ops_after_it():
    ops = ["add", "mul", "tanh", "exp", "sub", "div", "max", "neg"]
    a = _cap([Group(0, "jit", "main")], [(op, 0, [2, 3]) for op in ops])
    b = _cap([Group(0, "jit", "main")], [(op, 0, [2, 3]) for op in ops[:3] + ["relu"] + ops[3:]])
    d = to_json(diff(a, b))
    assert d["nodes"] == [{"group": "main", "status": "added", "op": "relu", "index_a": None, "index_b": 3}]


def test_a_replaced_op_is_changed_and_a_dropped_one_removed():
    ops = ["add", "mul", "tanh", "exp", "sub"]
    a = _cap([Group(0, "jit", "main")], [(op, 0, [2, 3]) for op in ops])
    b = _cap([Group(0, "jit", "main")], [(op, 0, [2, 3]) for op in ["add", "mul", "sigmoid", "sub"]])
    nodes = to_json(diff(a, b))["nodes"]
    by_status = {n["status"]: n for n in nodes}
    assert set(by_status) == {"changed", "removed"}
    assert by_status["changed"]["changes"] == {"op": {"a": "tanh", "b": "sigmoid"}}
    assert by_status["removed"]["op"] == "exp" and by_status["removed"]["index_a"] == 3


def test_same_named_scopes_are_told_apart_by_their_order():
    groups = [Group(0, "jit", "main"), Group(1, "scope", "block", 0), Group(2, "scope", "block", 0)]
    a = _cap(groups, [("add", 1, [2, 3]), ("mul", 2, [2, 3])])
    b = _cap(groups, [("add", 1, [2, 3]), ("mul", 2, [4, 3])])
    d = to_json(diff(a, b))
    assert [g["path"] for g in d["groups"]] == ["main/block#1"]
    assert d["nodes"][0]["changes"]["shapes"] == {"a": [[2, 3]], "b": [[4, 3]]}


def test_dtype_and_params_changes_are_named():
    a = _cap([Group(0, "jit", "main")], [("convert_element_type", 0, [2, 3])])
    b = _cap([Group(0, "jit", "main")], [("convert_element_type", 0, [2, 3])])
    a.nodes[0].params = {"new_dtype": "float32", "weak_type": False}
    b.nodes[0].params = {"new_dtype": "bfloat16", "weak_type": False}
    b.values[1].dtype = "bfloat16"
    ch = to_json(diff(a, b))["nodes"][0]["changes"]
    assert ch["dtypes"] == {"a": ["float32"], "b": ["bfloat16"]}
    assert ch["params"] == {"new_dtype": {"a": "float32", "b": "bfloat16"}}
    assert "shapes" not in ch


def test_a_module_class_change_marks_its_group():
    a = _cap([_mod(0, "", None, "Net"), _mod(1, "act", 0, "ReLU")], [("aten::relu", 1, [2, 3])])
    b = _cap([_mod(0, "", None, "Net"), _mod(1, "act", 0, "GELU")], [("aten::relu", 1, [2, 3])])
    (g,) = to_json(diff(a, b))["groups"]
    assert g["path"] == "act" and g["changes"] == {"class": {"a": "ReLU", "b": "GELU"}}


def test_a_failed_capture_cannot_be_diffed():
    ok = _read("mlp")
    failed = Capture.failed_capture(Failure("ImportError", "No module named 'model'", stage="import"))
    with pytest.raises(DiffError) as exc:
        diff(ok, failed, label_b="broken.tvg")
    text = str(exc.value)
    assert "broken.tvg is a failed capture" in text and "[import] ImportError" in text and "no graph to compare" in text


def test_a_capture_built_in_memory_and_its_file_diff_the_same(tmp_path):
    # The file reader gives column tables; an in-memory capture lists Node rows.
    a = _cap([Group(0, "jit", "main")], [("add", 0, [2, 3]), ("mul", 0, [2, 3])])
    b = _cap([Group(0, "jit", "main")], [("add", 0, [2, 3]), ("tanh", 0, [2, 3]), ("mul", 0, [2, 3])])
    graphfile.write(a, tmp_path / "a.tvg")
    graphfile.write(b, tmp_path / "b.tvg")
    from_files = to_json(diff(graphfile.read(tmp_path / "a.tvg"), graphfile.read(tmp_path / "b.tvg")))
    assert from_files == to_json(diff(a, b))


def test_the_diff_module_imports_nothing_but_the_standard_library_and_capture():
    code = ("import sys, capture.graph.diff; bad = [m for m in sys.modules if m.split('.')[0] in "
            "('torch', 'jax', 'viewer', 'tensorviz_lsp', 'pygls', 'libcst', 'numpy')]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr


# --------------------------------------------------------------------------- alignment


def test_a_repetitive_program_with_replaced_ops_pairs_in_place():
    from capture.graph.diff import align

    a = ["dot", "add", "max", "mul"] * 300
    b = list(a)
    for k in range(7, len(b), 97):
        b[k] = "while"
    pairs, removed, added = align(a, b)
    # Sliding the period over would report runs of additions and removals instead.
    assert removed == [] and added == [] and pairs == [(k, k) for k in range(len(a))]


@pytest.mark.parametrize("cells", [None, 1], ids=["sequence-matcher", "look-ahead-walk"])
def test_an_insertion_and_a_deletion_in_a_long_flat_group(monkeypatch, cells):
    import capture.graph.diff as cd

    if cells is not None:
        monkeypatch.setattr(cd, "_MATCHER_CELLS", cells)  # the linear walk, as for 50,000 ops
    a = [f"op{k % 13}" for k in range(3000)]
    b = a[:1000] + ["relu"] + a[1000:2000] + a[2003:]
    pairs, removed, added = cd.align(a, b)
    assert added == [1000] and removed == [2000, 2001, 2002]
    assert all(a[i] == b[j] for i, j in pairs) and len(pairs) == 2997


def _check_alignment(a, b, pairs, removed, added):
    ia = [i for i, _ in pairs]
    ib = [j for _, j in pairs]
    assert ia == sorted(set(ia)) and ib == sorted(set(ib))  # in order, each position once
    assert sorted(ia + removed) == list(range(len(a)))
    assert sorted(ib + added) == list(range(len(b)))


_OPS = st.lists(st.sampled_from(["add", "mul", "dot", "tanh", "exp"]), max_size=60)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(_OPS, _OPS, st.booleans())
def test_alignment_pairs_every_position_once_in_order(a, b, walk):
    import capture.graph.diff as cd

    old = cd._MATCHER_CELLS
    cd._MATCHER_CELLS = 0 if walk else old
    try:
        pairs, removed, added = cd.align(a, b)
    finally:
        cd._MATCHER_CELLS = old
    _check_alignment(a, b, pairs, removed, added)
    if a == b:
        assert removed == [] and added == [] and pairs == [(k, k) for k in range(len(a))]


@pytest.mark.parametrize("name", ["gpt2_2_layers", "gpt2_3_layers", "gpt2_wider", "mlp", "mlp_edited",
                                  "flax_mlp_16", "flax_mlp_32"])
def test_the_fixture_captures_match_their_model_files(name):
    import hashlib

    capture = _read(name)
    assert capture.failure is None and capture.recipe["name"] == name
    for src in capture.sources:
        digest = hashlib.sha256((CAPTURES.parent / src.path).read_bytes()).hexdigest()
        assert digest == src.sha256, f"{src.path} changed since captures/{name}.tvg was made: " \
                                     "run python tests/diff/models/make_captures.py"


def test_a_nan_literal_or_param_is_the_same_in_both():
    def make():
        c = _cap([Group(0, "jit", "main")], [("max", 0, [2, 3]), ("clamp", 0, [2, 3])])
        c.nodes[0].inputs.append(Operand(1, None, float("nan")))
        c.nodes[1].params = {"max": float("nan"), "min": 0.0}
        return c

    assert diff(make(), make()).same
    other = make()
    other.nodes[1].params = {"min": 0.0, "max": float("inf")}
    (n,) = to_json(diff(make(), other))["nodes"]
    assert list(n["changes"]) == ["params"] and list(n["changes"]["params"]) == ["max"]
