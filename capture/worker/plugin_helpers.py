"""What every framework plug-in needs and none should write again: how a Python object
is named in a message, where an instruction of a code object is, and which frame of a
stack is the model's.

Plug-ins (``capture/torch``, ``capture/jax``, ``tests/fake_framework.py``) import these
instead of keeping copies; they run in the worker and need the standard library alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..graph.model import Frame


def describe_type(obj: Any) -> str:
    """An object's type as messages name it: ``a torch.nn.Linear``, ``a dict``."""
    t = type(obj)
    return f"a {t.__module__}.{t.__qualname__}" if t.__module__ != "builtins" else f"a {t.__qualname__}"


# Each code object's instruction positions, for every trace of the process: listing them
# costs ~70 us for a transformers forward, once per code object instead of per capture.
# Keyed by id, the code object kept with its list (so the id stays its own): a
# WeakKeyDictionary hashed and compared the code object itself on every lookup, 2-3 us for
# a transformers forward. Emptied past _POSITIONS_KEPT code objects.
_POSITIONS: dict[int, tuple[Any, list[Any]]] = {}
_POSITIONS_KEPT = 8192


def code_positions(code: Any) -> list[Any]:
    """``list(code.co_positions())``, kept for the process (empty when it has none)."""
    got = _POSITIONS.get(id(code))
    if got is not None:  # its code object is alive (held here): the id is still its own
        return got[1]
    try:
        positions = list(code.co_positions())
    except Exception:
        positions = []
    if len(_POSITIONS) >= _POSITIONS_KEPT:
        _POSITIONS.clear()
    _POSITIONS[id(code)] = (code, positions)
    return positions


def code_position(code: Any, lasti: int) -> tuple[int | None, int]:
    """(line, 0-based column) of the instruction at byte offset ``lasti`` of ``code``
    (its :func:`code_positions` entry); ``(None, 0)`` when the code object does not say."""
    positions = code_positions(code)
    if 0 <= lasti // 2 < len(positions):
        line, _, column, _ = positions[lasti // 2]
        return line, column or 0
    return None, 0


def innermost_frame(files: Any, stack: Iterable[Any]) -> Frame | None:
    """The innermost frame of a stack summary (``traceback.extract_tb`` /
    ``extract_stack`` entries, innermost last) in a workspace file (``files``: the
    context's :class:`~capture.worker.workspace_files.WorkspaceFiles`, None: no
    workspace), else the innermost frame in an installed library
    (:class:`~capture.worker.libframes.LibraryFiles`: ``library=True``, absolute path),
    else None."""
    entries = list(stack)
    if files is not None:
        for fs in reversed(entries):
            rel = files.relative(fs.filename)
            if rel is not None:
                return Frame(rel, fs.lineno or 0, getattr(fs, "colno", None) or 0, fs.name)
    from .libframes import LibraryFiles

    lib = LibraryFiles()
    for fs in reversed(entries):
        path = lib.path(fs.filename)
        if path is not None:
            return Frame(path, fs.lineno or 0, getattr(fs, "colno", None) or 0, fs.name, True)
    return None


#: The one rule of :func:`moved_bytes_costs`, and what it means.
BYTES_ONLY_RULE = "bytes only"


def moved_bytes_costs(capture: Any) -> Any:
    """The costs any capture has without a framework's FLOP rules: each node reads its
    array operands and writes its results at their recorded shapes and dtypes (unfused;
    :data:`~capture.graph.model.UNCOUNTED` where a shape is symbolic or a dtype unknown),
    and its FLOPs are uncounted. The worker gives this to a capture whose plug-in counted
    nothing, so the summary, the hover and the viewer's cost panel work for every
    framework (and say what is not counted)."""
    from ..graph.model import UNCOUNTED, NodeCosts
    from ..units import nbytes

    values = {v.id: v for v in capture.values}

    def moved(ids: Iterable[int | None]) -> int:
        total = 0
        for vid in ids:
            v = values.get(vid) if vid is not None else None
            size = nbytes(v.shape, v.dtype) if v is not None else None
            if size is None:
                return UNCOUNTED
            total += size
        return total

    reads, writes = [], []
    for node in capture.nodes:
        reads.append(moved(o.value for o in node.inputs if o.value is not None))
        writes.append(moved(node.outputs))
    ops = sorted({n.op for n in capture.nodes})
    why = f"the {capture.framework} capture counts no FLOPs (its plug-in has no FLOP rules)"
    notes = {
        "counter": f"TensorViz: bytes from the shapes and dtypes the {capture.framework} capture recorded; no FLOPs",
        "rules": {BYTES_ONLY_RULE: f"bytes read and written at the recorded shapes, unfused; {why}"},
        "uncounted": {op: why for op in ops},
    }
    n = len(capture.nodes)
    return NodeCosts([UNCOUNTED] * n, reads, writes, [0] * n, [BYTES_ONLY_RULE], notes=notes)


def require_model_factory(ctx: Any, target: Any) -> None:
    """``model_factory = true`` names a function that builds the model: refuse a class or
    anything else not callable (``recipe``: a class is built from init without it)."""
    if not callable(target) or isinstance(target, type):
        from .errors import CaptureError

        raise CaptureError("recipe", f"model_factory = true, but {ctx.recipe.model} is {describe_type(target)}, not "
                                     "a function that builds the model (a class is built from init without it: omit "
                                     "model_factory)", {"key_path": f"profiles.{ctx.recipe.name}.model_factory"})
