"""``.cuda()`` in a model captured on the CPU (issue 49): Meta's llama3 allocates its caches
with ``torch.zeros(...).cuda()`` in the constructor; on the CPU the calls leave the tensors
and modules where they are, and ``meta`` says so. Models of our own."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch_workspace import capture_in_process, profile, tensor, write  # noqa: E402

pytestmark = pytest.mark.torch

MODEL = '''
import torch
from torch import nn


class CachedAttention(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.proj = nn.Linear(dim, dim).cuda()
        self.cache_k = torch.zeros((2, 4, dim)).cuda()

    def forward(self, x):
        self.cache_k[:, : x.shape[1]] = self.proj(x)
        return self.cache_k.cuda(non_blocking=True).sum(dim=1)
'''


def test_cuda_calls_stay_on_the_cpu(ws):
    write(ws, {"cudaish.py": MODEL})
    tensor_cuda, module_cuda = torch.Tensor.cuda, torch.nn.Module.cuda
    cap = capture_in_process(ws, profile("cudaish:CachedAttention", args=[tensor([2, 3, 8])]))[0]
    assert cap.failure is None
    ops = [n.op for n in cap.nodes]
    assert "aten::copy_" in ops and any(op.startswith("aten::sum") for op in ops), ops
    assert cap.meta["cuda_calls"].startswith("the model called .cuda() 3 time(s)")
    assert (torch.Tensor.cuda, torch.nn.Module.cuda) == (tensor_cuda, module_cuda)


def test_a_model_without_cuda_calls_says_nothing(ws):
    write(ws, {"plain.py": MODEL.replace(".cuda()", "").replace(".cuda(non_blocking=True)", "")})
    cap = capture_in_process(ws, profile("plain:CachedAttention", args=[tensor([2, 3, 8])]))[0]
    assert cap.failure is None and "cuda_calls" not in cap.meta
