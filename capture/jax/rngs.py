"""RNG streams of a JAX capture: the keys the traced program draws from, and where each
came from (``meta["rng_streams"]``). Runs inside the worker; ``jax`` and ``flax`` are
passed in or found in ``sys.modules`` (never imported here).

Linen
    A module an init factory returns bound with ``model.bind(variables, rngs={...})``
    keeps those streams: ``unbind()`` drops them, so they are passed to ``apply`` again
    (origin ``"bound"``). A stream the module asks for that nothing gave it (Linen's
    ``nn.Dropout(deterministic=False)`` asks for ``"dropout"``, ``self.make_rng("noise")``
    for ``"noise"``) gets a key derived from the profile seed and the stream's name
    (origin ``"seed"``)::

        jax.random.fold_in(jax.random.key(seed), zlib.crc32(name.encode("utf-8")) & 0x7FFFFFFF)

    Linen names the stream it misses (``InvalidRngError: ... needs PRNG for "dropout"``):
    the stream is added and the program traced again, once per missing stream; a module
    that needs none is traced once. ``rngs`` given among the inputs (an inputs factory
    returning ``{"kwargs": {"rngs": {...}}}``) are used as given (origin ``"input"``),
    over bound or derived keys of the same name.

NNX
    The streams are the ``nnx.Rngs`` state the modules carry (their ``RngKey``
    variables, traced as state like any other): built by an init factory (origin
    ``"factory"``), the ``nnx.Rngs(seed)`` TensorViz supplied to a constructor (``"seed"``),
    or made by the constructor itself (``"module"``). An ``nnx.Rngs``, ``RngStream`` or
    typed key array among the inputs is ``"input"``.

Each entry: ``{"name": stream, "origin": ..., "where": where it sits, "note": a sentence}``.
"""

from __future__ import annotations

import inspect
import re
import sys
import types
import typing
import zlib
from typing import Any, cast

from ..graph.meta import RngStream
from .structures import type_test
from ..worker.errors import CaptureError

MAX_STREAMS = 64
_MISSING = re.compile(r'needs PRNG for "([^"]+)"')


def derivation(seed: int, name: str) -> str:
    """How the key of stream ``name`` is derived from ``seed``, as code."""
    return f"jax.random.fold_in(jax.random.key({seed}), zlib.crc32({name!r}.encode()) & 0x7FFFFFFF)"


def derived_key(jax: Any, seed: int, name: str) -> Any:
    """The key :func:`derivation` describes."""
    return jax.random.fold_in(jax.random.key(seed), zlib.crc32(name.encode("utf-8")) & 0x7FFFFFFF)


class LinenStreams:
    """The ``rngs`` a Linen ``apply`` receives, and where each came from."""

    def __init__(self, bound: dict[str, Any] | None = None, bound_by: str | None = None) -> None:
        self.keys: dict[str, Any] = dict(bound or {})
        self.entries: dict[str, RngStream] = {
            name: {"name": name, "origin": "bound", "where": "model.bind(variables, rngs=...)",
                   "note": f"bound by {bound_by} with model.bind(variables, rngs=...)"}
            for name in self.keys
        }
        self.seed: int | None = None  # set when tracing starts (capture.jax.tracing.trace)

    def apply_rngs(self, kwargs: dict[str, Any]) -> dict[str, Any] | None:
        """The ``rngs`` for ``apply``: the bound and derived keys, overlaid by an ``rngs``
        mapping given among the inputs (popped from ``kwargs``)."""
        rngs = dict(self.keys)
        given = kwargs.pop("rngs", None)
        if isinstance(given, dict):
            for name in given:
                self.entries[str(name)] = {"name": str(name), "origin": "input", "where": f"rngs.{name}",
                                           "note": "given as input (the rngs keyword of the inputs)"}
            rngs.update(given)
        elif given is not None:
            kwargs["rngs"] = given  # not a mapping: Linen's own error says what it wants
        return rngs or None

    def add_missing(self, jax: Any, exc: BaseException) -> bool:
        """Add the stream a Linen ``InvalidRngError`` names, derived from the seed; False
        when ``exc`` is no such error, or names a stream already given (retrying would
        not help)."""
        errors = sys.modules.get("flax.errors")
        invalid = getattr(errors, "InvalidRngError", None)
        if invalid is None or not isinstance(exc, invalid) or self.seed is None:
            return False
        m = _MISSING.search(str(exc))
        if m is None or m.group(1) in self.keys or m.group(1) in self.entries:
            return False
        name = m.group(1)
        if len(self.keys) >= MAX_STREAMS:
            raise CaptureError("trace", f"the Linen module asks for more than {MAX_STREAMS} RNG streams") from exc
        self.keys[name] = derived_key(jax, self.seed, name)
        self.entries[name] = {"name": name, "origin": "seed", "where": f"seed {self.seed}",
                              "note": f"derived from seed {self.seed} and the stream name ({derivation(self.seed, name)})"}
        return True

    def meta(self) -> list[RngStream]:
        return [self.entries[k] for k in sorted(self.entries)]


