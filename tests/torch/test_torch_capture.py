"""The PyTorch eager capture (``capture.torch.framework`` + ``capture.torch.trace``) in
this process, following the worker's order: one small workspace model per rule."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from capture.graph.model import describe_tree, tree_leaves  # noqa: E402
from capture.torch.trace import TorchTrace  # noqa: E402
from capture.worker.errors import CaptureError, LimitExceeded  # noqa: E402
from capture.worker.limits import Limits  # noqa: E402
from capture.worker.workspace_files import WorkspaceFiles  # noqa: E402

from torch_workspace import capture_in_process, profile, tensor  # noqa: E402

pytestmark = pytest.mark.torch


def run(ws, table, **kw):
    return capture_in_process(ws, table, **kw)[0]


def groups(cap, kind=None, name=None):
    return [g for g in cap.groups if (kind is None or g.kind == kind) and (name is None or g.name == name)]


def nodes_in(cap, gid):
    """The kernels a group ran itself: its direct nodes and those of the function groups
    (the torch.* calls, capture.torch.functions) directly inside it, in order."""
    calls = {g.id for g in cap.groups if g.kind == "function" and g.parent == gid}
    return [n for n in cap.nodes if n.group == gid or n.group in calls]


def ops(cap):
    return [n.op for n in cap.nodes]


def values(cap):
    return {v.id: v for v in cap.values}


def output_description(cap, key=None):
    tree = cap.outputs if key is None else dict(cap.outputs["dict"])[key]
    return describe_tree(tree, values(cap))


def direct_description(out):
    """The same text ``describe_tree`` gives, for a direct forward's result."""
    if isinstance(out, torch.Tensor):
        return f"{str(out.dtype).removeprefix('torch.')}[{','.join(str(d) for d in out.shape)}]"
    if isinstance(out, list):
        return "[" + ", ".join(direct_description(x) for x in out) + "]"
    if isinstance(out, tuple):
        items = [direct_description(x) for x in out]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(out, dict):
        return "{" + ", ".join(f"{k!r}: {direct_description(v)}" for k, v in out.items()) + "}"
    return repr(out)


# --------------------------------------------------------------------------- models


def test_small_cnn(ws):
    cap = run(ws, profile("models:SmallCNN", args=[tensor([2, 3, 16, 16])]))
    assert cap.backend == "torch_eager" and cap.framework == "torch"
    assert cap.framework_version == torch.__version__
    assert (cap.coverage.scope, cap.coverage.status, cap.coverage.reasons) == ("eager_forward", "complete", [])
    assert {"aten::convolution", "aten::relu", "aten::max_pool2d_with_indices", "aten::addmm"} <= set(ops(cap))
    assert "aten::native_batch_norm" in ops(cap)
    [root] = [g for g in cap.groups if g.parent is None]
    assert (root.kind, root.name, root.attrs["class"], root.attrs["path"]) == ("module", "SmallCNN", "SmallCNN", "")
    children = [g.name for g in cap.groups if g.parent == root.id]
    assert children == ["conv1", "bn1", "pool", "conv2", "pool", "head"]
    pools = groups(cap, name="pool")
    assert [g.attrs["call"] for g in pools] == [0, 1] and all(g.attrs["class"] == "MaxPool2d" for g in pools)
    conv = nodes_in(cap, groups(cap, name="conv1")[0].id)
    assert [n.op for n in conv] == ["aten::convolution"]
    # operands at schema positions: input, weight, bias, then literal stride/padding/…
    operands = conv[0].inputs
    assert [o.position for o in operands[:3]] == [0, 1, 2]
    vals = values(cap)
    assert vals[operands[1].value].measured["param"] == "conv1.weight"
    assert vals[operands[0].value].measured["input"] == "x"  # forward(self, x)
    assert [o.literal for o in operands[3:5]] == [[1, 1], [1, 1]]
    assert output_description(cap) == "float32[2,10]"


