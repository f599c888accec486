"""Module-call groups of a converted jaxpr: the converter's side of
:mod:`capture.jax.modules`.

While tracing, each intercepted Flax module call ran inside a ``jax.named_scope`` named
``tv_module#<i>`` and left record ``i`` (path, class, method, call-site frames, the
record of the call it was traced inside). :class:`ModuleGroups` turns those name-stack
parts into groups of kind ``module`` wherever the equations land: at the top level, in a
``jit``/``remat`` group, or in any container group a caller walks a nested jaxpr into.

* A Linen call's own name scope (``Dense_0``), which Linen pushes just outside the
  marker, is replaced by the module group instead of staying a ``scope`` group.
* ``call`` numbers the calls of one module (path and class) in conversion order; only
  calls whose equations landed in the program count (a transform that traces a body
  twice leaves records that never become groups).
* A jit body JAX reused from its cache for a second call (``@nnx.jit`` on a block's
  ``__call__``, twelve layers) carries the first call's markers; its module paths are
  re-based onto the module call the body actually sits in.

Standard library only.
"""

from __future__ import annotations

import re
from typing import Any

from ..graph.model import Group

MODULE_NOTE = "one call of a Flax module, recorded while tracing"
# A name-stack part naming intercepted module call i.
MODULE_MARKER = "tv_module#"
_MODULE_RE = re.compile(r"tv_module#(\d+)")
_TRANSFORMED_RE = re.compile(r"^\w+\((.*)\)$")  # a name-stack part inside a transform: vmap(Dense_0)


class ModuleGroups:
    """The module groups of one conversion; ``conv`` is the converter (its ``groups``
    and ``frames``)."""

    def __init__(self, records: list, conv: Any) -> None:
        self.records = records
        self.conv = conv
        self._call_no: dict[tuple, int] = {}  # (parent group, record) -> call number
        self._calls_seen: dict[tuple, int] = {}  # (path, module, class) -> calls numbered so far
        self._record_of: dict[int, int] = {}  # module group -> its record

    def forget_groups(self, first: int) -> None:
        """Groups ``first`` and after were undone (a body closed after all): nothing here
        may point at their ids, which will be reused."""
        for gid in [g for g in self._record_of if g >= first]:
            del self._record_of[gid]
        for key in [k for k in self._call_no if k[0] is not None and k[0] >= first]:
            del self._call_no[key]

    def parts(self, parts: tuple) -> tuple:
        """Name-stack parts with each module-call marker as its record index (an int)."""
        out: list = []
        records = self.records
        for p in parts:
            m = _MODULE_RE.search(p)
            i = int(m.group(1)) if m else -1
            if not 0 <= i < len(records):
                out.append(p)
                continue
            scope = records[i].scope
            if scope is not None and out and type(out[-1]) is str:
                t = _TRANSFORMED_RE.match(out[-1])
                if out[-1] == scope or (t is not None and t.group(1) == scope):
                    out.pop()
            out.append(i)
        return tuple(out)

    def name(self, part: Any) -> str:
        return part if type(part) is str else self.records[part].name

    def group(self, gid: int, i: int, parent: int | None) -> Group:
        rec = self.records[i]
        attrs = rec.attrs()
        path = attrs["path"] = self._path(rec, parent)
        call = self._call_no.get((parent, i))
        if call is None:
            key = (path, rec.module, rec.cls)
            call = self._call_no[(parent, i)] = self._calls_seen.get(key, 0)
            self._calls_seen[key] = call + 1
        self._record_of[gid] = i
        attrs["call"] = call
        frame = self.conv.frames.frame_of_raw(rec.codes, rec.lastis)
        if frame is not None:
            attrs["frame"] = frame
        attrs["note"] = MODULE_NOTE
        return Group(gid, "module", rec.name, parent, attrs)

    def _path(self, rec: Any, parent: int | None) -> str | None:
        """``rec.path``, re-based when the call sits in another module call than the one
        it was traced in."""
        groups = self.conv.groups
        g = parent
        while g is not None and groups[g].kind != "module":
            g = groups[g].parent
        if g is None or rec.parent is None or self._record_of.get(g) == rec.parent:
            return rec.path
        old, new = self.records[rec.parent].path, groups[g].attrs.get("path")
        if rec.path is None or old is None or new is None or old == new:
            return rec.path
        if rec.path == old or rec.path.startswith(old + "." if old else ""):
            rest = rec.path[len(old):].lstrip(".")
            return f"{new}.{rest}" if new and rest else new or rest
        return rec.path
