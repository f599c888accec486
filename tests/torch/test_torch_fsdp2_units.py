"""Units of the Torch FSDP2 work (issue 46), fast.

Statistics never read a storage freed under a waiting tensor: FSDP2 frees a
block's gathered parameters after its forward with ``untyped_storage().resize_(0)``, an
act the trace cannot see. A small value waiting in the statistics batch on such a
storage was read when the batch was measured: freed memory, and the worker died with
SIGSEGV on the usual recipe (``fully_shard`` per block, then the root) with statistics on.
Such a value now has no statistics (counted as skipped); the others are measured.

The collective table names, for every c10d op, the argument holding its process group and
the one holding this rank's input (what its bytes are counted from), checked against the
ops' own schemas."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from capture.graph.model import Value  # noqa: E402
from capture.torch.dtensors import COLLECTIVE_OPS, WRAPPERS  # noqa: E402
from capture.torch.stats import ActivationStatistics, intact  # noqa: E402

pytestmark = pytest.mark.torch


def _values(n):
    return [Value(i, [64], "float32", {}) for i in range(n)]


@pytest.mark.parametrize("how", ["batch", "alone"])
def test_a_value_whose_storage_was_freed_is_skipped_not_read(how):
    values = _values(3)
    stats = ActivationStatistics(values, "immediate")
    gathered = torch.randn(64 * 1024)  # large enough to be returned to the system when freed
    view = gathered[:64]
    kept = torch.full((64,), 2.0)
    stats.measure(0, view, key="gathered")
    if how == "batch":
        stats.measure(1, kept, key="kept")
    gathered.untyped_storage().resize_(0)  # what FSDP2's free_storage does after a block's forward
    assert not intact(view) and intact(kept)
    stats.flush()
    assert "stats" not in values[0].measured and stats.skipped == 1
    if how == "batch":
        assert values[1].measured["stats"]["mean"] == 2.0


@pytest.mark.parametrize("make", [
    lambda: torch.randn(4, 8),
    lambda: torch.randn(8, 4).t(),
    lambda: torch.randn(16)[4:12],
    lambda: torch.randn(3, 5)[:, 1:3],
    lambda: torch.empty(0),
])
def test_intact_tensors(make):
    assert intact(make())


def test_a_storage_shrunk_below_a_view_is_not_intact():
    base = torch.randn(32)
    view = base[16:]
    base.untyped_storage().resize_(16 * 4)  # holds the first half only
    assert intact(base[:16].clone()) and not intact(view)


GROUP_ARGS = {"group_name", "process_group"}
INPUT_ARGS = {"input", "inputs", "input_tensor", "input_tensors", "tensors"}


@pytest.mark.parametrize("name", sorted(COLLECTIVE_OPS))
def test_the_collective_table_matches_each_ops_schema(name):
    import torch.distributed  # noqa: F401  (registers the c10d ops)

    kind, group, given = COLLECTIVE_OPS[name]
    ns, base = name.split("::")
    args = getattr(getattr(torch.ops, ns), base).default._schema.arguments
    assert args[group].name in GROUP_ARGS
    assert args[given].name in INPUT_ARGS
    assert kind in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast")


def test_wrappers_are_ops_of_this_torch():
    import torch.distributed._functional_collectives  # noqa: F401  (registers _wrap_tensor_autograd)

    for name in WRAPPERS:
        ns, base = name.split("::")
        assert getattr(getattr(torch.ops, ns), base).default._schema.arguments[0].name == "input"
