"""The ``TorchDispatchMode`` of a :class:`capture.torch.trace.TorchTrace`'s Python recorder:
every ATen op reaches ``TorchTrace._dispatch`` (the native recorder, ``capture.torch.native``,
replaces it where it can be used), and the Dynamo guard chosen for it.

Torch is imported at module level: one of the worker's framework modules.
"""

from __future__ import annotations

import sys
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..worker.errors import LimitExceeded

_NoTorchFunction = torch._C.DisableTorchFunction


class _Mode(TorchDispatchMode):
    def __init__(self, trace: Any) -> None:  # a capture.torch.trace.TorchTrace (no import: a circle)
        super().__init__()
        self.trace = trace

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # By default a mode's __torch_dispatch__ is wrapped in torch._dynamo.disable: that
        # imports torch._dynamo on the first op (1.5-3 s) and costs every op a few
        # microseconds, to keep torch.compile out of frames it could never see here
        # unless the model compiles. Once torch._dynamo is loaded, _skip_dynamo_below marks
        # this method's code instead (else _DynamoSafeMode keeps the wrapper).
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.trace._in_hook:  # a module hook's own tensor calls (a result's statistics), not the model's
            return func(*args, **(kwargs or {}))
        try:
            # The trace's own tensor calls (strides, storages, statistics) are not the
            # model's: they bypass the function mode (FunctionCalls) and run faster.
            with _NoTorchFunction():
                return self.trace._dispatch(func, args, kwargs)
        except LimitExceeded as exc:
            if self.trace.limit_error is None:
                self.trace.limit_error = exc
            raise
        except Exception as exc:
            # Only a fake tensor (an abstract capture) raises what needs data. The abstract
            # module is imported here, not with this one: it imports sympy (through
            # PyTorch's symbolic shapes), ~0.5 s of every eager capture's start otherwise.
            from .abstract import NEEDS_DATA, data_dependent_failure, op_name

            if not isinstance(exc, NEEDS_DATA):
                raise
            trace = self.trace
            fid = trace.frame_of(sys._getframe(1))
            err = data_dependent_failure(exc, op_name(func), trace.b.frames[fid] if fid is not None else None, "forward")
            if trace.data_error is None:
                trace.data_error = err
            raise err from None


class _DynamoSafeMode(_Mode):
    """The same mode, with PyTorch's default dynamo guard (used once torch._dynamo is loaded,
    where :func:`_skip_dynamo_below` cannot mark the mode's code instead)."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return True

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return _Mode.__torch_dispatch__(self, func, types, args, kwargs)


def _skip_dynamo_below(code: Any) -> bool:
    """Mark ``code`` (the mode's ``__torch_dispatch__``) so that Dynamo never compiles it
    nor any frame it calls: what PyTorch's guard on a dispatch mode does (a
    ``torch._dynamo.disable(recursive=True)`` wrapper), set once on the code object instead of
    paid as two Python calls and two eval-frame swaps per op (~1 us/op measured, 3 % of a
    recorded Llama's own cost). False when this PyTorch has no such setting (the wrapper
    is used)."""
    try:
        from torch._C._dynamo.eval_frame import _FrameAction, _FrameExecStrategy, set_code_exec_strategy

        set_code_exec_strategy(code, _FrameExecStrategy(_FrameAction.SKIP, _FrameAction.SKIP))
    except Exception:  # noqa: BLE001 - another PyTorch's internals: keep PyTorch's own guard
        return False
    return True


def _mode_class() -> type[_Mode]:
    """The dispatch mode to record with: once torch._dynamo is loaded (a model that may
    compile), one whose frames Dynamo skips."""
    if "torch._dynamo" not in sys.modules or _skip_dynamo_below(_Mode.__torch_dispatch__.__code__):
        return _Mode
    return _DynamoSafeMode
