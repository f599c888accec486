"""Torch checkpoints and fixtures (``init.checkpoint``, ``inputs.fixture``): trained
weights reach the graph's statistics, key checking, weights-only loading, size and path
limits, binding a saved batch to ``forward``, and freshness of the loaded files.

Most captures run in this process (the worker's order); the ones about what the worker
process does (refusing a malicious pickle, sources and freshness, a ``transformers``
model) go through ``capture.session.runner.run_capture``."""

from __future__ import annotations

import importlib
import io
import os
import sys
import tracemalloc
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from capture.graph.freshness import stale_sources  # noqa: E402
from capture.recipe import parse_profile  # noqa: E402
from capture.session.runner import run_capture  # noqa: E402
from capture.worker.errors import CaptureError  # noqa: E402
from capture.worker.limits import Limits  # noqa: E402

from torch_workspace import capture_in_process, profile, tensor, write  # noqa: E402

import numpy as np  # noqa: E402

pytestmark = pytest.mark.torch

FIXTURE_MODELS = '''
import torch
from torch import nn


class TwoInputs(nn.Module):
    """forward(x, mask=None, *, scale=1.0): one positional-or-keyword pair and a keyword."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, mask=None, *, scale=1.0):
        y = self.fc(x) * scale
        return y if mask is None else y * mask


class TakesKwargs(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, **extra):
        return self.fc(x) + sum(v.sum() for v in extra.values())


def add(a, b):
    return a + b
'''

RESNET = '''
from transformers import ResNetConfig, ResNetModel

CONFIG = dict(num_channels=3, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
              layer_type="basic", hidden_act="relu")


def build():
    return ResNetModel(ResNetConfig(**CONFIG))
'''

GPT2 = '''
from transformers import GPT2Config, GPT2LMHeadModel

CONFIG = dict(n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=16, use_cache=False)


def build():
    return GPT2LMHeadModel(GPT2Config(**CONFIG))
'''


@pytest.fixture
def ws(ws):
    write(ws, {"fixture_models.py": FIXTURE_MODELS, "instance_model.py": "from torch import nn\n\ninstance = nn.Linear(4, 3)\n"})
    (ws / "runs").mkdir()
    sys.path.insert(0, str(ws))
    try:
        yield ws
    finally:
        if str(ws) in sys.path:
            sys.path.remove(str(ws))


def run(ws, table, **kw):
    return capture_in_process(ws, table, **kw)[0]


def workspace_class(name, module="models"):
    return getattr(importlib.import_module(module), name)


def trained_mlp(width=8, steps=30):
    """An MLP after a few SGD steps on a fixed regression task: weights no fresh
    initialisation would give."""
    torch.manual_seed(11)
    model = workspace_class("MLP")(width=width)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(64, 4), torch.randn(64, 3) * 3 + 1
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return model.eval()


def output_stats(cap, key=None):
    tree = cap.outputs if key is None else dict(cap.outputs["dict"])[key]
    return {v.id: v for v in cap.values}[tree["value"]].measured["stats"]


def failure(ws, table, **kw) -> CaptureError:
    with pytest.raises(CaptureError) as exc:
        run(ws, table, **kw)
    return exc.value


BATCH = torch.arange(8, dtype=torch.float32).reshape(2, 4) / 4 - 1


# --------------------------------------------------------------------------- trained weights


