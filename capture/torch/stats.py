"""Activation statistics of a trace's values (``measured.stats``).

An :class:`ActivationStatistics` belongs to one :class:`capture.torch.trace.TorchTrace`
(``trace.statistics``, None with statistics off) and writes into the values of the
trace's graph builder: the trace calls :meth:`~ActivationStatistics.measure` for each
floating value it records, :meth:`~ActivationStatistics.share` for a view over exactly
its input's elements (``t``, ``transpose``, ``view``, ``detach`` …: the input's
statistics, no reduction), and :meth:`~ActivationStatistics.finish` once at the end.

Statistics are over the finite elements: ``min``, ``max``, ``mean``, ``std``
(population), plus the ``nan`` and ``inf`` counts (all four None when nothing is
finite).

* On CPU (``immediate``), the values an op produces are measured in batches
  (:meth:`~ActivationStatistics.measure` with a ``key``): a produced tensor of at most
  :data:`BATCH_ELEMENTS` elements is kept (a reference, at most :data:`BATCH_HELD`
  elements in all) and measured with others of the same dtype and size at once, stacked
  as the rows of one matrix: four row reductions (minima, maxima, sums, sums of squares)
  for many values instead of four reductions and a read-back for each, whose calls cost
  more than their arithmetic for small tensors. A batch is measured when it is full,
  at :meth:`~ActivationStatistics.finish`, and before any op writes to the storage of a
  value it holds (:meth:`~ActivationStatistics.waiting_on`: the trace asks before every
  op that writes in place), so every value's statistics are of the data it had when it
  was made. Min, max and the NaN/Inf counts are exact; the sums, taken row by row, give a
  mean and std equal to what one tensor's reductions give, to float32 precision (summed
  in another order, they may differ in the last bits). A small tensor from outside
  (a buffer, an input: no storage key, since a kernel may write one without saying so)
  joins the batch as a copy made when it is first read, so a write nobody reports cannot
  change what is measured. A value alone in its dtype and size and a larger one are
  measured one by one as below. A value whose storage was freed under it before its
  batch was measured (FSDP2 frees a block's gathered parameters after its forward, with
  no op the trace sees) has no statistics (counted in ``stats_skipped_values``).
* One by one on CPU, as each op finishes: the four moments (min, max, sum, sum of
  squares) of a tensor that fills a dense block of memory (contiguous or permuted) are
  reduced over that block as one run, a large one chunk by chunk, each chunk small
  enough to stay in cache while its four reductions read it, and all of them are read
  back at once. Every element equal (min = max) gives that value and no spread exactly. NaN/Inf propagate through min/max, so
  finite min and max prove both counts are zero; only otherwise does a masked path count
  and skip them. A copy the measurement needs (a slice with gaps made dense, a
  half-precision chunk converted to float32, the batch's rows) is written into one
  buffer per dtype kept from value to value (:func:`_scratch`, freed at
  :meth:`~ActivationStatistics.finish`), not a new tensor each time: a fresh allocation of
  that size maps new pages and faults on each (185 against 24 us per 384 KiB copy of
  nanoGPT's q, k, v slices inside a capture). Sums that overflow float32 are taken again in float64, and a variance
  lost to cancellation (``var < 1e-4 mean²``) is recomputed exactly (two-pass, float64).
  The reductions run on one thread: each is one memory pass, too short for a parallel
  region to pay off, and on a loaded machine a region waits for a descheduled worker
  (measured on 2 shared cores: 4-18 ms per output with 2 threads, 0.4-1 ms with 1). The
  model's own ops keep their threads.
* On other devices (``deferred``) six numbers per value are reduced on the device
  without synchronising and fetched with one transfer per device at :meth:`finish`.

Parameters (:meth:`~ActivationStatistics.later`) need not delay the graph: they do not
depend on the input, so a trace made with ``parameters="later"`` keeps a reference to
each parameter it sees and measures none of them in the forward (the graph is written
without their statistics, ``meta["stats_pending"]`` counting the values that wait); the
worker sends the graph, then :meth:`~ActivationStatistics.measure_later` measures them
(the same reductions, so the same numbers) and sends them in a second message
(``capture.worker.protocol.StatisticsMessage``). Views over exactly a parameter's
elements (its ``t``, ``view`` …) wait with it and get its statistics. An op about to
write to a waiting parameter's storage (an optimizer step, a ``copy_`` into a weight)
has it measured first (:meth:`~ActivationStatistics.before_write`): its statistics are
always of the data the forward read.

Torch is imported at module level: one of the worker's framework modules.
"""

