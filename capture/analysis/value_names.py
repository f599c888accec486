"""Value names: what a person calls a value that enters the graph from outside.

A capture says it in three places, which the projection reads in this order (first wins):

* the Torch tracer's ``measured`` label (``param: "stem.weight"``, ``buffer: …``,
  ``input: "input_ids"``): :func:`measured_name`;
* ``capture.meta["input_names"]``, ``[value id, name]`` pairs the JAX worker records
  from the callable's signature and the PyTree paths (``x``, ``w1``,
  ``params.Dense_0.kernel``, ``lin.kernel``);
* the ``capture.inputs`` structure path (``args[0]``, ``kwargs.x`` named ``x``,
  ``variables.params.Dense_0.kernel``): what a capture without recorded names still gets.

:func:`input_names` combines the last two into ``(value, name, path, role)`` per leaf;
``path`` (where the leaf sits in ``capture.inputs``) stays searchable as an alias when it
differs from the name. Every function here treats its input as hostile (a file read from
disk): a malformed entry is skipped, never an error.
"""

from __future__ import annotations

import re
from typing import Any

from capture.graph.model import state_keys

ROLES = ("input", "param", "buffer", "variable", "const")
ROLE_WORDS = {"input": "capture input", "param": "parameter", "buffer": "buffer",
              "variable": "variable", "const": "constant"}
NAME_MAX = 200
_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def measured_name(m: dict[str, Any]) -> tuple[str, str] | None:
    """The Torch tracer's label of a value first seen from outside: ``{"param": NAME}``
    as ``(NAME, "param")``; ``None`` without one."""
    for role in ("param", "buffer", "input"):
        name = m.get(role)
        if isinstance(name, str) and name:
            return name[:NAME_MAX], role
    return None


def key_suffix(k: Any) -> str:
    """How a structure key continues a name: ``.kernel``, ``[0]``, ``['some key']``."""
    if isinstance(k, str) and _IDENT_RE.match(k):
        return "." + k
    if type(k) is int:
        return f"[{k}]"
    return f"[{k!r}]"


def walk_names(tree: Any, name: str, path: str, role: str, out: list[Any]) -> None:
    """Append ``(value, name, path, role)`` for every leaf of ``tree`` (no recursion)."""
    stack = [(tree, name, path)]
    while stack:
        t, n, p = stack.pop()
        if not isinstance(t, dict):
            continue
        if "value" in t:
            if type(t["value"]) is int:
                out.append((t["value"], n[:NAME_MAX], p[:NAME_MAX], role))
            continue
        kids: list[Any] = []
        for kind in ("list", "tuple"):
            if isinstance(t.get(kind), list):
                kids = [(c, f"[{i}]") for i, c in enumerate(t[kind])]
        if isinstance(t.get("dict"), list):
            kids = [(kv[1], key_suffix(kv[0])) for kv in t["dict"] if isinstance(kv, (list, tuple)) and len(kv) == 2]
        for c, suffix in reversed(kids):
            stack.append((c, n + suffix if n else suffix.lstrip("."), p + suffix if p else suffix.lstrip(".")))


def recorded_names(meta: Any) -> dict[int, str]:
    """``meta["input_names"]`` as ``{value id: name}`` (first entry of a value wins);
    malformed entries are skipped, a missing or malformed list gives ``{}``."""
    entries = meta.get("input_names") if isinstance(meta, dict) else None
    out: dict[int, str] = {}
    if not isinstance(entries, list):
        return out
    for e in entries:
        if isinstance(e, (list, tuple)) and len(e) == 2 and type(e[0]) is int and isinstance(e[1], str) and e[1]:
            out.setdefault(e[0], e[1][:NAME_MAX])
    return out


def input_names(tree: Any, meta: Any = None) -> list[tuple[int, str, str, str]]:
    """``(value, name, path, role)`` for each leaf of a capture's input structure, in order.

    ``path`` is where the leaf sits (``args[0]``, ``kwargs.x``,
    ``variables.params.Dense_0.kernel``). ``name`` is what a person calls it: the name the
    capture recorded for it in ``meta["input_names"]`` (``x``, ``w1``,
    ``params.Dense_0.kernel``), else the argument name for keyword arguments (``x``),
    ``args[i]`` for positional ones, the state path for JAX state
    (``variables.params.Dense_0.kernel``). ``role`` is ``"variable"`` under the key the
    JAX worker recorded as holding the state (``meta["state_key"]``; in a file written
    without it, ``variables`` or ``state``), ``"input"`` elsewhere."""
    out: list[Any] = []
    if not isinstance(tree, dict):
        return out
    # The worker records which key holds the state (capture.graph.model.state_keys: the key
    # names are guessed only for files written before it did).
    keys = state_keys(meta)
    pairs = tree.get("dict")
    if isinstance(pairs, list) and pairs and all(isinstance(kv, (list, tuple)) and len(kv) == 2 for kv in pairs) \
            and {kv[0] for kv in pairs if isinstance(kv[0], (str, int))} & {"args", "kwargs"}:
        for key, sub in pairs:
            if key == "kwargs" and isinstance(sub, dict) and isinstance(sub.get("dict"), list):
                for kv in sub["dict"]:
                    if isinstance(kv, (list, tuple)) and len(kv) == 2:
                        n = key_suffix(kv[0]).lstrip(".")
                        walk_names(kv[1], n, "kwargs" + key_suffix(kv[0]), "input", out)
            elif key == "args":
                walk_names(sub, "args", "args", "input", out)
            else:
                role = "variable" if key in keys else "input"
                k = key_suffix(key).lstrip(".")
                walk_names(sub, k, k, role, out)
    elif "value" in tree:
        walk_names(tree, "input", "input", "input", out)
    elif "list" in tree or "tuple" in tree:
        walk_names(tree, "args", "args", "input", out)
    else:
        walk_names(tree, "", "", "input", out)
    recorded = recorded_names(meta)
    if recorded:
        out = [(v, recorded.get(v, n), p, r) for v, n, p, r in out]
    return out
