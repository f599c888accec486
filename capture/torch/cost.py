"""What each ATen op of a Torch capture costs: FLOPs and unfused bytes, counted by PyTorch's
own rules from what the capture recorded (op overload, operand shapes and dtypes, literals).

A pass after the capture (:func:`count`), for eager and abstract captures alike: the trace
loop (:mod:`capture.torch.trace`) is not touched. Each node's op is resolved to its
``OpOverload`` and counted by the first rule that applies:

* ``flop_counter``: the formula ``torch.utils.flop_counter`` registers for the op (matmuls,
  convolutions, attention kernels, their backward ops), called with the recorded shapes:
  exactly what ``FlopCounterMode`` would add for it;
* ``flop_counter sdpa (CPU kernel)``: the CPU attention kernels
  (``_scaled_dot_product_flash_attention_for_cpu`` and its backward), which have no
  entry in that registry (``FlopCounterMode`` counts them as 0), counted with the
  registry's own attention formulas (``sdpa_flop_count``, ``sdpa_backward_flop_count``);
* ``grouped matmul``: ``aten._grouped_mm`` (a mixture of experts' experts in one call), which
  that registry has no formula for: its ``mm`` formula summed over the groups, 2 FLOPs per
  multiply-add of each output element over the shared dimension;
* ``bookkeeping``: the profiler's ``record_function`` markers (an optimizer step's): nothing;
* ``view``: an op whose schema says its result aliases an input without writing it
  (``view``, ``t``, ``expand``, ``slice``…) and the few views whose schema does not say so
  (``_unsafe_view``, ``unsafe_split``…): no FLOPs, no bytes;
* ``data movement``: copies, casts, gathers, concatenations, padding, factories: no FLOPs,
  their bytes;
* ``scatter-add``: an accumulating scatter or index_put: 1 FLOP per update element (as
  ``jax.experimental.roofline`` counts a scatter-add);
* ``foreach``: ``_foreach_*`` over tensor lists (optimizer steps): 1 FLOP per output element;
* ``random``: random number generation (``bernoulli_`` of a training-mode dropout,
  ``normal_``…): 1 FLOP per element generated;
* ``pointwise`` (ATen's ``pointwise`` tag): 1 FLOP per output element;
* ``reduction`` (ATen's ``reduction`` tag): input elements − output elements (n − 1 per
  result, ``jax.experimental.roofline``'s count for ``reduce_sum``);
* ``cumulative``: ``cumsum``, ``cumprod``, ``cummax``…: 1 FLOP per element (as the JAX count);
* ``decomposed``: none of the above, but ``torch._decomp`` has a decomposition for the op
  (softmax, layer norm, batch norm, pooling, dropout, their backward ops…): it is run on
  meta tensors of the recorded shapes and the ops it dispatches are counted by these same
  rules, recursively;
* anything else is *uncounted* (``-1``), listed by name with the reason, never a zero.

Bytes are unfused: the bytes of every tensor operand (each value once) read, and of
every result written, at their shapes and dtypes; a view moves nothing; a gather
(``embedding``, ``index_select``…) reads what it takes (its result's size) and its indices.

Torch is imported at module level: this is one of the worker's framework modules.
"""

from __future__ import annotations

import math
import sys
import types
from contextlib import contextmanager
from typing import Any, Iterator, cast

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..graph.model import UNCOUNTED, Capture, NodeCosts
from ..graph.symbols import evaluate as _evaluate
from ..graph.symbols import fixed_symbols
from ..units import COUNT_LIMIT, OVERFLOW_REASON
from .dtensors import BOUNDARY_OPS
from .tensors import tensors_of

