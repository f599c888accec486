"""Is a top-level ``def`` a plain JAX function?

Yes when it carries a JAX transform decorator (``@jax.jit``, ``@partial(jax.jit,
…)``, ``@nnx.jit``…) or its body uses an operation reached through a name the
file (or the function itself) imported from JAX. Merely living in a file that
imports JAX is not enough: a config loader next to the model is not a graph.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from .function_bodies import child_fields
from .frameworks import FUNCTOOLS_PARTIAL, is_jax_operation, is_jax_transform
from .literals import literal_value
from .namespace import ImportedName, Namespace, Symbol, dotted_parts, identifier, qualify
from .parameters import source_text


@dataclass(frozen=True, slots=True)
class JaxEvidence:
    transform: str | None  # qualified decorator, e.g. "jax.jit"
    transform_text: str | None  # the decorator as written
    operations: tuple[str, ...]  # qualified JAX names the body uses, first use first
    static_argnums: tuple[int, ...] = ()
    static_argnames: tuple[str, ...] = ()

    def reason(self) -> str:
        if self.transform is not None:
            written = f" (@{self.transform_text})" if self.transform_text != self.transform else ""
            return f"decorated with the JAX transform {self.transform}{written}"
        shown = ", ".join(self.operations[:3])
        more = len(self.operations) - 3
        return "uses JAX operations: " + shown + (f" and {more} more" if more > 0 else "")


def jax_evidence(function: cst.FunctionDef, ns: Namespace) -> JaxEvidence | None:
    for decorator in function.decorators:
        found = _transform(decorator.decorator, ns)
        if found is not None:
            transform, nums, names = found
            return JaxEvidence(
                transform, source_text(decorator.decorator), (), nums, names
            )
    operations = _operations(function, ns)
    if operations:
        return JaxEvidence(None, None, operations)
    return None


def transformed_function(call: cst.Call, ns: Namespace,
                         functions: dict[str, cst.FunctionDef]) -> tuple[cst.FunctionDef, JaxEvidence] | None:
    """``step = jax.jit(train_step, static_argnums=1)`` / ``grad_loss = jax.grad(loss)`` at
    the top level: the function of this file it transforms and the transform, as evidence."""
    found = _transform(call, ns)
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if found is None or not positional or not isinstance(positional[0].value, cst.Name):
        return None
    function = functions.get(positional[0].value.value)
    if function is None:
        return None
    transform, nums, names = found
    return function, JaxEvidence(transform, source_text(call.func), (), nums, names)


# --- decorators -------------------------------------------------------------------------


def _transform(
    expr: cst.BaseExpression, ns: Namespace
) -> tuple[str, tuple[int, ...], tuple[str, ...]] | None:
    call: cst.Call | None = None
    if isinstance(expr, cst.Call):
        call = expr
        func_parts = dotted_parts(expr.func)
        func = qualify(ns, func_parts) if func_parts else None
        if func == FUNCTOOLS_PARTIAL:
            positional = [a for a in expr.args if a.keyword is None and not a.star]
            if not positional:
                return None
            expr = positional[0].value
        else:
            # ``@jax.jit(static_argnames=…)``, ``@nnx.split_rngs(splits=2)``
            expr = expr.func
    parts = dotted_parts(expr)
    qualified = qualify(ns, parts) if parts else None
    if qualified is None or not is_jax_transform(qualified):
        return None
    nums: tuple[int, ...] = ()
    names: tuple[str, ...] = ()
    if call is not None:
        for arg in call.args:
            if arg.keyword is None:
                continue
            ok, value = literal_value(arg.value)
            if not ok:
                continue
            if arg.keyword.value == "static_argnums":
                nums = _ints(value)
            elif arg.keyword.value == "static_argnames":
                names = _strs(value)
    return qualified, nums, names


def _ints(value: object) -> tuple[int, ...]:
    items = value if isinstance(value, list) else [value]
    return tuple(v for v in items if isinstance(v, int) and not isinstance(v, bool))


def _strs(value: object) -> tuple[str, ...]:
    items = value if isinstance(value, list) else [value]
    return tuple(v for v in items if isinstance(v, str))


# --- operations in the body -------------------------------------------------------------

def _operations(function: cst.FunctionDef, ns: Namespace) -> tuple[str, ...]:
    references, local_names, local_imports = _scan(function, ns)
    found: dict[str, None] = {}
    for parts, called in references:
        head = parts[0]
        symbol = local_imports.get(head)
        if isinstance(symbol, ImportedName):
            qualified: str | None = ".".join((symbol.target, *parts[1:]))
        elif head in local_names:
            continue  # a parameter or local variable, whatever it is called
        else:
            qualified = qualify(ns, parts)
        if qualified is not None and is_jax_operation(qualified, called=called):
            found.setdefault(qualified)
    return tuple(found)


def _scan(
    function: cst.FunctionDef, ns: Namespace
) -> tuple[list[tuple[tuple[str, ...], bool]], set[str], dict[str, Symbol]]:
    """References (dotted, and whether each is the callee of a call), locally bound
    names and local imports of a function body.

    A hand-rolled walk over dataclass fields: a libcst visitor rebuilds every node
    it passes and costs ~3x as much, and this runs on every function of a JAX file.
    """
    references: list[tuple[tuple[str, ...], bool]] = []
    callees: set[int] = set()  # id() of nodes that are a Call's func (the tree outlives the walk)
    local_names: set[str] = {identifier(p.name.value) for p in _all_params(function.params)}
    local_imports: dict[str, Symbol] = {}
    stack: list[cst.CSTNode] = [function.body]
    while stack:
        node = stack.pop()
        node_type = type(node)
        if node_type is cst.Name:
            references.append(((identifier(node.value),), id(node) in callees))  # type: ignore[attr-defined]
            continue
        if node_type is cst.Attribute:
            parts = dotted_parts(node)  # type: ignore[arg-type]
            if parts is not None:
                references.append((parts, id(node) in callees))
            else:
                stack.append(node.value)  # type: ignore[attr-defined]
            continue
        if node_type is cst.Import or node_type is cst.ImportFrom:
            ns.bind_import(node, local_imports)  # type: ignore[arg-type]
            continue
        if node_type is cst.Annotation:
            continue
        if node_type is cst.Call:
            callees.add(id(node.func))  # type: ignore[attr-defined]
        if node_type in _BINDING_TYPES:
            local_names.update(_bound_names(node))
        children: list[cst.CSTNode] = []
        for name in child_fields(node_type):
            value = getattr(node, name)
            if isinstance(value, cst.CSTNode):
                children.append(value)
            elif isinstance(value, (list, tuple)):
                children.extend(v for v in value if isinstance(v, cst.CSTNode))
        children.reverse()  # keep source order for "first use"
        stack.extend(children)
    return references, local_names, local_imports


def _all_params(params: cst.Parameters) -> Iterator[cst.Param]:
    yield from params.posonly_params
    yield from params.params
    if isinstance(params.star_arg, cst.Param):
        yield params.star_arg
    yield from params.kwonly_params
    if isinstance(params.star_kwarg, cst.Param):
        yield params.star_kwarg


_BINDING_TYPES = frozenset(
    {
        cst.Assign, cst.AnnAssign, cst.AugAssign, cst.NamedExpr, cst.For, cst.CompFor,
        cst.WithItem, cst.ExceptHandler, cst.ExceptStarHandler, cst.FunctionDef,
        cst.ClassDef,
    }
)


def _bound_names(node: cst.CSTNode) -> Iterator[str]:
    """Names a statement or expression binds in the enclosing function."""
    if isinstance(node, cst.Assign):
        for target in node.targets:
            yield from _target_names(target.target)
    elif isinstance(node, (cst.AnnAssign, cst.AugAssign, cst.NamedExpr)):
        yield from _target_names(node.target)
    elif isinstance(node, (cst.For, cst.CompFor)):
        yield from _target_names(node.target)
    elif isinstance(node, (cst.WithItem, cst.ExceptHandler, cst.ExceptStarHandler)):
        asname = node.asname if isinstance(node, cst.WithItem) else node.name
        if asname is not None:
            yield from _target_names(asname.name)
    elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
        yield identifier(node.name.value)


def _target_names(target: cst.BaseExpression) -> Iterator[str]:
    stack = [target]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name):
            yield identifier(node.value)
        elif isinstance(node, (cst.Tuple, cst.List)):
            stack.extend(e.value for e in node.elements)
        elif isinstance(node, cst.StarredElement):
            stack.append(node.value)
