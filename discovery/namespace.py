"""What each top-level name of a file is bound to, read from its imports and aliases.

``nn`` means whatever the file bound it to: ``import torch.nn as nn`` and
``from flax import linen as nn`` give the same spelling different meanings, so
every reference is turned into a fully qualified name through this table before
anything is decided about it.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from typing import Union

import libcst as cst

from .frameworks import star_import_provides


@dataclass(frozen=True, slots=True)
class ImportedName:
    """Bound by an import. ``target`` is absolute ("jax.numpy", "pkg.layers.Base");
    it starts with "." when a relative import could not be placed in a package."""

    target: str


@dataclass(frozen=True, slots=True)
class AliasOf:
    """``Base = nn.Module`` at module level: another name, possibly dotted."""

    parts: tuple[str, ...]


@dataclass(slots=True)
class ClassInfo:
    name: str
    qualname: str
    node: cst.ClassDef = field(repr=False)
    bases: tuple[cst.BaseExpression, ...] = field(repr=False)
    methods: dict[str, cst.FunctionDef] = field(default_factory=dict, repr=False)
    nested: dict[str, ClassInfo] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DefinedClass:
    info: ClassInfo


@dataclass(frozen=True, slots=True)
class DefinedFunction:
    node: cst.FunctionDef = field(repr=False)


@dataclass(frozen=True, slots=True)
class Opaque:
    """Bound to something discovery does not follow (a call result, a literal…)."""


Symbol = Union[ImportedName, AliasOf, DefinedClass, DefinedFunction, Opaque]
OPAQUE = Opaque()


def identifier(name: str) -> str:
    """The name Python binds: identifiers are NFKC-normalised (``𝐀`` binds ``A``)."""
    return name if name.isascii() else unicodedata.normalize("NFKC", name)


def dotted_parts(expr: cst.BaseExpression) -> tuple[str, ...] | None:
    """``a.b.c`` → ("a", "b", "c"); None for anything that is not a plain dotted name."""
    parts: list[str] = []
    # A loop rather than recursion: attribute chains can be thousands long.
    while isinstance(expr, cst.Attribute):
        parts.append(identifier(expr.attr.value))
        expr = expr.value
    if not isinstance(expr, cst.Name):
        return None
    parts.append(identifier(expr.value))
    parts.reverse()
    return tuple(parts)


def dotted_text(expr: cst.BaseExpression) -> str | None:
    parts = dotted_parts(expr)
    return ".".join(parts) if parts is not None else None


def qualified_text(expr: cst.BaseExpression, ns: Namespace | None) -> str | None:
    """The fully qualified name a dotted expression denotes in ``ns`` (through its
    imports), else the expression as written; None for anything not a dotted name."""
    parts = dotted_parts(expr)
    if parts is None:
        return None
    return (qualify(ns, parts) if ns is not None else None) or ".".join(parts)


def absolute_module(
    relative_dots: int, module: str | None, importer: str | None, importer_is_package: bool
) -> str:
    """The absolute module an import statement names.

    ``importer`` is the importing file's dotted module name, when it is known (files
    inside a workspace); otherwise relative imports stay relative (leading dots).
    """
    if relative_dots == 0:
        return module or ""
    if importer is not None:
        package_parts = importer.split(".") if importer else []
        if not importer_is_package:
            package_parts = package_parts[:-1]
        up = relative_dots - 1
        if up <= len(package_parts):
            base = package_parts[: len(package_parts) - up]
            return ".".join([*base, *([module] if module else [])])
    return "." * relative_dots + (module or "")


@dataclass(slots=True)
class Namespace:
    """Top-level bindings of one file, in the order the file makes them."""

    module_name: str | None
    is_package: bool
    symbols: dict[str, Symbol] = field(default_factory=dict)
    star_imports: list[str] = field(default_factory=list)
    # ``__all__`` when the file spells it as literal strings: what ``import *`` takes.
    # None: not declared, or not readable as literals (every public name counts).
    exports: set[str] | None = None
    # A lazy-import table (``_import_structure = {"models.bert": ["BertModel"]}``, the
    # ``_LazyModule`` convention of transformers, diffusers…): name → submodule.
    lazy: dict[str, str] = field(default_factory=dict)
    _exports_unreadable: bool = field(default=False, repr=False)

    def exports_name(self, name: str) -> bool:
        """Would ``from <this module> import *`` bind ``name``?"""
        if self.exports is not None:
            return name in self.exports
        return not name.startswith("_")

    def top_level_classes(self) -> list[ClassInfo]:
        """Classes still bound at the end of the file (a later rebinding hides one)."""
        return [s.info for s in self.symbols.values() if isinstance(s, DefinedClass)]

    def top_level_functions(self) -> list[cst.FunctionDef]:
        return [s.node for s in self.symbols.values() if isinstance(s, DefinedFunction)]

    def class_by_qualname(self, qualname: str) -> ClassInfo | None:
        head, *rest = qualname.split(".")
        symbol = self.symbols.get(head)
        if not isinstance(symbol, DefinedClass):
            return None
        return nested_class(symbol.info, rest)

    def bind_import(self, node: cst.Import | cst.ImportFrom, into: dict[str, Symbol]) -> None:
        if isinstance(node, cst.Import):
            for alias in node.names:
                target = dotted_text(alias.name) or ""
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    into[identifier(alias.asname.name.value)] = ImportedName(target)
                else:
                    # ``import a.b.c`` binds ``a``; ``a.b.c.X`` then resolves naturally.
                    head = target.split(".", 1)[0]
                    into[head] = ImportedName(head)
            return
        module = absolute_module(
            len(node.relative),
            dotted_text(node.module) if node.module is not None else None,
            self.module_name,
            self.is_package,
        )
        if isinstance(node.names, cst.ImportStar):
            if into is self.symbols:
                self.star_imports.append(module)
            return
        for alias in node.names:
            name = dotted_text(alias.name) or ""
            local = name
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = identifier(alias.asname.name.value)
            joined = f"{module}.{name}" if module and not module.endswith(".") else module + name
            into[local] = ImportedName(joined)


def build_namespace(
    module: cst.Module, module_name: str | None, is_package: bool
) -> Namespace:
    ns = Namespace(module_name, is_package)
    for stmt in module.body:
        _bind_statement(ns, stmt, conditional=False)
    if ns._exports_unreadable:
        ns.exports = None
    if ns.lazy and module_name is not None and is_package:
        # The table is what the package serves at run time; a name it also binds
        # (``if TYPE_CHECKING: from .x import Name``) already says the same.
        for name, submodule in ns.lazy.items():
            ns.symbols.setdefault(name, ImportedName(f"{module_name}.{submodule}.{name}"))
    return ns


def _bind_statement(ns: Namespace, stmt: cst.BaseStatement, *, conditional: bool) -> None:
    if isinstance(stmt, cst.SimpleStatementLine):
        for small in stmt.body:
            _bind_small(ns, small, conditional)
        return
    if isinstance(stmt, cst.ClassDef):
        if not conditional:
            info = _class_info(stmt, identifier(stmt.name.value))
            # Re-insert so the dict order follows the latest definition.
            ns.symbols.pop(info.name, None)
            ns.symbols[info.name] = DefinedClass(info)
        return
    if isinstance(stmt, cst.FunctionDef):
        if not conditional:
            name = identifier(stmt.name.value)
            ns.symbols.pop(name, None)
            ns.symbols[name] = DefinedFunction(stmt)
        return
    # ``try: from flax import linen as nn`` / ``if TYPE_CHECKING:``: the imports in a
    # block still tell what a name means; definitions there are not offered.
    for block in _blocks_of(stmt):
        for inner in block:
            _bind_statement(ns, inner, conditional=True)


def _bind_small(ns: Namespace, small: cst.BaseSmallStatement, conditional: bool) -> None:
    """One simple statement: an import, an assignment (or a lazy-import table's entry)."""
    if isinstance(small, (cst.Import, cst.ImportFrom)):
        ns.bind_import(small, ns.symbols)
    elif isinstance(small, cst.Assign):
        parts = dotted_parts(small.value)
        for target in small.targets:
            if not _bind_table(ns, target.target, small.value, "="):
                _bind_assignment(ns, target.target, parts, conditional)
    elif isinstance(small, cst.AnnAssign) and small.value is not None:
        if not _bind_table(ns, small.target, small.value, "="):
            _bind_assignment(ns, small.target, dotted_parts(small.value), conditional)
    elif isinstance(small, cst.AugAssign):
        _bind_table(ns, small.target, small.value, "+=")
    elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        _bind_table_call(ns, small.value)


def _bind_assignment(
    ns: Namespace, target: cst.BaseExpression, value: tuple[str, ...] | None, conditional: bool
) -> None:
    if not isinstance(target, cst.Name):
        return
    name = identifier(target.value)
    if conditional and isinstance(ns.symbols.get(name), ImportedName):
        # ``nn = None`` in an ``except ImportError`` branch is the fallback for when
        # the import fails; the import is what a model file means.
        return
    if value is not None and value not in _CONSTANTS:
        ns.symbols[name] = AliasOf(value)
    elif not conditional:
        ns.symbols[name] = OPAQUE


_CONSTANTS = frozenset({("None",), ("True",), ("False",)})
_LAZY_TABLE = "_import_structure"


def _strings(value: cst.BaseExpression) -> list[str] | None:
    """``["a", "b"]`` / ``("a",)`` → the strings; None for anything else."""
    if not isinstance(value, (cst.List, cst.Tuple)):
        return None
    out = []
    for element in value.elements:
        if not isinstance(element, cst.Element) or not isinstance(element.value, cst.SimpleString):
            return None
        evaluated = element.value.evaluated_value
        if not isinstance(evaluated, str):
            return None
        out.append(evaluated)
    return out


def _table_key(target: cst.BaseExpression) -> str | None:
    """``_import_structure["models.bert"]`` → "models.bert"."""
    if not (
        isinstance(target, cst.Subscript)
        and isinstance(target.value, cst.Name)
        and target.value.value == _LAZY_TABLE
        and len(target.slice) == 1
        and isinstance(target.slice[0].slice, cst.Index)
        and isinstance(target.slice[0].slice.value, cst.SimpleString)
    ):
        return None
    key = target.slice[0].slice.value.evaluated_value
    return key if isinstance(key, str) else None


def _add_lazy(ns: Namespace, submodule: str, names: list[str] | None) -> None:
    if names is None or not all(part.isidentifier() for part in submodule.split(".")):
        return
    for name in names:
        if name.isidentifier():
            ns.lazy[name] = submodule


def _bind_table(
    ns: Namespace, target: cst.BaseExpression, value: cst.BaseExpression, op: str
) -> bool:
    """``__all__`` and lazy-import tables; True when the statement was one of them."""
    if isinstance(target, cst.Name) and target.value == "__all__":
        names = _strings(value)
        if names is None:
            ns._exports_unreadable = True
        elif op == "=" or ns.exports is None:
            ns.exports = set(names)
        else:
            ns.exports.update(names)
        return True
    if isinstance(target, cst.Name) and target.value == _LAZY_TABLE and op == "=":
        if isinstance(value, cst.Dict):
            for element in value.elements:
                if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString):
                    key = element.key.evaluated_value
                    if isinstance(key, str):
                        _add_lazy(ns, key, _strings(element.value))
        return True
    table_key = _table_key(target)
    if table_key is not None:
        _add_lazy(ns, table_key, _strings(value))
        return True
    return False


