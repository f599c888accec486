"""Plumbing: what a container computes once and hands to every layer of its stack.

A decoder's forward makes, before its layers, the values every layer reads: position
ids, the attention mask (``transformers``' ``masking_utils``: 20 ops or more under an
abstract capture), the rotary tables (``cos``, ``sin``). Drawn as they are, they fill the
first view above the layers (Gemma 3, ModernBERT, Mixtral open on them). On a page
whose items hold a stack of layers, :func:`plumbing_fold` finds those items and folds
them into one named card, the way a stack folds its repetitions:

* a **feeding item** is outside the stacks of layers (every stack of at least two
  repetitions each handing something to the next: DeepSeek-V3's 3 dense layers and its
  58 mixture-of-experts layers, not Gemma 3's rotary embedding called twice) and
  hands a value to a repetition after the first (the hidden state enters the first
  repetition only and then passes from layer to layer, so what enters later ones from
  outside is what every layer reads);
* an item is plumbing when it feeds, or when everything it hands on goes to plumbing
  items or into the stack's later repetitions (the ops that build a mask for the ops
  that finish it); an item that hands a value out of the container, or only to the
  first layer or to anything else, is not (the embedding feeds the rotary embedding
  its dtype, and the first layer its hidden state);
* what the plumbing computes and nothing reads goes with it; at least two items fold
  (one card is already one card); another stack among them
  (Gemma 3's local and global rotary embeddings side by side) folds with them.

The fold is a stack entry with ``fold: "plumbing"`` and one repetition of its members
(in program order, not necessarily adjacent), named after what it holds: the modules'
names and the library functions the ops ran in (``create_causal_mask``, ``sdpa_mask``).
It opens like a stack (``viewer/API.md``).
"""

from __future__ import annotations

from typing import Any, Callable

#: What the card is titled.
TITLE = "layer inputs"
#: Names listed on the card (the rest counted).
NAMES_LISTED = 4


def plumbing_fold(items: list[dict[str, Any]], edges: list[dict[str, Any]], stacks: list[dict[str, Any]],
                  op_name: Callable[[int], str | None]) -> dict[str, Any] | None:
    """The plumbing fold of a page (``items``, its ``edges`` and ``stacks`` as the page
    holds them), or ``None``. ``op_name(node)``: what an op is called on the card (the
    library function it ran in), or ``None`` for an op of the container's own code.
    Removes the stacks it absorbs from ``stacks``."""
    # (the steps of a loop are not layers: what every step reads is the loop's input)
    layers = [st for st in stacks if st.get("fold") is None and not st.get("loop") and st["count"] >= 2
              and _chained(st, edges)]
    if not layers:
        return None
    # The layers: every frame of a stack of layers, and every frame of the same class
    # beside them (Gemma 3's lone global layers between runs of local ones).
    classes = {it.get("class") for it in items for st in layers for rep in st["members"]
               if it["key"] in rep and it["type"] == "group"} - {None}
    in_stacks = {k for st in layers for rep in st["members"] for k in rep}
    layer = [it["key"] for it in items if it["key"] in in_stacks
             or (it["type"] == "group" and it.get("class") in classes)]
    if not layer:
        return None
    first = layer[0]
    layer_set = set(layer)
    outs: dict[str, list[str]] = {}
    for e in edges:
        outs.setdefault(e["source"], []).append(e["target"])
    # what enters a layer after the first from outside the layers
    plumb = {e["source"] for e in edges
             if e["source"] not in layer_set and e["target"] in layer_set and e["target"] != first
             and not e["source"].startswith(("in:", "out:"))}
    if not plumb:
        return None
    order = [it["key"] for it in items if it["key"] not in layer_set]
    _spread(plumb, order, outs, layer_set, first)
    # an item that also hands something out of the container, or to the rest of the
    # page besides plumbing and the layers, is part of the main path, not plumbing
    plumb = {k for k in plumb if all(t in plumb or t in layer_set for t in outs.get(k, ()))}
    _add_dead(plumb, order, outs)
    for st in list(stacks):  # another stack among the plumbing (two rotary embeddings) folds with it
        if any(st is lay for lay in layers):
            continue
        keys = {k for rep in st["members"] for k in rep}
        if keys & plumb:
            plumb |= keys
            stacks.remove(st)
    members = [k for k in order if k in plumb]
    if len(members) < 2:
        return None
    return _fold(items, members, op_name, [st["key"] for st in layers], len(layer))


