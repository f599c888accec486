"""Flax module calls recorded while a JAX program is traced, as ``module`` groups.

``jax.make_jaxpr`` sees primitives, not Flax modules. While tracing, each call of a
Flax module method (NNX ``__call__`` and the other public methods a model calls on its
submodules; every Linen method Linen lets ``nn.intercept_methods`` see) runs inside a
``jax.named_scope`` whose name is a marker, ``tv_module#<i>``, and appends record ``i``
to a side table: the module's attribute path from the root (``layers.0.attn``), its
class, the method, and the Python frames of the call site. JAX keeps name stacks in
every equation's ``source_info``, also inside nested jaxprs (``jit``, ``remat``,
``scan``, ``cond`` and ``vmap`` bodies), so the converter
(:mod:`capture.jax.convert`) turns the marked part of a name stack into a group of
kind ``module`` wherever the equation lands.

A name scope changes equation metadata only: the traced program (primitives, params,
their order) is the same with and without the interception (``tests/jax`` proves it).

NNX paths: the modules the traced callable carries are registered, by object identity,
under their attribute paths (``nnx.List``/``nnx.Dict`` entries included) when they are
merged inside the trace. NNX transforms (``nnx.jit``,
``nnx.vmap``, ``nnx.scan``, ``nnx.remat``, ``nnx.cond``) call the function with clones
made inside their own trace; a clone is found by walking the Python frames from the
call site outwards: the nearest local that is an unregistered module holding the callee
gives its relative path, and the nearest registered module of the clone's own class
(the argument the transform was given) gives the clone's path. A callee found neither
way keeps ``path: None`` and is named by its class.

Imports nothing of JAX or Flax at module level (the capture package stays importable
with the standard library).
"""

from __future__ import annotations

import sys
import types
from contextlib import contextmanager
from typing import Any, Callable, Iterator, cast
from types import FrameType

from .module_groups import MODULE_MARKER as MARKER
from .frame_table import _library_prefixes

_MAX_CALL_FRAMES = 200  # Python frames kept per call site at most
_MAX_SEARCH_FRAMES = 200  # frames walked to find where a transform's clone came from
_SHALLOW_ITEMS = 64  # items of a tuple/list/dict local looked at for modules

# NNX Module API methods: never module calls, even when a subclass overrides them.
_NNX_API = frozenset({"sow", "perturb", "iter_modules", "iter_children", "set_attributes", "train", "eval",
                      "set_mode", "view", "view_info"})


class CallRecord:
    """One intercepted module call (``records[i]`` for marker ``i``)."""

    __slots__ = ("name", "path", "parent", "cls", "module", "method", "framework", "scope", "codes", "lastis")

    def __init__(self, name: str, path: str | None, parent: int | None, cls: type, method: str, framework: str,
                 scope: str | None, codes: list, lastis: list) -> None:
        self.name = name
        self.path = path
        # The record of the call this one was traced inside (None at the top): a jit body
        # JAX reuses from its cache carries the first call's records, which the converter
        # re-bases onto the call it actually sits in.
        self.parent = parent
        self.cls = cls.__qualname__
        self.module = cls.__module__
        self.method = method
        self.framework = framework
        # Linen's own name scope around this call (``Dense_0``): the module group takes its place.
        self.scope = scope
        # The call's Python frames, innermost first, up to the first outside the standard
        # library, installed packages and TensorViz: the converter picks the user's frame.
        self.codes = codes
        self.lastis = lastis

    def attrs(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "class": self.cls, "module": self.module}
        if self.method != "__call__":
            out["method"] = self.method
        out["framework"] = self.framework
        return out