#: What each rule name means (``NodeCosts.notes["rules"]``).
RULES = {
    "flop_counter": "the formula torch.utils.flop_counter registers for the op (matmul, convolution, attention)",
    "flop_counter sdpa (CPU kernel)": "torch.utils.flop_counter's attention formulas (sdpa_flop_count, "
                                      "sdpa_backward_flop_count) for the CPU attention kernel its registry has no "
                                      "entry for (FlopCounterMode counts it as 0)",
    "grouped matmul": "torch.utils.flop_counter's mm formula summed over the groups of aten._grouped_mm (a "
                      "mixture of experts' experts in one call), which its registry has no entry for; it reads "
                      "the weights of at most min(groups, rows) experts (those some row can reach)",
    "convolution backward": "own rule, differs from FlopCounterMode: each gradient asked for by output_mask (input, "
                            "weight) costs what the forward convolution does, 2 FLOPs per multiply-add of "
                            "batch x output positions x kernel x out channels x in channels per group; torch's "
                            "conv_backward_flop counts a grouped or depthwise weight gradient as a dense convolution "
                            "(groups times too many) and needs the gradients' shapes; bias gradients are not "
                            "counted (as torch does not count a forward bias)",
    "convolution": "own rule, differs from FlopCounterMode: a convolution kernel whose schema torch's conv_flop "
                   "misreads (_slow_conv2d_forward, cudnn_convolution: its transposed flag is read from another "
                   "argument): 2 FLOPs per multiply-add, output elements x kernel x in channels per group",
    "view": "a view of its input: no FLOPs, no bytes",
    "bookkeeping": "a profiler marker (record_function): no FLOPs, no bytes",
    "data movement": "copies, casts, gathers, concatenations, factories: no FLOPs, the bytes they move",
    "scatter-add": "an accumulating scatter: 1 FLOP per update element",
    "foreach": "_foreach_* over tensor lists: 1 FLOP per output element",
    "random": "random number generation (bernoulli, normal, rand…): 1 FLOP per element generated",
    "pointwise": "ATen tags it pointwise: 1 FLOP per output element",
    "reduction": "ATen tags it a reduction: input elements - output elements (n - 1 per result)",
    "cumulative": "a cumulative scan (cumsum, cummax…): 1 FLOP per element",
    "selection": "top-k, sort, median, histograms (histc, bincount), searchsorted: 1 FLOP (a comparison) per input "
                 "element, as a reduction counts",
    "decomposed": "its torch._decomp decomposition, run on meta tensors of the recorded shapes, counted op by op "
                  "by these rules",
    "communication": "a collective (c10d all-gather, reduce-scatter, all-reduce…): no FLOPs counted (a "
                     "reduction's sums neither), the bytes of its operands and results on this rank",
    "DTensor boundary": "a DTensor and its local tensor joined (to_local, from_local): no kernel, no FLOPs, no bytes",
    "no rule": "uncounted: no flop_counter formula, no pointwise or reduction tag, no decomposition",
}
NOTES = {
    "flops": "floating-point operations; a multiply-add counts 2 (torch.utils.flop_counter's convention)",
    "bytes": "unfused: each op reads its tensor operands and writes its results at their shapes and dtypes; "
             "a view moves nothing",
}

#: What kind of arithmetic a rule's FLOPs are (``notes["kinds"]``: per op name), so that a reference
#: counter's total can be matched by the kinds it counts (FlopCounterMode: matmul, convolution, attention).
KINDS = ("matmul", "convolution", "attention", "pointwise", "reduction/norm", "scan", "other")
_RULE_KINDS = {"flop_counter sdpa (CPU kernel)": "attention", "grouped matmul": "matmul",
               "convolution": "convolution", "convolution backward": "convolution", "pointwise": "pointwise",
               "foreach": "pointwise", "random": "pointwise", "scatter-add": "pointwise",
               "reduction": "reduction/norm", "selection": "reduction/norm", "cumulative": "scan"}
_MATMULS = frozenset({"mm", "addmm", "bmm", "baddbmm", "_scaled_mm", "_grouped_mm", "matmul", "linear"})

# Views whose schema does not mark the result as an alias of the input.
_VIEWS = frozenset({
    "_unsafe_view", "unsafe_split", "unsafe_split_with_sizes", "unsafe_chunk", "_reshape_alias", "alias",
    "lift_fresh", "detach", "_neg_view", "_conj", "view_as_real", "view_as_complex",
})
# Ops that move or make data and compute nothing (no FLOPs, their bytes).
_DATA_MOVEMENT = frozenset({
    "clone", "_to_copy", "copy_", "copy", "lift_fresh_copy", "contiguous", "_copy_from", "_copy_from_and_resize",
    "cat", "stack", "index_select", "embedding", "gather", "index", "take", "constant_pad_nd", "reflection_pad1d",
    "reflection_pad2d", "replication_pad1d", "replication_pad2d", "slice_scatter", "select_scatter",
    "diagonal_scatter", "as_strided_scatter", "scatter", "repeat", "roll", "flip", "tril_indices", "triu_indices",
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like", "new_zeros",
    "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "arange", "linspace", "scalar_tensor", "eye",
    "fill", "fill_", "zero_", "masked_select", "nonzero", "expand_copy", "permute_copy", "view_copy",
    "transpose_copy", "t_copy", "unsqueeze_copy", "squeeze_copy", "slice_copy", "select_copy", "split_copy",
    "alias_copy", "unbind_copy", "set_", "resize_", "resize_as_", "_local_scalar_dense", "item", "to",
    "randperm", "index_copy", "index_copy_", "narrow_copy", "unfold_copy", "pixel_shuffle", "pixel_unshuffle",
    "channel_shuffle", "im2col", "col2im",
})
# FSDP2's copies into and out of its collectives' flat buffers (and torch's own chunk_cat).
_DATA_MOVEMENT = _DATA_MOVEMENT | {"all_gather_copy_in", "split_with_sizes_copy", "chunk_cat", "_chunk_cat"}
# Collectives' namespaces (capture.torch.dtensors.COLLECTIVE_OPS).
_COLLECTIVE_NAMESPACES = frozenset({"c10d", "_c10d_functional", "c10d_functional"})
# The rule a whole namespace decides: profiler markers are bookkeeping, collectives communication.
_NAMESPACE_KINDS = {"profiler": "bookkeeping", **{ns: "communication" for ns in _COLLECTIVE_NAMESPACES}}
# Gathers: read what they take (their result's size) and their indices, not the whole table.
_TAKING = frozenset({"embedding", "index_select", "gather", "index", "take"})
# Accumulating scatters: the operand holding the updates (by schema name).
_SCATTER_ADD = {"scatter_add": "src", "scatter_add_": "src", "index_add": "source", "index_add_": "source",
                "scatter_reduce": "src", "scatter_reduce_": "src", "index_reduce": "source", "index_reduce_": "source",
                "_index_put_impl_": "values", "index_put": "values", "index_put_": "values"}