def _bind_table_call(ns: Namespace, call: cst.Call) -> None:
    """``__all__.extend([...])``, ``_import_structure["x"].extend([...])`` / ``.append("N")``."""
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value not in ("extend", "append"):
        return
    if len(call.args) != 1 or call.args[0].keyword is not None:
        return
    arg = call.args[0].value
    if func.attr.value == "append":
        arg = cst.List([cst.Element(arg)]) if isinstance(arg, cst.SimpleString) else arg
    names = _strings(arg)
    if isinstance(func.value, cst.Name) and func.value.value == "__all__":
        if names is None:
            ns._exports_unreadable = True
        else:
            ns.exports = (ns.exports or set()) | set(names)
        return
    key = _table_key(func.value)
    if key is not None:
        _add_lazy(ns, key, names)


def _blocks_of(stmt: cst.BaseStatement) -> list[list[cst.BaseStatement]]:
    blocks: list[list[cst.BaseStatement]] = []

    def add(suite: cst.BaseSuite | None) -> None:
        if isinstance(suite, cst.IndentedBlock):
            blocks.append(list(suite.body))
        elif isinstance(suite, cst.SimpleStatementSuite):
            blocks.append([cst.SimpleStatementLine(body=suite.body)])

    if isinstance(stmt, cst.If):
        add(stmt.body)
        orelse = stmt.orelse
        while orelse is not None:
            add(orelse.body)
            orelse = orelse.orelse if isinstance(orelse, cst.If) else None
    elif isinstance(stmt, (cst.Try, cst.TryStar)):
        add(stmt.body)
        for handler in stmt.handlers:
            add(handler.body)
        if stmt.orelse is not None:
            add(stmt.orelse.body)
        if stmt.finalbody is not None:
            add(stmt.finalbody.body)
    elif isinstance(stmt, cst.With):
        add(stmt.body)
    return blocks


