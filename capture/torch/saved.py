"""Torch checkpoints and fixtures: ``init.checkpoint`` and ``inputs.fixture`` of a recipe.

Runs inside the worker (the Torch capture calls it); ``torch``, ``safetensors`` and
``numpy`` are imported lazily, only when a file needs them.

Files
-----
Both paths are workspace-relative (the recipe refuses absolute paths and ``..``); here
the file must exist, be a regular file, and resolve (symlinks followed) inside the
workspace. Its size is checked against ``Limits.max_saved_file_bytes`` before it is
read; it is then read once, its sha256 recorded as a capture source (so replacing
``runs/best.pt`` makes the graph stale) and loaded from exactly those bytes.

Checkpoints (``init.checkpoint``)
---------------------------------
``.pt`` / ``.pth`` / ``.bin``: ``torch.load(..., weights_only=True, map_location=device)``
only. A file that needs arbitrary unpickling (a pickled class, a function) is refused
and none of its code runs. ``.safetensors``: the ``safetensors`` package.

Accepted contents: a state dict (parameter and buffer names to tensors), or a dict that
holds one under ``"state_dict"``, ``"model_state_dict"`` or ``"model"`` (training
scripts' ``torch.save({"epoch": …, "model_state_dict": …})``). When every key starts
with ``module.`` (saved from ``DataParallel``/``DistributedDataParallel``) and the
model's keys do not, that prefix is removed. Keys of the model's state dict that share
their tensor with a key the checkpoint gives (tied weights) are not missing.

Key checking is strict by default: missing or unexpected keys fail listing both;
``strict = false`` loads what matches and records the lists in the capture's ``meta``
(``checkpoint_missing`` / ``checkpoint_unexpected``). A shape mismatch always fails,
naming the parameter and both shapes.

In an abstract capture (``evidence = "abstract"``) nothing is loaded
(:func:`check_checkpoint`): the names and shapes are read without the tensor data, from
a ``.safetensors`` header or a ``.pt`` zip archive's pickled index (``torch.load`` to
the meta device), and checked against the fake model exactly as above (the wrapper
keys, the ``module.`` prefix, tied weights, ``strict``). The file is hashed in pieces
for staleness and never read whole, so ``max_saved_file_bytes`` does not apply. A
``.pt`` file in the legacy (non-zip) format, which cannot be indexed without reading
it, is refused.

Fixtures (``inputs.fixture``)
-----------------------------
``.pt``/``.pth`` (weights-only), ``.safetensors`` or ``.npz`` (``allow_pickle=False``).
A mapping of names to tensors binds by ``forward``'s parameter names (a function's, for
a function): positional where the leading parameters are all given, keyword otherwise
(keyword too for a ``**kwargs`` forward). A list or tuple (``.pt``) is positional, a
single tensor is the first argument, ``.npz`` keys ``arr_0``, ``arr_1`` … (``np.savez``
without names) are positions. ``inputs.fixture_keys`` maps keys explicitly (a key to a
parameter name, or to ``"args[N]"``); only the mapped keys are used then. Literal
``inputs.kwargs`` join the fixture's. NumPy arrays become tensors; every tensor moves
to the profile's device.
"""

from __future__ import annotations

import hashlib
import inspect
import io
import os
import re
import sys
import time
import zipfile
from collections.abc import Mapping
from typing import Any

import safe_read

from ..graph.meta import CaptureMeta
from ..units import bytes_text
from ..worker.context import CaptureContext
from ..worker.errors import CaptureError
from ..worker.npz_sizes import NpzTooLarge, check_npz_size
from ..worker.plugin_helpers import describe_type

# Lists in messages show this many names, then a count.
_SHOWN = 12
# meta keeps at most this many missing/unexpected names.
_META_KEYS = 1000
_WRAPPER_KEYS = ("state_dict", "model_state_dict", "model")
_NPZ_POSITION = re.compile(r"^arr_(0|[1-9][0-9]*)$")
_POSITION = re.compile(r"^args\[(0|[1-9][0-9]*)\]$")


# --------------------------------------------------------------------------- files