class ModuleCalls:
    """The side table of one trace, and the interception that fills it."""

    def __init__(self) -> None:
        self.records: list[CallRecord] = []
        self._stack: list[tuple[str | None, int]] = []  # (path, record) of the calls being traced
        self._paths: dict[int, str] = {}  # id(NNX module) -> attribute path
        self._keep: list[Any] = []  # the registered objects, so their ids stay theirs
        self._graphs: dict[int, dict[int, str]] = {}  # id(unregistered module) -> {id(node): relative path}
        self._nnx: Any = None
        self._nnx_top: tuple[int, str] | None = None  # (id, method) of the innermost NNX call
        self._library: dict[Any, bool] = {}  # code -> in a library (not a call site)
        self._prefixes = tuple(_library_prefixes())

    # ------------------------------------------------------------------ the call

    def _enter(self, path: str | None, cls: type, method: str, framework: str, scope: str | None) -> int:
        parent, parent_rec = self._stack[-1] if self._stack else (None, None)
        if path is None:
            name = cls.__name__
        elif path == parent:  # a module calling another method of itself
            name = method
        elif parent and path.startswith(parent + "."):
            name = path[len(parent) + 1:]
        else:
            name = path or cls.__name__
        if method != "__call__" and path != parent:
            name = f"{name}.{method}"
        i = len(self.records)
        codes, lastis = self._call_site()
        self.records.append(CallRecord(name, path, parent_rec, cls, method, framework, scope, codes, lastis))
        self._stack.append((path, i))
        return i

    def _call_site(self) -> tuple[list, list]:
        codes: list[Any] = []
        lastis: list[int] = []
        library = self._library
        f: FrameType | None = sys._getframe(3)  # above _call_site, _enter and the interceptor
        while f is not None and len(codes) < _MAX_CALL_FRAMES:
            code = f.f_code
            codes.append(code)
            lastis.append(f.f_lasti)
            lib = library.get(code)
            if lib is None:
                lib = library[code] = code.co_filename.startswith(self._prefixes) or code.co_filename.startswith("<")
            if not lib:
                break
            f = f.f_back
        return codes, lastis

    # ------------------------------------------------------------------ NNX

    def register(self, obj: Any, prefix: str = "") -> None:
        """Record the attribute path of every NNX module in ``obj``'s graph."""
        nnx = self._nnx
        if nnx is None:
            return
        for keys, node in _modules(nnx, obj):
            if id(node) not in self._paths:
                self._paths[id(node)] = _join(prefix, keys)
                self._keep.append(node)

    def _graph_of(self, obj: Any) -> dict[int, str]:
        got = self._graphs.get(id(obj))
        if got is None:
            nnx = self._nnx
            got = {id(n): _join("", k) for k, n in _modules(nnx, obj)}
            self._graphs[id(obj)] = got
            self._keep.append(obj)
        return got

    def nnx_path(self, obj: Any, frame: Any) -> str | None:
        path = self._paths.get(id(obj))
        if path is None:
            path = self._find(obj, frame, {id(obj)})
            if path is not None:
                self.register(obj, path)
        return path

    def _find(self, target: Any, frame: Any, busy: set[int]) -> str | None:
        """The path of an NNX module made inside a transform: see the module docstring.
        ``busy``: the modules being placed (never an answer for one another)."""
        if len(busy) > 8:
            return None
        f, walked = frame, 0
        while f is not None and walked < _MAX_SEARCH_FRAMES:
            for v in _module_locals(self._nnx, f):
                if id(v) in busy:
                    continue
                known = self._paths.get(id(v))
                if known is not None:
                    if type(v) is type(target):  # the module this clone was made from
                        return known
                    continue
                rel = self._graph_of(v).get(id(target))
                if rel is None and type(v) is not type(target):
                    continue
                # an unregistered module holding the callee, or a clone of the same class
                # (the transform's argument, itself a clone): place it first
                base = self._find(v, f, busy | {id(v)})
                if base is not None:
                    self.register(v, base)
                    return _join(base, rel.split(".")) if rel else base
            f = f.f_back
            walked += 1
        return None

    def _wrap_nnx(self, jax: Any, orig: Any, method: str) -> Callable[..., Any]:
        calls = self
        named_scope = jax.named_scope

        def call(self_: Any, *args: Any, **kwargs: Any) -> Any:
            bound = orig.__get__(self_, type(self_))
            if calls._nnx_top == (id(self_), method):  # super().__call__(x): the same call continues
                return bound(*args, **kwargs)
            try:
                path = calls.nnx_path(self_, sys._getframe(1))
                i = calls._enter(path, type(self_), method, "flax.nnx", None)
            except Exception:  # recording must never break the trace: this call stays unnamed
                return bound(*args, **kwargs)
            outer, calls._nnx_top = calls._nnx_top, (id(self_), method)
            try:
                with named_scope(MARKER + str(i)):
                    return bound(*args, **kwargs)
            finally:
                calls._stack.pop()
                calls._nnx_top = outer

        call.__wrapped__ = orig  # type: ignore[attr-defined]
        call.__name__ = getattr(orig, "__name__", method)
        call.__qualname__ = getattr(orig, "__qualname__", method)
        call.__doc__ = getattr(orig, "__doc__", None)
        return call

    @contextmanager
    def nnx_methods(self, jax: Any, nnx: Any, roots: list[tuple[Any, str]]) -> Iterator[None]:
        """Wrap the call methods of every NNX module class in ``roots``' graphs (class
        attributes, restored on exit)."""
        self._nnx = nnx
        classes: dict[type, None] = {}
        node_types = {type(node): None for root, _ in roots for _, node in _modules(nnx, root)}
        for t in node_types:
            for c in t.__mro__:
                if isinstance(c, type) and c is not nnx.Module and _kind(nnx, c) == _MODULE:
                    classes.setdefault(c, None)
        patched: list[tuple[type, str, Any]] = []
        try:
            for c in classes:
                for name in _call_methods(c):
                    orig = c.__dict__[name]
                    setattr(c, name, self._wrap_nnx(jax, orig, name))
                    patched.append((c, name, orig))
            yield
        finally:
            for c, name, orig in reversed(patched):
                setattr(c, name, orig)

    # ------------------------------------------------------------------ Linen

    def linen_interceptor(self, jax: Any) -> Callable[..., Any]:
        calls = self
        named_scope = jax.named_scope

        def interceptor(next_fun: Callable[..., Any], args: tuple, kwargs: dict, context: Any) -> Any:
            method = context.method_name
            # setup, private helpers, and the <lambda> of Linen's lifted transforms (nn.remat,
            # nn.scan wrap the module class; the wrapped module's own call is recorded)
            if method == "setup" or not method.isidentifier() or (method.startswith("_") and method != "__call__"):
                return next_fun(*args, **kwargs)
            module = context.module
            try:
                path: str | None = ".".join(str(p) for p in module.path)
            except Exception:  # an unbound module (no scope): no path
                path = None
            try:
                scope = (module.name or type(module).__name__) + ("" if method == "__call__" else f".{method}")
                i = calls._enter(path, type(module), method, "flax.linen", scope)
            except Exception:  # recording must never break the trace: this call stays unnamed
                return next_fun(*args, **kwargs)
            try:
                with named_scope(MARKER + str(i)):
                    return next_fun(*args, **kwargs)
            finally:
                calls._stack.pop()

        return interceptor