def test_trained_weights_reach_the_statistics(ws):
    model = trained_mlp()
    torch.save(model.state_dict(), ws / "runs" / "best.pt")
    torch.save({"x": BATCH}, ws / "batch.pt")
    loaded = run(ws, profile("models:MLP", init={"checkpoint": "runs/best.pt"}, inputs={"fixture": "batch.pt"}))
    fresh = run(ws, profile("models:MLP", inputs={"fixture": "batch.pt"}))

    with torch.no_grad():
        expected = model(BATCH)
    stats = output_stats(loaded)
    assert stats["mean"] == pytest.approx(expected.mean().item(), rel=1e-5)
    assert stats["min"] == pytest.approx(expected.min().item(), rel=1e-5)
    assert stats["max"] == pytest.approx(expected.max().item(), rel=1e-5)
    # A fresh initialisation describes other weights entirely.
    assert output_stats(fresh)["mean"] != pytest.approx(stats["mean"], rel=1e-2)

    # The parameter values themselves are the checkpoint's.
    params = {v.measured.get("param"): v for v in loaded.values if v.measured.get("param")}
    w = params["fc1.weight"].measured["stats"]
    assert w["mean"] == pytest.approx(model.fc1.weight.mean().item(), rel=1e-5)

    assert loaded.meta["state"] == "checkpoint" and loaded.meta["checkpoint"] == "runs/best.pt"
    assert "trained weights from runs/best.pt" in loaded.meta["state_note"]
    assert loaded.meta["checkpoint_strict"] is True and loaded.meta["checkpoint_tensors"] == 4
    assert loaded.meta["checkpoint_load_s"] >= 0
    assert fresh.meta["state"] == "fresh_init" and "checkpoint" not in fresh.meta
    assert loaded.recipe["init"] == {"args": [], "kwargs": {}, "checkpoint": "runs/best.pt", "strict": True}


def test_checkpoint_with_constructor_arguments_and_a_training_wrapper(ws):
    model = trained_mlp(width=6)
    torch.save({"epoch": 3, "model_state_dict": model.state_dict(), "best": 0.5}, ws / "runs" / "ckpt.pth")
    cap = run(ws, profile("models:MLP", init={"args": [6], "checkpoint": "runs/ckpt.pth"},
                          args=[tensor([2, 4], generator={"kind": "full", "value": 1})]))
    with torch.no_grad():
        expected = model(torch.ones(2, 4))
    assert output_stats(cap)["mean"] == pytest.approx(expected.mean().item(), rel=1e-5)
    assert cap.meta["checkpoint_key"] == "model_state_dict"


def test_a_data_parallel_prefix_is_removed(ws):
    model = trained_mlp()
    torch.save({f"module.{k}": v for k, v in model.state_dict().items()}, ws / "runs" / "ddp.pt")
    cap = run(ws, profile("models:MLP", init={"checkpoint": "runs/ddp.pt"},
                          args=[tensor([2, 4], generator={"kind": "full", "value": 1})]))
    assert cap.meta["checkpoint_prefix_removed"] == "module."
    with torch.no_grad():
        assert output_stats(cap)["mean"] == pytest.approx(model(torch.ones(2, 4)).mean().item(), rel=1e-5)


def test_safetensors_checkpoint(ws):
    from safetensors.torch import save_file

    model = trained_mlp()
    save_file(model.state_dict(), str(ws / "runs" / "best.safetensors"))
    cap = run(ws, profile("models:MLP", init={"checkpoint": "runs/best.safetensors"},
                          args=[tensor([2, 4], generator={"kind": "full", "value": 1})]))
    with torch.no_grad():
        assert output_stats(cap)["mean"] == pytest.approx(model(torch.ones(2, 4)).mean().item(), rel=1e-5)


def test_safetensors_without_the_package_says_what_is_missing(ws, monkeypatch):
    from safetensors.torch import save_file

    save_file(trained_mlp().state_dict(), str(ws / "runs" / "best.safetensors"))
    monkeypatch.setitem(sys.modules, "safetensors", None)
    monkeypatch.setitem(sys.modules, "safetensors.torch", None)
    err = failure(ws, profile("models:MLP", init={"checkpoint": "runs/best.safetensors"}, args=[tensor([2, 4])]))
    assert err.stage == "dependencies" and err.details["missing"] == ["safetensors"]
    assert "runs/best.safetensors needs the safetensors package" in err.message


# --------------------------------------------------------------------------- key checking