def read_saved_file(ctx: CaptureContext, rel: str, what: str, key_path: str) -> bytes:
    """The bytes of the workspace file ``rel`` (checked, size-bounded), its sha256
    recorded as a capture source before anything is parsed."""
    real = _saved_path(ctx, rel, what, key_path)
    limit = ctx.limits.max_saved_file_bytes
    size = os.path.getsize(real)
    if size > limit:
        raise _too_large(what, rel, size, limit, key_path)
    try:
        # The checks above name the problem; this read refuses what was swapped in since.
        data = safe_read.read_bytes(real, workspace=str(ctx.workspace), max_bytes=limit)
    except safe_read.TooLarge:  # grew since it was measured
        raise _too_large(what, rel, size, limit, key_path) from None
    except safe_read.UnsafeFile as exc:
        raise CaptureError(what, f"{key_path}: {rel} {exc.strerror}", {"key_path": key_path, "path": rel},
                           error_type="NotAFile") from None
    ctx.files.record_saved_file(rel, hashlib.sha256(data).hexdigest())
    return data


def _saved_path(ctx: CaptureContext, rel: str, what: str, key_path: str) -> str:
    """The real path of the workspace file ``rel``: inside the workspace, a regular file."""
    root = str(ctx.workspace)
    full = os.path.join(root, *rel.split("/"))
    real = os.path.realpath(full)
    details = {"key_path": key_path, "path": rel}
    if real != root and not real.startswith(root + os.sep):
        raise CaptureError(
            what,
            f"{key_path}: {rel} leads outside the workspace (a symlink to {real}); {what} files must live "
            f"inside the workspace {root}",
            {**details, "resolved": real},
            error_type="PathOutsideWorkspace",
        )
    if not os.path.exists(real):
        raise CaptureError(
            what, f"{key_path}: no {what} file {rel} in the workspace {root}", details, error_type="FileNotFoundError"
        )
    if not os.path.isfile(real):
        raise CaptureError(what, f"{key_path}: {rel} is not a regular file", details, error_type="NotAFile")
    return real


def _too_large(what: str, rel: str, size: int, limit: int, key_path: str) -> CaptureError:
    return CaptureError(
        "limit",
        f"{key_path}: the {what} {rel} is {bytes_text(size)} ({size:,} bytes), over the limit of {bytes_text(limit)} "
        f"({limit:,} bytes); raise the limit to load it (max_saved_file_bytes: the tensorviz.maxSavedFileMB setting, "
        "or --max-saved-file-mb)",
        {"limit": "max_saved_file_bytes", "maximum": limit, "reached": size, "path": rel, "key_path": key_path},
        error_type="LimitExceeded",
    )