# What a value of a type is to the graph walk: skipped, a module (recorded and walked),
# another NNX object (walked: an Optimizer holds modules), or a plain container.
_SKIP, _MODULE, _OBJECT, _CONTAINER = range(4)
_KINDS: dict[type, int] = {}


def _kind(nnx: Any, t: type) -> int:
    """By type, cached: ``isinstance`` against NNX's ABC-based classes costs microseconds
    a value, and a transformer's graph has thousands of attributes."""
    k = _KINDS.get(t)
    if k is None:
        objects = tuple(c for c in (getattr(nnx, "Pytree", None), getattr(nnx, "Object", None)) if isinstance(c, type))
        if issubclass(t, nnx.Module):
            k = _MODULE
        elif objects and issubclass(t, objects):
            k = _OBJECT
        elif t in (list, tuple, dict):
            k = _CONTAINER
        else:
            k = _SKIP
        _KINDS[t] = k
    return k


def _modules(nnx: Any, root: Any) -> list[tuple[tuple, Any]]:
    """``(attribute path keys, module)`` for every NNX module in ``root``'s graph, each
    once, parents first: a walk of the attributes of modules and other NNX objects (an
    ``nnx.Optimizer``, any ``nnx.Pytree``) and of the lists, tuples and dicts they hold,
    skipping the Variables and arrays ``nnx.iter_graph`` also visits (10x faster on a
    transformer). Falls back to ``nnx.iter_graph`` on a layout it does not know."""
    try:
        out: list[tuple[tuple, Any]] = []
        seen: set[int] = set()
        stack: list[tuple[tuple, Any]] = [((), root)]
        while stack:
            keys, node = stack.pop()
            if len(keys) > 100:
                raise RecursionError("graph deeper than 100 levels")
            kind = _kind(nnx, type(node))
            if kind == _MODULE or kind == _OBJECT:
                if id(node) in seen:
                    continue
                seen.add(id(node))
                if kind == _MODULE:
                    out.append((keys, node))
                items = [(k, v) for k, v in vars(node).items() if not k.startswith(("_pytree__", "_object__"))]
            elif kind == _CONTAINER:
                items = list(node.items()) if type(node) is dict else list(enumerate(node))
            else:  # a Variable or another leaf of the graph given as a root: no modules
                continue
            for k, v in reversed(items):
                if _kind(nnx, type(v)) != _SKIP:
                    stack.append((keys + (k,), v))
        return out
    except Exception:
        return [(k, n) for k, n in nnx.iter_graph(root) if isinstance(n, nnx.Module)]


