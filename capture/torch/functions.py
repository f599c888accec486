"""Function groups: the ``torch.*`` / ``torch.nn.functional`` call each kernel ran under.

The dispatch mode of :class:`capture.torch.trace.TorchTrace` sees kernels after
composite decompositions (``F.linear`` arrives as ``aten::t`` + ``aten::addmm``, with
``aten::view`` around it for a 3-d input). A :class:`FunctionCalls` mode beside it, a
``TorchFunctionMode`` active while the trace records, sees the public call those kernels
ran under, before autograd and dispatch: ``torch.nn.functional.linear``,
``torch.layer_norm``, ``torch.Tensor.softmax``. It records, for the outermost call only
(a call inside one, such as ``F.layer_norm`` calling ``torch.layer_norm``, reaches no
mode: PyTorch pops a function mode while its handler runs):

* a call that ran two or more kernels, all directly in the group that was open when it
  started: a group of its own, ``kind = "function"``, ``name`` the function's short
  public name (``linear``, ``layer_norm``, ``scaled_dot_product_attention``),
  ``attrs.function`` its qualified name (``torch.nn.functional.linear``),
  ``attrs.frame`` the call site (the frame id of the line that called it); its kernels
  move into it (the capture keeps every kernel);
* a call that ran one kernel: no group; the node's ``params["function"]`` is the
  qualified name;
* a ``dtensor::`` boundary node (``capture.torch.dtensors``) made as the call read a
  value made before it stays where it is: it joins the groups of the two values and is
  not one of the function's kernels;
* a call that ran no kernel, or one during which another group opened (a module or a
  scope ran inside it) or whose kernels landed elsewhere (autograd's, in backward
  groups): nothing.

Names: a function of ``torch.nn.functional`` is named there (``F.conv2d`` is also
``torch.conv2d``: ``torch.nn.functional.conv2d``), else of ``torch``, else a method or
property of ``torch.Tensor`` (``torch.Tensor.softmax``, ``torch.Tensor.__getitem__``,
``torch.Tensor.T``), else its own public ``torch.…`` module (``torch.nn.init.normal_``).
A function outside the ``torch`` namespace is not named and records nothing.

Torch is imported at module level: one of the worker's framework modules.
"""

from __future__ import annotations

import sys
from types import MethodType
from typing import Any, Protocol

import torch
from torch.overrides import TorchFunctionMode

from ..worker.builder import GraphBuilder
from .dtensors import BOUNDARY_OPS
from ..worker.errors import LimitExceeded

GROUP_KIND = "function"
# ``x.data``: an aten::detach under a dispatch mode, no op at all natively (capture.torch.native).
_DATA = "torch.Tensor.data"
# A call's kernels become a function group from this many; one gets params["function"].
MIN_GROUP_KERNELS = 2
# public_name of every function a mode has received, shared by the captures of a process
# (the torch namespace's functions; a property's getter is a new but equal object each
# read); emptied past this many (a program passing new callables through a mode).
_NAMES: dict[Any, tuple[str, str] | None] = {}
_NAMES_KEPT = 4096


def public_name(func: Any) -> tuple[str, str] | None:
    """``(qualified, short)`` public name of a function a function mode receives, or
    None when it has none in the ``torch`` namespace."""
    name = getattr(func, "__name__", None)
    if not isinstance(name, str):
        return None
    if name == "__get__":  # a Tensor property's getter (x.T, x.mT)
        prop = getattr(getattr(func, "__self__", None), "__name__", None)
        return (f"torch.Tensor.{prop}", prop) if isinstance(prop, str) else None
    functional = torch.nn.functional
    if getattr(functional, name, None) is func:
        return f"torch.nn.functional.{name}", name
    if getattr(torch, name, None) is func:
        return f"torch.{name}", name
    if getattr(torch.Tensor, name, None) is func or getattr(torch._C.TensorBase, name, None) is func:
        return f"torch.Tensor.{name}", name
    module = getattr(func, "__module__", None)
    if isinstance(module, str) and module.startswith("torch.") and not any(p.startswith("_") for p in module.split(".")):
        return f"{module}.{name}", name
    return None