from __future__ import annotations

import math
import threading
from typing import Any

import torch
from torch import Tensor as _Tensor

from ..graph.model import Value

_STAT_NATIVE = (torch.float32, torch.float64)
MODES = ("auto", "immediate", "deferred")
# Elements per chunk of the one-pass reduction: 256 Ki float32 (1 MiB) stays in a
# core's cache while min/max, sum and sum of squares read it; smaller chunks cost more
# in per-call overhead than they save (measured on GPT-2's weights and activations).
CHUNK = 1 << 18
# A produced value of at most this many elements is measured in a batch (see above):
# below it, the calls of four reductions and a read-back cost more than the arithmetic;
# above it, copying the value into the batch costs more than the calls it saves
# (measured on a transformers Llama and a deep stack of small blocks at batch 1).
BATCH_ELEMENTS = 1 << 13
# A tensor of at most this many elements that does not fill a dense block of memory is
# copied into one before its reduction (:func:`moments`).
COPY_ELEMENTS = 1 << 22
# A batch is measured once it holds this many values or elements (the memory it keeps).
BATCH_VALUES = 512
BATCH_HELD = 1 << 22
_BATCH_DTYPES = frozenset((torch.float32, torch.float64, torch.float16, torch.bfloat16))


class ActivationStatistics:
    """Statistics into ``values`` (the trace's builder values). ``mode``: ``"auto"``
    (immediate on CPU, deferred elsewhere), ``"immediate"`` or ``"deferred"``."""

    def __init__(self, values: list[Value], mode: str = "auto") -> None:
        if mode not in MODES:
            raise ValueError(f"stats_mode must be auto, immediate or deferred, not {mode!r}")
        self.values = values
        self.mode = mode
        self.skipped = 0  # values whose dtype/device has no such reductions
        self._pending: list[tuple[int, _Tensor]] = []
        self._vectors: dict[int, _Tensor] = {}  # deferred statistics vector per value
        # The batch (immediate mode): values waiting to be measured, by (dtype, numel);
        # the storages they are on; their elements; values sharing a waiting one's.
        self._batch: dict[tuple, list[tuple[int, _Tensor]]] = {}
        self._batch_keys: set = set()
        self._batch_vids: set[int] = set()
        self._batch_held = 0
        self._batch_shares: list[tuple[int, int]] = []
        # Measured after the graph (:meth:`later`): the tensor and storage of each value
        # that waits, by value; every value waiting (views too) -> the value it shares.
        self._later: dict[int, tuple[_Tensor, Any]] = {}
        self._later_of: dict[int, int] = {}
        self._later_keys: dict[Any, list[int]] = {}

    def known(self, vid: int) -> bool:
        """Has value ``vid`` statistics (read, or pending on its device, in the batch or
        after the graph)?"""
        return (vid in self._vectors or vid in self._batch_vids or vid in self._later_of
                or "stats" in measured_fields(self.values[vid]))

    def later(self, vid: int, t: _Tensor, key: Any) -> None:
        """Value ``vid`` (a parameter, tensor ``t`` on storage ``key``) is measured after
        the graph is written (:meth:`measure_later`), or before an op writes to ``key``."""
        if t.numel() == 0:
            return
        # kept as it is (a parameter, alive anyway), detached when measured: a detached
        # copy made now would allocate while the forward runs
        self._later[vid] = (t, key)
        self._later_of[vid] = vid
        self._later_keys.setdefault(key, []).append(vid)

    @property
    def pending(self) -> int:
        """How many values wait for :meth:`measure_later`."""
        return len(self._later_of)

    def before_write(self, key: Any) -> bool:
        """An op is about to write to storage ``key``: the values waiting on it (in the
        batch, or for after the graph) are measured now. Whether any were."""
        found = False
        if key in self._batch_keys:
            self.flush()
            found = True
        waiting = self._later_keys.pop(key, None)
        if waiting:
            self._measure_waiting(waiting)
            found = True
        return found

    def _measure_waiting(self, vids: list[int]) -> None:
        """Measure the waiting values ``vids`` now, and the views that share them."""
        roots = set(vids)
        for vid in vids:
            t, _ = self._later.pop(vid)
            self._one(vid, t.detach())
        values = self.values
        for vid, root in list(self._later_of.items()):
            if root in roots:
                del self._later_of[vid]
                got = measured_fields(values[root]).get("stats")
                if got is not None and vid != root:
                    measured_fields(values[vid])["stats"] = got

    def measure_later(self) -> list[list[Any]]:
        """Measure the values that wait (after the graph was written): ``[value id,
        statistics]`` of each, views included, also written into the values. Small ones
        are measured in batches, as in the forward."""
        if not self._later_of:
            return []
        later, later_of = self._later, self._later_of
        self._later, self._later_of, self._later_keys = {}, {}, {}
        for vid, (t, key) in later.items():
            self.measure(vid, t.detach(), key)
        self.finish()
        values = self.values
        rows: list[list[Any]] = []
        for vid, root in later_of.items():
            got = measured_fields(values[root]).get("stats")
            if got is None:
                continue
            if vid != root:
                measured_fields(values[vid])["stats"] = got
            rows.append([vid, got])
        return rows

    def share(self, vid: int, src: int) -> None:
        """Value ``vid`` holds exactly ``src``'s elements: give it ``src``'s statistics."""
        root = self._later_of.get(src)
        if root is not None:
            self._later_of[vid] = root
            return
        if src in self._batch_vids:
            # known() now, so that a view of this view shares them too (applied in order)
            self._batch_shares.append((vid, src))
            self._batch_vids.add(vid)
            return
        vec = self._vectors.get(src)
        if vec is not None:
            self._vectors[vid] = vec
            self._pending.append((vid, vec))
        else:
            measured_fields(self.values[vid])["stats"] = measured_fields(self.values[src])["stats"]

    def measure(self, vid: int, t: _Tensor, key: Any = None) -> None:
        """The statistics of ``t``, the tensor of value ``vid`` (floating point). With a
        ``key`` (the storage it is on), a small CPU tensor waits in the batch."""
        n = t.numel()
        if n == 0:
            return
        cpu = t.device.type == "cpu"
        if cpu and n <= BATCH_ELEMENTS and self.mode != "deferred" and t.dtype in _BATCH_DTYPES \
                and t.layout == torch.strided:
            if key is not None:
                # Kept as an alias (detach: the same storage, another tensor): an op's result
                # that something else still held when the op returned would make autograd
                # give the model a copy of it (one more op).
                self._batch.setdefault((t.dtype, n), []).append((vid, t.detach()))
                self._batch_keys.add(key)
            else:
                # A storage no op is watched writing (a buffer, an input): its data now, copied.
                self._batch.setdefault((t.dtype, n), []).append((vid, t.detach().clone()))
            self._batch_vids.add(vid)
            self._batch_held += n
            if len(self._batch_vids) >= BATCH_VALUES or self._batch_held >= BATCH_HELD:
                self.flush()
            return
        deferred = self.mode == "deferred" or (self.mode == "auto" and not cpu)
        threads = torch.get_num_threads() if cpu else 1
        if threads > 1:
            torch.set_num_threads(1)
        try:
            if deferred:
                vec = self._vectors[vid] = _stats_vector(t if t.dtype in _STAT_NATIVE else t.float())
                self._pending.append((vid, vec))
            else:
                measured_fields(self.values[vid])["stats"] = stats_now(t)
        except Exception:  # an exotic dtype/device without these reductions
            self.skipped += 1
        finally:
            if threads > 1:
                torch.set_num_threads(threads)

    def waiting_on(self, key: Any) -> bool:
        """Whether a value in the batch is on storage ``key`` (measure it before a write)."""
        return key in self._batch_keys

    @property
    def batched(self) -> bool:
        """Whether values wait in the batch or for after the graph (an op that writes
        in place asks :meth:`before_write` first)."""
        return bool(self._batch_vids) or bool(self._later_keys)

    def flush(self) -> None:
        """Measure the values waiting in the batch (see the module docstring)."""
        if not self._batch_vids:
            return
        groups, shares = self._batch, self._batch_shares
        self._batch, self._batch_keys, self._batch_vids, self._batch_held, self._batch_shares = {}, set(), set(), 0, []
        threads = torch.get_num_threads()
        if threads > 1:
            torch.set_num_threads(1)
        try:
            for (_, n), items in groups.items():
                items = self._still_held(items)
                if not items:
                    continue
                if len(items) == 1:
                    self._one(*items[0])
                    continue
                try:
                    rows = _row_moments([t for _, t in items], n)
                except Exception:  # an exotic tensor: one by one
                    for vid, t in items:
                        self._one(vid, t)
                    continue
                for (vid, t), (mn, mx, s, q) in zip(items, rows):
                    measured_fields(self.values[vid])["stats"] = _from_moments(t, n, mn, mx, s, q)
        finally:
            if threads > 1:
                torch.set_num_threads(threads)
        values = self.values
        for vid, src in shares:
            got = measured_fields(values[src]).get("stats")
            if got is not None:
                measured_fields(values[vid])["stats"] = got

    def _still_held(self, items: list[tuple[int, _Tensor]]) -> list[tuple[int, _Tensor]]:
        """The waiting tensors whose storage still holds them (see :func:`intact`); the
        others are counted in ``skipped``."""
        kept = [item for item in items if intact(item[1])]
        self.skipped += len(items) - len(kept)
        return kept

    def _one(self, vid: int, t: _Tensor) -> None:
        if not intact(t):
            self.skipped += 1
            return
        try:
            measured_fields(self.values[vid])["stats"] = stats_now(t)
        except Exception:
            self.skipped += 1

    def finish(self) -> None:
        """Measure the batch; fetch the deferred statistics: one transfer per device."""
        self.flush()
        release_scratch()
        if not self._pending:
            return
        by_device: dict[Any, list[tuple[int, _Tensor]]] = {}
        for vid, vec in self._pending:
            by_device.setdefault(vec.device, []).append((vid, vec))
        self._pending = []
        self._vectors = {}
        for items in by_device.values():
            rows = torch.stack([vec for _, vec in items]).cpu().tolist()  # one transfer
            for (vid, _), row in zip(items, rows):
                measured_fields(self.values[vid])["stats"] = _stats_from_vector(row, self.values[vid])