def bound_streams(obj: Any) -> dict[str, Any]:
    """The streams a bound Linen module's scope holds (``bind(variables, rngs=...)``), as keys."""
    rngs = getattr(getattr(obj, "scope", None), "rngs", None)
    out: dict[str, Any] = {}
    if isinstance(rngs, dict):
        for name, lazy in rngs.items():
            as_key = getattr(lazy, "as_jax_rng", None)
            out[str(name)] = as_key() if callable(as_key) else lazy
    return out


def init_rngs(key: Any, kwargs: dict[str, Any]) -> Any:
    """What a fresh Linen module's ``init`` receives: ``key`` (``jax.random.key(seed)``),
    or, when the inputs give an ``rngs`` mapping (popped from ``kwargs``), those streams
    with ``key`` as ``"params"``."""
    given = kwargs.pop("rngs", None)
    if isinstance(given, dict):
        return {**given, "params": key}
    if given is not None:
        kwargs["rngs"] = given  # not a mapping: Linen's own error says what it wants
    return key


def nnx_streams(jax: Any, plan: Any, seed: int, factory: str | None, model: str) -> list[RngStream]:
    """The RNG streams the NNX state of ``plan`` carries (``RngKey`` variables)."""
    nnx = sys.modules.get("flax.nnx")
    rng_key = getattr(nnx, "RngKey", None)
    if rng_key is None or getattr(plan, "state_key", None) != "state":
        return []
    label = plan.state_label
    if label == "fresh_init":
        origin, note = "seed", f"derived from seed {seed}: nnx.Rngs({seed}), which TensorViz passed to the constructor"
    elif label == "constructed":
        origin, note = "module", f"made by the constructor of {model} (from the literal init)"
    else:
        origin, note = "factory", f"carried by the module{'s' if label == 'callable_state' else ''} that {factory or model} built"
    out: list[RngStream] = []
    labels = list(getattr(plan, "module_labels", []) or [])
    from_inputs = list(getattr(plan, "node_from_inputs", []) or [])
    is_key = type_test((rng_key,))
    for path, leaf in jax.tree_util.tree_flatten_with_path(plan.state, is_leaf=is_key)[0]:
        if not is_key(leaf):
            continue
        keys = [_key(e) for e in path]
        if keys and type(keys[0]) is int:
            i, keys = keys[0], keys[1:]
            if 0 <= i < len(from_inputs) and from_inputs[i]:
                continue  # an input's streams are the inputs' (input_streams)
            prefix = labels[i] if 0 <= i < len(labels) else ""
            keys = ([prefix] if prefix else []) + keys
        if keys and keys[-1] == "key":
            keys = keys[:-1]
        tag = _tag(leaf) or (str(keys[-1]) if keys else "default")
        out.append({"name": tag, "origin": origin, "where": ".".join(str(k) for k in keys), "note": note})
    return out


