"""A tiny pure-Python "framework" for TensorViz's own tests and benchmarks.

It lets the worker runtime (recipes, imports, frames, sources, limits, failures) be
exercised without JAX or Torch. A recipe with ``framework = "fake"`` names a workspace
function (or a class, built with ``init``) that computes with :class:`FakeArray`
recording proxies::

    def net(x, y, scale=2.0):
        h = (x @ y).relu()
        return h * scale, {"sum": h.sum()}

Every arithmetic operation on a proxy records a node (``add``, ``mul``, ``matmul``,
``relu``, ``sum``, ``reshape``…) with shapes broadcast like NumPy and the frame of the
workspace line that did it; Python scalars become literal operands. Every call of a
workspace function during the trace opens a nested ``scope`` group, so nested user calls
count against ``max_groups``. ``opaque(x)`` records an opaque boundary (coverage
becomes partial with ``opaque_kernel``). Shapes and dtypes only: no numbers are computed.

Only ``device = "cpu"`` exists: ``cuda:N`` fails the device check (no CPU fallback).
Input factories may build proxies with :func:`array` (only during a fake capture), after
``import fake_framework``.

A workspace class deriving from :class:`Module` is what discovery finds for it (its
declaration, :data:`CAPABILITIES`, names the ``fake_module`` kind and that base), so
the language server offers a lens on it and the command line's ``file.py:Class``
shorthand opens it, as for a Torch or Flax module.

It does not ship: a test (or benchmark) makes it a framework by setting
``TENSORVIZ_TEST_PLUGINS`` to :data:`PLUGIN` (the registry's way in for plug-ins that do
not ship, :mod:`capture.frameworks`); the worker inherits that and loads this file. The
module keeps the framework plug-in contract, :class:`capture.worker.plugin.FrameworkPlugin`
(``VERSION``, :func:`imported_version`, :func:`check_supported`, :func:`probe_device`,
:func:`capture`), as the Torch and JAX plug-ins do.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from capture.frameworks.capabilities import Capabilities, CandidateKind, ClassNamespace
from capture.graph.model import Capture, Coverage, Operand
from capture.worker.builder import GraphBuilder
from capture.worker.context import CaptureContext
from capture.worker.errors import CaptureError
from capture.worker.plugin_helpers import code_position

VERSION = "1"
# The value of ``capture.frameworks.TEST_PLUGINS_ENV`` that makes this file the "fake" framework.
PLUGIN = f"fake={Path(__file__).resolve()}"

_active: "_Tracer | None" = None

# What the fake framework declares about itself (capture.frameworks.capabilities), as
# capture/torch/declaration.py does for Torch: the one place the rest of TensorViz
# learns about it.
CAPABILITIES = Capabilities(
    label="Fake",
    kinds=(CandidateKind("fake_module", "fake module",
                         namespaces=(ClassNamespace("fake_framework", frozenset({"Module"}), "fake_framework.Module"),),
                         init_contract="Called with no arguments in the capture worker. Returns a built {name}."),),
    # cuda:N is accepted by the recipe and refused by the device check (no CPU fallback).
    devices=("cpu", "cuda"),
    values_note="Traced by the fake framework: shapes and dtypes only (nothing was computed).",
)


class Module:
    """The base of a fake model class: built with its init arguments, called with the inputs."""


def imported_version() -> str:
    """Nothing to import: keeps ``VERSION``."""
    return ""


def check_supported(version: str) -> None:
    """Every version of the fake framework is supported."""


def probe_device(ctx: CaptureContext) -> None:
    if ctx.recipe.device != "cpu":
        raise CaptureError(
            "device",
            f"the fake framework has no {ctx.recipe.device} backend (only cpu); no CPU fallback is made",
            {"device": ctx.recipe.device, "available": ["cpu"]},
        )


def capture(ctx: CaptureContext) -> Capture:
    global _active
    tracer = _Tracer(ctx)
    _active = tracer
    try:
        return tracer.run()
    finally:
        _active = None


def array(shape: list[int] | tuple[int, ...], dtype: str = "float32") -> "FakeArray":
    """A traced input array, for input factories of fake recipes."""
    if _active is None:
        raise RuntimeError("fake.array() is only available during a fake capture")
    return _active.new_input(tuple(shape), dtype)


def opaque(x: "FakeArray") -> "FakeArray":
    """An unexpanded subprogram boundary around ``x`` (like a JAX ``while``)."""
    if _active is None:
        raise RuntimeError("fake.opaque() is only available during a fake capture")
    _active.opaque_seen = True
    return _active.record("while", [x], x.shape, x.dtype, opaque=True)


class _Tracer:
    def __init__(self, ctx: CaptureContext) -> None:
        self.ctx = ctx
        self.b: GraphBuilder = ctx.new_builder()
        self.group_stack: list[int] = []
        self.opaque_seen = False
        self._user_code: dict[Any, bool] = {}

    # --------------------------------------------------------------- running

    def run(self) -> Capture:
        ctx = self.ctx
        recipe = ctx.recipe
        ctx.progress("importing the model", 0.1)
        target = ctx.import_object(recipe.model)
        if recipe.init.factory is not None:
            model = ctx.call_factory(recipe.init.factory)
        elif isinstance(target, type):
            init_args, init_kwargs = ctx.materialize("init", lambda leaf: self.new_input(leaf.desc.shape, leaf.desc.dtype))
            model = target(*init_args, **init_kwargs)
        else:
            if not recipe.init.is_empty:
                raise CaptureError("recipe", f"{recipe.model} is a function: its init must be empty")
            model = target
        if not callable(model):
            raise CaptureError("trace", f"{recipe.model} built a {type(model).__name__}, which is not callable")
        args, kwargs = ctx.inputs_call(lambda leaf: self.new_input(leaf.desc.shape, leaf.desc.dtype))
        inputs = {"dict": [["args", {"tuple": [self.tree(a) for a in args]}],
                           ["kwargs", {"dict": [[k, self.tree(v)] for k, v in kwargs.items()]}]]}
        ctx.progress("tracing", 0.5)
        previous = sys.getprofile()
        sys.setprofile(self._profile)
        try:
            result = model(*args, **kwargs)
        finally:
            sys.setprofile(previous)
        outputs = self.tree(result)
        if not self.b.nodes:
            raise CaptureError("trace", f"{recipe.model} recorded no operations; nothing to show as a graph")
        ctx.progress("traced", 1.0)
        return self.b.build(
            backend="fake",
            framework="fake",
            framework_version=VERSION,
            coverage=Coverage(
                scope="traced_program",
                status="partial" if self.opaque_seen else "complete",
                reasons=["opaque_kernel"] if self.opaque_seen else [],
                effects="none",
            ),
            inputs=inputs,
            outputs=outputs,
        )

    def tree(self, obj: Any) -> Any:
        if isinstance(obj, FakeArray):
            return {"value": obj.vid}
        if obj is None or type(obj) in (bool, int, float, str):
            return {"static": obj}
        if isinstance(obj, list):
            return {"list": [self.tree(x) for x in obj]}
        if isinstance(obj, tuple):
            return {"tuple": [self.tree(x) for x in obj]}
        if isinstance(obj, dict):
            return {"dict": [[k if type(k) in (str, int) else str(k), self.tree(v)] for k, v in obj.items()]}
        raise CaptureError("trace", f"the model returned a {type(obj).__name__}, which the fake framework cannot describe")

    # --------------------------------------------------------------- groups from calls

    def _is_user(self, code: Any) -> bool:
        known = self._user_code.get(code)
        if known is None:
            known = self._user_code[code] = self.ctx.is_workspace_file(code.co_filename)
        return known

    def _profile(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call" and self._is_user(frame.f_code):
            parent = self.group_stack[-1] if self.group_stack else None
            gid = self.b.group("scope", frame.f_code.co_qualname, parent)
            self.group_stack.append(gid)
        elif event == "return" and self._is_user(frame.f_code) and self.group_stack:
            self.group_stack.pop()

    # --------------------------------------------------------------- recording

    def new_input(self, shape: tuple, dtype: str) -> "FakeArray":
        return FakeArray(self, self.b.value(list(shape), dtype), tuple(shape), dtype)

    def user_frame(self) -> int | None:
        f = sys._getframe(1)
        while f is not None:
            if self._is_user(f.f_code):
                pos = _column(f)
                return self.b.frame(self.ctx.frame_for(f.f_code.co_filename, f.f_lineno, pos, f.f_code.co_name))
            f = f.f_back
        return None

    def record(self, op: str, operands: list, shape: tuple, dtype: str, *, params: dict | None = None, opaque: bool = False) -> "FakeArray":
        ins = []
        for pos, x in enumerate(operands):
            if isinstance(x, FakeArray):
                ins.append(Operand(pos, value=x.vid))
            elif x is None or type(x) in (bool, int, float, str):
                ins.append(Operand(pos, literal=x))
            else:
                raise TypeError(f"fake {op}: unsupported operand of type {type(x).__name__}")
        out = self.b.value(list(shape), dtype)
        group = self.group_stack[-1] if self.group_stack else None
        self.b.node(op, ins, [out], params=params, group=group, frame=self.user_frame(), opaque=opaque)
        return FakeArray(self, out, shape, dtype)


def _column(frame: Any) -> int:
    return code_position(frame.f_code, frame.f_lasti)[1]


def _broadcast(a: tuple, b: tuple, op: str) -> tuple:
    out = []
    for i in range(max(len(a), len(b))):
        x = a[len(a) - 1 - i] if i < len(a) else 1
        y = b[len(b) - 1 - i] if i < len(b) else 1
        if x != y and 1 not in (x, y):
            raise ValueError(f"fake {op}: shapes {list(a)} and {list(b)} do not broadcast")
        out.append(y if x == 1 else x)
    return tuple(reversed(out))


class FakeArray:
    """A recording proxy: shape and dtype, no data."""

    __slots__ = ("_t", "vid", "shape", "dtype")
    __array_priority__ = 1000

    def __init__(self, tracer: _Tracer, vid: int, shape: tuple, dtype: str) -> None:
        self._t = tracer
        self.vid = vid
        self.shape = tuple(shape)
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"FakeArray(%{self.vid}, {self.dtype}{list(self.shape)})"

    def _binary(self, op: str, other: Any, reverse: bool = False) -> "FakeArray":
        other_shape = other.shape if isinstance(other, FakeArray) else ()
        if not (isinstance(other, FakeArray) or type(other) in (bool, int, float)):
            return NotImplemented
        shape = _broadcast(self.shape, other_shape, op)
        operands = [other, self] if reverse else [self, other]
        return self._t.record(op, operands, shape, self.dtype)

    def __add__(self, o):
        return self._binary("add", o)

    def __radd__(self, o):
        return self._binary("add", o, True)

    def __sub__(self, o):
        return self._binary("sub", o)

    def __rsub__(self, o):
        return self._binary("sub", o, True)

    def __mul__(self, o):
        return self._binary("mul", o)

    def __rmul__(self, o):
        return self._binary("mul", o, True)

    def __truediv__(self, o):
        return self._binary("div", o)

    def __rtruediv__(self, o):
        return self._binary("div", o, True)

    def __neg__(self):
        return self._t.record("neg", [self], self.shape, self.dtype)

    def __matmul__(self, o):
        if not isinstance(o, FakeArray):
            return NotImplemented
        a, b = self.shape, o.shape
        if len(a) < 1 or len(b) < 1:
            raise ValueError("fake matmul: scalar operands")
        if len(b) == 1:
            if a[-1] != b[0]:
                raise ValueError(f"fake matmul: shapes {list(a)} and {list(b)} do not match")
            shape = a[:-1]
        else:
            if a[-1] != b[-2]:
                raise ValueError(f"fake matmul: shapes {list(a)} and {list(b)} do not match")
            shape = _broadcast(a[:-2], b[:-2], "matmul") + a[-2:-1] + b[-1:]
        return self._t.record("matmul", [self, o], shape, self.dtype)

    def relu(self) -> "FakeArray":
        return self._t.record("relu", [self], self.shape, self.dtype)

    def sum(self) -> "FakeArray":
        return self._t.record("reduce_sum", [self], (), self.dtype, params={"axes": list(range(len(self.shape)))})

    def reshape(self, *shape: int) -> "FakeArray":
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        n = 1
        for d in self.shape:
            n *= d
        m = 1
        for d in shape:
            m *= d
        if n != m:
            raise ValueError(f"fake reshape: cannot reshape {list(self.shape)} to {list(shape)}")
        return self._t.record("reshape", [self], tuple(shape), self.dtype, params={"new_sizes": list(shape)})

    @property
    def T(self) -> "FakeArray":
        return self._t.record("transpose", [self], tuple(reversed(self.shape)), self.dtype)