def test_strict_loading_lists_missing_and_unexpected_keys(ws):
    state = trained_mlp().state_dict()
    del state["fc2.bias"]
    state["head.weight"] = torch.zeros(3, 8)
    torch.save(state, ws / "runs" / "best.pt")
    err = failure(ws, profile("models:MLP", init={"checkpoint": "runs/best.pt"}, args=[tensor([2, 4])]))
    assert (err.stage, err.error_type) == ("checkpoint", "StateDictMismatch")
    assert "missing 1 key(s): fc2.bias" in err.message
    assert "unexpected 1 key(s): head.weight" in err.message
    assert "init.strict = false" in err.message
    assert err.details["missing"] == ["fc2.bias"] and err.details["unexpected"] == ["head.weight"]


def test_non_strict_loading_records_the_lists_in_meta(ws):
    model = trained_mlp()
    state = model.state_dict()
    del state["fc2.bias"]
    state["head.weight"] = torch.zeros(3, 8)
    torch.save(state, ws / "runs" / "best.pt")
    cap = run(ws, profile("models:MLP", init={"checkpoint": "runs/best.pt", "strict": False},
                          args=[tensor([2, 4])]))
    assert cap.meta["checkpoint_missing"] == ["fc2.bias"]
    assert cap.meta["checkpoint_unexpected"] == ["head.weight"]
    assert cap.meta["checkpoint_strict"] is False
    assert "without strict key checking" in cap.meta["state_note"]
    params = {v.measured.get("param"): v for v in cap.values if v.measured.get("param")}
    # What matched was loaded.
    assert params["fc1.weight"].measured["stats"]["mean"] == pytest.approx(model.fc1.weight.mean().item(), rel=1e-5)


def test_a_shape_mismatch_names_the_parameter_and_both_shapes(ws):
    torch.save(trained_mlp(width=16).state_dict(), ws / "runs" / "wide.pt")
    for strict in (True, False):
        err = failure(ws, profile("models:MLP", init={"checkpoint": "runs/wide.pt", "strict": strict},
                                  args=[tensor([2, 4])]))
        assert (err.stage, err.error_type) == ("checkpoint", "ShapeMismatch")
        assert "fc1.weight: checkpoint [16, 4], model [8, 4]" in err.message
        assert "fc2.weight: checkpoint [3, 16], model [3, 8]" in err.message


def test_something_else_than_a_state_dict_is_refused(ws):
    torch.save({"epoch": 3, "lr": 0.1}, ws / "runs" / "meta.pt")
    err = failure(ws, profile("models:MLP", init={"checkpoint": "runs/meta.pt"}, args=[tensor([2, 4])]))
    assert err.error_type == "NotAStateDict"
    assert "a dict with keys epoch, lr" in err.message and "'state_dict'" in err.message


def test_a_module_instance_takes_a_checkpoint(ws):
    torch.manual_seed(4)
    trained = torch.nn.Linear(4, 3)
    torch.save(trained.state_dict(), ws / "runs" / "linear.pt")
    cap = run(ws, profile("instance_model:instance", init={"checkpoint": "runs/linear.pt"},
                          args=[tensor([2, 4], generator={"kind": "full", "value": 1})]))
    with torch.no_grad():
        assert output_stats(cap)["mean"] == pytest.approx(trained(torch.ones(2, 4)).mean().item(), rel=1e-5)
    fresh = run(ws, profile("instance_model:instance", args=[tensor([2, 4])]))
    assert fresh.meta["state"] == "module_instance"


def test_a_checkpoint_needs_a_module(ws):
    torch.save({"w": torch.ones(2)}, ws / "runs" / "w.pt")
    err = failure(ws, profile("fixture_models:add", init={"checkpoint": "runs/w.pt"},
                              args=[tensor([2]), tensor([2])]))
    assert err.stage == "recipe" and "torch.nn.Module" in err.message


# --------------------------------------------------------------------------- limits