def input_streams(jax: Any, args: tuple, kwargs: dict, names: list[str | None]) -> list[RngStream]:
    """RNG streams among the inputs: ``nnx.Rngs`` (each of its streams), ``nnx.RngStream``
    and typed key arrays, named by where they sit (``rngs.sample``, ``key``)."""
    nnx = sys.modules.get("flax.nnx")
    rngs_type = getattr(nnx, "Rngs", None)
    stream_type = getattr(nnx, "RngStream", None)
    kinds = tuple(t for t in (rngs_type, stream_type) if isinstance(t, type))

    def is_rng_object(x: Any) -> bool:
        return bool(kinds) and isinstance(x, kinds)

    out: list[RngStream] = []
    tops = [(n or f"args[{i}]", a) for i, (a, n) in enumerate(zip(args, names))] + list(kwargs.items())
    for top, value in tops:
        for path, leaf in jax.tree_util.tree_flatten_with_path(value, is_leaf=is_rng_object)[0]:
            where = top + "".join(_suffix(_key(e)) for e in path)
            if isinstance(rngs_type, type) and isinstance(leaf, rngs_type):
                for attr, stream in vars(leaf).items():
                    if isinstance(stream_type, type) and isinstance(stream, stream_type):
                        out.append({"name": str(getattr(stream, "tag", None) or attr), "origin": "input",
                                    "where": f"{where}.{attr}", "note": "given as input"})
            elif is_rng_object(leaf):
                out.append({"name": str(getattr(leaf, "tag", None) or where), "origin": "input", "where": where,
                            "note": "given as input"})
            elif _is_typed_key(jax, leaf):
                out.append({"name": where, "origin": "input", "where": where, "note": "a key given as input"})
    return out


def _suffix(k: Any) -> str:
    return f".{k}" if isinstance(k, str) and k.isidentifier() else f"[{k!r}]"


def _is_typed_key(jax: Any, x: Any) -> bool:
    dtype = getattr(x, "dtype", None)
    try:
        return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)
    except Exception:
        return False


def _tag(leaf: Any) -> str | None:
    tag = getattr(leaf, "tag", None)
    if isinstance(tag, str):
        return tag
    get = getattr(leaf, "get_metadata", None)
    if callable(get):
        try:
            meta = get()
            if isinstance(meta, dict) and isinstance(meta.get("tag"), str):
                return meta["tag"]
        except Exception:
            return None
    return None


def _key(entry: Any) -> Any:
    for attr in ("key", "name", "idx"):
        if hasattr(entry, attr):
            return getattr(entry, attr)
    return str(entry)


def supply_rngs(nnx: Any, target: type, args: tuple, kwargs: dict, seed: int) -> tuple[tuple, dict, list[str]]:
    """``args``/``kwargs`` for an NNX constructor with ``nnx.Rngs(seed)`` passed to each of its
    rngs parameters (named ``rngs`` or annotated ``nnx.Rngs``, as discovery marks them
    ``supplied_by: "tensorviz"``) that the literal init leaves unset. One ``nnx.Rngs`` is
    shared by all of them. Returns the names of the parameters supplied."""
    init = cast(Any, target).__init__
    try:
        params = list(inspect.signature(init).parameters.values())
    except (TypeError, ValueError):
        return args, kwargs, []
    if inspect.isfunction(init) and params:
        params = params[1:]  # self
    try:
        hints = typing.get_type_hints(init)
    except Exception:  # an annotation that does not resolve: names still count
        hints = {}
    args, kwargs, supplied, rngs = tuple(args), dict(kwargs), [], None
    for position, p in enumerate(params):
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.name != "rngs" and not is_rngs_type(nnx, hints.get(p.name, p.annotation)):
            continue
        by_position = p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and len(args) > position
        if by_position or (p.kind != p.POSITIONAL_ONLY and p.name in kwargs):
            continue  # the recipe sets it: passed as saved
        if p.kind == p.POSITIONAL_ONLY and len(args) != position:
            continue  # cannot be reached positionally: the constructor says what is missing
        rngs = rngs if rngs is not None else nnx.Rngs(seed)
        if p.kind == p.POSITIONAL_ONLY:
            args = args + (rngs,)
        else:
            kwargs[p.name] = rngs
        supplied.append(p.name)
    return args, kwargs, supplied


def is_rngs_type(nnx: Any, annotation: Any) -> bool:
    if annotation is nnx.Rngs:
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):  # Optional[nnx.Rngs]
        return any(a is nnx.Rngs for a in typing.get_args(annotation))
    return False