def test_buffer_writes_no_recorded_op_shows_make_coverage_partial(ws):
    """BatchNorm in train mode updates its running statistics inside the kernel,
    without a version bump: the capture must not call itself complete."""
    cap = run(ws, profile("models:SmallCNN", args=[tensor([2, 3, 16, 16])], mode="train"))
    assert (cap.coverage.status, cap.coverage.reasons) == ("partial", ["untracked_buffer_update"])
    assert cap.meta["untracked_buffer_updates"] == ["bn1.running_mean", "bn1.running_var"]
    # the counter's in-place add_ is a recorded op, so it is not reported as unseen
    assert "aten::add_.Tensor" in ops(cap)


def test_transformer_block_opens_as_nested_modules(ws):
    cap = run(ws, profile("models:Block", args=[tensor([2, 5, 16])]))
    [root] = [g for g in cap.groups if g.parent is None]
    assert root.name == "Block"
    top = [g.name for g in cap.groups if g.parent == root.id]
    assert top == ["ln1", "attn", "ln2", "mlp"]
    attn = groups(cap, name="attn")[0]
    assert [g.name for g in cap.groups if g.parent == attn.id and g.kind == "module"] == ["qkv", "proj"]
    assert groups(cap, name="qkv")[0].attrs["path"] == "attn.qkv"
    mlp = groups(cap, name="mlp")[0]
    assert [(g.name, g.attrs["path"], g.attrs["class"]) for g in cap.groups if g.parent == mlp.id] == [
        ("0", "mlp.0", "Linear"), ("1", "mlp.1", "GELU"), ("2", "mlp.2", "Linear"),
    ]
    assert "aten::_softmax" in ops(cap) and "aten::native_layer_norm" in ops(cap)
    # The softmax was written in Attention.forward: its frame says so.
    softmax = next(n for n in cap.nodes if n.op == "aten::_softmax")
    frame = cap.frames[softmax.frame]
    assert (frame.file, frame.function) == ("models.py", "Attention.forward")
    line = (ws / "models.py").read_text().splitlines()[frame.line - 1]
    assert "softmax" in line and line[frame.column:].startswith("att.softmax")
    assert output_description(cap) == "float32[2,5,16]"


def test_submodule_called_twice_is_two_group_instances(ws):
    cap = run(ws, profile("models:Twice", args=[tensor([3, 4])]))
    shared = groups(cap, name="shared")
    assert len(shared) == 2
    assert [g.attrs["call"] for g in shared] == [0, 1]
    assert {g.attrs["path"] for g in shared} == {"shared"}
    first, second = (nodes_in(cap, g.id) for g in shared)
    assert [n.op for n in first] == [n.op for n in second] == ["aten::t", "aten::addmm"]
    # the second call consumes the first call's result
    assert first[-1].outputs[0] in {o.value for o in second[-1].inputs}
    # both calls use the same parameter value
    vals = values(cap)
    weights = [vals[n.inputs[0].value].measured.get("param") for n in (first[0], second[0])]
    assert weights == ["shared.weight", "shared.weight"] and first[0].inputs[0].value == second[0].inputs[0].value


def test_views_and_in_place_ops_share_storage(ws):
    cap = run(ws, profile("models:Aliasing", args=[tensor([2, 3], generator={"kind": "arange"})]))
    assert ops(cap) == ["aten::mul.Tensor", "aten::view", "aten::add_.Tensor", "aten::relu"]
    mul, view, add_, relu = cap.nodes
    vals = values(cap)
    y, flat, flat2 = mul.outputs[0], view.outputs[0], add_.outputs[0]
    m = {v: vals[v].measured for v in (y, flat, flat2)}
    assert m[y]["storage"] == m[flat]["storage"] == m[flat2]["storage"]
    assert flat in m[y]["aliases"] and y in m[flat]["aliases"]
    assert m[flat2]["version_of"] == flat
    assert view.inputs[0].value == y
    # relu reads y after the in-place write through its view: a new version of y
    y2 = relu.inputs[0].value
    assert y2 != y and vals[y2].measured["version_of"] == y and vals[y2].measured["written_by"] == add_.id
    assert vals[y2].measured["storage"] == m[y]["storage"]
    assert vals[y2].measured["stats"]["min"] == 1.0 and vals[y2].measured["stats"]["max"] == 11.0
    z = relu.outputs[0]
    assert vals[z].measured["storage"] != m[y]["storage"] and "aliases" not in vals[z].measured
    out = dict(cap.outputs["tuple"][1]["dict"])
    assert out["flat"] == {"value": flat2}
    # a view over the same elements shares the statistics of its input
    assert m[flat]["stats"] == m[y]["stats"] == {"min": 0.0, "max": 10.0, "mean": 5.0,
                                                 "std": pytest.approx(math.sqrt(35 / 3)), "nan": 0, "inf": 0}