_finite = math.isfinite


def intact(t: _Tensor) -> bool:
    """Whether ``t``'s storage still holds every element ``t`` reads. A storage can shrink
    under a tensor without an op the trace sees: FSDP2 frees a block's gathered parameters
    after its forward (``untyped_storage().resize_(0)``); reading a tensor kept in the
    batch from such a storage would read freed memory (a segmentation fault)."""
    if t.device.type != "cpu" or t.numel() == 0:
        return True
    try:
        extent = t.storage_offset() + 1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride()))
        return t.untyped_storage().nbytes() >= extent * t.element_size()
    except (RuntimeError, NotImplementedError, TypeError):
        return True


def _row_moments(tensors: list[_Tensor], n: int) -> list[list[float]]:
    """``[min, max, sum, sum of squares]`` of each of ``tensors`` (``n`` elements each, one
    dtype), as the rows of one matrix: four row reductions (float32 for narrower floats;
    ``amin`` and ``amax`` rather than ``aminmax``, which reduces rows 25-30x slower on a
    CPU: 1.1 ms against 40 us for 20 rows of 8,192)."""
    want = tensors[0].dtype if tensors[0].dtype in _STAT_NATIVE else torch.float32
    rows = _scratch(len(tensors) * n, want)
    torch.cat([t.reshape(-1) for t in tensors], out=rows)  # converted to float32 as it is copied
    rows = rows.view(len(tensors), n)
    lo, hi = rows.amin(dim=1), rows.amax(dim=1)
    sums = rows.sum(dim=1)
    squares = torch.linalg.vector_norm(rows, dim=1).square()
    return torch.stack((lo, hi, sums, squares), dim=1).tolist()


