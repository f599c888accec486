"""Which of a callable's parameters some given arguments leave unset, or name wrongly.

Discovery knows each parameter of a model's constructor (its setup fields), of what a
capture calls (``forward``, ``__call__``, the function) and of a configuration class (its
fields), with its kind and whether it is required. :func:`bind` compares that with what a
saved setup gives, the way Python would bind a call, but from source alone: the CLI
refuses a setup before any worker starts (``tensorviz capture model.py:net`` with no
``--input``), and the setup form says what it still needs, with the same answer.

Parameters are read in their JSON contract (``CallInput.to_json()``,
``SetupField.to_json()``: ``name``, ``kind``, ``required``, and ``supplied_by`` for a
value the capture gives itself, NNX's ``rngs``), so the language server's copies of
them bind the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Binding:
    """What binding given arguments to parameters found.

    ``missing``: required parameters nothing gives, in order. ``unknown``: keywords no
    parameter takes (never reported when the parameters may be incomplete, or a
    ``**kwargs`` takes any). ``extra_positional``: how many positional arguments are
    past the last positional parameter (0 when a ``*args`` takes them, or when the
    parameters may be incomplete). ``twice``: parameters given both by position and by
    keyword. ``taken``: the parameter names a keyword could name, for messages."""

    missing: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()
    extra_positional: int = 0
    twice: tuple[str, ...] = ()
    taken: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not (self.missing or self.unknown or self.extra_positional or self.twice)


def bind(
    parameters: Sequence[Mapping[str, Any]],
    positional: int,
    keywords: Iterable[str],
    *,
    complete: bool = True,
) -> Binding:
    """Bind ``positional`` positional arguments and the ``keywords`` given to
    ``parameters`` (in declaration order). ``complete``: False when discovery could
    not read every parameter (a base it cannot see may add some), so nothing given is
    called unknown and only the listed required parameters can be missing."""
    keywords = list(keywords)
    params = [p for p in parameters if not p.get("supplied_by")]
    slots = [p for p in params if p.get("kind") == "positional"]
    named = [p for p in params if p.get("kind") in ("positional", "keyword_only")]
    any_positional = any(p.get("kind") == "var_positional" for p in params)
    any_keyword = any(p.get("kind") == "var_keyword" for p in params)
    by_position = {p["name"] for p in slots[:positional]}
    extra = 0 if any_positional or not complete else max(0, positional - len(slots))
    names = {p["name"] for p in named}
    unknown = () if any_keyword or not complete else tuple(k for k in keywords if k not in names)
    twice = tuple(k for k in keywords if k in by_position)
    given = by_position | set(keywords)
    missing = tuple(p["name"] for p in named if p.get("required") and p["name"] not in given)
    return Binding(missing, unknown, extra, twice, tuple(p["name"] for p in named))
