"""Which reshapes a function call does on its way in or out are elided (viewer/projection/
presentation.py): what one reshapes enters the call from outside, or what it makes leaves
the call. Table-driven over the operand orders a file may hold."""

from __future__ import annotations

import pytest

from capture.analysis.index import GraphIndex
from capture.graph.model import Capture, Coverage, Group, Node, Operand, Value
from viewer.projection.presentation import Presentation


def call(reads: str, leaves: bool) -> tuple[Capture, int]:
    """A module calling ``linear``: inside it, a matmul then the reshape under test, whose
    operands are ``reads`` (``o``: a value from outside the call, ``i``: the matmul's
    output, ``l``: a literal), then a relu; ``leaves``: the reshape's output is what the
    call hands back (else the relu's is)."""
    values = [Value(k, [2, 8], "float32") for k in range(4)]
    x, mm, rs, relu = range(4)
    ops = {"o": Operand(0, x), "i": Operand(0, mm), "l": Operand(0, None, [16])}
    operands = [Operand(k, ops[c].value, ops[c].literal) for k, c in enumerate(reads)]
    nodes = [Node(0, "aten::mm", [Operand(0, x), Operand(1, x)], [mm], {}, 1, None),
             Node(1, "aten::view", operands, [rs], {}, 1, None),
             Node(2, "aten::relu", [Operand(0, rs if not leaves else mm)], [relu], {}, 1, None),
             Node(3, "aten::neg", [Operand(0, rs if leaves else relu)], [], {}, 0, None)]
    groups = [Group(0, "module", "m", None, {"class": "M"}), Group(1, "function", "linear", 0, {})]
    cap = Capture(backend="torch_eager", framework="torch", framework_version="0", coverage=Coverage(scope="eager_forward"),
                  values=values, nodes=nodes, groups=groups, frames=[], inputs={"tuple": [{"value": x}]},
                  outputs={"tuple": []})
    return cap, 1


@pytest.mark.parametrize("reads, leaves, elided", [
    ("ol", False, True),   # what it reshapes enters the call
    ("lo", False, True),   # a literal first, then a value from outside
    ("il", False, False),  # made inside, and what it makes stays inside
    ("li", False, False),
    ("il", True, True),    # made inside, handed out of the call
    ("l", False, False),   # no value at all: only what leaves counts
    ("l", True, True),
    ("", True, True),
    ("", False, False),
])
def test_a_reshape_in_a_call_is_elided_when_its_input_enters_or_its_output_leaves(reads, leaves, elided):
    cap, node = call(reads, leaves)
    assert (node in Presentation(cap, GraphIndex(cap)).elided) == elided