def _from_moments(t: _Tensor, n: int, mn: float, mx: float, s: float, q: float) -> dict[str, Any]:
    """The statistics from a tensor's four moments; the NaN/Inf, overflow and
    cancellation cases as :func:`stats_now` takes them."""
    if not (_finite(mn) and _finite(mx)):
        return _masked_stats(t if t.dtype in _STAT_NATIVE else t.float(), n)
    if not (_finite(s) and _finite(q)):  # float32 overflow: this one again, in float64
        return stats_now(t)
    return _summary(t, n, mn, mx, s, q)


def _summary(t: _Tensor, n: int, mn: float, mx: float, s: float, q: float) -> dict[str, Any]:
    """The statistics of ``t`` (finite) from its four moments. Every element equal (min
    = max: a fresh BatchNorm's running variance, a mask): that value and no spread,
    exactly, with no second pass (its float32 moments cancel to a variance of 0, which
    asked for the exact two-pass one: ~30 us a buffer)."""
    if mn == mx:
        return {"min": mn, "max": mx, "mean": mn, "std": 0.0, "nan": 0, "inf": 0}
    mean = s / n
    var = q / n - mean * mean
    if var < 1e-4 * mean * mean:  # cancellation: ask for the exact two-pass value
        std = torch.std(t.double(), correction=0).item() if n > 1 else 0.0
    else:
        std = math.sqrt(var)
    return {"min": mn, "max": mx, "mean": mean, "std": std, "nan": 0, "inf": 0}