class _WritesMarker:
    """Unpickling this runs Path.write_text: proof that a file's code ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (self.marker, "ran"))


@pytest.mark.slow
def test_a_checkpoint_needing_arbitrary_unpickling_is_refused_and_its_code_never_runs(ws):
    marker = ws / "unpickled.marker"
    state = trained_mlp().state_dict()
    torch.save({**state, "evil": _WritesMarker(marker)}, ws / "runs" / "evil.pt")
    # The file really runs code when unpickled without weights-only loading.
    torch.load(ws / "runs" / "evil.pt", weights_only=False)
    assert marker.read_text() == "ran"
    marker.unlink()

    c = run_capture(ws, parse_profile("p", profile("models:MLP", init={"checkpoint": "runs/evil.pt"},
                                                   args=[tensor([2, 4])])), timeout=120)
    assert c.failed and not c.nodes
    assert (c.failure.stage, c.failure.type) == ("checkpoint", "UnsafeCheckpoint")
    assert "refused to load runs/evil.pt" in c.failure.message
    assert "weights-only" in c.failure.message and "none of its code ran" in c.failure.message
    assert "it refers to getattr, which weights-only loading does not allow" in c.failure.message
    assert not marker.exists()


def test_a_fixture_needing_arbitrary_unpickling_is_refused(ws):
    marker = ws / "unpickled.marker"
    torch.save({"x": BATCH, "y": _WritesMarker(marker)}, ws / "evil_batch.pt")
    err = failure(ws, profile("models:MLP", inputs={"fixture": "evil_batch.pt"}))
    assert (err.stage, err.error_type) == ("fixture", "UnsafeFixture")
    assert not marker.exists()


def test_object_arrays_in_npz_are_refused(ws):
    import numpy as np

    np.savez(ws / "objects.npz", x=np.array([{"a": 1}], dtype=object))
    err = failure(ws, profile("models:MLP", inputs={"fixture": "objects.npz"}))
    assert err.error_type == "UnsafeFile" and "without pickle" in err.message


def test_the_size_limit_names_the_size_and_the_limit(ws):
    torch.save(trained_mlp().state_dict(), ws / "runs" / "best.pt")
    size = (ws / "runs" / "best.pt").stat().st_size
    err = failure(ws, profile("models:MLP", init={"checkpoint": "runs/best.pt"}, args=[tensor([2, 4])]),
                  limits=Limits(max_saved_file_bytes=1024))
    assert (err.stage, err.error_type) == ("limit", "LimitExceeded")
    assert f"({size:,} bytes), over the limit of 1 KiB (1,024 bytes)" in err.message
    assert "runs/best.pt" in err.message and "max_saved_file_bytes" in err.message
    assert err.details["limit"] == "max_saved_file_bytes" and err.details["reached"] == size


def test_a_symlink_leading_out_of_the_workspace_is_refused(ws, tmp_path_factory):
    outside = tmp_path_factory.mktemp("elsewhere") / "best.pt"
    torch.save(trained_mlp().state_dict(), outside)
    (ws / "runs" / "best.pt").symlink_to(outside)
    err = failure(ws, profile("models:MLP", init={"checkpoint": "runs/best.pt"}, args=[tensor([2, 4])]))
    assert err.error_type == "PathOutsideWorkspace"
    assert "runs/best.pt leads outside the workspace" in err.message and str(outside) in err.message


def test_a_symlink_inside_the_workspace_is_followed(ws):
    torch.save(trained_mlp().state_dict(), ws / "runs" / "epoch3.pt")
    (ws / "runs" / "best.pt").symlink_to("epoch3.pt")
    cap = run(ws, profile("models:MLP", init={"checkpoint": "runs/best.pt"}, args=[tensor([2, 4])]))
    assert cap.meta["checkpoint"] == "runs/best.pt"


def test_a_missing_file_is_named(ws):
    err = failure(ws, profile("models:MLP", init={"checkpoint": "runs/nope.pt"}, args=[tensor([2, 4])]))
    assert err.stage == "checkpoint" and "no checkpoint file runs/nope.pt" in err.message
    assert err.details["key_path"] == "profiles.p.init.checkpoint"


# --------------------------------------------------------------------------- fixtures


def two_inputs(ws):
    return workspace_class("TwoInputs", "fixture_models")


def test_fixture_by_names_binds_positional_and_keyword_parameters(ws):
    mask = torch.tensor([[1.0, 0.0, 1.0, 0.0]])
    torch.save({"mask": mask, "x": BATCH, "scale": torch.tensor(3.0)}, ws / "batch.pt")
    cap, ctx = capture_in_process(ws, profile("fixture_models:TwoInputs", inputs={"fixture": "batch.pt"}))
    torch.manual_seed(0)
    model = two_inputs(ws)().eval()
    with torch.no_grad():
        expected = model(BATCH, mask, scale=torch.tensor(3.0))
    assert output_stats(cap)["mean"] == pytest.approx(expected.mean().item(), rel=1e-5)
    # x and mask are positional (in forward's order), scale keyword-only.
    inputs = dict(cap.inputs["dict"])
    assert len(inputs["args"]["tuple"]) == 2 and [k for k, _ in inputs["kwargs"]["dict"]] == ["scale"]
    labels = {v.measured.get("input") for v in cap.values if v.measured.get("input")}
    assert {"x", "mask", "scale"} <= labels
    assert cap.meta["fixture"] == "batch.pt" and cap.meta["fixture_keys"] == ["mask", "x", "scale"]


def test_fixture_list_is_positional(ws):
    torch.save((BATCH, torch.ones(1, 4)), ws / "batch.pt")
    cap = run(ws, profile("fixture_models:TwoInputs", inputs={"fixture": "batch.pt"}))
    assert len(dict(cap.inputs["dict"])["args"]["tuple"]) == 2


def test_fixture_keys_map_explicitly_and_leave_the_rest(ws):
    torch.save({"features": BATCH, "labels": torch.zeros(2, dtype=torch.long)}, ws / "batch.pt")
    cap = run(ws, profile("models:MLP", inputs={"fixture": "batch.pt", "fixture_keys": {"features": "x"}}))
    assert cap.meta["fixture_keys"] == ["features"] and cap.meta["fixture_unused"] == ["labels"]
    labels = {v.measured.get("input") for v in cap.values if v.measured.get("input")}
    assert "x" in labels


def test_fixture_keys_to_a_position(ws):
    torch.save({"a": BATCH, "b": BATCH * 2}, ws / "pair.pt")
    cap = run(ws, profile("fixture_models:add", inputs={"fixture": "pair.pt",
                                                         "fixture_keys": {"b": "args[1]", "a": "args[0]"}}))
    assert output_stats(cap)["mean"] == pytest.approx((BATCH * 3).mean().item(), rel=1e-6)


def test_unknown_fixture_names_list_forwards_parameters(ws):
    torch.save({"x": BATCH, "labels": torch.zeros(2)}, ws / "batch.pt")
    err = failure(ws, profile("fixture_models:TwoInputs", inputs={"fixture": "batch.pt"}))
    assert err.error_type == "UnknownInputName"
    assert "fixture key 'labels' names no parameter of TwoInputs.forward(x, mask, *, scale)" in err.message
    assert "inputs.fixture_keys" in err.message

    err = failure(ws, profile("fixture_models:TwoInputs",
                              inputs={"fixture": "batch.pt", "fixture_keys": {"input": "x"}}))
    assert err.error_type == "UnknownFixtureKey"
    assert "has no key 'input' (its keys: x, labels)" in err.message


def test_a_kwargs_forward_takes_any_name(ws):
    torch.save({"x": BATCH, "bias": torch.ones(1)}, ws / "batch.pt")
    cap = run(ws, profile("fixture_models:TakesKwargs", inputs={"fixture": "batch.pt"}))
    assert [k for k, _ in dict(cap.inputs["dict"])["kwargs"]["dict"]] == ["bias"]


def test_a_missing_required_input_is_named(ws):
    torch.save({"mask": torch.ones(1, 4)}, ws / "batch.pt")
    err = failure(ws, profile("fixture_models:TwoInputs", inputs={"fixture": "batch.pt"}))
    assert err.error_type == "MissingInput" and "'x'" in err.message


def test_npz_fixture_by_name_and_by_position(ws):
    import numpy as np

    np.savez(ws / "named.npz", x=BATCH.numpy())
    cap = run(ws, profile("models:MLP", inputs={"fixture": "named.npz"}))
    torch.manual_seed(0)
    model = workspace_class("MLP")().eval()
    with torch.no_grad():
        assert output_stats(cap)["mean"] == pytest.approx(model(BATCH).mean().item(), rel=1e-5)

    np.savez(ws / "positional.npz", BATCH.numpy(), (BATCH * 2).numpy())  # arr_0, arr_1
    cap = run(ws, profile("fixture_models:add", inputs={"fixture": "positional.npz"}))
    assert output_stats(cap)["mean"] == pytest.approx((BATCH * 3).mean().item(), rel=1e-6)


def test_literal_kwargs_join_a_fixture(ws):
    torch.save({"x": BATCH}, ws / "batch.pt")
    cap = run(ws, profile("fixture_models:TwoInputs",
                          inputs={"fixture": "batch.pt", "kwargs": {"scale": 0.0}}))
    assert output_stats(cap)["max"] == 0.0
    err = failure(ws, profile("fixture_models:TwoInputs", inputs={"fixture": "batch.pt", "kwargs": {"x": 1.0}}))
    assert err.error_type == "DuplicateInput" and "inputs.kwargs.x" in err.message


def test_safetensors_fixture(ws):
    from safetensors.torch import save_file

    save_file({"x": BATCH}, str(ws / "batch.safetensors"))
    cap = run(ws, profile("models:MLP", inputs={"fixture": "batch.safetensors"}))
    assert cap.meta["fixture"] == "batch.safetensors"


# --------------------------------------------------------------------------- the worker


@pytest.mark.slow
def test_worker_records_the_files_and_a_replaced_checkpoint_makes_the_graph_stale(ws):
    torch.save(trained_mlp().state_dict(), ws / "runs" / "best.pt")
    torch.save({"x": BATCH}, ws / "batch.pt")
    c = run_capture(ws, parse_profile("p", profile("models:MLP", init={"checkpoint": "runs/best.pt"},
                                                   inputs={"fixture": "batch.pt"})), timeout=120)
    assert c.failure is None, c.failure
    assert [s.path for s in c.sources] == ["batch.pt", "models.py", "runs/best.pt"]
    assert stale_sources(c.sources, ws) == []
    torch.save(trained_mlp(steps=31).state_dict(), ws / "runs" / "best.pt")  # the next epoch's weights
    assert [(s.path, s.state) for s in stale_sources(c.sources, ws)] == [("runs/best.pt", "changed")]
    os.remove(ws / "batch.pt")
    assert [(s.path, s.state) for s in stale_sources(c.sources, ws)] == [
        ("batch.pt", "missing"), ("runs/best.pt", "changed")]


@pytest.mark.slow
def test_a_failed_load_still_records_the_checkpoint_for_freshness(ws):
    torch.save(trained_mlp(width=16).state_dict(), ws / "runs" / "best.pt")
    c = run_capture(ws, parse_profile("p", profile("models:MLP", init={"checkpoint": "runs/best.pt"},
                                                   args=[tensor([2, 4])])), timeout=120)
    assert c.failure is not None and c.failure.type == "ShapeMismatch"
    assert "runs/best.pt" in [s.path for s in c.sources]
    torch.save(trained_mlp().state_dict(), ws / "runs" / "best.pt")  # the fix
    assert [s.path for s in stale_sources(c.sources, ws)] == ["runs/best.pt"]


@pytest.mark.slow
def test_transformers_resnet_from_a_config_with_safetensors_weights_and_an_npz_batch(ws):
    pytest.importorskip("transformers")
    import numpy as np
    from safetensors.torch import save_file

    write(ws, {"resnet_model.py": RESNET})
    build = importlib.import_module("resnet_model").build
    torch.manual_seed(7)
    model = build().eval()
    with torch.no_grad():  # "trained": weights and running statistics no initialisation gives
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.2)
        for name, b in model.named_buffers():
            if name.endswith("running_mean"):
                b.add_(0.3)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(ws / "runs" / "resnet.safetensors"))
    pixels = torch.linspace(-1, 1, 2 * 3 * 32 * 32).reshape(2, 3, 32, 32)
    np.savez(ws / "images.npz", pixel_values=pixels.numpy())

    table = profile("resnet_model:build", init={"factory": "resnet_model:build", "checkpoint": "runs/resnet.safetensors"},
                    inputs={"fixture": "images.npz", "kwargs": {"return_dict": False}})
    c = run_capture(ws, parse_profile("p", table), timeout=180)
    assert c.failure is None, c.failure
    assert c.meta["state"] == "checkpoint" and c.meta["checkpoint_tensors"] == len(model.state_dict())
    with torch.no_grad():
        last, pooled = model(pixels, return_dict=False)
    outs = c.outputs["tuple"]
    vals = {v.id: v for v in c.values}
    assert vals[outs[1]["value"]].measured["stats"]["mean"] == pytest.approx(pooled.mean().item(), rel=1e-4)
    assert vals[outs[0]["value"]].measured["stats"]["max"] == pytest.approx(last.max().item(), rel=1e-4)
    assert {"runs/resnet.safetensors", "images.npz", "resnet_model.py"} <= {s.path for s in c.sources}


def test_transformers_gpt2_with_tied_weights_and_mapped_fixture_keys(ws):
    pytest.importorskip("transformers")
    from safetensors.torch import save_model

    write(ws, {"gpt2_model.py": GPT2})
    build = importlib.import_module("gpt2_model").build
    torch.manual_seed(3)
    model = build().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1.5)
    # save_model drops the tied duplicate (lm_head.weight is transformer.wte.weight).
    save_model(model, str(ws / "runs" / "gpt2.safetensors"))
    ids = torch.tensor([[1, 5, 9, 2, 7, 3]])
    torch.save({"ids": ids, "mask": torch.ones_like(ids), "targets": ids}, ws / "batch.pt")
    table = profile("gpt2_model:build", init={"factory": "gpt2_model:build", "checkpoint": "runs/gpt2.safetensors"},
                    inputs={"fixture": "batch.pt", "fixture_keys": {"ids": "input_ids", "mask": "attention_mask"},
                            "kwargs": {"return_dict": False}})
    cap = run(ws, table)
    assert "checkpoint_missing" not in cap.meta  # strict, and the tied head is not missing
    assert cap.meta["fixture_unused"] == ["targets"]
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=torch.ones_like(ids), return_dict=False)[0]
    first = cap.outputs["tuple"][0]["value"]
    stats = {v.id: v for v in cap.values}[first].measured["stats"]
    assert stats["mean"] == pytest.approx(logits.mean().item(), rel=1e-4)
    assert stats["std"] == pytest.approx(logits.std(correction=0).item(), rel=1e-4)


@pytest.mark.slow
def test_the_cli_shorthand_captures_trained_weights_and_a_fixture(ws):
    import subprocess

    from capture.graph import graphfile

    root = Path(__file__).resolve().parents[2]
    model = trained_mlp()
    torch.save(model.state_dict(), ws / "runs" / "best.pt")
    torch.save({"x": BATCH}, ws / "batch.pt")
    out = ws / "mlp.tvg"
    proc = subprocess.run(
        [sys.executable, "-m", "tensorviz_lsp", "capture", "models.py:MLP", "--checkpoint", "runs/best.pt",
         "--fixture", "batch.pt", "-o", str(out)],
        cwd=ws, capture_output=True, text=True, timeout=180,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])},
    )
    assert proc.returncode == 0, proc.stderr
    text = (ws / ".tensorviz" / "recipes.toml").read_text()
    assert 'checkpoint = "runs/best.pt"' in text and 'fixture = "batch.pt"' in text
    c = graphfile.read(out)
    assert c.meta["state"] == "checkpoint" and c.meta["checkpoint"] == "runs/best.pt"
    with torch.no_grad():
        assert output_stats(c)["mean"] == pytest.approx(model(BATCH).mean().item(), rel=1e-5)

    # The size limit, lowered from the command line, stops the load with both figures.
    proc = subprocess.run(
        [sys.executable, "-m", "tensorviz_lsp", "capture", "--profile", "MLP", "--max-saved-file-mb", "0.001",
         "-o", str(out)],
        cwd=ws, capture_output=True, text=True, timeout=180,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])},
    )
    assert proc.returncode == 1
    assert "[limit] LimitExceeded" in proc.stderr and "over the limit of 1.02 KiB (1,048 bytes)" in proc.stderr
    assert "tensorviz.maxSavedFileMB" in proc.stderr


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="this machine has no CUDA GPU (torch sees none)")
def test_checkpoint_and_fixture_load_onto_the_cuda_device(ws):
    """map_location is the profile's device: the weights and the batch arrive on cuda:0."""
    from safetensors.torch import save_file

    model = trained_mlp()
    torch.save(model.state_dict(), ws / "runs" / "best.pt")
    save_file({"x": BATCH}, str(ws / "batch.safetensors"))
    cap = run(ws, profile("models:MLP", init={"checkpoint": "runs/best.pt"}, inputs={"fixture": "batch.safetensors"},
                          device="cuda:0"))
    assert cap.meta["state"] == "checkpoint" and cap.meta["device"] == "cuda:0"
    with torch.no_grad():
        assert output_stats(cap)["mean"] == pytest.approx(model(BATCH).mean().item(), rel=1e-4)