_RANDOM = frozenset({
    "bernoulli", "bernoulli_", "normal", "normal_", "uniform", "uniform_", "rand", "rand_like", "randn", "randn_like",
    "randint", "randint_like", "random", "random_", "exponential", "exponential_", "geometric_", "log_normal_",
    "cauchy_", "multinomial", "poisson", "_standard_gamma",
})
_CUMULATIVE = frozenset({"cumsum", "cumsum_", "cumprod", "cumprod_", "cummax", "cummin", "logcumsumexp",
                         "_cummax_helper", "_cummin_helper"})
# Convolutions counted by our own rule (capture.torch.cost._conv_flops), not torch's conv formulas.
_CONV_BACKWARD = frozenset({"convolution_backward"})
_CONV_OWN = frozenset({"_slow_conv2d_forward", "cudnn_convolution", "cudnn_convolution_transpose",
                       "mkldnn_convolution", "_conv_depthwise2d", "slow_conv3d_forward", "slow_conv_dilated2d",
                       "slow_conv_dilated3d", "slow_conv_transpose2d", "slow_conv_transpose3d",
                       "_nnpack_spatial_convolution"})
#: The rules that count differently from ``FlopCounterMode``, and why (``notes["differs from FlopCounterMode"]``).
DIFFERS = {
    "convolution backward": "torch's conv_backward_flop counts a grouped or depthwise weight gradient as a dense "
                            "convolution (groups times the multiply-adds done); ours counts what runs",
    "convolution": "torch's conv_flop misreads these kernels' arguments (or has no entry for them)",
    "flop_counter sdpa (CPU kernel)": "FlopCounterMode has no entry for the CPU attention kernel and counts it as 0",
    "grouped matmul": "FlopCounterMode has no entry for aten._grouped_mm and counts it as 0",
}
_SELECTION = frozenset({"topk", "sort", "argsort", "kthvalue", "median", "nanmedian", "mode", "msort", "histc",
                        "bincount", "searchsorted", "bucketize"})
_SDPA_CPU = {"_scaled_dot_product_flash_attention_for_cpu": "forward",
             "_scaled_dot_product_flash_attention_for_cpu_backward": "backward"}
# Arguments whose recorded literal is a name (capture.torch.trace_values.literal) to turn back into a torch object.
_NAMED_ARGS = ("dtype", "layout", "memory_format")
_MAX = COUNT_LIMIT


def _fits(flops: int) -> int:
    """``flops``; beyond what a graph file stores for one op, uncounted with the reason
    (never clipped to the limit)."""
    if flops > _MAX:
        raise _Uncounted(OVERFLOW_REASON)
    return flops


#: What the ``flops`` column of a Torch capture split over a mesh covers, and what
#: ``notes["per_rank"]`` covers (see TorchCosts.per_rank).
FLOPS_SCOPE = ("global for DTensor ops (their global shapes: every rank's share together), per rank for "
               "plain-tensor ops (one rank's tensors: local tensors, FSDP's gathered parameters)")
PER_RANK_SCOPE = ("per rank: DTensor ops at the shapes one rank computes on (each DTensor's per-device shape), "
                  "plain-tensor ops as recorded; total: the whole program on one rank, its uncounted ops "
                  "counted apart")


class _PerDevice:
    """A DTensor value seen at the shape one rank holds (its ``per_device_shape``)."""

    __slots__ = ("shape", "dtype")

    def __init__(self, value: Any) -> None:
        self.shape = list(value.sharding["per_device_shape"])
        self.dtype = value.dtype


class _Unbuildable(Exception):
    """An argument the capture kept only as a name (an opaque object): the op cannot be rerun."""