def test_nan_producing_activations_are_counted(ws):
    cap = run(ws, profile("models:MakesNaN", args=[tensor([2, 3], generator={"kind": "arange"})]))
    vals = values(cap)
    bad_tree, nan_tree = cap.outputs["tuple"]
    bad = vals[bad_tree["value"]].measured["stats"]
    # 2 * log(x - 1) for x = 0..5: NaN, -inf, then 2*log(1..4)
    finite = [2 * math.log(v) for v in (1, 2, 3, 4)]
    assert (bad["nan"], bad["inf"]) == (1, 1)
    assert bad["min"] == pytest.approx(0.0) and bad["max"] == pytest.approx(finite[-1])
    assert bad["mean"] == pytest.approx(sum(finite) / 4, rel=1e-5)
    allnan = vals[nan_tree["value"]].measured["stats"]
    assert allnan == {"nan": 6, "inf": 0, "min": None, "max": None, "mean": None, "std": None}


@pytest.mark.parametrize("model, inputs", [
    pytest.param("MakesNaN", [tensor([2, 3], generator={"kind": "arange"})], id="nan"),
    pytest.param("Block", [tensor([2, 5, 16])], id="block"),
])
def test_deferred_statistics_match_immediate(ws, model, inputs):
    """The batched on-device path (one transfer at the end, used off the CPU) gives the
    same numbers as the CPU path."""
    import importlib
    import sys

    sys.path.insert(0, str(ws))
    cls = getattr(importlib.import_module("models"), model)
    torch.manual_seed(0)
    m = cls().eval()
    x = torch.arange(30, dtype=torch.float32).reshape(2, 3, 5)[..., :3] if model == "MakesNaN" else torch.randn(2, 5, 16)
    stats = {}
    for mode in ("immediate", "deferred"):
        tr = TorchTrace(WorkspaceFiles(ws), stats_mode=mode)
        tr.label_module(m)
        with tr.recording():
            m(x)
        tr.finish()
        stats[mode] = [v.measured.get("stats") for v in tr.b.values]
    assert len(stats["immediate"]) == len(stats["deferred"])
    for a, b in zip(stats["immediate"], stats["deferred"]):
        assert (a is None) == (b is None)
        if a is not None:
            for key in ("nan", "inf"):
                assert a[key] == b[key]
            for key in ("min", "max", "mean", "std"):
                assert (a[key] is None and b[key] is None) or a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-5)


def test_output_bytes_per_value_and_group(ws):
    cap = run(ws, profile("models:MLP", args=[tensor([5, 4])]))
    vals = values(cap)
    for v in cap.values:
        assert v.measured["bytes"] == math.prod(v.shape) * 4
    fc1 = groups(cap, name="fc1")[0]
    [addmm] = [n for n in nodes_in(cap, fc1.id) if n.op == "aten::addmm"]
    assert fc1.attrs["result_bytes"] == vals[addmm.outputs[0]].measured["bytes"] == 5 * 8 * 4
    # the transposed weight is a view: it allocates nothing
    assert fc1.attrs["output_bytes"] == 5 * 8 * 4
    [root] = [g for g in cap.groups if g.parent is None]
    assert root.attrs["output_bytes"] == sum(g.attrs["output_bytes"] for g in cap.groups if g.parent == root.id)
    assert root.attrs["outputs"] == cap.outputs


