"""The trunk: which groups the first view opens.

From the top, the first view follows the group that holds most of the program: a child
group opens when it holds more than half of its container's ops (Llama's decoder
``model`` with 98 % of the ops opens, ``lm_head``'s 4 ops stay a card), or when it is the
only thing its container draws (a lone wrapper). Repeated blocks never qualify (a stack
member shares its ops with its twins, so none holds a majority), nor does a function
card or a group drawn as its single op: the first view is never spent on a one-op frame.
Small heads and stems stay collapsed because they never hold the majority.
"""

from __future__ import annotations

from typing import Any

from capture.analysis.index import ROOT


def trunk(index: Any, present: Any) -> list[int]:
    """The groups the first view opens, from the top down (each inside the previous)."""
    count = index.node_count
    out: list[int] = []
    g = ROOT
    while True:
        nxt = _next(index, present, g, count)
        if nxt is None:
            return out
        out.append(nxt)
        g = nxt


def _next(index: Any, present: Any, g: int, count: list[int]) -> int | None:
    """The child of ``g`` the first view opens: its only group drawn as a frame when it
    draws nothing else, else the one holding the majority of its ops (at most one child
    can: found first, so that a container of 14,285 alike blocks is looked at only until
    two frames are drawn, not block by block)."""
    _, refs, _ = index.ordered(g)
    total = count[g + 1]
    majority = next((c for c in index.child_groups[g + 1] if 2 * count[c + 1] > total and count[c + 1] > 1), None)

    def frame(c: int) -> bool:  # drawn as a frame: not a function card, not its single op
        return not present.is_function_card(c) and present.single(c, False) is None

    kids: list[int] = []
    for r in refs:
        if not present.drawn(r, False):
            continue
        if r >= 0 or not frame(~r):
            break  # an op shown: no lone frame
        kids.append(~r)
        if len(kids) > 1:
            break  # two frames: no lone one
    else:
        if len(kids) == 1:
            return kids[0]
    return majority if majority is not None and present.drawn(~majority, False) and frame(majority) else None
