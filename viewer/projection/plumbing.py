"""Plumbing: what a container computes once and hands to every layer of its stack.

A decoder's forward makes, before its layers, the values every layer reads: position
ids, the attention mask (``transformers``' ``masking_utils``: 20 ops or more under an
abstract capture), the rotary tables (``cos``, ``sin``). Drawn as they are, they fill the
first view above the layers (Gemma 3, ModernBERT, Mixtral open on them). On a page
whose items hold a stack of layers, :func:`plumbing_fold` finds those items and folds
them into one named card, the way a stack folds its repetitions:

* a **feeding item** is outside the stacks of layers (every stack of at least two
  repetitions: DeepSeek-V3's 3 dense layers and its 58 mixture-of-experts layers) and
  hands a value to a repetition after the first (the hidden state enters the first
  repetition only and then passes from layer to layer, so what enters later ones from
  outside is what every layer reads);
* an item is plumbing when it feeds, or when everything it hands on goes to plumbing
  items or into the stack's later repetitions (the ops that build a mask for the ops
  that finish it); an item that hands a value out of the container, or only to the
  first layer or to anything else, is not (the embedding feeds the rotary embedding
  its dtype, and the first layer its hidden state);
* at least two items fold (one card is already one card); another stack among them
  (Gemma 3's local and global rotary embeddings side by side) folds with them.

The fold is a stack entry with ``fold: "plumbing"`` and one repetition of its members
(in program order, not necessarily adjacent), named after what it holds: the modules'
names and the library functions the ops ran in (``create_causal_mask``, ``sdpa_mask``).
It opens like a stack (``viewer/API.md``).
"""

from __future__ import annotations

from typing import Callable

#: What the card is titled.
TITLE = "layer inputs"
#: Names listed on the card (the rest counted).
NAMES_LISTED = 4


def plumbing_fold(items: list[dict], edges: list[dict], stacks: list[dict],
                  op_name: Callable[[int], str | None]) -> dict | None:
    """The plumbing fold of a page (``items``, its ``edges`` and ``stacks`` as the page
    holds them), or ``None``. ``op_name(node)``: what an op is called on the card (the
    library function it ran in), or ``None`` for an op of the container's own code. Removes the stacks it absorbs from
    ``stacks``."""
    layers = [st for st in stacks if st.get("fold") is None and st["count"] >= 2]
    if not layers:
        return None
    # every stack of layers (DeepSeek-V3: 3 dense layers, then 58 mixture-of-experts ones)
    rep_of = {k: r for st in layers for r, rep in enumerate(st["members"]) for k in rep}
    outs: dict[str, list[str]] = {}
    for e in edges:
        outs.setdefault(e["source"], []).append(e["target"])
    feeding = {e["source"] for e in edges
               if e["source"] not in rep_of and e["target"] in rep_of and rep_of[e["target"]] >= 1
               and not e["source"].startswith(("in:", "out:"))}
    if not feeding:
        return None
    plumb = set(feeding)
    order = [it["key"] for it in items if it["key"] not in rep_of]
    changed = True
    while changed:
        changed = False
        for k in reversed(order):
            if k in plumb:
                continue
            targets = outs.get(k)
            if not targets or any(t.startswith("out:") for t in targets):
                continue
            into_layers = [rep_of[t] for t in targets if t in rep_of]
            if into_layers and max(into_layers) == 0:
                continue  # the first layer's own input (the hidden state)
            if all(t in plumb or t in rep_of for t in targets):
                plumb.add(k)
                changed = True
    # a feeding item that hands something out of the container, or to the rest of the
    # page besides plumbing and the layers, is part of the main path, not plumbing
    plumb = {k for k in plumb
             if all(t in plumb or t in rep_of for t in outs.get(k, ()))}
    for st in list(stacks):  # another stack among the plumbing (two rotary embeddings) folds with it
        if any(st is layer for layer in layers):
            continue
        keys = {k for rep in st["members"] for k in rep}
        if keys & plumb:
            plumb |= keys
            stacks.remove(st)
    members = [k for k in order if k in plumb]
    if len(members) < 2:
        return None
    by_key = {it["key"]: it for it in items}
    names = _names([by_key[k] for k in members], op_name)
    ops = sum(int(by_key[k].get("node_count") or 1) for k in members)
    return {
        "key": "s" + members[0], "fold": "plumbing", "start": None, "period": len(members), "count": 1,
        "members": [members], "label": TITLE, "pattern": [], "inner": [],
        "names": names, "ops": ops, "feeds": [st["key"] for st in layers],
        "layers": sum(st["count"] for st in layers),
    }


def _names(members: list[dict], op_name: Callable[[int], str | None]) -> list[str]:
    """What the fold holds, in order, each once: a module by its name (``rotary_emb``), a
    function call by its function, an op by the library function it ran in; the ops of
    the container's own code are counted (``+3 ops``)."""
    out: dict[str, None] = {}
    loose = 0
    for it in members:
        if it["type"] == "group":
            out.setdefault(str(it.get("label") or it.get("title") or ""), None)
        elif it["type"] == "node":
            name = op_name(it["id"])
            if name:
                out.setdefault(name, None)
            else:
                loose += 1
    out.pop("", None)
    names = list(out)
    if loose:
        names.append(f"+{loose} op{'s' if loose > 1 else ''}")
    return names