class _Uncounted(Exception):
    """The op, or an op its decomposition runs, has no rule."""


class TorchCosts:
    """Counts the nodes of Torch captures; caches rules per op and results per signature."""

    def __init__(self) -> None:
        from torch.utils import flop_counter
        from torch._decomp import decomposition_table

        self.registry = flop_counter.flop_registry
        self.sdpa = (flop_counter.sdpa_flop_count, flop_counter.sdpa_backward_flop_count)
        self.decompositions = decomposition_table
        self._ops: dict[str, Any] = {}
        self._kinds: dict[Any, str] = {}
        self._signatures: dict[tuple, tuple[int, str]] = {}
        self._shapes: list[tuple | None] = []  # per value of the capture being counted: its shape, or None
        self._flop_kinds: dict[str, str] = {}  # per op name: the kind of its FLOPs (KINDS)
        self._itemsize: dict[str, int | None] = {}
        self.reasons: dict[str, str] = {}

    # ------------------------------------------------------------------ ops

    def resolve(self, name: str) -> Any:
        """The ``OpOverload`` a recorded op name (``aten::add.Tensor``, ``aten::addmm``) names, or None."""
        got = self._ops.get(name, False)
        if got is not False:
            return got
        op = None
        ns, sep, rest = name.partition("::")
        if sep:
            base, _, overload = rest.partition(".")
            try:
                op = getattr(getattr(getattr(torch.ops, ns), base), overload or "default")
            except (AttributeError, RuntimeError):
                op = None
        self._ops[name] = op
        return op

    def kind(self, op: Any) -> str:
        """The rule that counts ``op`` (a key of :data:`RULES`)."""
        got = self._kinds.get(op)
        if got is None:
            got = self._kinds[op] = self._kind(op)
        return got

    def _kind(self, op: Any) -> str:
        schema = op._schema
        ns, _, base = schema.name.rpartition("::")
        by_namespace = _NAMESPACE_KINDS.get(ns)
        if by_namespace is not None:
            return by_namespace
        if base in _VIEWS or any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns):
            return "view"
        if base in _CONV_BACKWARD or base in _CONV_OWN:
            return "convolution backward" if base in _CONV_BACKWARD else "convolution"
        if op.overloadpacket in self.registry:
            return "flop_counter"
        by_name = self._named_kind(base)
        if by_name is not None:
            return by_name
        tags = op.tags
        if torch.Tag.pointwise in tags:
            return "pointwise"
        if torch.Tag.reduction in tags:
            return "reduction"
        if op in self.decompositions:
            return "decomposed"
        return "no rule"

    @staticmethod
    def _named_kind(base: str) -> str | None:
        """The rule an op's base name alone decides (before its tags are read), or None."""
        if base in _SDPA_CPU:
            return "flop_counter sdpa (CPU kernel)"
        if base == "_grouped_mm":
            return "grouped matmul"
        if base in _DATA_MOVEMENT:
            return "data movement"
        if base in _SCATTER_ADD:
            return "scatter-add"
        if base.startswith("_foreach_"):
            return "foreach"
        if base in _RANDOM:
            return "random"
        if base in _CUMULATIVE or base in _SELECTION:
            return "cumulative" if base in _CUMULATIVE else "selection"
        return None

    def kind_of(self, name: str, rule: str, parts: Any) -> str:
        """The kind (:data:`KINDS`) of the FLOPs of op ``name`` counted by ``rule``; a decomposed
        op's from the kinds of the ops its decomposition ran (``parts``): a norm, a softmax or a
        pooling (anything running a reduction) is ``reduction/norm``, only pointwise ops ``pointwise``."""
        got = _RULE_KINDS.get(rule)
        if got is not None:
            return got
        base = name.split("::")[-1].split(".")[0]
        if rule == "flop_counter":
            if base in _MATMULS:
                return "matmul"
            return "convolution" if "conv" in base else "attention" if "attention" in base else "other"
        if rule == "decomposed":
            for kind in ("matmul", "convolution", "attention", "scan", "reduction/norm"):
                if kind in parts:
                    return kind
            return "pointwise" if parts else "other"
        return "other"

    def itemsize(self, dtype: str) -> int | None:
        got = self._itemsize.get(dtype, 0)
        if got == 0:
            t = getattr(torch, dtype, None)
            got = self._itemsize[dtype] = t.itemsize if isinstance(t, torch.dtype) else None
        return got

    # ------------------------------------------------------------------ counting

    def _shapes_and_sizes(self, capture: Capture) -> tuple[list[tuple | None], list[int]]:
        """Each value's shape (None when a dimension stays symbolic) and bytes (-1 when
        unknown); a symbol the capture fixed (``meta``: a hit loop's row counts) is read as
        its value."""
        shapes: list[tuple | None] = []
        sizes: list[int] = []
        fixed = fixed_symbols(capture.meta)
        for v in capture.values:
            shape = v.shape
            if fixed and not all(type(d) is int for d in shape):
                shape = [d if type(d) is int else _evaluate(d, fixed) for d in shape]
            if all(type(d) is int for d in shape):
                n = math.prod(cast(list[int], shape))
                item = self.itemsize(v.dtype)
                shapes.append(tuple(shape))
                sizes.append(n * item if item is not None else -1)
            else:
                shapes.append(None)
                sizes.append(-1)
        return shapes, sizes

    def _node_flops(self, node: Any, op: Any, values: Any, shapes: list) -> tuple[int, str, str | None]:
        """``(flops, rule, kind)`` of one recorded op; ``op`` None when this process cannot
        resolve it (then known by name, or uncounted)."""
        if op is None:
            known = _without_overload(node.op)
            if known is not None:
                return known
            self.reasons.setdefault(node.op, "not an operator this Torch knows")
            return UNCOUNTED, "no rule", None
        kind = self.kind(op)
        f, name = self._flops(node, op, kind, values, shapes)
        return f, name, kind

    def count(self, capture: Capture) -> NodeCosts:
        """The cost columns of ``capture``'s nodes."""
        values = capture.values
        shapes, sizes = self._shapes_and_sizes(capture)
        self._shapes = shapes
        rules: list[str] = []
        rule_ids: dict[str, int] = {}
        flops, read, written, rule = [], [], [], []
        for node in capture.nodes:
            op = self.resolve(node.op)
            f, name, kind = self._node_flops(node, op, values, shapes)
            if kind == "view" or kind == "bookkeeping":
                r = w = 0
            elif op is not None and _base(op) in _TAKING:
                # what it takes from (embedding's weight, index_select's self) is operand 0;
                # the other tensors are indices, read whole
                w = _total(sizes[v] for v in node.outputs)
                table = node.inputs[0].value if node.inputs and node.inputs[0].position == 0 else None
                rest = {o.value for o in node.inputs if o.value is not None and o.value != table}
                r = _total([w] + [sizes[v] for v in rest]) if w >= 0 else UNCOUNTED
            else:
                ins = {o.value for o in node.inputs if o.value is not None}
                r = _total(sizes[v] for v in ins)
                w = _total(sizes[v] for v in node.outputs)
                if kind == "grouped matmul" and r >= 0:
                    r -= _idle_experts_bytes(node, shapes, sizes)
            k = rule_ids.get(name)
            if k is None:
                k = rule_ids[name] = len(rules)
                rules.append(name)
            flops.append(f)
            read.append(r)
            written.append(w)
            rule.append(k)
        notes: dict[str, Any] = dict(NOTES)
        notes["counter"] = f"torch {torch.__version__}: torch.utils.flop_counter formulas, ATen tags and torch._decomp"
        notes["rules"] = {name: RULES[name] for name in rules}
        kinds: dict[str, str] = {}
        for node, f, k in zip(capture.nodes, flops, rule):
            if f > 0 and node.op not in kinds:
                kinds[node.op] = self._flop_kinds.get(node.op) or self.kind_of(node.op, rules[k], ())
        if kinds:
            notes["kinds"] = kinds
        differs = {name: DIFFERS[name] for name in rules if name in DIFFERS}
        if differs:
            notes["differs from FlopCounterMode"] = differs
        uncounted = {capture.nodes[i].op for i, f in enumerate(flops) if f < 0}
        if uncounted:
            notes["uncounted"] = {op: self.reasons.get(op, RULES["no rule"]) for op in sorted(uncounted)}
        per_rank = self.per_rank(capture, flops)
        if per_rank is not None:
            notes["per_rank"] = per_rank
        return NodeCosts(flops, read, written, rule, rules, [], notes)

    def per_rank(self, capture: Capture, flops: list[int]) -> dict[str, Any] | None:
        """A split Torch program's FLOPs per rank (``notes["per_rank"]``), None when no node
        reads or makes a DTensor. A DTensor op's ``flops`` column is global (its global
        shapes); here it is counted again at the shapes one rank computes on (each
        DTensor's ``per_device_shape``: the ATen op DTensor runs on the local tensors). A
        plain-tensor op (a local tensor's, an FSDP all-gather's) is one rank's already."""
        values = capture.values
        split = [isinstance(v.sharding, dict) and not v.sharding.get("local") for v in values]
        if not any(split):
            return None
        local = [_PerDevice(v) if s else v for v, s in zip(values, split)]
        shapes = [tuple(v.shape) if all(type(d) is int for d in v.shape) else None for v in local]
        nodes, rank_flops = [], []
        total = uncounted = 0
        counted_shapes, self._shapes = self._shapes, shapes  # the rules read operands at one rank's shapes
        try:
            for i, node in enumerate(capture.nodes):
                f = flops[i]
                if any(split[o.value] for o in node.inputs if o.value is not None) or any(split[v] for v in node.outputs):
                    op = self.resolve(node.op)
                    if op is not None and f >= 0:
                        f, _ = self._flops(node, op, self.kind(op), local, shapes)
                    nodes.append(i)
                    rank_flops.append(f)
                if f < 0:
                    uncounted += 1
                else:
                    total += f
        finally:
            self._shapes = counted_shapes
        return {"scope": PER_RANK_SCOPE, "nodes": nodes, "flops": rank_flops, "total": total,
                "uncounted": uncounted, "flops_scope": FLOPS_SCOPE}

    def _flops(self, node: Any, op: Any, kind: str, values: Any, shapes: list) -> tuple[int, str]:
        if kind == "view" or kind == "data movement" or kind == "bookkeeping" or kind == "communication":
            return 0, kind
        if kind == "no rule":
            self.reasons.setdefault(node.op, RULES["no rule"])
            return UNCOUNTED, kind
        key: list[Any] = [node.op]
        for o in node.inputs:
            if o.value is None:
                key.append((o.position, _hashable(o.literal)))
            else:
                s = shapes[o.value]
                if s is None:
                    self.reasons.setdefault(node.op, "a symbolic shape")
                    return UNCOUNTED, "no rule"
                key.append((o.position, s, values[o.value].dtype))
        for v in node.outputs:
            key.append((shapes[v], values[v].dtype))
        sig = tuple(key)
        got = self._signatures.get(sig)
        if got is None:
            got = self._signatures[sig] = self._count_one(node, op, kind, values)
        return got

    def _count_one(self, node: Any, op: Any, kind: str, values: Any) -> tuple[int, str]:
        try:
            args, kwargs = self._arguments(op, node.inputs, values)
            outs = [_meta(self._shapes[v] or values[v].shape, values[v].dtype) for v in node.outputs]
            out = outs[0] if len(outs) == 1 else tuple(outs)
            if kind == "decomposed":
                counter = _Decomposition(self)
                with _dynamo_not_imported(), counter:
                    self.decompositions[op](*args, **kwargs)
                self._flop_kinds.setdefault(node.op, self.kind_of(node.op, kind, counter.kinds))
                return _fits(counter.flops), kind
            return _fits(self.flops_of(op, kind, args, kwargs, out)), kind
        except _Uncounted as exc:
            self.reasons.setdefault(node.op, str(exc))
        except _Unbuildable as exc:
            self.reasons.setdefault(node.op, f"cannot rebuild its arguments ({exc})")
        except Exception as exc:  # a formula or a decomposition that fails on these shapes
            self.reasons.setdefault(node.op, f"its rule failed on the recorded shapes ({type(exc).__name__}: "
                                             f"{str(exc).splitlines()[0][:160] if str(exc) else ''})")
        return UNCOUNTED, "no rule"

    def flops_of(self, op: Any, kind: str, args: tuple, kwargs: dict, out: Any) -> int:
        """FLOPs of ``op`` on ``args`` (meta tensors) with result ``out``, by rule ``kind``."""
        if kind == "flop_counter":
            return int(self.registry[op.overloadpacket](*args, **kwargs, out_val=out))
        if kind == "flop_counter sdpa (CPU kernel)":
            base = op._schema.name.split("::")[-1]
            if _SDPA_CPU[base] == "forward":
                q, k, v = args[:3]
                return int(self.sdpa[0](q.shape, k.shape, v.shape))
            grad_out, q, k, v = args[:4]
            return int(self.sdpa[1](grad_out.shape, q.shape, k.shape, v.shape))
        if kind in ("view", "data movement", "bookkeeping"):
            return 0
        if kind == "convolution" or kind == "convolution backward":
            return conv_flops(op, args, kwargs, out)
        if kind == "grouped matmul":
            a, b = args[0], args[1]
            if a.dim() == 2 and b.dim() == 2:  # groups along the shared dimension: one M×K×N matmul in all
                return 2 * a.shape[0] * a.shape[1] * b.shape[1]
            return 2 * out.numel() * a.shape[-1]  # each output element: one group's dot product over K
        if kind == "cumulative" or kind == "selection":
            ins = tensors_of(args)
            return ins[0].numel() if ins else 0
        if kind == "pointwise" or kind == "foreach" or kind == "random":
            return sum(t.numel() for t in tensors_of(out)) if kind == "foreach" else max(
                (t.numel() for t in tensors_of(out)), default=0)
        if kind == "reduction":
            ins = tensors_of(args)
            return max(ins[0].numel() - max((t.numel() for t in tensors_of(out)), default=1), 0) if ins else 0
        if kind == "scatter-add":
            base = op._schema.name.split("::")[-1]
            name = _SCATTER_ADD[base]
            names = [a.name for a in op._schema.arguments]
            pos = names.index(name) if name in names else -1
            updates = kwargs.get(name, args[pos] if 0 <= pos < len(args) else None)
            if base.startswith("index_put") or base == "_index_put_impl_":
                acc = kwargs.get("accumulate", args[3] if len(args) > 3 else False)
                if not acc:
                    return 0
            return updates.numel() if isinstance(updates, torch.Tensor) else 0
        raise _Uncounted(RULES["no rule"])

    def _arguments(self, op: Any, operands: list, values: Any) -> tuple[tuple, dict]:
        """The op's arguments rebuilt from the recorded operands: meta tensors of the
        recorded shapes and dtypes, literals turned back into torch objects."""
        by_pos: dict[int, list] = {}
        for o in operands:
            by_pos.setdefault(o.position, []).append(o)
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        by_name = False
        for i, a in enumerate(op._schema.arguments):
            got = by_pos.get(i)
            if got is None:
                by_name = True  # a default: what follows goes by name
                continue
            type_text = str(a.type)
            if "List" in type_text and ("Tensor" in type_text):
                val: Any = [self._operand(o, a.name, values) for o in got]
            elif len(got) == 1:
                val = self._operand(got[0], a.name, values)
            else:
                val = [self._operand(o, a.name, values) for o in got]
            if a.kwarg_only or by_name:
                kwargs[a.name] = val
            else:
                args.append(val)
        return tuple(args), kwargs

    def _operand(self, o: Any, name: str, values: Any) -> Any:
        if o.value is not None:
            v = values[o.value]
            return _meta(self._shapes[o.value] or v.shape, v.dtype)
        return _literal(o.literal, name)


