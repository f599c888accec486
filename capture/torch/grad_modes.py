"""Forwards that switch autograd modes themselves (``@torch.inference_mode()``,
``@torch.no_grad()``, ``@torch.enable_grad()`` on ``forward``, or the same as ``with``
blocks).

``no_grad`` and ``enable_grad`` change only whether autograd records, which the trace
follows as it is. Inference mode also stops the version counters of the tensors made in
it ("Inference tensors do not track version counter"), and the trace reads those counters
to tell an in-place write from a new value. While the capture runs, inference mode is
therefore entered as what it means for the values: grad off (``inference_mode(False)``:
grad on), as ``torch.no_grad`` would. Every value the forward computes is the same; the
tensors are ordinary ones, so writes stay visible. The capture's ``meta`` says so
(``inference_mode``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..graph.meta import CaptureMeta

INFERENCE_NOTE = (
    "the model entered torch.inference_mode {n} time(s); during the capture it ran as torch.no_grad "
    "(the same values; tensors keep their version counters, so in-place writes are recorded)"
)


@contextmanager
def inference_mode_as_grad_mode(torch: Any, meta: CaptureMeta) -> Iterator[None]:
    """Within the block, ``torch.inference_mode(mode)`` sets grad mode to ``not mode`` (and
    restores it on exit) instead of entering inference mode; how many times the model
    entered it is added to ``meta`` (``inference_mode``) on the way out."""
    cls = torch.autograd.grad_mode.inference_mode
    original = cls.__enter__, cls.__exit__
    entered = [0]

    def enter(self: Any) -> None:
        self._tensorviz_grad_before = torch.is_grad_enabled()
        torch._C._set_grad_enabled(not self.mode)
        if self.mode:
            entered[0] += 1

    def exit_(self: Any, *exc: Any) -> None:
        torch._C._set_grad_enabled(self.__dict__.pop("_tensorviz_grad_before", True))

    cls.__enter__, cls.__exit__ = enter, exit_
    try:
        yield
    finally:
        cls.__enter__, cls.__exit__ = original
        if entered[0]:
            meta["inference_mode"] = INFERENCE_NOTE.format(n=entered[0])