def _load(torch: Any, data: bytes, rel: str, what: str, device: Any, key_path: str, limit: int) -> Any:
    """The object saved in ``data`` (by the file's suffix), tensors on ``device``;
    ``limit``: what an ``.npz`` may take decompressed (``max_saved_file_bytes``)."""
    suffix = os.path.splitext(rel)[1].lower()
    details = {"key_path": key_path, "path": rel}
    if suffix == ".safetensors":
        try:
            from safetensors.torch import load as load_safetensors
        except ImportError as exc:
            raise CaptureError(
                "dependencies",
                f"{key_path}: reading {rel} needs the safetensors package, which the selected interpreter "
                f"{sys.executable} cannot import ({exc})",
                {**details, "missing": ["safetensors"], "python": sys.executable},
            ) from exc
        try:
            loaded = load_safetensors(data)
        except Exception as exc:
            raise CaptureError(what, f"{key_path}: {rel} is not a readable safetensors file: {exc}", details,
                               error_type=type(exc).__name__) from None
        return {k: v.to(device) for k, v in loaded.items()}
    if suffix == ".npz":
        try:
            import numpy
        except ImportError as exc:
            raise CaptureError(
                "dependencies",
                f"{key_path}: reading {rel} needs NumPy, which the selected interpreter {sys.executable} cannot import",
                {**details, "missing": ["numpy"], "python": sys.executable},
            ) from exc
        try:
            # A zip compresses zeros a thousandfold: what it would take is checked first.
            check_npz_size(data, limit)
        except NpzTooLarge as exc:
            raise _too_large(what, f"{rel} (decompressed, at its member {exc.member})", exc.total, limit,
                             key_path) from None
        except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
            raise CaptureError(what, f"{key_path}: {rel} is not a readable .npz file: {exc}", details,
                               error_type=type(exc).__name__) from None
        try:
            with numpy.load(io.BytesIO(data), allow_pickle=False) as npz:
                arrays = {k: npz[k] for k in npz.files}
        except ValueError as exc:
            if "allow_pickle" in str(exc) or "pickle" in str(exc).lower():
                raise CaptureError(
                    what,
                    f"{key_path}: {rel} holds Python objects (arrays of dtype object), which would need unpickling; "
                    "TensorViz loads .npz files without pickle. Save numeric arrays only.",
                    details, error_type="UnsafeFile",
                ) from None
            raise CaptureError(what, f"{key_path}: {rel} is not a readable .npz file: {exc}", details,
                               error_type="ValueError") from None
        except Exception as exc:
            raise CaptureError(what, f"{key_path}: {rel} is not a readable .npz file: {exc}", details,
                               error_type=type(exc).__name__) from None
        return {k: torch.from_numpy(numpy.ascontiguousarray(a)).to(device) for k, a in arrays.items()}
    # .pt / .pth / .bin: weights-only, never arbitrary unpickling.
    import pickle

    try:
        return torch.load(io.BytesIO(data), map_location=device, weights_only=True)
    except pickle.UnpicklingError as exc:
        text = str(exc)
        if "Weights only load failed" in text:
            why = next((ln.strip() for ln in text.splitlines() if "WeightsUnpickler error" in ln), "")
            why = re.sub(r"\s*Please use `torch\.serialization.*", "", why).removeprefix("WeightsUnpickler error: ")
            named = re.search(r"GLOBAL (\S+) was not an allowed global", why)
            if named:
                why = f"it refers to {named.group(1)}, which weights-only loading does not allow"
            raise CaptureError(
                what,
                f"{key_path}: refused to load {rel}: it needs arbitrary unpickling"
                + (f" ({why})" if why else "")
                + ", and TensorViz loads Torch files weights-only (torch.load(weights_only=True)); none of its code ran. "
                + ("Save a plain state dict (torch.save(model.state_dict(), path)) or a .safetensors file."
                   if what == "checkpoint" else "Save tensors (a dict, list or tuple of tensors) or a .safetensors/.npz file."),
                {**details, "reason": why},
                error_type="UnsafeCheckpoint" if what == "checkpoint" else "UnsafeFixture",
            ) from None
        raise CaptureError(what, f"{key_path}: {rel} is not a readable PyTorch file: {text.splitlines()[0] if text else exc}",
                           details, error_type="UnpicklingError") from None
    except Exception as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise CaptureError(what, f"{key_path}: {rel} is not a readable PyTorch file: {first}", details,
                           error_type=type(exc).__name__) from None


# --------------------------------------------------------------------------- checkpoints


def load_checkpoint(ctx: CaptureContext, torch: Any, model: Any, device: Any) -> CaptureMeta:
    """Load ``init.checkpoint`` into ``model``; returns what the capture's meta records."""
    recipe = ctx.recipe
    rel = recipe.init.checkpoint
    assert rel is not None
    key_path = f"profiles.{recipe.name}.init.checkpoint"
    started = time.perf_counter()
    data = read_saved_file(ctx, rel, "checkpoint", key_path)
    obj = _load(torch, data, rel, "checkpoint", device, key_path, ctx.limits.max_saved_file_bytes)
    del data
    checked = _checked_state(ctx, torch, model, obj, rel, key_path)
    with torch.no_grad():
        model.load_state_dict(checked[0], strict=False)
    return _checkpoint_meta(
        recipe.init.strict, rel, checked, "checkpoint", started,
        f"trained weights from {rel} ({len(checked[0]):,} tensors, loaded weights-only {_strictness(recipe.init.strict)}) "
        "into the module the init built",
    )