# --------------------------------------------------------------------------- setup


def test_factory_built_module_uses_its_weights(ws):
    torch.manual_seed(123)
    import importlib
    import sys

    sys.path.insert(0, str(ws))
    reference = importlib.import_module("models").MLP(width=8).eval()
    torch.save(reference.state_dict(), ws / "weights.pt")
    cap = run(ws, profile("models:MLP", init={"factory": "factories:load_mlp"},
                          args=[tensor([2, 4], generator={"kind": "full", "value": 1})]))
    expected = reference(torch.ones(2, 4))
    stats = values(cap)[cap.outputs["value"]].measured["stats"]
    assert stats["min"] == pytest.approx(expected.min().item(), rel=1e-6)
    assert stats["max"] == pytest.approx(expected.max().item(), rel=1e-6)
    assert stats["mean"] == pytest.approx(expected.mean().item(), rel=1e-5)


def test_factory_must_return_the_selected_class(ws):
    (ws / "bad_factory.py").write_text("from torch import nn\n\ndef make():\n    return nn.Linear(2, 2)\n")
    with pytest.raises(CaptureError) as exc:
        run(ws, profile("models:MLP", init={"factory": "bad_factory:make"}, args=[tensor([2, 4])]))
    assert exc.value.stage == "recipe" and "MLP" in exc.value.message


def test_cuda_is_refused_before_the_model_is_imported(ws):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    from capture.torch import framework as fw
    from capture.recipe import parse_profile
    from capture.worker.context import CaptureContext

    ctx = CaptureContext(parse_profile("p", profile("marked:Marked", args=[tensor([2])], device="cuda:0")), ws)
    with pytest.raises(CaptureError) as exc:
        fw.probe_device(ctx)
    assert exc.value.stage == "device"
    assert "cuda:0" in exc.value.message and "does not fall back" in exc.value.message
    assert exc.value.details["available"] == ["cpu"]
    # capture() checks again itself, still before the import
    with pytest.raises(CaptureError) as exc:
        fw.capture(ctx)
    assert exc.value.stage == "device"
    assert not (ws / "imported.marker").exists()
    # the same model imports (and leaves its marker) on the CPU
    run(ws, profile("marked:Marked", args=[tensor([2])]))
    assert (ws / "imported.marker").exists()


def test_seeded_inputs_and_weights_are_deterministic(ws):
    table = profile("models:Block", args=[tensor([2, 5, 16])], seed=7)
    a, b = run(ws, table), run(ws, table)
    assert [v.measured.get("stats") for v in a.values] == [v.measured.get("stats") for v in b.values]
    c = run(ws, {**table, "seed": 8})
    assert [v.measured.get("stats") for v in a.values] != [v.measured.get("stats") for v in c.values]


def test_plain_function_with_an_inputs_factory(ws):
    cap = run(ws, profile("models:plain_function", inputs={"factory": "models:pair_inputs"}))
    [root] = cap.groups
    assert (root.kind, root.name) == ("function", "plain_function")
    assert ops(cap) == ["aten::mm", "aten::tanh", "aten::mul.Tensor"]
    assert cap.nodes[-1].inputs[1].literal == 0.5
    kwargs = dict(dict(cap.inputs["dict"])["kwargs"]["dict"])
    assert kwargs == {"scale": {"static": 0.5}}
    assert output_description(cap) == "float32[2,5]"


def test_requires_grad_input_is_recorded(ws):
    cap = run(ws, profile("models:MLP", args=[tensor([2, 4], requires_grad=True)], grad_enabled=True))
    x = dict(cap.inputs["dict"])["args"]["tuple"][0]["value"]
    assert values(cap)[x].measured == {**values(cap)[x].measured, "input": "x", "requires_grad": True}
    assert any(n.op == "aten::addmm" for n in cap.nodes)


