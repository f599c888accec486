"""Diff mode of the viewer: what changed between the capture on screen and another one.

The page shows capture B; ``GET api/diff?capture=B&against=A`` compares it with capture A
(another capture this server holds, or ``against=previous``: the baseline its embedder
set with :meth:`DiffStore.set_baseline`, the previous capture of the same profile). The
answer is :func:`capture.graph.diff.to_json` with ids, plus what the page draws:

* ``changes``: one entry per change, in graph order, each with ``key`` (the item of B to
  highlight: the node or group itself, or for something removed the B group that lost
  it), ``item_path`` (B's item keys to expand to show it, as ``api/node`` gives them),
  ``status`` (``added`` | ``removed`` | ``changed``), ``type`` (``group`` | ``node``),
  ``title`` and ``detail`` (one line each, for the change list);
* ``marks``: ``{key: status}`` for every B item to colour, with ``contains`` for the
  groups and chunks on the way down to a change (so a collapsed card says "a change is
  inside").

Matching is by group path and node place (:mod:`capture.graph.diff`), never by id; ids here
only say which items of the two held captures the entries are.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable

from capture.graph.diff import CaptureDiff, DiffError, diff, summary, to_json
from capture.graph.diff import change_text  # one wording for the CLI and the page
from capture.graph.model import Capture

from ..projection.projection import Projection

# How a mark outranks another on one item: its own change first, then "lost a child", then
# "a change is inside".
_STRENGTH = {"": 0, "contains": 1, "removed-inside": 2, "changed": 3, "added": 4, "removed": 4}
MAX_CHANGES = 5000  # entries the change list gets (the counts always cover everything)
_CACHED = 8


class DiffUnavailable(Exception):
    """No diff can be made (no such capture, a failed capture): ``str()`` is for a person."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class DiffStore:
    """Baselines (the capture each held capture is compared with by default) and a small
    cache of computed answers. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._baselines: dict[int, tuple[Capture | Callable[[], Capture], str]] = {}
        self._answers: OrderedDict[tuple, dict] = OrderedDict()

    def set_baseline(self, capture_id: int, baseline: Capture | Callable[[], Capture], label: str) -> None:
        """Offer a diff of capture ``capture_id`` against ``baseline`` (``label`` names it,
        e.g. "previous capture of gpt2 (12:03:41 UTC)"). ``baseline`` may be a function that
        reads it (from the history), called on the first ``api/diff``, so that showing a new
        capture never waits for its predecessor. A failed baseline is not offered."""
        if isinstance(baseline, Capture) and baseline.failure is not None:
            return
        with self._lock:
            self._baselines[capture_id] = (baseline, label)

    def forget(self, capture_id: int) -> None:
        """A released capture: drop its baseline and every cached answer that involves it."""
        with self._lock:
            self._baselines.pop(capture_id, None)
            for key in [k for k in self._answers if capture_id in k[:2]]:
                del self._answers[key]

    def _baseline(self, capture_id: int) -> tuple[Capture, str] | None:
        with self._lock:
            got = self._baselines.get(capture_id)
        if got is None:
            return None
        if isinstance(got[0], Capture):
            return got[0], got[1]
        try:
            loaded = got[0]()
        except Exception as exc:  # a pruned or unreadable history file
            raise DiffUnavailable(404, f"the previous capture can no longer be read: {exc}") from None
        with self._lock:
            self._baselines[capture_id] = (loaded, got[1])
        return loaded, got[1]

    def offer(self, capture_id: int) -> dict | None:
        """What ``api/capture`` says about diff mode: ``{against: "previous", label}`` or ``None``."""
        with self._lock:
            got = self._baselines.get(capture_id)
        return None if got is None else {"against": "previous", "label": got[1]}

    def answer(self, b_id: int, b: Capture, b_projection: Callable[[], Projection], against: str,
               resolve: Callable[[str], tuple[int, Capture, str]]) -> dict:
        """The ``api/diff`` answer for capture ``b_id`` against ``against`` (``previous`` or a
        held capture id, looked up with ``resolve``)."""
        key: tuple[Any, ...]
        if against in ("", "previous"):
            got = self._baseline(b_id)
            if got is None:
                raise DiffUnavailable(404, "this capture has no previous capture to compare with")
            a, label, key = got[0], got[1], (b_id, "previous", id(got[0]))
        else:
            a_id, a, label = resolve(against)
            key = (b_id, a_id)
        with self._lock:
            cached = self._answers.get(key)
            if cached is not None:
                self._answers.move_to_end(key)
                return cached
        if b.failure is not None:
            raise DiffUnavailable(409, "this capture failed: a failure record has no graph to compare")
        try:
            d = diff(a, b, label_a=label, label_b="this capture")
        except DiffError as exc:
            raise DiffUnavailable(409, str(exc)) from None
        out = payload(d, b_projection())
        with self._lock:
            self._answers[key] = out
            while len(self._answers) > _CACHED:
                self._answers.popitem(last=False)
        return out


def payload(d: CaptureDiff, proj: Projection) -> dict:
    """``to_json(d, ids=True)`` plus the page's ``changes`` and ``marks`` (see the module doc)."""
    out = to_json(d, ids=True)
    changes: list[dict] = []
    marks: dict[str, str] = {}
    by_group: dict[Any, list] = {}
    for n in d.nodes:
        by_group.setdefault(n.group, []).append(n)

    def mark(item_path: list[str], key: str, status: str) -> None:
        for k in item_path:
            if k != key and _STRENGTH[marks.get(k, "")] < _STRENGTH["contains"]:
                marks[k] = "contains"
        if _STRENGTH[marks.get(key, "")] < _STRENGTH[status]:
            marks[key] = status

    def group_path_keys(g: int | None) -> tuple[str, list[str]]:
        if g is None or g < 0:
            return "g-1", []
        return f"g{g}", proj.index.group_item_path(g)

    for g in d.groups:
        if g.status == "removed":
            # Not in B: point at the B group that held it (its parent's counterpart).
            key, path = group_path_keys(g.holder)
            mark(path, key, "removed-inside")
        else:
            key, path = group_path_keys(g.b)
            mark(path, key, g.status)
        changes.append({
            "type": "group", "status": g.status, "key": key, "item_path": path,
            "path": g.path, "title": _group_title(g), "detail": _group_detail(g),
        })
        for n in by_group.pop(g.path, []) if g.status == "changed" else []:
            changes.append(_node_entry(n, g.b, proj, mark, group_path_keys))
    for rest in by_group.values():  # the top level (nodes outside every group)
        for n in rest:
            changes.append(_node_entry(n, None, proj, mark, group_path_keys))
    total = len(changes)
    out["changes"] = changes[:MAX_CHANGES]
    out["changes_total"] = total
    out["marks"] = marks
    out["text"] = summary(d)
    return out