def check_checkpoint(ctx: CaptureContext, torch: Any, model: Any) -> CaptureMeta:
    """Check ``init.checkpoint``'s tensor names and shapes against ``model`` (an abstract
    capture's fake module) without reading tensor data; returns what the meta records."""
    recipe = ctx.recipe
    rel = recipe.init.checkpoint
    assert rel is not None
    key_path = f"profiles.{recipe.name}.init.checkpoint"
    started = time.perf_counter()
    real = _saved_path(ctx, rel, "checkpoint", key_path)
    obj = _index(torch, real, rel, key_path)
    from ..graph.freshness import file_sha256

    digest = file_sha256(real)
    if digest is None:
        raise CaptureError("checkpoint", f"{key_path}: {rel} cannot be read", {"key_path": key_path, "path": rel},
                           error_type="OSError")
    ctx.files.record_saved_file(rel, digest)
    checked = _checked_state(ctx, torch, model, obj, rel, key_path)
    return _checkpoint_meta(
        recipe.init.strict, rel, checked, "checkpoint_checked", started,
        f"abstract: no weights; the names and shapes of {rel}'s {len(checked[0]):,} tensors were checked "
        f"{_strictness(recipe.init.strict)} against the module the init built, and nothing was loaded",
    )


def _strictness(strict: bool) -> str:
    return "with strict key checking" if strict else "without strict key checking"


def _checkpoint_meta(strict: bool, rel: str, checked: tuple, state: str, started: float, note: str) -> CaptureMeta:
    """What the capture's meta records of a checkpoint loaded (``state = "checkpoint"``,
    timed as ``checkpoint_load_s``) or only checked (``"checkpoint_checked"``,
    ``checkpoint_check_s``); ``checked`` is :func:`_checked_state`'s result."""
    tensors, wrapper, prefix, missing, unexpected = checked
    meta: CaptureMeta = {
        "state": state,
        "state_note": note,
        "checkpoint": rel,
        "checkpoint_strict": strict,
        "checkpoint_tensors": len(tensors),
    }
    if state == "checkpoint":
        meta["checkpoint_load_s"] = round(time.perf_counter() - started, 4)
    else:
        meta["checkpoint_check_s"] = round(time.perf_counter() - started, 4)
    meta.update(_key_meta(strict, wrapper, prefix, missing, unexpected))
    return meta


def _key_meta(strict: bool, wrapper: str | None, prefix: str | None, missing: list[str],
              unexpected: list[str]) -> CaptureMeta:
    meta = CaptureMeta()
    if wrapper is not None:
        meta["checkpoint_key"] = wrapper
    if prefix is not None:
        meta["checkpoint_prefix_removed"] = prefix
    if not strict:
        meta["checkpoint_missing"] = missing[:_META_KEYS]
        meta["checkpoint_unexpected"] = unexpected[:_META_KEYS]
        if len(missing) > _META_KEYS or len(unexpected) > _META_KEYS:
            meta["checkpoint_counts"] = {"missing": len(missing), "unexpected": len(unexpected)}
    return meta


# safetensors' dtype names (its header spelling) as torch dtype attribute names.
_SAFETENSORS_DTYPES = {
    "BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "U16": "uint16", "I32": "int32",
    "U32": "uint32", "I64": "int64", "U64": "uint64", "F16": "float16", "BF16": "bfloat16", "F32": "float32",
    "F64": "float64", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2",
}
# A safetensors header larger than this is refused (the format's own readers use 100 MB).
_MAX_SAFETENSORS_HEADER = 100_000_000