def stats_now(t: _Tensor) -> dict[str, Any]:
    """The statistics of a tensor (read now; see the module docstring)."""
    n = t.numel()
    mn, mx, s, q = moments(t)
    if not (_finite(mn) and _finite(mx)):
        return _masked_stats(t if t.dtype in _STAT_NATIVE else t.float(), n)
    if not (_finite(s) and _finite(q)):  # float32 overflow: accumulate in float64
        mn, mx, s, q = moments(t, torch.float64)
    return _summary(t, n, mn, mx, s, q)


def moments(t: _Tensor, dtype: torch.dtype | None = None) -> tuple[float, float, float, float]:
    """``(min, max, sum, sum of squares)`` of ``t``, reduced in ``dtype`` (float32 for
    narrower floats, the tensor's own float32/float64 otherwise). A tensor whose elements
    fill one dense block of memory (contiguous, or a permutation of it: a transpose, a
    ``permute`` of heads) is reduced as the 1-D run of that memory (the statistics do
    not depend on the order of the elements; the strided reductions of a permuted view
    ran 10-20x slower); any other of at most :data:`COPY_ELEMENTS` (a slice with gaps:
    one of q, k, v split from one projection) is copied into such a run first (its
    strided sum of squares took 130 us on 98,304 elements, the copy and four dense
    reductions 60 us). A run longer than :data:`CHUNK` is reduced chunk by chunk (each
    chunk converted on its own: a bfloat16 weight is never copied whole); the partial
    results are combined in Python floats. NaN propagates into min and max, ±inf into
    min or max. Copies and conversions go into a buffer kept for the next (:func:`_scratch`)."""
    want = dtype or (t.dtype if t.dtype in _STAT_NATIVE else torch.float32)
    flat = dense_run(t)
    if flat is None and t.layout == torch.strided and t.numel() <= COPY_ELEMENTS:
        flat = _scratch(t.numel(), want)
        flat.view(t.shape).copy_(t)  # one pass: the gaps skipped, the dtype converted
    if flat is None:
        return tuple(_four(t if t.dtype == want else t.to(want)).tolist())
    if flat.numel() <= CHUNK:
        return _run_moments(flat if flat.dtype == want else _scratch(flat.numel(), want).copy_(flat))
    rows = torch.stack([_four(c if c.dtype == want else _scratch(c.numel(), want).copy_(c))
                        for c in flat.split(CHUNK)]).tolist()  # one read-back for all chunks
    if any(math.isnan(r[0]) or math.isnan(r[1]) for r in rows):
        return math.nan, math.nan, math.nan, math.nan
    return (min(r[0] for r in rows), max(r[1] for r in rows),
            math.fsum(r[2] for r in rows), math.fsum(r[3] for r in rows))


def _run_moments(x: _Tensor) -> tuple[float, float, float, float]:
    """``(min, max, sum, sum of squares)`` of a 1-D float32/float64 run."""
    lo, hi = x.amin(), x.amax()
    return lo.item(), hi.item(), x.sum().item(), torch.dot(x, x).item()


# Buffers the copies and conversions of :func:`moments` and the batch go into, by dtype,
# kept from one value to the next (:func:`release_scratch` frees them). A new tensor for
# each copy cost more than the copy: above glibc's mmap threshold every allocation maps
# fresh pages and faults on each one (nanoGPT's q, k, v slices: 185 us per 384 KiB copy
# inside a capture, 24 us into memory already mapped).
# One set per thread: two threads measuring at once never share a buffer.
_SCRATCH = threading.local()