def _join(prefix: str, keys: Any) -> str:
    parts = [str(k) for k in keys]
    if prefix:
        parts.insert(0, prefix)
    return ".".join(parts)


def _call_methods(c: type) -> list[str]:
    """The methods of NNX class ``c`` (its own ``__dict__``) that are module calls:
    ``__call__``, and for user classes and Flax's layers (``flax.nnx.nn``) every public
    function (``encode``, ``attend``), never NNX's own Module API."""
    own = c.__dict__
    mod = c.__module__ or ""
    public = not mod.startswith("flax.") or mod.startswith("flax.nnx.nn.")
    out = []
    for name, v in own.items():
        if name != "__call__" and (not public or name.startswith("_") or name in _NNX_API):
            continue
        if isinstance(v, (staticmethod, classmethod, property, type)) or not callable(v):
            continue
        if not (isinstance(v, types.FunctionType) or hasattr(v, "__get__")):
            continue
        out.append(name)
    return out


def _module_locals(nnx: Any, frame: Any) -> Iterator[Any]:
    """NNX modules a frame holds in its locals, directly or one or two containers deep."""
    try:
        values = list(frame.f_locals.values())
    except Exception:
        return
    Module = nnx.Module
    stack = [(v, 0) for v in values]
    while stack:
        v, d = stack.pop(0)
        if isinstance(v, Module):
            yield v
        elif d < 2 and type(v) in (tuple, list):
            stack.extend((x, d + 1) for x in v[:_SHALLOW_ITEMS])
        elif d < 2 and type(v) is dict:
            stack.extend((x, d + 1) for x in list(v.values())[:_SHALLOW_ITEMS])


_ACTIVE: list[ModuleCalls] = []


@contextmanager
def intercept(jax: Any, nnx_roots: list[tuple[Any, str]] | None = None) -> Iterator[ModuleCalls]:
    """Record Flax module calls while the body traces: NNX classes of ``nnx_roots``'
    graphs (``(module, path prefix)``) and, when Flax Linen is imported, every Linen
    module call. Yields the :class:`ModuleCalls` whose ``records`` the converter reads."""
    calls = ModuleCalls()
    linen = sys.modules.get("flax.linen")
    nnx = sys.modules.get("flax.nnx")
    _ACTIVE.append(calls)
    try:
        with _maybe(linen is not None, lambda: cast(Any, linen).intercept_methods(calls.linen_interceptor(jax))):
            if nnx is not None and nnx_roots:
                with calls.nnx_methods(jax, nnx, nnx_roots):
                    yield calls
            else:
                calls._nnx = nnx
                yield calls
    finally:
        _ACTIVE.remove(calls)


def register_merged(modules: Any, labels: list[str]) -> None:
    """Inside the trace: the NNX modules the callable carries, just merged, under the
    paths where the callable holds them (``""`` for itself, a partial's parameter)."""
    if not _ACTIVE:
        return
    calls = _ACTIVE[-1]
    for m, label in zip(modules, labels):
        calls.register(m, label)


@contextmanager
def _maybe(cond: bool, make: Callable[[], Any]) -> Iterator[None]:
    if cond:
        with make():
            yield
    else:
        yield
