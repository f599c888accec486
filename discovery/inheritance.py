"""Following a class's bases to a framework Module, across files and re-exports.

``class Block(Base)`` is a candidate when ``Base`` is one: in the same file, in
another workspace file (``from .layers import Base``), or re-exported through a
package ``__init__.py``. Chains may be any length (walked with an explicit stack,
not recursion) and import cycles end the search instead of looping.

A base imported from an installed package (``from transformers import BertModel``)
is followed into that package's source files when the workspace index has a
library environment (``libraries.py``): the workspace first, as Python's path has
it, then the installed packages, through the same re-exports plus nested
``import *`` (limited by ``__all__``) and lazy-import tables.
"""

from __future__ import annotations

import builtins
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, Union

import libcst as cst

from .frameworks import FrameworkBase, framework_base, framework_namespaces
from .libraries import MAX_LIBRARY_CLASS_DEPTH, MAX_STAR_DEPTH
from .namespace import (
    AliasOf,
    ClassInfo,
    DefinedClass,
    DefinedFunction,
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

    def library(self, name: str, wanted: str | None = None) -> AnalysedModule | None:
        """The installed module ``name`` (see ``libraries.py``); with ``wanted``, None
        also when its text cannot provide that name."""


class NoWorkspace:
    """Without a workspace index only the file itself is known."""

    def module(self, name: str, importer: AnalysedModule) -> AnalysedModule | None:
        return None

    def library(self, name: str, wanted: str | None = None) -> AnalysedModule | None:
        return None


@dataclass(frozen=True, slots=True)
class ClassRef:
    """A class defined in an analysed workspace file."""

    module: AnalysedModule = field(compare=False)
    info: ClassInfo = field(compare=False)
    key: tuple[str, str] = field(init=False)  # (path, qualname): identity across lookups

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", (self.module.path, self.info.qualname))


@dataclass(frozen=True, slots=True)
class FunctionRef:
    """A top-level function defined in an analysed file (a workspace file, or an installed
    library's skeleton: its signature and return annotation, not its body)."""

    module: AnalysedModule = field(compare=False)
    node: cst.FunctionDef = field(compare=False)


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


@dataclass(frozen=True, slots=True)
class Ancestry:
    """What a class inherits, summed over its workspace ancestors."""

    framework_bases: tuple[FrameworkBase, ...]
    # Some base is outside what discovery can read (an unresolved import).
    has_unknown_base: bool
    # method name → the nearest class defining it (``forward``, ``__init__``…)
    definers: dict[str, ClassRef]


_MAX_REEXPORT_HOPS = 64
_STDLIB = frozenset(sys.stdlib_module_names)
# Top-level names whose modules are never looked for in the workspace: these, and the
# packages of every framework's base-class namespaces (``torch``, ``flax``).
_NOT_WORKSPACE_ROOTS = _STDLIB | {"jax", "jaxlib"}
# Never followed into installed files: the standard library, and JAX (no Modules).
_NOT_LIBRARY_ROOTS = _STDLIB | {"jax", "jaxlib"}
# Names a module has without binding them: never looked for behind ``import *``.
_BUILTIN_NAMES = frozenset(dir(builtins))


def _framework_or_stdlib(root: str) -> bool:
    return root in _NOT_WORKSPACE_ROOTS or any(ns.root.split(".", 1)[0] == root for ns in framework_namespaces())
T = TypeVar("T")


class Resolver:
    def __init__(self, source: ModuleSource) -> None:
        self._source = source
        self._bases: dict[tuple[str, str], list[tuple[BaseTarget, str]]] = {}
        self._lineages: dict[tuple[str, str], Lineage] = {}
        self._memos: dict[str, dict[tuple[str, str], Any]] = {}

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
        found = self._follow(module, parts, functions=False)
        assert not isinstance(found, FunctionRef)
        return found

    def resolve_callable(self, module: AnalysedModule, parts: tuple[str, ...]) -> BaseTarget | FunctionRef:
        """As :meth:`resolve`, and a function defined at the top of a file is a
        :class:`FunctionRef` (``resnet18`` through ``torchvision.models``' re-exports)."""
        return self._follow(module, parts, functions=True)

    def _follow(self, module: AnalysedModule, parts: tuple[str, ...], *, functions: bool) -> BaseTarget | FunctionRef:
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
            if functions and isinstance(symbol, DefinedFunction) and not rest:
                return FunctionRef(module, symbol.node)
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

    def resolve_qualified(self, qualified: str, importer: AnalysedModule) -> BaseTarget:
        """What the fully qualified name ``qualified`` means, as seen from ``importer``
        (``transformers.LlamaConfig``: through the package's re-exports)."""
        found = self._resolve_qualified(qualified, importer)
        if isinstance(found, tuple):
            module, parts = found
            return self.resolve(module, parts)
        return found

    def _resolve_qualified(
        self, qualified: str, importer: AnalysedModule
    ) -> BaseTarget | tuple[AnalysedModule, tuple[str, ...]]:
        known = framework_base(qualified)
        if known is not None:
            return known
        if qualified.startswith("."):
            return Unresolved(qualified)  # relative import outside any known package
        parts = tuple(qualified.split("."))
        if not _is_library(importer) and not _framework_or_stdlib(parts[0]):
            # The longest prefix that is a workspace module; the rest is looked up in it.
            for split in range(len(parts) - 1, 0, -1):
                module = self._source.module(".".join(parts[:split]), importer)
                if module is not None:
                    return module, parts[split:]
        if parts[0] not in _NOT_LIBRARY_ROOTS:
            # Then the installed packages: ``transformers.BertModel``, and framework
            # classes the tables do not list (``flax.nnx.bridge.ToNNX``).
            for split in range(len(parts) - 1, 0, -1):
                module = self._source.library(".".join(parts[:split]), parts[split])
                if module is not None:
                    return module, parts[split:]
        return Unresolved(qualified)  # typing.Generic, abc.ABC, torch.nn.Identity…

    def _module_for(
        self, name: str, importer: AnalysedModule, wanted: str
    ) -> AnalysedModule | None:
        """The module ``from name import *`` in ``importer`` reads."""
        if name.startswith("."):
            return None
        root = name.split(".", 1)[0]
        if not _is_library(importer) and not _framework_or_stdlib(root):
            module = self._source.module(name, importer)
            if module is not None:
                return module
        if root in _NOT_LIBRARY_ROOTS or _in_framework_table(name + "."):
            return None  # the framework tables already say what these provide
        return self._source.library(name, wanted)

    def _star_provider(
        self, ns: Namespace, name: str, importer: AnalysedModule
    ) -> AnalysedModule | None:
        """The module that binds ``name`` which ``ns``'s ``import *`` lines bring in,
        through nested ``import *`` re-exports (``transformers`` → ``.models`` →
        ``.bert`` → ``.modeling_bert``), each limited by its ``__all__``."""
        if name.startswith("_") or name in _BUILTIN_NAMES:
            return None  # ``import *`` skips private names; builtins are no import
        visited = {importer.path}
        stack = [(importer, iter(_star_order(ns, name, importer)))]
        while stack:
            current, pending = stack[-1]
            for star in pending:
                module = self._module_for(star, current, name)
                if module is None or module.namespace is None or module.path in visited:
                    continue
                visited.add(module.path)
                provided = module.namespace
                if not provided.exports_name(name):
                    continue
                if name in provided.symbols:
                    return module
                if provided.star_imports and len(stack) < MAX_STAR_DEPTH:
                    stack.append((module, iter(_star_order(provided, name, module))))
                    break
            else:
                stack.pop()
        return None

    # --- whole chains -----------------------------------------------------------------

    def lineage(self, ref: ClassRef) -> Lineage | None:
        """How ``ref`` derives from a framework Module, or None if it does not.

        Depth-first through the bases in order, the first framework base found wins
        (the way Python's MRO would meet it for ordinary hierarchies). Every class on
        the path to a framework base learns its own lineage at the same time, so a
        file full of subclasses costs one walk, not one per class.
        """
        known = self._lineages.get(ref.key)
        if known is not None:
            return known
        on_path: set[tuple[str, str]] = {ref.key}
        # Not remembered across calls: inside a cycle, "leads nowhere" depends on
        # where the walk entered it.
        dead_ends: set[tuple[str, str]] = set()
        # Each frame: a class on the current path and the index of its next base.
        path: list[list[Any]] = [[ref, 0]]
        library_depth = int(_is_library(ref.module))  # library classes on the path
        while path:
            frame = path[-1]
            current, index = frame
            bases = self.bases_of(current)
            if index >= len(bases):
                dead_ends.add(current.key)
                on_path.discard(current.key)
                path.pop()
                library_depth -= int(_is_library(current.module))
                continue
            frame[1] += 1
            target, _ = bases[index]
            if isinstance(target, FrameworkBase):
                return self._learn(path, Lineage(target, (), bases[index][1]))
            if isinstance(target, ClassRef):
                through = self._lineages.get(target.key)
                if through is not None:
                    return self._learn(
                        path, Lineage(through.base, (target, *through.via), bases[index][1])
                    )
                if target.key in on_path or target.key in dead_ends:
                    continue  # a cycle, or already known not to lead anywhere
                if _is_library(target.module):
                    if library_depth >= MAX_LIBRARY_CLASS_DEPTH:
                        continue
                    library_depth += 1
                on_path.add(target.key)
                path.append([target, 0])
        return None

    def _learn(self, path: list[list[Any]], last: Lineage) -> Lineage:
        """Give every class on ``path`` its lineage, given the last one's."""
        lineage = last
        for i in range(len(path) - 1, -1, -1):
            current, index = path[i]
            if i < len(path) - 1:
                written = self.bases_of(current)[index - 1][1]
                lineage = Lineage(lineage.base, (path[i + 1][0], *lineage.via), written)
            self._lineages[current.key] = lineage
        return lineage

    def local_bases(self, ref: ClassRef) -> list[ClassRef]:
        return [t for t, _ in self.bases_of(ref) if isinstance(t, ClassRef)]

    def fold(self, ref: ClassRef, combine: Callable[[ClassRef, list[T]], T], memo: dict[tuple[str, str], T]) -> T:
        """``combine(cls, [results for its workspace bases, in order])``, bases first.

        Iterative (chains may be thousands of classes long) and memoised in ``memo``
        (so a file of subclasses costs one pass). A base met again on the current
        path, i.e. a cycle, is left out.
        """
        if ref.key in memo:
            return memo[ref.key]
        on_path = {ref.key}
        stack: list[tuple[ClassRef, Iterator[ClassRef]]] = [(ref, iter(self.local_bases(ref)))]
        while stack:
            node, pending = stack[-1]
            for base in pending:
                if base.key not in memo and base.key not in on_path:
                    on_path.add(base.key)
                    stack.append((base, iter(self.local_bases(base))))
                    break
            else:
                stack.pop()
                on_path.discard(node.key)
                inherited = [memo[b.key] for b in self.local_bases(node) if b.key in memo]
                memo[node.key] = combine(node, inherited)
        return memo[ref.key]

    def memo(self, purpose: str) -> dict[tuple[str, str], Any]:
        """A memo table for :meth:`fold`, shared by everything this resolver answers."""
        return self._memos.setdefault(purpose, {})

    def ancestry(self, ref: ClassRef) -> Ancestry:
        ancestry: Ancestry = self.fold(ref, self._combine_ancestry, self.memo("ancestry"))
        return ancestry

    def _combine_ancestry(self, ref: ClassRef, inherited: list[Ancestry]) -> Ancestry:
        framework: dict[FrameworkBase, None] = {}
        unknown = False
        for target, _ in self.bases_of(ref):
            if isinstance(target, FrameworkBase):
                framework[target] = None
            elif isinstance(target, Unresolved) and target.text not in _NEUTRAL_BASES:
                unknown = True
        definers: dict[str, ClassRef] = {}
        for parent in reversed(inherited):  # the first base wins, as in the MRO
            framework.update(dict.fromkeys(parent.framework_bases))
            unknown = unknown or parent.has_unknown_base
            definers.update(parent.definers)
        definers.update(dict.fromkeys(ref.info.methods, ref))
        return Ancestry(tuple(framework), unknown, definers)


def _text(expr: cst.BaseExpression) -> str:
    return source_text(expr)


def _is_library(module: AnalysedModule) -> bool:
    return getattr(module, "library", False)


def _in_framework_table(qualified: str) -> bool:
    """Under ``torch.nn``/``flax.linen``/``flax.nnx``, whose Module classes are listed
    (``frameworks.py``): ``from flax.linen import *`` is answered by those tables
    (``star_import_provides``), so such a module is never searched for other names."""
    return any(qualified.startswith(ns.root + ".") for ns in framework_namespaces())


def _normalised(name: str) -> str:
    return name.replace("_", "").lower()


def _star_order(ns: Namespace, name: str, importer: AnalysedModule) -> list[str]:
    """The ``import *`` modules of ``ns`` in the order to look for ``name`` in.

    The last one wins at run time, so they are tried last first. In installed
    packages (hundreds of ``from .x import *`` lines in ``transformers/models``), a
    module whose name begins ``name`` goes first, the longest such first:
    ``GPT2LMHeadModel`` is looked for in ``.gpt2`` before the other 400."""
    stars = list(reversed(ns.star_imports))
    if not _is_library(importer) or len(stars) < 2:
        return stars
    wanted = _normalised(name)

    def score(star: str) -> int:
        last = _normalised(star.rsplit(".", 1)[-1])
        return len(last) if len(last) >= 2 and wanted.startswith(last) else 0

    return sorted(stars, key=score, reverse=True)  # stable: ties keep run-time order