def conv_flops(op: Any, args: tuple, kwargs: dict, out: Any) -> int:
    """FLOPs of a convolution kernel or of ``convolution_backward``, from the input and weight
    shapes and the forward output's (``grad_output`` for the backward), 2 per multiply-add.

    A forward convolution does ``output elements × in channels per group × kernel size``
    multiply-adds (a transposed one ``input elements × out channels per group × kernel``);
    its backward does as many again for each gradient ``output_mask`` asks for (input,
    weight): every product of the forward is one product of each gradient. A bias
    gradient is not counted (a forward bias is not counted either)."""
    names = [a.name for a in op._schema.arguments]

    def arg(name: str, default: Any = None) -> Any:
        if name in kwargs:
            return kwargs[name]
        i = names.index(name) if name in names else -1
        return args[i] if 0 <= i < len(args) else default

    weight = arg("weight")
    transposed = bool(arg("transposed", "transpose" in _base(op)))
    per_product = weight.shape[1] * math.prod(weight.shape[2:])  # in channels per group (out, transposed) × kernel
    if _base(op) in _CONV_BACKWARD:
        grad_out, x = arg("grad_output"), arg("input")
        forward = 2 * (x.numel() if transposed else grad_out.numel()) * per_product
        mask = arg("output_mask", [True, True, True])
        return forward * (int(bool(mask[0])) + int(bool(mask[1])))
    x = arg("input", arg("self"))
    result = tensors_of(out)[0]
    return 2 * (x.numel() if transposed else result.numel()) * per_product