@pytest.mark.parametrize("model, args, init", [
    pytest.param("SmallCNN", [tensor([2, 3, 16, 16])], {"args": [], "kwargs": {"classes": 5}}, id="cnn"),
    pytest.param("Block", [tensor([3, 7, 16])], None, id="transformer-block"),
    pytest.param("Twice", [tensor([3, 4])], None, id="twice"),
    pytest.param("Aliasing", [tensor([2, 3])], None, id="aliasing"),
    pytest.param("MakesNaN", [tensor([4])], None, id="nan"),
])
def test_output_shapes_equal_a_direct_forward(ws, model, args, init):
    cap = run(ws, profile(f"models:{model}", args=args, init=init))
    import importlib

    cls = getattr(importlib.import_module("models"), model)
    init_kwargs = (init or {}).get("kwargs", {})
    with torch.no_grad():
        out = cls(**init_kwargs).eval()(*[torch.randn(*a["shape"]) for a in args])
    assert output_description(cap) == direct_description(out)


# --------------------------------------------------------------------------- training step


def training_profile(**step):
    return profile(
        "models:MLP", args=[tensor([6, 4])], kind="training_step", mode="train", grad_enabled=True,
        step=step or {"loss": "mean"},
    )


def test_training_step_has_forward_loss_backward_and_optimizer_groups(ws):
    cap = run(ws, training_profile(loss="mean", optimizer={"factory": "models:make_sgd"}))
    assert (cap.coverage.scope, cap.coverage.status) == ("training_step", "complete")
    top = [(g.kind, g.name) for g in cap.groups if g.parent is None]
    assert top == [("module", "MLP"), ("loss", "loss"), ("backward", "backward"), ("optimizer", "SGD")]
    backward = groups(cap, kind="backward", name="backward")[0]
    bw_nodes = [n for n in cap.nodes if _under(cap, n.group, backward.id)]
    # the seed gradient (ones_like) is made by the engine itself; every other op runs
    # inside an autograd node, which it names
    assert bw_nodes[0].op == "aten::ones_like"
    assert all("grad_fn" in n.params for n in bw_nodes[1:])
    assert {"AddmmBackward0", "ReluBackward0", "MeanBackward0", "AccumulateGrad"} <= {n.params["grad_fn"] for n in bw_nodes[1:]}
    # backward ops nest in mirrors of the forward modules that created them
    mirrors = {g.attrs["path"]: g for g in cap.groups if g.kind == "backward" and "path" in g.attrs}
    assert groups(cap, kind="backward", name="loss")[0].attrs["forward_group"] == groups(cap, kind="loss")[0].id
    assert {"", "fc1", "act", "fc2"} <= set(mirrors)
    fc1_mirror = mirrors["fc1"]
    assert cap.groups[fc1_mirror.attrs["forward_group"]].attrs["path"] == "fc1"
    fc1_bw = nodes_in(cap, fc1_mirror.id)
    assert fc1_bw and {n.params["grad_fn"] for n in fc1_bw} == {"AddmmBackward0", "TBackward0"}
    fwd = cap.nodes[fc1_bw[0].params["forward_node"]]
    assert fwd.op == "aten::addmm" and cap.frames[fc1_bw[0].frame] == cap.frames[fwd.frame]
    # gradients are labelled and listed in the outputs
    vals = values(cap)
    grads = dict(dict(cap.outputs["dict"])["grads"]["dict"])
    assert set(grads) == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}
    for name, tree in grads.items():
        assert vals[tree["value"]].measured["grad_of"] == name
        assert vals[tree["value"]].shape == list(dict(_params(ws))[name])
    loss = dict(cap.outputs["dict"])["loss"]
    assert vals[loss["value"]].shape == []
    # the optimizer updates the parameters in place: new versions of the param values
    opt = groups(cap, kind="optimizer")[0]
    updated = {vals[vals[v].measured["version_of"]].measured.get("param")
               for n in nodes_in(cap, opt.id) for v in n.outputs if "version_of" in vals[v].measured}
    assert {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"} <= updated


def test_training_step_with_a_loss_function(ws):
    cap = run(ws, training_profile(loss={"factory": "models:cross_entropy"}))
    loss = groups(cap, kind="loss")[0]
    assert loss.attrs["loss"] == "models:cross_entropy"
    assert any(n.op.startswith("aten::_log_softmax") for n in nodes_in(cap, loss.id))
    assert not groups(cap, kind="optimizer")


def test_training_step_needs_grad(ws):
    with pytest.raises(CaptureError) as exc:
        run(ws, {**training_profile(), "grad_enabled": False})
    assert exc.value.stage == "recipe" and "grad_enabled" in exc.value.message


def _under(cap, gid, ancestor):
    while gid is not None:
        if gid == ancestor:
            return True
        gid = cap.groups[gid].parent
    return False


def _params(ws):
    import importlib

    return [(n, tuple(p.shape)) for n, p in importlib.import_module("models").MLP(width=8).named_parameters()]


# --------------------------------------------------------------------------- limits and failures


def test_op_limit_stops_the_forward(ws):
    with pytest.raises(LimitExceeded) as exc:
        run(ws, profile("models:Block", args=[tensor([2, 5, 16])]), limits=Limits(max_ops=10))
    assert exc.value.stage == "limit" and exc.value.limit == "max_ops"


def test_value_and_group_limits(ws):
    with pytest.raises(LimitExceeded) as exc:
        run(ws, profile("models:Block", args=[tensor([2, 5, 16])]), limits=Limits(max_values=12))
    assert exc.value.limit == "max_values"
    with pytest.raises(LimitExceeded) as exc:
        run(ws, profile("models:Block", args=[tensor([2, 5, 16])]), limits=Limits(max_groups=3))
    assert exc.value.limit == "max_groups"


def test_a_limit_swallowed_by_user_code_is_still_reported(ws):
    with pytest.raises(LimitExceeded) as exc:
        run(ws, profile("models:Swallows", args=[tensor([2, 4])]), limits=Limits(max_ops=20))
    assert exc.value.limit == "max_ops"


def test_a_raising_model_propagates_with_its_frames(ws):
    with pytest.raises(ValueError) as exc:
        run(ws, profile("models:Raises", args=[tensor([2, 4])]))
    files = WorkspaceFiles(ws).traceback_frames(exc.value.__traceback__)
    assert [(f.file, f.function) for f in files][-2:] == [("models.py", "forward"), ("models.py", "helper")]
    # hooks and the dispatch mode are gone: a later forward is not recorded anywhere
    assert not torch.nn.modules.module._global_forward_pre_hooks


def test_statistics_can_be_turned_off(ws, monkeypatch):
    monkeypatch.setenv("TENSORVIZ_TORCH_STATS", "0")
    cap = run(ws, profile("models:Block", args=[tensor([2, 5, 16])]))
    assert cap.meta["stats"] is False
    assert not any("stats" in v.measured for v in cap.values)
    assert all("bytes" in v.measured and "storage" in v.measured for v in cap.values)


def test_every_value_is_used_or_produced_and_ids_are_dense(ws):
    cap = run(ws, profile("models:Block", args=[tensor([2, 5, 16])]))
    produced = [v for n in cap.nodes for v in n.outputs]
    assert len(produced) == len(set(produced)), "a value has one producer"
    used = {o.value for n in cap.nodes for o in n.inputs if o.value is not None}
    inputs = set(tree_leaves(cap.inputs))
    assert set(range(len(cap.values))) == set(produced) | used | inputs


def test_result_size_limit_stops_the_forward_early(ws, monkeypatch):
    import capture.torch.trace as tt

    monkeypatch.setattr(tt, "CHECKPOINT_OPS", 16)
    with pytest.raises(LimitExceeded) as exc:
        run(ws, profile("models:Block", args=[tensor([2, 5, 16])]), limits=Limits(max_result_bytes=3000))
    assert exc.value.limit == "max_result_bytes" and "estimated while recording" in exc.value.message


def test_progress_while_recording(ws, monkeypatch):
    import capture.torch.trace as tt
    from capture.torch import framework as fw
    from capture.recipe import parse_profile
    from capture.worker.context import CaptureContext

    monkeypatch.setattr(tt, "CHECKPOINT_OPS", 16)
    seen = []
    ctx = CaptureContext(parse_profile("p", profile("models:Block", args=[tensor([2, 5, 16])])), ws,
                         progress_sink=lambda message, fraction: seen.append(message))
    fw.capture(ctx)
    assert "recorded 16 operations" in seen and "recorded 32 operations" in seen


def test_arguments_written_in_place_become_new_versions(ws):
    """Schema-marked writes that are not returned (``_foreach_add_``) and ``out=``
    results are new versions of their tensors, produced by the writing node."""
    trace = TorchTrace(WorkspaceFiles(ws))
    params = [torch.zeros(2), torch.ones(3)]
    out = torch.empty(2)
    with trace.recording():
        torch._foreach_add_(params, 1.0)
        torch.add(params[0], 1.0, out=out)
        params[0].sum()
    trace.finish()
    foreach, add_out, total = trace.b.nodes
    vals = trace.b.values
    assert [vals[v].measured["version_of"] for v in foreach.outputs] == [o.value for o in foreach.inputs[:2]]
    assert vals[add_out.outputs[0]].measured["version_of"] == add_out.inputs[-1].value
    assert total.inputs[0].value == foreach.outputs[0]
    assert vals[foreach.outputs[1]].measured["stats"]["min"] == 2.0


def test_a_write_through_a_view_makes_one_new_version(ws):
    trace = TorchTrace(WorkspaceFiles(ws))
    x = torch.zeros(4)
    with trace.recording():
        y = x + 1
        y[:2].mul_(3)
        a = y * 2
        b = y * 2
        x.add_(1)  # an outside tensor written in place, then read again
        c = x * 2
    trace.finish()
    nodes = {n.op: n for n in trace.b.nodes}
    reads = [n for n in trace.b.nodes if n.op == "aten::mul.Tensor"]
    y1, y2, x2 = (n.inputs[0].value for n in reads)
    vals = trace.b.values
    assert y1 == y2, "read twice after one write: one new version"
    assert vals[y1].measured["written_by"] == nodes["aten::mul_.Tensor"].id
    assert x2 == nodes["aten::add_.Tensor"].outputs[0]
    assert a.shape == b.shape == c.shape


def test_thread_count_is_restored_after_statistics(ws):
    torch.set_num_threads(2)
    run(ws, profile("models:Block", args=[tensor([2, 5, 16])]))
    assert torch.get_num_threads() == 2


def test_ops_in_the_block_that_opens_the_recording_have_its_frame(ws):
    (ws / "direct.py").write_text(
        "import torch\n\ndef run(trace):\n    with trace.recording():\n        return torch.ones(2) * 3\n"
    )
    import importlib
    import sys

    sys.path.insert(0, str(ws))
    trace = TorchTrace(WorkspaceFiles(ws))
    importlib.import_module("direct").run(trace)
    frames = [trace.b.frames[n.frame] for n in trace.b.nodes]
    assert [(f.file, f.line, f.function) for f in frames] == [("direct.py", 5, "run")] * 2


@pytest.mark.slow
def test_the_eager_capture_imports_neither_sympy_nor_dynamo_to_start():
    """The modules an eager capture starts with leave out what only an abstract capture
    (sympy, through PyTorch's symbolic shapes: ~0.5 s) or torch.compile (``torch._dynamo``:
    1.5-2 s) needs: a plain model's first capture does not wait for them."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    code = ("import sys; import capture.torch.framework, capture.torch.trace, capture.torch.cost, "
            "capture.torch.functions; print(sorted(m for m in ('sympy', 'torch._dynamo') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=str(root),
                          env={**os.environ, "PYTHONPATH": str(root)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"
