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
        _, refs, _ = index.ordered(g)
        kids: list[int] = []
        ops_shown = False
        for r in refs:
            if not present.drawn(r, False):
                continue
            if r >= 0:
                ops_shown = True
                continue
            c = ~r
            if present.is_function_card(c) or present.single(c, False) is not None:
                ops_shown = True
            else:
                kids.append(c)
        total = count[g + 1]
        nxt: int | None
        if len(kids) == 1 and not ops_shown:
            nxt = kids[0]
        else:
            nxt = next((c for c in kids if 2 * count[c + 1] > total and count[c + 1] > 1), None)
        if nxt is None:
            return out
        out.append(nxt)
        g = nxt