@contextmanager
def _dynamo_not_imported() -> Iterator[None]:
    """Run a decomposition without importing ``torch._dynamo`` for it.

    ``torch._refs`` wraps many references in ``torch._disable_dynamo``, whose wrapper
    imports ``torch._dynamo`` on its first call (1.5-2 s: most of a plain Torch model's
    first capture after its forward, for nanoGPT's ``layer_norm``) only to make
    ``torch._dynamo.disable(fn)``: a function that keeps Dynamo out of ``fn``'s frames.
    With Dynamo not loaded nothing is compiling, so calling ``fn`` itself does the same.
    While the block runs, ``torch._dynamo`` is a stand-in whose ``disable`` returns ``fn``;
    afterwards the stand-in is gone and every wrapper it answered forgets that answer, so
    a later call (a model compiling after the capture) imports the real Dynamo and wraps
    as before. Where Dynamo is already loaded (``transformers`` imports it) this does
    nothing."""
    if "torch._dynamo" in sys.modules:
        yield
        return
    answered: list[Any] = []

    def disable(fn: Any, recursive: bool = True, wrapping: bool = True, **_: Any) -> Any:
        answered.append(fn)
        return fn

    stand_in = types.ModuleType("torch._dynamo", "a stand-in while a decomposition is counted (capture.torch.cost)")
    vars(stand_in)["disable"] = disable
    sys.modules["torch._dynamo"] = stand_in
    vars(torch)["_dynamo"] = stand_in
    try:
        yield
    finally:
        if sys.modules.get("torch._dynamo") is stand_in:
            del sys.modules["torch._dynamo"]
        if vars(torch).get("_dynamo") is stand_in:
            del vars(torch)["_dynamo"]
        for fn in answered:
            own = getattr(fn, "__dict__", None)
            if own is not None and own.get("__dynamo_disable") is fn:
                del own["__dynamo_disable"]