def _scratch(n: int, dtype: torch.dtype) -> _Tensor:
    """A 1-D tensor of ``n`` elements of ``dtype`` in this thread's kept buffer (its data
    is overwritten by the next call for that dtype)."""
    buffers: dict[torch.dtype, _Tensor] = _SCRATCH.__dict__
    buf = buffers.get(dtype)
    if buf is None or buf.numel() < n:
        buf = buffers[dtype] = torch.empty(max(n, CHUNK), dtype=dtype)
    return buf[:n]


def release_scratch() -> None:
    """Free this thread's buffers of :func:`_scratch` (at the end of a trace's statistics)."""
    _SCRATCH.__dict__.clear()


def dense_run(t: _Tensor) -> _Tensor | None:
    """``t``'s elements as a 1-D tensor over the same memory when they fill one dense
    block of it (``t`` contiguous, or any permutation of a contiguous tensor's
    dimensions), else None (a slice with gaps, an expanded dimension)."""
    if t.is_contiguous():
        return t.view(-1)
    if t.layout != torch.strided or t.is_neg() or t.is_conj():
        return None
    expected = 1
    for stride, size in sorted((st, n) for n, st in zip(t.shape, t.stride()) if n != 1):
        if stride != expected:
            return None
        expected *= size
    return t.as_strided((t.numel(),), (1,), t.storage_offset())


def _four(x: _Tensor) -> _Tensor:
    """min, max, sum and sum of squares of ``x``, as one 4-element tensor (a BLAS dot
    for the squares of a 1-D tensor, a norm squared otherwise). ``amin`` and ``amax``:
    two vectorised passes, 1.3-3x faster together than the one pass of ``aminmax``
    (measured on a CPU at nanoGPT's activation sizes)."""
    if x.dim() == 1:
        squares = torch.dot(x, x)
    else:
        squares = torch.linalg.vector_norm(x).square()
    return torch.stack((x.amin(), x.amax(), x.sum(), squares))


def _masked_stats(x: _Tensor, n: int) -> dict[str, Any]:
    """Statistics of a tensor holding NaN or ±inf: counted, then skipped."""
    nan = int(torch.isnan(x).sum().item())
    finite = torch.isfinite(x)
    n_finite = int(finite.sum().item())
    stats: dict[str, Any] = {"nan": nan, "inf": n - n_finite - nan}
    if n_finite:
        xf = x[finite].double()
        lo, hi = torch.aminmax(xf)
        stats.update(min=lo.item(), max=hi.item(), mean=xf.mean().item(), std=torch.std(xf, correction=0).item())
    else:
        stats.update(min=None, max=None, mean=None, std=None)
    return stats


def _stats_vector(x: _Tensor) -> _Tensor:
    """Six float64 numbers on ``x``'s device, with no host synchronisation:
    finite min, finite max, finite sum, finite sum of squares, NaN count, finite count."""
    finite = torch.isfinite(x)
    zeroed = torch.where(finite, x, 0)
    return torch.stack((
        torch.where(finite, x, math.inf).amin().double(),
        torch.where(finite, x, -math.inf).amax().double(),
        zeroed.sum(dtype=torch.float64),
        torch.square(zeroed.double()).sum(),
        torch.isnan(x).sum().double(),
        finite.sum().double(),
    ))


def measured_fields(value: Value) -> dict[str, Any]:
    """A value of an eager capture: its measured fields (the trace made them)."""
    assert value.measured is not None, "an eager capture's values are measured"
    return value.measured


def _stats_from_vector(row: list[float], value: Value) -> dict[str, Any]:
    mn, mx, s, q, nan, n_finite = row
    n = 1
    for d in value.shape:
        assert isinstance(d, int), "a measured value's dimensions are numbers"
        n *= d
    nan, n_finite = int(nan), int(n_finite)
    stats: dict[str, Any] = {"nan": nan, "inf": n - n_finite - nan}
    if n_finite:
        mean = s / n_finite
        stats.update(min=mn, max=mx, mean=mean, std=math.sqrt(max(q / n_finite - mean * mean, 0.0)))
    else:
        stats.update(min=None, max=None, mean=None, std=None)
    return stats
