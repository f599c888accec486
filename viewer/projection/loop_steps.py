"""What a stack of loop steps says (the steps :mod:`capture.analysis.loops` wraps).

A Python loop over time steps folds into one stack card titled by where the loop's body
is (``loop · mamba.py:21–22``) and tagged ``×64 steps``, whose lines say what the loop
carries from one step to the next (``carries x f32[2,8,4] step to step``) and what each
step takes a slice of (``per step: a slice of f32[2,64,8,4] ×2 · f32[2,64,4]``) or reads
whole; its costs are the run's sums, as any stack's.
"""

from __future__ import annotations

from typing import Any, Callable

from capture.analysis.loops import STEP_KIND

#: Ops that take one step's part of a sequence (Torch kernels and JAX primitives, by
#: their base name): ``deltaA[:, i]``, ``x[:, t]``, ``lax.dynamic_slice``.
SLICING_OPS = frozenset({
    "select", "slice", "narrow", "index", "index_select", "gather", "take", "unbind", "split", "chunk",
    "dynamic_slice", "squeeze", "as_strided",
})
#: Values named per line of the card (the rest counted).
LISTED = 3


def is_step(item: dict) -> bool:
    return item.get("type") == "group" and item.get("kind") == STEP_KIND


def loop_label(attrs: Any, count: int) -> str:
    """``loop · mamba.py:21–22``: where the loop's body is (its first step's lines)."""
    loop = attrs.get("loop") if isinstance(attrs, dict) else None
    loop = loop if isinstance(loop, dict) else {}
    file, lines = loop.get("file"), loop.get("lines")
    if not isinstance(file, str) or not isinstance(lines, list) or len(lines) != 2:
        return f"loop ×{count} steps"
    a, b = lines
    where = f"{file.rsplit('/', 1)[-1]}:{a}" + (f"–{b}" if b != a else "")
    return f"loop · {where}"


def _base(op: str) -> str:
    return op.rsplit("::", 1)[-1].split(".", 1)[0]


def _listed(briefs: list[dict]) -> str:
    """``x f32[2,8] · f32[2,5,4] ×2``: values by name and label, equal ones counted."""
    counted: dict[str, int] = {}
    for b in briefs:
        text = f"{b['name']} {b['label']}" if b.get("name") and b.get("role") not in ("param", "buffer") else b["label"]
        counted[text] = counted.get(text, 0) + 1
    parts = [t if k == 1 else f"{t} ×{k}" for t, k in counted.items()]
    more = len(parts) - LISTED
    return " · ".join(parts[:LISTED]) + (f" +{more}" if more > 0 else "")


def loop_words(capture: Any, index: Any, brief: Callable[[int], dict], is_weight: Callable[[int], bool],
               steps: list[int]) -> dict:
    """A stack of the steps ``steps`` (group ids, in order): its ``label`` and its
    ``loop`` entry (``steps``, ``carried`` and ``sliced``/``read`` values, and the
    ``lines`` its card says)."""
    groups = capture.groups
    first = groups[steps[0]].attrs if isinstance(groups[steps[0]].attrs, dict) else {}
    got = first.get("loop")
    loop: dict[str, Any] = got if isinstance(got, dict) else {}
    carried: list[int] = []
    if len(steps) > 1:
        second = groups[steps[1]].attrs.get("loop") if isinstance(groups[steps[1]].attrs, dict) else None
        carried = [v for v in (second or {}).get("carried", ()) if type(v) is int and 0 <= v < index.n_values]
    shared = [v for v in loop.get("shared", ()) if type(v) is int and 0 <= v < index.n_values and not is_weight(v)]
    sliced, read = _sliced(index, steps[0], shared)
    out: dict[str, Any] = {"steps": len(steps), "carried": [brief(v) for v in carried],
                           "sliced": [brief(v) for v in sliced], "read": [brief(v) for v in read]}
    lines = []
    if carried:
        lines.append(f"carries {_listed(out['carried'])} step to step")
    if sliced:
        lines.append(f"per step: a slice of {_listed(out['sliced'])}")
    if read:
        lines.append(f"every step reads {_listed(out['read'])}")
    out["lines"] = lines
    return {"label": loop_label(first, len(steps)), "loop": out}


def _sliced(index: Any, step: int, shared: list[int]) -> tuple[list[int], list[int]]:
    """The shared values step ``step`` takes a slice of, and those it reads otherwise."""
    lo, hi = index.first[step + 1], index.last[step + 1]
    cols = index.cols
    sliced: list[int] = []
    read: list[int] = []
    for v in shared:
        readers = [i for i in index.uses(v) if lo <= i <= hi]
        (sliced if readers and all(_base(cols.op[i]) in SLICING_OPS for i in readers) else read).append(v)
    return sliced, read