class _Decomposition(TorchDispatchMode):
    """Counts the ops a decomposition dispatches (on meta tensors) by the same rules."""

    def __init__(self, costs: TorchCosts) -> None:
        super().__init__()
        self.costs = costs
        self.flops = 0
        self.kinds: set[str] = set()  # of the ops counted (KINDS)

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # PyTorch wraps a mode's __torch_dispatch__ in torch._disable_dynamo by default,
        # which imports torch._dynamo on the first call: 1.5-2 s of the first eager
        # capture with a decomposed op (nanoGPT's layer_norm) spent importing a compiler
        # nothing here uses. This mode only runs in the cost pass, after the forward, on
        # meta tensors: never in a frame torch.compile could trace.
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        costs = self.costs
        kind = costs.kind(func) if isinstance(func, torch._ops.OpOverload) else "no rule"
        if kind == "decomposed":
            with self:
                return costs.decompositions[func](*args, **kwargs)
        out = func(*args, **kwargs)
        if kind == "no rule":
            raise _Uncounted(f"its decomposition runs {func.name()}, which has no rule")
        f = costs.flops_of(func, kind, args, kwargs, out)
        self.flops += f
        if f:
            self.kinds.add(costs.kind_of(func.name(), kind, ()))
        return out


def _idle_experts_bytes(node: Any, shapes: list, sizes: list[int]) -> int:
    """The bytes of the groups of ``_grouped_mm``'s stacked weight no row can reach: with
    ``M`` rows in groups (a 2-D first operand, ``offs``), at most ``min(G, M)`` of the ``G``
    groups (experts) run, so at most their matrices are read."""
    a = next((o.value for o in node.inputs if o.position == 0 and o.value is not None), None)
    b = next((o.value for o in node.inputs if o.position == 1 and o.value is not None), None)
    if a is None or b is None or a == b or shapes[a] is None or shapes[b] is None or sizes[b] < 0:
        return 0
    sa, sb = shapes[a], shapes[b]
    if len(sa) != 2 or len(sb) != 3 or sb[0] <= 0:
        return 0
    groups, rows = sb[0], sa[0]
    return sizes[b] * (groups - min(groups, rows)) // groups