def _class_info(node: cst.ClassDef, qualname: str) -> ClassInfo:
    bases = tuple(arg.value for arg in node.bases if arg.keyword is None and not arg.star)
    info = ClassInfo(identifier(node.name.value), qualname, node, bases)
    body = node.body
    if isinstance(body, cst.IndentedBlock):
        for stmt in body.body:
            if isinstance(stmt, cst.FunctionDef):
                info.methods[identifier(stmt.name.value)] = stmt
            elif isinstance(stmt, cst.ClassDef):
                # Nested classes are reachable as ``module:Outer.Inner``.
                inner = _class_info(stmt, f"{qualname}.{identifier(stmt.name.value)}")
                info.nested[inner.name] = inner
    return info


def nested_class(info: ClassInfo, path: list[str] | tuple[str, ...]) -> ClassInfo | None:
    for name in path:
        found = info.nested.get(name)
        if found is None:
            return None
        info = found
    return info


def qualify(ns: Namespace, parts: tuple[str, ...] | list[str]) -> str | None:
    """The fully qualified name a dotted reference denotes, through imports and
    module-level aliases; None for local definitions and names discovery cannot place."""
    parts = tuple(parts)
    seen: set[str] = set()
    while parts:
        head, rest = parts[0], parts[1:]
        symbol = ns.symbols.get(head)
        if symbol is None:
            for star in reversed(ns.star_imports):
                provided = star_import_provides(star, head)
                if provided is not None:
                    return ".".join((provided, *rest))
            return None
        if isinstance(symbol, ImportedName):
            return ".".join((symbol.target, *rest)) if symbol.target else None
        if isinstance(symbol, AliasOf):
            if head in seen:  # ``a = b; b = a``
                return None
            seen.add(head)
            parts = symbol.parts + rest
            continue
        return None
    return None
