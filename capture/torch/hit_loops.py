"""A Python loop over a data-dependent set of indices in an abstract capture: the
mixture-of-experts loop over the experts the routing hit (DBRX, Mixtral, OLMoE, gpt-oss
and most ``transformers`` models' eager experts)::

    expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()
    for expert_idx in expert_hit:
        token_idx = torch.where(expert_mask[expert_idx[0]])[1]
        ...

With no data, the hit set's length is an unbacked symbol and Python cannot iterate it
(``GuardOnDataDependentSymNode``). While :class:`HitLoops` is active, iterating a tensor
made by ``nonzero`` whose length is such a symbol takes one stated choice instead:

* **every index hit**: the loop runs once per index of ``nonzero``'s input, in order
  (``nonzero`` lists them sorted), each element a small constant tensor holding that
  index; where a ``topk`` ran before (the router), at most as many indices as it chose
  from (a one-hot mask of ``N + 1`` classes, as DBRX builds, never hits class ``N``).
  For the experts, an upper bound on how many run.
* **the rows spread evenly**: each ``nonzero`` result of data-dependent length made
  inside the loop (the tokens routed to one expert) is given an equal share of its upper
  bound (``top_k × tokens`` over the iterations, remainders spread one by one), so the
  rows over all iterations add up to what the routing hands out: the active top-k FLOPs.

Each choice is recorded (:attr:`HitLoops.choices`, ``meta["assumptions"]`` of the capture)
with the line of the loop, and every symbol fixed this way has one value in the capture's
symbol table (``min == max``), which the cost pass counts with.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager, nullcontext
from typing import Any, Iterator

import torch
from torch._subclasses import fake_tensor as _fake
from torch.utils._python_dispatch import TorchDispatchMode

#: The most iterations a hit set is given (a larger one is refused as before).
MAX_ITERATIONS = 4096


class HitLoops(TorchDispatchMode):
    """Below the trace, above the fake mode: remembers what ``nonzero`` and ``topk`` were
    given, and (while :meth:`active`) lets Python iterate a ``nonzero`` result of
    data-dependent length (see the module docstring)."""

    def __init__(self, shape_env: Any, files: Any = None) -> None:
        super().__init__()
        self.shape_env = shape_env
        self.files = files
        self._nonzero: dict[Any, tuple[list[int], int, Any]] = {}  # symbol -> (input shape, bound, SymInt)
        self._topk_n: int | None = None
        self.choices: list[dict[str, Any]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return self.dispatch(func, args, kwargs or {})

    def dispatch(self, func: Any, args: tuple, kwargs: dict) -> Any:
        """Run an op below this mode and remember what ``nonzero`` and ``topk`` were
        given (the mode's work; a trace recording above may call it itself, with this
        mode not entered: :meth:`active` with ``mode=False``)."""
        out = self.run(func, args, kwargs)
        packet = getattr(func, "overloadpacket", None)
        if packet is torch.ops.aten.nonzero and args and isinstance(out, torch.Tensor):
            n = out.shape[0]
            src = args[0]
            if isinstance(n, torch.SymInt) and all(type(d) is int for d in src.shape):
                numel = 1
                for d in src.shape:
                    numel *= d
                self._nonzero[n.node.expr] = (list(src.shape), numel, n)
        elif packet is torch.ops.aten.topk and args:
            dim = args[2] if len(args) > 2 else kwargs.get("dim", -1)
            d = args[0].shape[dim]
            if type(d) is int:
                self._topk_n = d
        return out

    def run(self, func: Any, args: tuple, kwargs: dict) -> Any:
        """Run the op below this mode (a subclass may run some otherwise: one mode layer
        instead of two, each costing every op a Python dispatch)."""
        return func(*args, **kwargs)

    @contextmanager
    def active(self, mode: bool = True) -> Iterator[None]:
        """Iterating a hit set runs once per index; with ``mode``, this is the dispatch
        mode too (else its caller runs every op through :meth:`dispatch`)."""
        original = torch.Tensor.__iter__
        loops = self

        def iterate(t: Any) -> Any:
            got = loops._hit_set(t)
            if got is None:
                return original(t)
            return loops._iterate(t, *got, sys._getframe(1))

        torch.Tensor.__iter__ = iterate
        try:
            with self if mode else nullcontext():
                yield
        finally:
            torch.Tensor.__iter__ = original

    def _hit_set(self, t: Any) -> tuple[list[int], int] | None:
        """(nonzero's input shape, iterations) when ``t`` is a nonzero result of
        data-dependent length on the CPU, else None."""
        if not _fake.is_fake(t) or t.dim() == 0 or t.device.type != "cpu":
            return None
        n = t.shape[0]
        if not isinstance(n, torch.SymInt):
            return None
        got = self._nonzero.get(n.node.expr)
        if got is None:
            return None
        shape, bound, _ = got
        if len(shape) == 1 and self._topk_n is not None:
            bound = min(bound, self._topk_n)
        if bound > MAX_ITERATIONS:
            return None
        return shape, bound

    def _iterate(self, t: Any, shape: list[int], count: int, frame: Any) -> Iterator[Any]:
        torch._check(t.shape[0] == count)
        made: list[Any] = []  # per iteration, the data-dependent row counts nonzero made in it
        choice: dict[str, Any] = {"loop": _where(frame), "set": f"nonzero of {list(shape)}", "iterations": count}
        self.choices.append(choice)
        element_shape = [int(d) for d in t.shape[1:]]
        try:
            for i in range(count):
                before = set(self._nonzero)
                # made under the fake mode: a constant it can read (expert_idx == N, an index)
                yield torch.tensor(_unravel(i, shape), dtype=t.dtype).reshape(element_shape)
                made.append([s for s in self._nonzero if s not in before])
        finally:
            self._spread(made, choice)

    def _spread(self, made: list[list[Any]], choice: dict[str, Any]) -> None:
        """Give the row sets each iteration made an equal share of their bound."""
        n = len(made)
        per_position = list(zip(*made)) if made and all(len(m) == len(made[0]) for m in made) else []
        shares = []
        for symbols in per_position:  # the k-th nonzero of each iteration: one kind of row set
            bound = self._nonzero[symbols[0]][1]
            if any(self._nonzero[s][1] != bound for s in symbols):
                continue
            for i, s in enumerate(symbols):
                torch._check(self._nonzero[s][2] == bound * (i + 1) // n - bound * i // n)
            shares.append({"rows": bound, "each": sorted({bound * (i + 1) // n - bound * i // n for i in range(n)}),
                           "symbols": [str(s) for s in symbols]})
        choice["row_sets"] = shares
        choice["text"] = _text(choice)


def _unravel(i: int, shape: list[int]) -> list[int]:
    out = []
    for d in reversed(shape):
        out.append(i % d)
        i //= d
    return list(reversed(out))


def _where(frame: Any) -> dict[str, Any]:
    code = frame.f_code
    return {"file": code.co_filename, "line": frame.f_lineno, "function": code.co_qualname}


def _text(choice: dict[str, Any]) -> str:
    loop = choice["loop"]
    text = (f"the loop at {loop['file'].rsplit('/', 1)[-1]}:{loop['line']} over a data-dependent set "
            f"({choice['set']}) was run once per index, {choice['iterations']} times: every one hit, an upper bound")
    for rows in choice.get("row_sets", []):
        each = rows["each"]
        text += (f"; the {len(rows['symbols'])} row sets made in it were given "
                 f"{rows['rows']:,} rows in all, spread evenly ({' or '.join(map(str, each))} each)")
    return text