def _without_overload(name: str) -> tuple[int, str, str] | None:
    """``(flops, rule, kind)`` of a recorded op this process cannot resolve but knows by
    name: a DTensor boundary (no kernel ran), FSDP2's copies (its ops are registered only
    once FSDP2 is imported). None for any other."""
    if name in BOUNDARY_OPS:
        return 0, "DTensor boundary", "view"
    ns, _, rest = name.partition("::")
    if ns == "fsdp" and rest.split(".")[0] in _DATA_MOVEMENT:
        return 0, "data movement", "data movement"
    return None


def _base(op: Any) -> str:
    return op._schema.name.split("::")[-1]


def _meta(shape: list, dtype: str) -> Any:
    t = getattr(torch, dtype, None)
    if not isinstance(t, torch.dtype):
        raise _Unbuildable(f"dtype {dtype}")
    return torch.empty([int(d) for d in shape], dtype=t, device="meta")


def _literal(x: Any, name: str) -> Any:
    if isinstance(x, dict):
        if "complex" in x and isinstance(x["complex"], list) and len(x["complex"]) == 2:
            return complex(*x["complex"])
        raise _Unbuildable(f"{name} was recorded as {x.get('opaque', 'an object')}")
    if isinstance(x, str):
        if name in _NAMED_ARGS or name.endswith("dtype"):
            got = getattr(torch, x, None)
            if got is None:
                raise _Unbuildable(f"{name} {x!r}")
            return got
        if name == "device":
            return torch.device("meta")
    if isinstance(x, list):
        return [_literal(y, name) for y in x]
    return x


def _hashable(x: Any) -> Any:
    if isinstance(x, list):
        return tuple(_hashable(y) for y in x)
    if isinstance(x, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in x.items()))
    return x


def _total(sizes: Any) -> int:
    total = 0
    for s in sizes:
        if s < 0:
            return UNCOUNTED
        total += s
    return total if total <= _MAX else UNCOUNTED  # never clipped to the column's limit


def count(capture: Capture) -> NodeCosts:
    """The cost columns of a Torch ``capture`` (its ``Capture.cost``)."""
    return TorchCosts().count(capture)
