"""Activation statistics of a :class:`capture.torch.trace.TorchTrace` (``measured.stats``).

:class:`StatisticsMixin` holds the trace's statistics methods (it uses the trace's
builder and its ``stats_mode``, ``_pending_stats`` and ``_vec_of``); the functions below
it reduce one tensor.

Statistics (``stats``) are over the finite elements: ``min``, ``max``, ``mean``, ``std``
(population), plus the ``nan`` and ``inf`` counts (all four None when nothing is
finite). On CPU they are read as each op finishes, on one thread: ``aminmax``, a sum and
a norm, since NaN/Inf propagate through min/max, finite min and max prove both counts are
zero, and only then does a masked path run. On other devices six numbers per value are
reduced on the device without synchronising and fetched with one transfer per device at
:meth:`TorchTrace.finish` (``stats_mode``). A view over exactly its input's elements
(``t``, ``transpose``, ``view``, ``detach`` …) shares its input's statistics; outside
tensors get theirs once, when first seen.

Torch is imported at module level: one of the worker's framework modules.
"""

from __future__ import annotations

import math
from typing import Any

import torch

_STAT_NATIVE = (torch.float32, torch.float64)
_Tensor = torch.Tensor


class StatisticsMixin:
    """The statistics part of :class:`capture.torch.trace.TorchTrace`."""

    def _stats(self, vid: int, t: _Tensor) -> None:
        n = t.numel()
        if n == 0:
            return
        deferred = self.stats_mode == "deferred" or (self.stats_mode == "auto" and t.device.type != "cpu")
        # CPU reductions run on one thread: each is one memory pass, too short for a
        # parallel region to pay off, and on a loaded machine a region waits for a
        # descheduled worker (measured on 2 shared cores: 4-18 ms per output with 2
        # threads, 0.4-1 ms with 1). The model's own ops keep their threads.
        threads = torch.get_num_threads() if t.device.type == "cpu" else 1
        if threads > 1:
            torch.set_num_threads(1)
        try:
            x = t if t.dtype in _STAT_NATIVE else t.float()
            if deferred:
                vec = self._vec_of[vid] = _stats_vector(x)
                self._pending_stats.append((vid, vec))
            else:
                self.b.values[vid].measured["stats"] = _stats_now(x, n)
        except Exception:  # an exotic dtype/device without these reductions
            self.stats_skipped += 1
        finally:
            if threads > 1:
                torch.set_num_threads(threads)

    def _flush_stats(self) -> None:
        if not self._pending_stats:
            return
        by_device: dict[Any, list[tuple[int, _Tensor]]] = {}
        for vid, vec in self._pending_stats:
            by_device.setdefault(vec.device, []).append((vid, vec))
        self._pending_stats = []
        self._vec_of = {}
        for items in by_device.values():
            rows = torch.stack([vec for _, vec in items]).cpu().tolist()  # one transfer
            for (vid, _), row in zip(items, rows):
                self.b.values[vid].measured["stats"] = _stats_from_vector(row, self.b.values[vid])


def _finite(x: float) -> bool:
    return not (math.isnan(x) or math.isinf(x))


def _stats_now(x: _Tensor, n: int) -> dict[str, Any]:
    """Statistics of a CPU tensor, read now. Fast path: two reductions (aminmax,
    sum and sum of squares); NaN/Inf propagate through min/max, so finite min and max
    prove the counts are zero. Otherwise the masked path counts and skips them."""
    mn_t, mx_t = torch.aminmax(x)
    mn, mx = mn_t.item(), mx_t.item()
    if _finite(mn) and _finite(mx):
        s = x.sum().item()
        q = torch.linalg.vector_norm(x).item()
        if not (_finite(s) and _finite(q)):  # float32 overflow: accumulate in float64
            s = x.sum(dtype=torch.float64).item()
            q = torch.linalg.vector_norm(x, dtype=torch.float64).item()
        mean = s / n
        var = q * q / n - mean * mean
        if var < 1e-4 * mean * mean:  # cancellation: ask for the exact two-pass value
            std = torch.std(x.double(), correction=0).item() if n > 1 else 0.0
        else:
            std = math.sqrt(var)
        return {"min": mn, "max": mx, "mean": mean, "std": std, "nan": 0, "inf": 0}
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


def _stats_from_vector(row: list[float], value: Any) -> dict[str, Any]:
    mn, mx, s, q, nan, n_finite = row
    n = 1
    for d in value.shape:
        n *= d
    nan, n_finite = int(nan), int(n_finite)
    stats: dict[str, Any] = {"nan": nan, "inf": n - n_finite - nan}
    if n_finite:
        mean = s / n_finite
        stats.update(min=mn, max=mx, mean=mean, std=math.sqrt(max(q / n_finite - mean * mean, 0.0)))
    else:
        stats.update(min=None, max=None, mean=None, std=None)
    return stats

