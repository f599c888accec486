"""The parameters each group uses (capture/analysis/params.py): counted by (shape, dtype)
over a file's value columns, or value by value over a list of values; a shape or dtype
that cannot be a key (a hostile file's) is counted on its own."""

from __future__ import annotations

from dataclasses import replace

import pytest

from capture.analysis.analysis import Analysis
from capture.graph.model import Capture, Coverage, Group, Node, Operand, Value
from capture.graph.tables import ValueTable


def model(shapes: list) -> Capture:
    """One module reading an input and one parameter per entry of ``shapes``."""
    values = [Value(0, [2, 8], "float32")]
    values += [Value(1 + k, shape, dtype, measured={"role": "param", "param": f"w{k}"}) for k, (shape, dtype) in enumerate(shapes)]
    nodes, x = [], 0
    for k in range(len(shapes)):
        values.append(Value(len(values), [2, 8], "float32"))
        nodes.append(Node(k, "aten::mul.Tensor", [Operand(0, x), Operand(1, 1 + k)], [len(values) - 1], {}, 0, None))
        x = len(values) - 1
    return Capture(backend="torch_eager", framework="torch", framework_version="0", coverage=Coverage(scope="eager_forward"),
                   values=values, nodes=nodes, groups=[Group(0, "module", "m", None, {"class": "M"})], frames=[],
                   inputs={"tuple": [{"value": 0}]}, outputs={"tuple": [{"value": x}]})


SHAPES = [([8, 8], "float32"), ([8], "float32"), ([8, 8], "float32"), ([8, 8], "bfloat16"), (["n", 8], "float32")]


@pytest.mark.parametrize("as_table", [False, True])
def test_parameters_are_counted_by_shape_and_dtype(as_table):
    cap = model(SHAPES[:4])
    if as_table:
        cap = replace(cap, values=ValueTable.of(cap.values))
    got = Analysis(cap).params(0)
    assert got == {"tensors": 4, "count": 3 * 64 + 8, "bytes": 2 * 64 * 4 + 8 * 4 + 64 * 2}


def test_a_symbolic_dimension_makes_the_sums_unknown():
    assert Analysis(model(SHAPES)).params(0) == {"tensors": 5, "count": None, "bytes": None}


def test_a_shape_or_dtype_that_is_no_key_is_counted_on_its_own():
    cap = model([([8, 8], "float32"), ([[8], 8], "float32"), ([8], ["float32"])])
    assert Analysis(cap).params(0) == {"tensors": 3, "count": None, "bytes": None}
    cap = model([([8, 8], "float32"), ([8], ["float32"]), ([8], ["float32"])])
    assert Analysis(cap).params(0)["count"] == 64 + 8 + 8


@pytest.mark.parametrize("shapes", [SHAPES[:4], SHAPES])
def test_counted_by_the_labels_numbered_keys_as_by_the_columns(shapes):
    # once every label is made, a file's values are counted by the numbers of their
    # (shape, dtype) keys (ValueSummaries.shape_keys): the same figures as from the columns
    cap = replace(model(shapes), values=ValueTable.of(model(shapes).values))
    plain = Analysis(cap).params(0)
    keyed = Analysis(cap)
    keyed.values.labels()
    ids, keys = keyed.values.shape_keys()
    assert len(ids) == len(cap.values) and set(keys.values()) >= {((8, 8), "float32"), ((8, 8), "bfloat16")}
    assert keyed.params(0) == plain
    assert keyed.values.labels() == [Analysis(model(shapes)).values.label(v) for v in range(len(cap.values))]