def _index(torch: Any, real: str, rel: str, key_path: str) -> Any:
    """The saved object of a checkpoint with its tensors on the meta device (shapes and
    dtypes, no data), read from the file's index only."""
    details = {"key_path": key_path, "path": rel}
    if rel.lower().endswith(".safetensors"):
        import json
        import struct

        try:
            with open(real, "rb") as fh:
                head = fh.read(8)
                if len(head) != 8:
                    raise ValueError("shorter than its 8-byte header length")
                (n,) = struct.unpack("<Q", head)
                if n > _MAX_SAFETENSORS_HEADER:
                    raise ValueError(f"a header of {n:,} bytes (at most {_MAX_SAFETENSORS_HEADER:,})")
                header = json.loads(fh.read(n))
            if not isinstance(header, dict):
                raise ValueError("its header is not a JSON object")
            out = {}
            for name, entry in header.items():
                if name == "__metadata__":
                    continue
                if not isinstance(entry, dict) or not isinstance(entry.get("shape"), list) \
                        or not all(type(d) is int and d >= 0 for d in entry["shape"]):
                    raise ValueError(f"tensor {name!r} has no valid shape")
                dtype = getattr(torch, _SAFETENSORS_DTYPES.get(str(entry.get("dtype")), ""), None)
                if not isinstance(dtype, torch.dtype):
                    raise ValueError(f"tensor {name!r} has dtype {entry.get('dtype')!r}")
                out[name] = torch.empty(entry["shape"], dtype=dtype, device="meta")
            return out
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            raise CaptureError("checkpoint", f"{key_path}: {rel} is not a readable safetensors file: {exc}", details,
                               error_type=type(exc).__name__) from None
    import zipfile

    if not zipfile.is_zipfile(real):
        raise CaptureError(
            "checkpoint",
            f"{key_path}: {rel} is not a zip archive (a legacy torch.save format): an abstract capture can only "
            "check a checkpoint whose index it can read without its data. Save it again with torch.save (PyTorch "
            "1.6 or newer writes zip archives) or as .safetensors, or capture with evidence = \"eager\"",
            details, error_type="LegacyCheckpoint",
        )
    import pickle

    try:
        return torch.load(real, map_location="meta", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise CaptureError(
            "checkpoint",
            f"{key_path}: refused to read {rel}: it needs arbitrary unpickling, and TensorViz reads Torch files "
            "weights-only; none of its code ran. Save a plain state dict or a .safetensors file.",
            {**details, "reason": str(exc).splitlines()[0] if str(exc) else ""}, error_type="UnsafeCheckpoint",
        ) from None
    except Exception as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise CaptureError("checkpoint", f"{key_path}: {rel} is not a readable PyTorch file: {first}", details,
                           error_type=type(exc).__name__) from None


def _checked_state(ctx: CaptureContext, torch: Any, model: Any, obj: Any, rel: str,
                   key_path: str) -> tuple[dict[str, Any], str | None, str | None, list[str], list[str]]:
    """The state dict of a loaded (or indexed) checkpoint checked against ``model``:
    ``(state, wrapper key, prefix removed, missing, unexpected)``; raises on a shape
    mismatch, and on missing or unexpected keys when strict."""
    recipe = ctx.recipe
    state, wrapper = _state_dict_of(torch, obj, rel, key_path)
    expected = model.state_dict()
    prefix = None
    if state and all(k.startswith("module.") for k in state) and not any(k.startswith("module.") for k in expected):
        prefix = "module."
        state = {k[len(prefix):]: v for k, v in state.items()}
    details = {"key_path": key_path, "path": rel}

    mismatched = [
        (k, list(state[k].shape), list(v.shape))
        for k, v in expected.items()
        if k in state and isinstance(v, torch.Tensor) and isinstance(state[k], torch.Tensor)
        and tuple(state[k].shape) != tuple(v.shape)
    ]
    if mismatched:
        shown = "; ".join(f"{k}: checkpoint {s}, model {m}" for k, s, m in mismatched[:_SHOWN])
        raise CaptureError(
            "checkpoint",
            f"{key_path}: {rel} does not fit {type(model).__qualname__}: {len(mismatched)} shape mismatch(es): "
            f"{shown}{_more(mismatched)}",
            {**details, "shape_mismatches": [[k, s, m] for k, s, m in mismatched[:_META_KEYS]]},
            error_type="ShapeMismatch",
        )
    missing = _missing_keys(torch, expected, state)
    unexpected = [k for k in state if k not in expected]
    if recipe.init.strict and (missing or unexpected):
        raise CaptureError(
            "checkpoint",
            f"{key_path}: {rel} does not match {type(model).__qualname__}'s state dict (strict): "
            f"missing {len(missing)} key(s): {_list(missing)}; unexpected {len(unexpected)} key(s): {_list(unexpected)}. "
            "Set init.strict = false to load the keys that match.",
            {**details, "missing": missing[:_META_KEYS], "unexpected": unexpected[:_META_KEYS]},
            error_type="StateDictMismatch",
        )
    return state, wrapper, prefix, missing, unexpected


def _state_dict_of(torch: Any, obj: Any, rel: str, key_path: str) -> tuple[dict[str, Any], str | None]:
    def is_state(x: Any) -> bool:
        return (
            isinstance(x, Mapping)
            and len(x) > 0
            and all(isinstance(k, str) for k in x)
            and all(isinstance(v, torch.Tensor) or k.endswith("_extra_state") for k, v in x.items())
        )

    if is_state(obj):
        return dict(obj), None
    if isinstance(obj, Mapping):
        for key in _WRAPPER_KEYS:
            if is_state(obj.get(key)):
                return dict(obj[key]), key
        keys = [str(k) for k in list(obj)[:_SHOWN]]
        found = f"a dict with keys {', '.join(keys)}{_more(list(obj))}" if obj else "an empty dict"
    else:
        found = describe_type(obj)
    raise CaptureError(
        "checkpoint",
        f"{key_path}: {rel} holds {found}; expected a state dict (parameter names to tensors), or a dict holding "
        f"one under {', '.join(repr(k) for k in _WRAPPER_KEYS)}",
        {"key_path": key_path, "path": rel},
        error_type="NotAStateDict",
    )


def _missing_keys(torch: Any, expected: Mapping[str, Any], state: Mapping[str, Any]) -> list[str]:
    """Keys of the model the checkpoint does not give, tied duplicates of given ones aside."""
    given = set()
    for k, v in expected.items():
        if k in state and isinstance(v, torch.Tensor):
            given.add(_identity(v))
    out = []
    for k, v in expected.items():
        if k in state:
            continue
        if isinstance(v, torch.Tensor) and _identity(v) in given:
            continue  # tied to a key the checkpoint gives (lm_head.weight and wte.weight)
        out.append(k)
    return out


def _is_fake(t: Any) -> bool:
    from torch._subclasses.fake_tensor import is_fake

    return is_fake(t)


def _identity(t: Any) -> tuple:
    try:
        storage = t.untyped_storage()
        # A fake or meta tensor has no data: its storage object tells ties apart.
        where = ("storage", storage._cdata) if t.device.type == "meta" or _is_fake(t) else storage.data_ptr()
        return (where, t.storage_offset(), tuple(t.shape), tuple(t.stride()), str(t.device))
    except Exception:
        return (id(t),)


# --------------------------------------------------------------------------- fixtures


def load_fixture(ctx: CaptureContext, torch: Any, fn: Any, literal_kwargs: dict[str, Any], device: Any) -> tuple[tuple, dict, CaptureMeta]:
    """``(args, kwargs, meta)`` for calling ``fn`` (``forward``, or the function) with
    ``inputs.fixture`` (and the literal ``inputs.kwargs``)."""
    recipe = ctx.recipe
    rel = recipe.inputs.fixture
    assert rel is not None
    base = f"profiles.{recipe.name}.inputs"
    key_path = f"{base}.fixture"
    started = time.perf_counter()
    data = read_saved_file(ctx, rel, "fixture", key_path)
    obj = _load(torch, data, rel, "fixture", device, key_path, ctx.limits.max_saved_file_bytes)
    del data
    fit = _FixtureFit(fn, rel, base, recipe.inputs.fixture_keys)
    entries = fit.entries(torch, obj)
    pairs, unused = fit.pairs(entries)
    positional, by_name, keyword = fit.place(pairs)
    args = fit.positional_args(positional, by_name)
    kwargs = fit.keyword_args(args, by_name, keyword, literal_kwargs)
    fit.check_binds(args, kwargs, entries)
    meta: CaptureMeta = {
        "fixture": rel,
        "fixture_keys": [k for k, _, _ in pairs][:_META_KEYS],
        "fixture_load_s": round(time.perf_counter() - started, 4),
    }
    if unused:
        meta["fixture_unused"] = unused[:_META_KEYS]
    return tuple(args), kwargs, meta


_Entry = tuple[str, Any]  # (fixture key, value)


class _FixtureFit:
    """How a fixture's entries become ``fn``'s arguments: each entry named by its key, or
    by ``inputs.fixture_keys`` (a parameter name, or ``"args[N]"`` for a position), placed
    by ``fn``'s signature; every misfit a ``fixture`` failure naming the key."""

    def __init__(self, fn: Any, rel: str, base: str, fixture_keys: Any) -> None:
        self.rel, self.base, self.fixture_keys = rel, base, fixture_keys
        self.key_path = f"{base}.fixture"
        self.details = {"key_path": self.key_path, "path": rel}
        self.npz = rel.lower().endswith(".npz")
        try:
            sig: inspect.Signature | None = inspect.signature(fn)
        except (TypeError, ValueError):
            sig = None
        self.sig = sig
        self.params = dict(sig.parameters) if sig is not None else {}
        self.fn_name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
        params = self.params.values()
        self.pos_params = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        self.var_pos = any(p.kind == p.VAR_POSITIONAL for p in params)
        self.var_kw = any(p.kind == p.VAR_KEYWORD for p in params)
        self.signature_text = _signature_text(self.params) if sig is not None else "(signature unknown)"

    def entries(self, torch: Any, obj: Any) -> list[_Entry]:
        """The fixture's entries: a mapping's items, a sequence's ``args[N]``, one tensor's ``args[0]``."""
        key_path, rel = self.key_path, self.rel
        if isinstance(obj, Mapping):
            if not all(isinstance(k, str) for k in obj):
                raise CaptureError("fixture", f"{key_path}: {rel} holds a dict with non-string keys; name inputs with strings",
                                   self.details, error_type="BadFixture")
            return list(obj.items())
        if isinstance(obj, (list, tuple)):
            return [(f"args[{i}]", v) for i, v in enumerate(obj)]
        if isinstance(obj, torch.Tensor):
            return [("args[0]", obj)]
        raise CaptureError(
            "fixture",
            f"{key_path}: {rel} holds {describe_type(obj)}; expected a mapping of input names to tensors, a list/tuple "
            "of positional inputs, or one tensor",
            self.details, error_type="BadFixture",
        )

    def pairs(self, entries: list[_Entry]) -> tuple[list[tuple[str, str, Any]], list[str]]:
        """``(fixture key, target, value)`` per entry used (a target is a parameter name or
        ``"args[N]"``), and the keys ``fixture_keys`` leaves unused."""
        if not self.fixture_keys:
            pairs = []
            for key, value in entries:
                m = _NPZ_POSITION.match(key) if self.npz else None
                target = f"args[{m.group(1)}]" if m and key not in self.params else key
                pairs.append((key, target, value))
            return pairs, []
        available = dict(entries)
        pairs = []
        for key, target in self.fixture_keys:
            if key not in available:
                raise CaptureError(
                    "fixture",
                    f"{self.base}.fixture_keys.{key}: {self.rel} has no key {key!r} "
                    f"(its keys: {_list([k for k, _ in entries])})",
                    {**self.details, "fixture_keys": [k for k, _ in entries][:_META_KEYS]},
                    error_type="UnknownFixtureKey",
                )
            pairs.append((key, target, available[key]))
        return pairs, [k for k, _ in entries if k not in dict(self.fixture_keys)]

    def _unknown(self, key: str, target: str) -> CaptureError:
        where = f"{self.base}.fixture_keys.{key}" if self.fixture_keys else self.key_path
        hint = "" if self.fixture_keys else "; map fixture keys to parameters with inputs.fixture_keys"
        return CaptureError(
            "fixture",
            f"{where}: fixture key {key!r} names no parameter of {self.fn_name}{self.signature_text}{hint}",
            {**self.details, "key": key, "target": target, "parameters": list(self.params)},
            error_type="UnknownInputName",
        )

    def place(self, pairs: list[tuple[str, str, Any]]) -> tuple[dict[int, _Entry], dict[str, _Entry], dict[str, _Entry]]:
        """Each pair by where it goes: a position, a positional-or-keyword parameter's
        name, or a keyword-only (or ``**kwargs``) name."""
        positional: dict[int, _Entry] = {}
        by_name: dict[str, _Entry] = {}
        keyword: dict[str, _Entry] = {}
        for key, target, value in pairs:
            m = _POSITION.match(target)
            if m:
                positional[self._position(key, int(m.group(1)))] = (key, value)
                continue
            p = self.params.get(target)
            if p is None:
                if self.sig is None or self.var_kw:
                    keyword[target] = (key, value)
                    continue
                raise self._unknown(key, target)
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise self._unknown(key, target)
            if p.kind == p.POSITIONAL_ONLY:
                positional[self.pos_params.index(p)] = (key, value)
            elif p.kind == p.POSITIONAL_OR_KEYWORD:
                by_name[target] = (key, value)
            else:
                keyword[target] = (key, value)
        return positional, by_name, keyword

    def _position(self, key: str, i: int) -> int:
        if self.sig is not None and i >= len(self.pos_params) and not self.var_pos:
            raise CaptureError(
                "fixture",
                f"{self.key_path}: fixture entry {key!r} is positional argument {i}, but "
                f"{self.fn_name}{self.signature_text} takes {len(self.pos_params)} positional argument(s)",
                {**self.details, "key": key, "parameters": list(self.params)}, error_type="UnknownInputName",
            )
        return i

    def positional_args(self, positional: dict[int, _Entry], by_name: dict[str, _Entry]) -> list[Any]:
        """Positional where the leading parameters are all given; keyword from the first
        gap (``by_name`` keeps those). Takes what it places out of both."""
        pos_params, key_path = self.pos_params, self.key_path
        args: list[Any] = []
        i = 0
        while True:
            if i in positional:
                if i < len(pos_params) and pos_params[i].name in by_name:
                    raise CaptureError(
                        "fixture",
                        f"{key_path}: {pos_params[i].name!r} is given twice by the fixture "
                        f"({positional[i][0]!r} and {by_name[pos_params[i].name][0]!r})",
                        self.details, error_type="DuplicateInput",
                    )
                args.append(positional.pop(i)[1])
            elif i < len(pos_params) and pos_params[i].name in by_name:
                args.append(by_name.pop(pos_params[i].name)[1])
            else:
                break
            i += 1
        if positional:
            first = min(positional)
            raise CaptureError(
                "fixture",
                f"{key_path}: fixture entry {positional[first][0]!r} is positional argument {first}, but argument {i} "
                "is not given",
                self.details, error_type="MissingInput",
            )
        return args

    def keyword_args(self, args: list[Any], by_name: dict[str, _Entry], keyword: dict[str, _Entry],
                     literal_kwargs: dict[str, Any]) -> dict[str, Any]:
        """The keyword arguments: the fixture's, then the literal ``inputs.kwargs`` (one
        the fixture gives too is refused)."""
        kwargs = {name: v for name, (_, v) in by_name.items()}
        kwargs.update({name: v for name, (_, v) in keyword.items()})
        pos_params = self.pos_params
        for name, value in literal_kwargs.items():
            if name in kwargs or (name in self.params and pos_params
                                  and any(p.name == name for p in pos_params[: len(args)])):
                raise CaptureError(
                    "fixture",
                    f"{self.base}.kwargs.{name}: {name!r} is given by the fixture {self.rel} too; remove one of them",
                    self.details, error_type="DuplicateInput",
                )
            kwargs[name] = value
        return kwargs

    def check_binds(self, args: list[Any], kwargs: dict[str, Any], entries: list[_Entry]) -> None:
        if self.sig is None:
            return
        try:
            self.sig.bind(*args, **kwargs)
        except TypeError as exc:
            raise CaptureError(
                "fixture",
                f"{self.key_path}: the inputs from {self.rel} do not fit {self.fn_name}{self.signature_text}: {exc} "
                f"(fixture keys: {_list([k for k, _ in entries])})",
                {**self.details, "parameters": list(self.params)}, error_type="MissingInput",
            ) from None


def _signature_text(params: Mapping[str, inspect.Parameter]) -> str:
    """Every parameter's name, with ``/``, ``*``, ``*args`` and ``**kwargs`` markers
    (no annotations or defaults: library signatures are long)."""
    shown: list[str] = []
    star = False
    for p in params.values():
        if p.kind == p.VAR_POSITIONAL:
            shown.append(f"*{p.name}")
            star = True
        elif p.kind == p.VAR_KEYWORD:
            shown.append(f"**{p.name}")
        else:
            if p.kind == p.KEYWORD_ONLY and not star:
                shown.append("*")
                star = True
            shown.append(p.name)
        if p.kind == p.POSITIONAL_ONLY and not any(
            q.kind == q.POSITIONAL_ONLY for q in list(params.values())[list(params).index(p.name) + 1:]
        ):
            shown.append("/")
    return f"({', '.join(shown)})"


def _list(names: list[str]) -> str:
    if not names:
        return "none"
    return ", ".join(names[:_SHOWN]) + _more(names)


def _more(items: list) -> str:
    return f" and {len(items) - _SHOWN} more" if len(items) > _SHOWN else ""


