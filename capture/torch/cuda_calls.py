"""``.cuda()`` in a model captured on the CPU (issue 49, item 3).

Meta's llama3 allocates its key/value caches with ``torch.zeros(...).cuda()`` in the
attention's constructor: on a machine without CUDA (or a capture whose recipe says
``device = "cpu"``) the build stops with "Torch not compiled with CUDA enabled" before
anything can be seen. While a CPU capture builds and runs the model, ``Tensor.cuda()`` and
``Module.cuda()`` leave the tensor or module where it is (the capture's device) instead:
the same shapes, dtypes and operations, on the CPU. The capture's ``meta`` says how many
calls were kept (``cuda_calls``); a capture on a CUDA device is left alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..graph.meta import CaptureMeta

CUDA_NOTE = ("the model called .cuda() {n} time(s); the capture runs on the CPU, so those tensors and modules "
             "stayed on the CPU (the same shapes, dtypes and operations)")


@contextmanager
def cuda_calls_kept_on_cpu(torch: Any, device: Any, meta: CaptureMeta) -> Iterator[None]:
    """Within the block, on a CPU ``device``, ``.cuda()`` returns the tensor or module as it
    is; how many calls did so is added to ``meta`` (``cuda_calls``) on the way out."""
    if getattr(device, "type", str(device)) != "cpu":
        yield
        return
    tensor_cuda, module_cuda = torch.Tensor.cuda, torch.nn.Module.cuda
    calls = [0]

    def tensor_stays(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return self

    def module_stays(self: Any, device: Any = None) -> Any:
        calls[0] += 1
        return self

    torch.Tensor.cuda, torch.nn.Module.cuda = tensor_stays, module_stays
    try:
        yield
    finally:
        torch.Tensor.cuda, torch.nn.Module.cuda = tensor_cuda, module_cuda
        if calls[0]:
            meta["cuda_calls"] = CUDA_NOTE.format(n=calls[0])