class Recording(Protocol):
    """What the mode reads and sets of the trace that owns it
    (:class:`capture.torch.trace.TorchTrace`, which imports this module)."""

    b: GraphBuilder
    limit_error: LimitExceeded | None

    @property
    def current_group(self) -> int | None: ...

    def frame_of(self, f: Any) -> int | None: ...


class FunctionCalls(TorchFunctionMode):
    """The function mode of one trace's recording (see the module docstring)."""

    def __init__(self, trace: Recording) -> None:
        super().__init__()
        self.trace = trace
        if len(_NAMES) > _NAMES_KEPT:
            _NAMES.clear()
        # The native recorder (capture.torch.native.recording.NativeRecording) when it
        # records: its own handler (Recorder::torch_function: what __torch_function__ and
        # _group do here, on rows not yet made into nodes; _ran after a sync inside a
        # call) replaces this class's __torch_function__ for this mode.
        native = self._native = getattr(trace, "_native", None)
        if native is not None:
            handler = native.function_mode(names=_NAMES, public_name=public_name, ran=self._ran, data=_DATA,
                                           kind=GROUP_KIND)
            # bound to this mode: PyTorch calls a mode's handler only if its __self__ is the mode
            self.__torch_function__ = MethodType(handler, self)  # type: ignore[method-assign]

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        if self._native is not None:
            self._native.function_mode_exited()
            self.__dict__.pop("__torch_function__", None)  # the mode <-> its bound handler cycle

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        if kwargs is None:
            kwargs = {}
        try:
            names = _NAMES[func]
        except (KeyError, TypeError):  # TypeError: an unhashable callable
            names = public_name(func)
            try:
                _NAMES[func] = names
            except TypeError:
                pass
        if names is None:
            return func(*args, **kwargs)
        trace = self.trace
        b = trace.b
        nodes = b.nodes
        start, groups_before, parent = len(nodes), len(b.groups), trace.current_group
        out = func(*args, **kwargs)
        end = len(nodes)
        if end > start:
            if end == start + 1 and len(b.groups) == groups_before:
                # One kernel (most calls): its node names the function, unless it landed
                # elsewhere or is a boundary node (the general case below says when).
                node = nodes[start]
                if node.group == parent and node.op not in BOUNDARY_OPS and trace.current_group == parent:
                    node.params["function"] = names[0]
                    return out
            # The caller's frame (this frame's caller, as when the call started).
            self._ran(names, start, groups_before, parent, sys._getframe(1))
        return out

    def _ran(self, names: tuple[str, str], start: int, groups_before: int, parent: int | None, caller: Any) -> None:
        """A call that ran kernels ``start`` on: a function group, or its one kernel
        named (a limit reached making the group is kept as the trace's ``limit_error``)."""
        try:
            self._group(names, start, groups_before, parent, caller)
        except LimitExceeded as exc:
            if self.trace.limit_error is None:
                self.trace.limit_error = exc
            raise

    def _group(self, names: tuple[str, str], start: int, groups_before: int, parent: int | None, caller: Any) -> None:
        trace = self.trace
        b = trace.b
        nodes = b.nodes
        end = len(nodes)
        if len(b.groups) != groups_before or trace.current_group != parent:
            return
        for i in range(start, end):
            if nodes[i].group != parent:
                return
        kernels = [i for i in range(start, end) if nodes[i].op not in BOUNDARY_OPS or not _boundary_into(nodes, i, start)]
        if not kernels:
            return
        qualified, short = names
        if len(kernels) < MIN_GROUP_KERNELS:
            nodes[kernels[0]].params["function"] = qualified
            return
        attrs: dict[str, Any] = {"function": qualified}
        frame = trace.frame_of(caller)
        if frame is not None:
            attrs["frame"] = frame
        gid = b.group(GROUP_KIND, short, parent, attrs)
        for i in kernels:
            nodes[i].group = gid


def _boundary_into(nodes: list, i: int, start: int) -> bool:
    """Whether node ``i`` is a DTensor boundary (``capture.torch.dtensors``) joining a value
    made before the call (node ``start`` on) to the call: it stays between the two groups."""
    node = nodes[i]
    if node.op not in BOUNDARY_OPS or not node.inputs:
        return False
    src = node.inputs[0].value
    return not any(src in nodes[j].outputs for j in range(start, i))
