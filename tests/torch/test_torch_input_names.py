"""Names people wrote (issue 11, item 7): a Torch capture labels each input tensor
(``measured["input"]``) after the ``forward`` parameter it binds to, keyword arguments
after their key, ``args[i]`` only for ``*args``; the ``inputs`` structure is unchanged."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch_workspace import capture_in_process, forget_workspace_modules, profile, tensor, write  # noqa: E402

pytestmark = pytest.mark.torch

MODELS = """
import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(16, 8)

    def forward(self, input_ids, attention_mask=None):
        h = self.embed(input_ids)
        if attention_mask is not None:
            h = h * attention_mask.unsqueeze(-1)
        return h


class Varargs(nn.Module):
    def forward(self, x, *extra):
        return x + extra[0]


class Batch(nn.Module):
    def forward(self, batch, scale):
        return batch[0] * batch[1]["mask"] * scale


def batch_inputs():
    return {"args": ([torch.ones(2, 3), {"mask": torch.ones(2, 3)}],), "kwargs": {"scale": torch.ones(())}}


def add(a, b):
    return a + b


class Linear(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, features):
        return self.fc(features)
"""

IDS = tensor([2, 5], "int64", generator={"kind": "randint", "low": 0, "high": 16})
MASK = tensor([2, 5], "float32", generator={"kind": "ones"})


@pytest.fixture
def ws(tmp_path):
    write(tmp_path, {"named.py": MODELS})
    yield tmp_path
    forget_workspace_modules(tmp_path)


def input_labels(cap) -> dict[str, str]:
    """``{structure path: measured input label}`` for every input tensor."""
    out = {}

    def walk(tree, path):
        if "value" in tree:
            out[path] = cap.values[tree["value"]].measured.get("input")
        for i, c in enumerate(tree.get("list") or tree.get("tuple") or []):
            walk(c, f"{path}[{i}]")
        for k, c in tree.get("dict") or []:
            walk(c, f"{path}.{k}")

    for key, sub in cap.inputs["dict"]:
        walk(sub, key)
    return out


@pytest.mark.parametrize(("model", "fields", "expected"), [
    pytest.param("named:Encoder", {"args": [IDS]}, {"args[0]": "input_ids"}, id="forward-parameter"),
    pytest.param("named:Encoder", {"args": [IDS, MASK]}, {"args[0]": "input_ids", "args[1]": "attention_mask"},
                 id="optional-parameter-by-position"),
    pytest.param("named:Encoder", {"args": [IDS], "kwargs": {"attention_mask": MASK}},
                 {"args[0]": "input_ids", "kwargs.attention_mask": "attention_mask"}, id="kwargs-keep-their-names"),
    pytest.param("named:Encoder", {"kwargs": {"input_ids": IDS}}, {"kwargs.input_ids": "input_ids"}, id="all-keyword"),
    pytest.param("named:Varargs", {"args": [tensor([2]), tensor([2])]}, {"args[0]": "x", "args[1]": "args[1]"},
                 id="star-args-fall-back"),
    pytest.param("named:add", {"args": [tensor([2]), tensor([2])]}, {"args[0]": "a", "args[1]": "b"}, id="function"),
    pytest.param("named:Batch", {"inputs": {"factory": "named:batch_inputs"}},
                 {"args[0][0]": "batch[0]", "args[0][1].mask": "batch[1]['mask']", "kwargs.scale": "scale"},
                 id="nested-paths"),
])
def test_inputs_are_labelled_after_forward_parameters(ws, model, fields, expected):
    cap, _ = capture_in_process(ws, profile(model, **fields))
    assert input_labels(cap) == expected


def test_a_training_step_keys_input_gradients_by_parameter_name(ws):
    table = profile("named:Linear", kind="training_step", grad_enabled=True, mode="train",
                    args=[tensor([3, 4], requires_grad=True)], step={"loss": "sum"})
    cap, _ = capture_in_process(ws, table)
    grads = dict(dict(cap.outputs["dict"])["grads"]["dict"])
    assert set(grads) == {"fc.weight", "fc.bias", "features"}
    assert cap.values[grads["features"]["value"]].measured["grad_of"] == "features"