def _node_entry(n, g_b: int | None, proj: Projection, mark, group_path_keys) -> dict:
    if n.b is not None:
        path = proj.item_path(n.b)
        key = f"n{n.b}"
        mark(path[:-1], key, n.status)
    else:
        key, path = group_path_keys(g_b)
        mark(path, key, "removed-inside")
    where = f"#{n.index_b}" if n.index_b is not None else f"#{n.index_a} in the other capture"
    detail = {"added": "added", "removed": "removed"}.get(n.status) or change_text(n.changes)
    return {
        "type": "node", "status": n.status, "key": key, "item_path": path,
        "path": n.group, "title": f"{n.op} {where}", "detail": detail, "changes": n.changes,
    }


def _group_title(g) -> str:
    name = g.path if g.path else f"(root {g.name})"
    return name + (f" ({g.cls})" if g.cls else f" ({g.kind})")


def _group_detail(g) -> str:
    if g.status in ("added", "removed"):
        s = g.subtree
        bits = [f"{s.get('nodes', 0)} nodes", f"{s.get('groups', 0)} groups"]
        if s.get("parameters"):
            bits.append(f"{s['parameters']} parameter tensors")
        return f"{g.status}: " + ", ".join(bits)
    bits = [f"{k} {v['a']} → {v['b']}" for k, v in g.changes.items()]
    bits += [f"{c} node{'' if c == 1 else 's'} {s}" for s, c in g.nodes.items() if c]
    return "changed: " + (", ".join(bits) if bits else "its nodes")


__all__ = ["DiffStore", "DiffUnavailable", "payload", "MAX_CHANGES"]
