"""The fan-out of hooks (:mod:`tensorviz_lsp.feature` declares them): which features
implement each declared hook, in which order, checked once when the server is built.

:class:`HookTable` refuses, at startup, a feature method marked ``@hook`` whose name no
hookspec declares, an unmarked override of a declared hook, an ``after`` naming a
feature that does not implement the hook, and an order that goes round in a circle.
:meth:`HookTable.call` runs a hook named by its declaration (``Feature.code_lens``) and
combines the results by the declared rule; a feature whose hook raises is logged and
the others keep working.
"""

from __future__ import annotations

import heapq
import inspect
import logging
from collections.abc import Callable, Sequence
from typing import Any

from .feature import HOOKSPECS, IMPL_MARK, SPEC_MARK, Combine, Feature, HookImpl, combine_of

log = logging.getLogger(__name__)


class HookError(RuntimeError):
    """A feature's hooks break the declared contract (found when the server is built)."""


class HookTable:
    """Every declared hook's implementations, in fan-out order. ``features``: the
    server's features in their base order (each after the features it was given;
    :func:`tensorviz_lsp.wiring.build_parts`)."""

    def __init__(self, features: Sequence[Feature]) -> None:
        self.features = list(features)
        impls: dict[str, list[tuple[Feature, HookImpl]]] = {name: [] for name in HOOKSPECS}
        for feature in self.features:
            for name, impl in implemented(type(feature)).items():
                impls[name].append((feature, impl))
        self._order: dict[Callable[..., Any], list[tuple[str, Callable[..., Any]]]] = {}
        for name, found in impls.items():
            ordered = _ordered(name, found)
            # The bound methods, looked up once here: nothing is looked up by name later.
            self._order[HOOKSPECS[name]] = [(f.name, getattr(f, name)) for f in ordered]

    def implementers(self, declaration: Callable[..., Any]) -> list[str]:
        """The names of the features that implement the hook, in fan-out order."""
        return [name for name, _ in self._calls(declaration)]

    def _calls(self, declaration: Callable[..., Any]) -> list[tuple[str, Callable[..., Any]]]:
        calls = self._order.get(declaration)
        if calls is None:
            raise HookError(f"{getattr(declaration, '__qualname__', declaration)!r} is not a declared hook "
                            "(the hooks are the @hookspec methods of tensorviz_lsp.feature.Feature)")
        return calls

    async def call(self, declaration: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run the hook on every feature that implements it, in order, and combine
        the results by its rule (:class:`~tensorviz_lsp.feature.Combine`)."""
        rule = combine_of(declaration)
        gathered: list[Any] = []
        for feature_name, method in self._calls(declaration):
            try:
                result = method(*args, **kwargs)
                if inspect.isawaitable(result):
                    result = await result
            except Exception:
                log.exception("TensorViz: %s.%s failed; other features continue", feature_name, declaration.__name__)
                continue
            if rule is Combine.FIRST and result is not None:
                return result
            if rule is Combine.CONCAT and result:
                gathered.extend(result)
        return gathered if rule is Combine.CONCAT else None


def implemented(cls: type[Feature]) -> dict[str, HookImpl]:
    """The hooks ``cls`` implements (its ``@hook`` methods, inherited ones included),
    each checked against the declarations: a ``HookError`` names what is wrong."""
    out: dict[str, HookImpl] = {}
    for klass in reversed(cls.__mro__):
        if klass is Feature or not issubclass(klass, Feature):
            continue
        for name, member in vars(klass).items():
            function = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
            impl = getattr(function, IMPL_MARK, None)
            if isinstance(impl, HookImpl):
                if name not in HOOKSPECS:
                    raise HookError(
                        f"{klass.__qualname__}.{name} ({klass.__module__}) is marked @hook, but no hook {name!r} is "
                        f"declared (tensorviz_lsp/feature.py declares: {', '.join(sorted(HOOKSPECS))})")
                out[name] = impl
            elif name in HOOKSPECS:
                if hasattr(function, SPEC_MARK):
                    raise HookError(f"{klass.__qualname__}.{name}: only tensorviz_lsp.feature.Feature declares hooks")
                raise HookError(f"{klass.__qualname__}.{name} ({klass.__module__}) overrides the hook {name!r} "
                                "without @hook: mark it, or rename it")
            elif name not in ("__init__",) and hasattr(function, SPEC_MARK):
                raise HookError(f"{klass.__qualname__}.{name}: only tensorviz_lsp.feature.Feature declares hooks")
    return out


def _ordered(hook_name: str, found: list[tuple[Feature, HookImpl]]) -> list[Feature]:
    """The implementers of one hook: in base order, moved only as far as their
    ``after`` declarations need."""
    position = {id(f): i for i, (f, _) in enumerate(found)}
    by_class: dict[type, Feature] = {type(f): f for f, _ in found}
    before: dict[int, set[int]] = {id(f): set() for f, _ in found}
    for feature, impl in found:
        for other in impl.after:
            match = next((f for cls, f in by_class.items() if issubclass(cls, other)), None)
            if match is None:
                raise HookError(f"{type(feature).__qualname__}.{hook_name} runs after {other.__qualname__}, "
                                f"which does not implement {hook_name!r}")
            before[id(feature)].add(id(match))
    waiting = {k: set(v) for k, v in before.items()}
    ready = [position[k] for k, v in waiting.items() if not v]
    heapq.heapify(ready)
    ordered: list[Feature] = []
    while ready:
        feature = found[heapq.heappop(ready)][0]
        ordered.append(feature)
        for k, deps in waiting.items():
            if id(feature) in deps:
                deps.discard(id(feature))
                if not deps:
                    heapq.heappush(ready, position[k])
    if len(ordered) != len(found):
        stuck = sorted(type(f).__qualname__ for f, _ in found if f not in ordered)
        raise HookError(f"the 'after' declarations of {hook_name!r} go round in a circle: {', '.join(stuck)}")
    return ordered
