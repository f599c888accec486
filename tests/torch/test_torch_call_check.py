"""Inputs a model's call cannot take are a recipe failure that names them, before the
call: a TypeError raised at the call itself carried no frame of the user's code and was
reported as TensorViz's own bug (a transformers builder function given ``input_ids``)."""

from __future__ import annotations

import pytest

from capture.worker.errors import CaptureError
from capture_workspace import forget_workspace_modules, profile_table, tensor, write

pytest.importorskip("torch")

from torch_workspace import capture_in_process  # noqa: E402

MODEL = '''
import torch


def build():
    return torch.nn.Linear(3, 4)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 4)

    def forward(self, x):
        return self.lin(x)
'''


@pytest.fixture
def ws(tmp_path):
    write(tmp_path, {"model.py": MODEL})
    yield tmp_path
    forget_workspace_modules(tmp_path)


@pytest.mark.parametrize("model, call, given", [("model:build", "build", {}),
                                               ("model:Net", "Net.forward", {"x": tensor([1, 3])})])
def test_inputs_the_call_does_not_take_are_the_recipes_to_fix(ws, model, call, given):
    table = profile_table(model, kwargs={**given, "input_ids": tensor([1, 3])})
    with pytest.raises(CaptureError) as err:
        capture_in_process(ws, table)
    assert err.value.stage == "recipe"
    assert f"inputs: {call} does not take these inputs: got an unexpected keyword argument 'input_ids'" in str(err.value)


def test_inputs_it_takes_still_capture(ws):
    cap, _ = capture_in_process(ws, profile_table("model:Net", args=[tensor([1, 3])]))
    assert cap.failure is None and cap.nodes