def container_plumbing_fold(items: list[dict[str, Any]], edges: list[dict[str, Any]], container: str, feeds: set[int], layers: int,
                            op_name: Callable[[int], str | None]) -> dict[str, Any] | None:
    """The plumbing fold of a page whose layers sit one level down, in the group item
    ``container`` (BERT's encoder: its page holds the stack of layers, this one the mask
    ops), or ``None``. ``feeds``: the values the container hands to every layer of its
    stack (the mask), ``layers`` how many layers that stack has. What only computes those
    values (what enters the container carrying one of them, and what only feeds that)
    folds into one card; what also hands anything else on is the main path."""
    outs: dict[str, list[tuple[str, int | None]]] = {}
    for e in edges:
        outs.setdefault(e["source"], []).append((e["target"], e.get("value")))
    plumb: set[str] = set()
    order = [it["key"] for it in items if it["key"] != container]
    changed = True
    while changed:
        changed = False
        for k in reversed(order):
            targets = outs.get(k)
            if k in plumb or not targets:
                continue
            if all(t in plumb or (t == container and v in feeds) for t, v in targets):
                plumb.add(k)
                changed = True
    if not plumb:
        return None
    _add_dead(plumb, order, {k: [t for t, _ in ts] for k, ts in outs.items()})
    members = [k for k in order if k in plumb]
    if len(members) < 2:
        return None
    return _fold(items, members, op_name, [container], layers)


def _fold(items: list[dict[str, Any]], members: list[str], op_name: Callable[[int], str | None], feeds: list[str],
          layers: int) -> dict[str, Any]:
    """The plumbing fold's stack entry: ``members`` (keys in page order) as one card."""
    by_key = {it["key"]: it for it in items}
    names = _names([by_key[k] for k in members], op_name)
    ops = sum(int(by_key[k].get("node_count") or 1) for k in members)
    return {
        "key": "s" + members[0], "fold": "plumbing", "start": None, "period": len(members), "count": 1,
        "members": [members], "label": TITLE, "pattern": [], "inner": [],
        "names": names, "ops": ops, "feeds": feeds, "layers": layers,
    }


def _spread(plumb: set[str], order: list[str], outs: dict[str, list[str]], layer_set: set[str],
            first: str) -> None:
    """Grow ``plumb`` backwards through ``order`` (the page's items outside the layers):
    an item all of whose readers are plumbing or layers is plumbing too, unless it hands
    something out of the container or only feeds the first layer (its hidden state)."""
    changed = True
    while changed:
        changed = False
        for k in reversed(order):
            if k in plumb:
                continue
            targets = outs.get(k)
            if not targets or any(t.startswith("out:") for t in targets):
                continue
            into = [t for t in targets if t in layer_set]
            if into and all(t == first for t in into):
                continue  # the first layer's own input (the hidden state)
            if all(t in plumb or t in layer_set for t in targets):
                plumb.add(k)
                changed = True


def _add_dead(plumb: set[str], order: list[str], outs: dict[str, list[str]]) -> None:
    """What is computed among the plumbing and read by nothing (a mask helper's unused
    range) goes with it: added to ``plumb``."""
    dead: set[str] = set()
    for k in reversed(order):
        if all(t in dead for t in outs.get(k, ())):
            dead.add(k)
    at = [i for i, k in enumerate(order) if k in plumb]
    if at:
        plumb.update(k for k in order[at[0]:at[-1] + 1] if k in dead)


def _chained(stack: dict[str, Any], edges: list[dict[str, Any]]) -> bool:
    """A stack of layers: a repetition hands something to the next (the hidden state),
    unlike side-by-side repeats (Gemma 3's rotary embedding called twice)."""
    rep_of = {k: r for r, rep in enumerate(stack["members"]) for k in rep}
    return any(e["source"] in rep_of and e["target"] in rep_of and rep_of[e["target"]] == rep_of[e["source"]] + 1
               for e in edges)


def _names(members: list[dict[str, Any]], op_name: Callable[[int], str | None]) -> list[str]:
    """What the fold holds, most ops first, each once: a module by its name
    (``rotary_emb``), an op by the library function it ran in (``sdpa_mask``); the ops
    of the container's own code (and Python's indexing calls) counted last (``+3 ops``)."""
    count: dict[str, int] = {}
    loose = 0
    for it in members:
        n = int(it.get("node_count") or 1)
        if it["type"] == "group" and it.get("card") == "group":
            name = str(it.get("label") or "")
        elif it["type"] == "node":
            name = op_name(it["id"]) or ""
        else:  # a function call (``__getitem__``): its kernels are ops like any other
            name = ""
        if name and not name.startswith("_"):
            count[name] = count.get(name, 0) + n
        elif name.startswith("_") and name.strip("_"):
            count[name.strip("_")] = count.get(name.strip("_"), 0) + n
        else:
            loose += n
    names = sorted(count, key=lambda k: -count[k])
    if loose:
        names.append(f"+{loose} op{'s' if loose > 1 else ''}")
    return names
