"""Subprograms held anywhere in a primitive's params are opaque boundaries: the
converter finds a jaxpr by the structure of the params (named tuples, dataclasses,
mappings, nested tuples), never by a list of primitive names.

Spec ("Graph evidence and limits"): "cond, scan, while and other unexpanded
subprograms retain their primitive boundary and output shapes. Capture coverage is
partial with opaque_kernel; neither a branch nor an iteration is reported as executed.
Effects are also explicitly incomplete."
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

from capture.jax.convert import convert  # noqa: E402

from jax_workspace import capture_in_process, forget_workspace_modules, profile, tensor, write  # noqa: E402
from jaxpr_walk import in_body  # noqa: E402

pytestmark = pytest.mark.jax

SOLVERS = """
import jax
import jax.numpy as jnp
from jax.scipy.sparse import linalg as sparse_linalg


def solve(a, b):
    return jnp.linalg.solve(a, b)


def conjugate_gradient(a, b):
    x, _ = sparse_linalg.cg(lambda v: a @ v, b, maxiter=30)
    return x


def gmres(a, b):
    x, _ = sparse_linalg.gmres(lambda v: a @ v, b, restart=3)
    return x
"""


@pytest.fixture
def ws(tmp_path):
    write(tmp_path, {"solvers.py": SOLVERS})
    yield tmp_path
    forget_workspace_modules(tmp_path)


@pytest.mark.parametrize("symbol", ["solve", "conjugate_gradient", "gmres"])
def test_linear_solves_are_opaque_boundaries_with_partial_coverage(ws, symbol):
    """cond, scan, while and other unexpanded subprograms retain their primitive boundary
    and output shapes. Capture coverage is partial with opaque_kernel; neither a branch
    nor an iteration is reported as executed. Effects are also explicitly incomplete.

    ``jnp.linalg.solve`` and ``jax.scipy.sparse.linalg.cg``/``gmres`` lower to
    ``custom_linear_solve``, whose matvec and solve subprograms (cg's whole ``while``
    loop) sit in a named tuple param."""
    cap, _ = capture_in_process(ws, profile(f"solvers:{symbol}", args=[tensor([3, 3]), tensor([3])]))
    (node,) = [n for n in cap.nodes if n.op == "custom_linear_solve"]
    assert node.opaque
    assert cap.coverage.status == "partial" and cap.coverage.reasons == ["opaque_kernel"]
    assert cap.coverage.effects == "incomplete"
    assert cap.meta["opaque_primitives"] == {"custom_linear_solve": 1}
    assert [cap.values[v].shape for v in node.outputs] == [[3]]
    # each subprogram is named with its size, never inlined
    assert set(node.params["jaxprs"]) == {"matvec", "vecmat", "solve", "transpose_solve"}
    assert all(j["opaque"] == "ClosedJaxpr" and j["equations"] >= 1 for j in node.params["jaxprs"].values())
    # cg's and gmres's loops stay inside the boundary: no while node, no body template
    assert not any(n.op == "while" for n in cap.nodes)
    assert not any(in_body(cap, n.group) for n in cap.nodes)


@dataclasses.dataclass(frozen=True)
class _Program:
    """A param record of a primitive JAX does not ship: the search must find its jaxpr."""

    name: str
    stages: tuple


class _Stages(Mapping):
    """A hashable mapping param (JAX requires hashable params), as Flax's FrozenDict is."""

    def __init__(self, **items):
        self._items = dict(items)

    def __getitem__(self, k):
        return self._items[k]

    def __iter__(self):
        return iter(self._items)

    def __len__(self):
        return len(self._items)

    def __hash__(self):
        return hash(tuple(self._items))


def _holding_primitive():
    from jax.extend.core import Primitive

    prim = Primitive("tv_test_staged_call")
    prim.def_abstract_eval(lambda x, **params: x)
    return prim


@pytest.mark.parametrize(
    "wrap, holds",
    [
        pytest.param(lambda j: _Program("p", (_Stages(body=(j,)),)), True, id="dataclass>tuple>mapping>tuple"),
        pytest.param(lambda j: _Stages(stages=((1, _Stages(inner=j)),)), True, id="mapping>tuple>tuple>mapping"),
        pytest.param(lambda j: frozenset({("k", j)}), True, id="frozenset>tuple"),
        pytest.param(lambda j: _Program("p", (_Stages(body=(1, 2)),)), False, id="records without a jaxpr"),
    ],
)
def test_a_subprogram_is_found_by_structure_not_by_name(wrap, holds):
    """cond, scan, while and other unexpanded subprograms retain their primitive boundary
    and output shapes. Capture coverage is partial with opaque_kernel; [...] Effects are
    also explicitly incomplete."""
    prim = _holding_primitive()
    inner = jax.make_jaxpr(jnp.sin)(1.0)

    def f(x):
        return prim.bind(x, spec=wrap(inner))

    cap = convert(jax.make_jaxpr(f)(jnp.ones(3)))
    (node,) = cap.nodes
    assert node.opaque is holds
    assert cap.coverage.status == ("partial" if holds else "complete")
    assert cap.coverage.effects == ("incomplete" if holds else "none")
    assert [cap.values[v].shape for v in node.outputs] == [[3]]