# Issue 29 item 8: a 3 MB .npz of zeros drove the worker to 3.4 GB.
def _zip_bomb(path, members):
    import zipfile

    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, array in members.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, array)
            zf.writestr(f"{name}.npy", buf.getvalue())


def _lying_header(path, shape):
    """An .npy whose header declares ``shape`` but holds 8 bytes (NumPy would allocate the
    declared array whole before reading), stored uncompressed."""
    import zipfile

    header = repr({"descr": "<f8", "fortran_order": False, "shape": shape}).encode()
    header += b" " * (63 - (10 + len(header)) % 64) + b"\n"
    npy = b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + b"\x00" * 8
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("x.npy", npy)


@pytest.mark.parametrize("bomb", ["one-member", "many-members", "lying-header"])
def test_an_npz_is_checked_decompressed_before_it_is_read(ws, bomb):
    path = ws / "bomb.npz"
    if bomb == "one-member":
        _zip_bomb(path, {"x": np.zeros((64, 1024, 1024), dtype=np.uint8)})  # 64 MiB in about 64 KiB
    elif bomb == "many-members":
        _zip_bomb(path, {f"x{i}": np.zeros((4, 1024, 1024), dtype=np.uint8) for i in range(16)})
    else:
        _lying_header(path, (1 << 40,))  # 8 TiB declared
    assert path.stat().st_size < 1 << 20
    table = profile("models:MLP", inputs={"fixture": "bomb.npz"})  # (checkpoints are never .npz)
    tracemalloc.start()
    try:
        err = failure(ws, table, limits=Limits(max_saved_file_bytes=16 << 20))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (err.stage, err.error_type) == ("limit", "LimitExceeded"), err
    assert "bomb.npz (decompressed, at its member" in err.message and "max_saved_file_bytes" in err.message
    assert err.details["reached"] > 16 << 20
    assert peak < 8 << 20, f"peak {peak:,} bytes"


def test_an_npz_within_the_limit_decompressed_still_loads(ws):
    np.savez_compressed(ws / "zeros.npz", x=np.zeros((2, 4), dtype=np.float32))
    cap = run(ws, profile("models:MLP", inputs={"fixture": "zeros.npz"}), limits=Limits(max_saved_file_bytes=1 << 20))
    assert cap.failure is None
