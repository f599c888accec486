"""Following a class's bases to a framework Module, across files and re-exports.

``class Block(Base)`` is a candidate when ``Base`` is one: in the same file, in
another workspace file (``from .layers import Base``), or re-exported through a
package ``__init__.py``. Chains may be any length (walked with an explicit stack,
not recursion) and import cycles end the search instead of looping.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Union

import libcst as cst

from .frameworks import FrameworkBase, framework_base
from .namespace import (
    AliasOf,
    ClassInfo,
    DefinedClass,
    Namespace,
    dotted_parts,
    nested_class,
    qualify,
)
from .parameters import source_text

# Bases that add nothing a model needs: they neither make a class a candidate nor
# hide fields from discovery.
_NEUTRAL_BASES = frozenset(
    {"object", "builtins.object", "typing.Generic", "typing.Protocol", "abc.ABC"}
)


class AnalysedModule(Protocol):
    """What inheritance needs to know about a file (see ``analysis.py``)."""

    path: str
    namespace: Namespace | None


class ModuleSource(Protocol):
    def module(self, name: str, importer: AnalysedModule) -> AnalysedModule | None:
        """The workspace file that ``import name`` means for ``importer``."""


class NoWorkspace:
    """Without a workspace index only the file itself is known."""

    def module(self, name: str, importer: AnalysedModule) -> AnalysedModule | None:
        return None


@dataclass(frozen=True, slots=True)
class ClassRef:
    """A class defined in an analysed workspace file."""

    module: AnalysedModule
    info: ClassInfo

    @property
    def key(self) -> tuple[str, str]:
        return (self.module.path, self.info.qualname)


@dataclass(frozen=True, slots=True)
class Unresolved:
    text: str


BaseTarget = Union[FrameworkBase, ClassRef, Unresolved]


@dataclass(frozen=True, slots=True)
class Lineage:
    """How a class reaches its framework: through ``via`` (nearest first) to ``base``."""

    base: FrameworkBase
    via: tuple[ClassRef, ...]
    written: str  # the first base as written in the class itself


@dataclass(slots=True)
class Ancestry:
    """A class and its workspace ancestors in method-resolution order."""

    classes: list[ClassRef] = field(default_factory=list)
    framework_bases: list[FrameworkBase] = field(default_factory=list)
    # Some base is outside what discovery can read (an unresolved import).
    has_unknown_base: bool = False


_MAX_REEXPORT_HOPS = 64


class Resolver:
    def __init__(self, source: ModuleSource) -> None:
        self._source = source
        self._bases: dict[tuple[str, str], list[tuple[BaseTarget, str]]] = {}

    # --- single names ---------------------------------------------------------------

    def bases_of(self, ref: ClassRef) -> list[tuple[BaseTarget, str]]:
        """Each base of ``ref`` resolved, with its source text."""
        cached = self._bases.get(ref.key)
        if cached is None:
            cached = []
            for expr in ref.info.bases:
                text = _text(expr)
                if isinstance(expr, cst.Subscript):  # Base[T], Generic[T]
                    expr = expr.value
                parts = dotted_parts(expr)
                target = self.resolve(ref.module, parts) if parts else Unresolved(text)
                cached.append((target, text))
            self._bases[ref.key] = cached
        return cached

    def resolve(self, module: AnalysedModule, parts: tuple[str, ...]) -> BaseTarget:
        """What the dotted name ``parts`` means inside ``module``."""
        seen: set[tuple[str, tuple[str, ...]]] = set()
        for _ in range(_MAX_REEXPORT_HOPS):
            if (module.path, parts) in seen:
                break  # a re-export cycle
            seen.add((module.path, parts))
            ns = module.namespace
            if ns is None:
                break
            head, rest = parts[0], parts[1:]
            symbol = ns.symbols.get(head)
            if isinstance(symbol, DefinedClass):
                info = nested_class(symbol.info, rest)
                return ClassRef(module, info) if info is not None else Unresolved(".".join(parts))
            if isinstance(symbol, AliasOf):
                parts = symbol.parts + rest
                continue
            qualified = qualify(ns, parts)
            if qualified is not None:
                found = self._resolve_qualified(qualified, module)
                if isinstance(found, tuple):
                    module, parts = found
                    continue
                return found
            if symbol is None:
                provider = self._star_provider(ns, head, module)
                if provider is not None:
                    module = provider
                    continue
            break
        return Unresolved(".".join(parts))

    def _resolve_qualified(
        self, qualified: str, importer: AnalysedModule
    ) -> BaseTarget | tuple[AnalysedModule, tuple[str, ...]]:
        known = framework_base(qualified)
        if known is not None:
            return known
        if qualified.startswith("."):
            return Unresolved(qualified)  # relative import outside any known package
        parts = tuple(qualified.split("."))
        # The longest prefix that is a workspace module; the rest is looked up in it.
        for split in range(len(parts) - 1, 0, -1):
            module = self._source.module(".".join(parts[:split]), importer)
            if module is not None:
                return module, parts[split:]
        return Unresolved(qualified)

    def _star_provider(
        self, ns: Namespace, name: str, importer: AnalysedModule
    ) -> AnalysedModule | None:
        if name.startswith("_"):
            return None  # ``import *`` skips private names
        for star in reversed(ns.star_imports):
            if star.startswith("."):
                continue
            module = self._source.module(star, importer)
            if module is not None and module.namespace is not None:
                if name in module.namespace.symbols:
                    return module
        return None

    # --- whole chains -----------------------------------------------------------------

    def lineage(self, ref: ClassRef) -> Lineage | None:
        """How ``ref`` derives from a framework Module, or None if it does not.

        Depth-first through the bases in order, the first framework base found wins
        (the way Python's MRO would meet it for ordinary hierarchies).
        """
        on_path: set[tuple[str, str]] = {ref.key}
        dead_ends: set[tuple[str, str]] = set()
        # Each frame: a class on the current path and the index of its next base.
        path: list[list] = [[ref, 0]]
        while path:
            frame = path[-1]
            current, index = frame
            bases = self.bases_of(current)
            if index >= len(bases):
                dead_ends.add(current.key)
                on_path.discard(current.key)
                path.pop()
                continue
            frame[1] += 1
            target, _ = bases[index]
            if isinstance(target, FrameworkBase):
                via = tuple(f[0] for f in path[1:])
                return Lineage(target, via, self.bases_of(ref)[path[0][1] - 1][1])
            if isinstance(target, ClassRef):
                if target.key in on_path or target.key in dead_ends:
                    continue  # a cycle, or already known not to lead anywhere
                on_path.add(target.key)
                path.append([target, 0])
        return None

    def ancestry(self, ref: ClassRef) -> Ancestry:
        """``ref`` and its workspace ancestors, nearest first, each once."""
        result = Ancestry()
        seen: set[tuple[str, str]] = set()
        stack: list[ClassRef] = [ref]
        while stack:
            current = stack.pop()
            if current.key in seen:
                continue
            seen.add(current.key)
            result.classes.append(current)
            local_bases: list[ClassRef] = []
            for target, _ in self.bases_of(current):
                if isinstance(target, ClassRef):
                    local_bases.append(target)
                elif isinstance(target, FrameworkBase):
                    result.framework_bases.append(target)
                elif target.text not in _NEUTRAL_BASES:
                    result.has_unknown_base = True
            stack.extend(reversed(local_bases))
        return result


def _text(expr: cst.BaseExpression) -> str:
    return source_text(expr)
