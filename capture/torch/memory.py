"""Will an eager capture fit in memory? Checked while the model is built for real.

The eager build runs under a :class:`BuildGuard`, a dispatch mode that adds up the bytes
of the new storages the constructor (or init factory) allocates. A model that stays
under :data:`CHECK_BYTES` (1 GiB) and under half of the memory it may use
(:func:`memory_budget`) is never checked further: small models pay only the guard
(microseconds per constructor op). When the build passes that (or a checkpoint alone
would), :func:`estimate_model_bytes` builds the
model once abstractly (on the meta device: no parameter storage, nothing computed) in a
forked child of the worker and counts its parameter and buffer bytes (tied tensors
once); the child keeps whatever that build changes (modules imported with meta tensors
at their top level, RNG draws) away from the eager build, which resumes unless the
estimate says it cannot fit. Such a constructor or factory runs twice (its printing and
file writes happen twice too). When the abstract build fails (a constructor that reads
tensor values, a factory that loads real weights itself), or where ``os.fork`` does not
exist, the estimate is unavailable and the eager capture goes ahead unchecked;
``meta["memory_estimate"]`` says what happened.

:func:`check_fits` compares what the eager capture needs at least (parameters and
buffers, plus twice a checkpoint's file size: its bytes and the tensors loaded from
them) with the memory available: ``MemAvailable`` of ``/proc/meminfo`` and, under a
memory limit (``max_memory_bytes``, ``--memory``), the limit less what the worker
already uses (``VmData``). When it does not fit, the capture fails before building with
a ``MemoryError`` failure (stage ``limit``) whose details carry the figures
(:data:`FAILURE_KEYS`) and offer abstract evidence.

Torch is imported at module level: one of the worker's framework modules.
"""

from __future__ import annotations

import json
import os
from itertools import islice
import select
import time
from collections.abc import Mapping
from typing import Any, Callable, cast

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from ..graph.meta import MemoryEstimate
from ..worker.errors import CaptureError
from ..worker.memory_facts import available_memory, data_in_use, size_words
from .tensors import tensors_in, tensors_of

# The ``details`` of a memory failure (here and for an allocation that fails during a
# capture, ``capture.worker.main``), every key always present:
FAILURE_KEYS = {
    "limit": '"available_memory" (the machine\'s MemAvailable) or "max_memory_bytes" (the memory limit)',
    "maximum": "bytes allowed by that limit (for max_memory_bytes: the limit itself)",
    "requested": "bytes the capture asked for: the estimate of what the eager capture needs, or the "
                 "allocation that failed (None when the allocator did not say)",
    "available_bytes": "MemAvailable when it was checked (None where unknown)",
    "memory_limit_bytes": "the memory limit (0: none)",
    "phase": '"estimate" (checked before building) or "capture" (an allocation failed)',
    "abstract": 'the way out for a Torch capture: {"evidence": "abstract", "key_path": '
                '"profiles.NAME.evidence"}; None for other frameworks or an abstract capture',
}
# Also in an estimate failure: what was counted.
ESTIMATE_KEYS = ("parameter_bytes", "buffer_bytes", "checkpoint_bytes", "parameters", "buffers", "other_bytes",
                 "others")
# Plain tensors a module keeps outside its parameters and buffers (``self.cache = [torch.zeros(…)
# for …]``: 7.4 GB in 3.7 s once passed the check, which counted parameters and buffers
# only) are found in the modules' attributes, through lists, tuples, sets and dicts, this
# deep and this many containers' items at most.
OTHER_DEPTH = 6
OTHER_ITEMS = 1_000_000
# The abstract build in the child is abandoned after this many seconds (and at most a
# quarter of the capture's time left): the eager capture then goes ahead unchecked.
ESTIMATE_SECONDS = 60.0
# A build is estimated once it has allocated this many bytes, or this share of the
# memory budget if that is less: a small model is never estimated, a large one is
# before it has taken much of the machine.
CHECK_BYTES = 1 << 30
CHECK_FRACTION = 0.5


def memory_budget(memory_limit: int) -> tuple[int | None, int | None]:
    """``(budget, available)``: the bytes this capture may still use (the least of
    MemAvailable and, under a memory limit, the limit less ``VmData``; None when
    neither is known) and MemAvailable."""
    available = available_memory()
    rooms = [available] if available is not None else []
    if memory_limit:
        rooms.append(max(memory_limit - (data_in_use() or 0), 0))
    return (min(rooms) if rooms else None), available


def model_bytes(model: Any) -> dict[str, int]:
    """Parameter and buffer bytes of a module (meta, fake or real), each storage once."""
    seen: set[int] = set()

    def count(tensors: Any) -> tuple[int, int]:
        total = n = 0
        for t in tensors:
            if not isinstance(t, torch.Tensor):
                continue
            key = _storage_id(t)
            if key in seen:
                continue
            seen.add(key)
            total += _storage_bytes(t)
            n += 1
        return total, n

    params, n_params = count(model.parameters())
    buffers, n_buffers = count(model.buffers())
    others, n_others = count(_kept_tensors(model))
    return {"parameter_bytes": params, "buffer_bytes": buffers, "parameters": n_params, "buffers": n_buffers,
            "other_bytes": others, "others": n_others}


def _kept_tensors(model: Any) -> list[Any]:
    """Tensors the modules of ``model`` hold in their other attributes (within
    :data:`OTHER_DEPTH` levels of containers and :data:`OTHER_ITEMS` items)."""
    out: list[Any] = []
    budget = OTHER_ITEMS
    skip = ("_parameters", "_buffers", "_modules")
    stack: list[tuple[Any, int]] = []
    for m in model.modules():
        stack.extend((v, 0) for k, v in vars(m).items() if k not in skip)
    seen: set[int] = set()
    while stack and budget > 0:
        obj, depth = stack.pop()
        budget -= 1
        if isinstance(obj, torch.Tensor):
            out.append(obj)
        elif depth < OTHER_DEPTH and isinstance(obj, (list, tuple, set, frozenset, dict)) and id(obj) not in seen:
            seen.add(id(obj))
            items = obj.values() if isinstance(obj, dict) else obj
            stack.extend((x, depth + 1) for x in islice(items, budget))
    return out


def estimate_model_bytes(build: Callable[[], dict[str, int] | None], seconds: float) -> MemoryEstimate:
    """Run ``build`` (an abstract build returning :func:`model_bytes`, or None for a
    model that is not a module) in a forked child; ``{"status": "ok", **counts}``, or
    ``{"status": "unavailable", "reason": ...}``."""
    if not hasattr(os, "fork"):
        return {"status": "unavailable", "reason": "os.fork is not available on this platform"}
    started = time.perf_counter()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: build, answer, and leave without any cleanup of the parent's state
        try:
            os.close(r)
            try:
                with _disable_current_modes():  # a guard the parent forked inside of
                    counts = build()
                result: dict[str, Any] = ({"status": "ok", **counts} if counts is not None
                                          else {"status": "unavailable", "reason": "the model is not a torch.nn.Module"})
            except BaseException as exc:  # noqa: BLE001 - any failure only means "no estimate"
                text = str(exc).splitlines()[0] if str(exc) else ""
                result = {"status": "unavailable",
                          "reason": f"the abstract build failed: {type(exc).__name__}: {text}"[:500]}
            os.write(w, json.dumps(result).encode())
        finally:
            os._exit(0)
    os.close(w)
    chunks: list[bytes] = []
    deadline = time.monotonic() + max(0.5, seconds)
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([r], [], [], left)
            if not ready:
                raise TimeoutError
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    except TimeoutError:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(r)
        return {"status": "unavailable", "reason": f"the abstract build took over {seconds:.0f} s"}
    os.close(r)
    _, status = os.waitpid(pid, 0)
    try:
        # The child's answer: a MemoryEstimate it wrote as JSON (the forked build above).
        answer = cast(MemoryEstimate, json.loads(b"".join(chunks)))
    except ValueError:
        return {"status": "unavailable", "reason": f"the abstract build ended without an answer (status {status})"}
    answer["estimate_s"] = round(time.perf_counter() - started, 4)
    return answer


class BuildGuard(TorchDispatchMode):
    """Adds up the new storages allocated inside it; when they pass ``threshold`` bytes,
    calls ``on_trip(allocated)`` once (which may raise to stop the build)."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # PyTorch's default guard would import torch._dynamo (seconds)

    def __init__(self, threshold: int, on_trip: Callable[[int], None]) -> None:
        super().__init__()
        self.threshold = threshold
        self.on_trip = on_trip
        self.allocated = 0
        self.tripped = False
        self._seen: set[int] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self.tripped:
            return out
        # (tensors_in, not torch's pytree: tree_leaves cost ~20 us a call, twice per op,
        # and doubled the build of a model of many small modules)
        made = tensors_of(out)
        if not made:
            return out
        seen = self._seen
        for t in tensors_in((args, kwargs)):  # views of these allocate nothing
            seen.add(_storage_id(t))
        for t in made:
            key = _storage_id(t)
            if key not in seen:
                seen.add(key)
                self.allocated += _storage_bytes(t)
        if self.allocated > self.threshold:
            self.tripped = True
            self.on_trip(self.allocated)
        return out


def _storage_id(t: Any) -> int:
    try:
        return t.untyped_storage()._cdata
    except Exception:
        return id(t)


def _storage_bytes(t: Any) -> int:
    try:
        return t.untyped_storage().nbytes()
    except Exception:
        return t.numel() * t.element_size()


def check_fits(estimate: Mapping[str, Any], *, checkpoint_bytes: int, memory_limit: int,
               evidence_key_path: str, offer_abstract: bool) -> None:
    """Raise the memory failure when the eager capture cannot fit (see the module
    docstring); ``estimate`` from :func:`estimate_model_bytes`, status ok."""
    needed = estimate["parameter_bytes"] + estimate["buffer_bytes"] + estimate.get("other_bytes", 0) + 2 * checkpoint_bytes
    available = available_memory()
    bounds = []
    if memory_limit:
        used = data_in_use() or 0
        bounds.append(("max_memory_bytes", memory_limit, max(memory_limit - used, 0)))
    if available is not None:
        bounds.append(("available_memory", available, available))
    for limit, maximum, room in bounds:
        if needed <= room:
            continue
        counts = {k: estimate.get(k, 0) for k in ESTIMATE_KEYS if k != "checkpoint_bytes"}
        what = (f"the capture memory limit of {size_words(memory_limit)} (tensorviz.captureMemoryMB, --memory; "
                f"{size_words(room)} of it left)" if limit == "max_memory_bytes"
                else f"the {size_words(available)} this machine has available")
        parts = f"{size_words(estimate['parameter_bytes'])} of parameters ({counts['parameters']:,} tensors)"
        if estimate["buffer_bytes"]:
            parts += f", {size_words(estimate['buffer_bytes'])} of buffers"
        if estimate.get("other_bytes"):
            parts += f", {size_words(estimate['other_bytes'])} of other tensors its modules keep ({counts['others']:,})"
        if checkpoint_bytes:
            parts += f", twice the checkpoint's {size_words(checkpoint_bytes)} (its bytes and the tensors loaded from them)"
        way_out = (' To see its graph without weights, capture it with evidence = "abstract" (shapes, dtypes, ops '
                   "and modules; nothing computed), or give the capture more memory." if offer_abstract
                   else " Give the capture more memory.")
        raise CaptureError(
            "limit",
            f"an eager capture of this model needs at least {size_words(needed)} ({parts}, counted by an abstract build), "
            f"more than {what}.{way_out}",
            {
                "limit": limit,
                "maximum": maximum,
                "requested": needed,
                "available_bytes": available,
                "memory_limit_bytes": memory_limit,
                "phase": "estimate",
                "abstract": {"evidence": "abstract", "key_path": evidence_key_path} if offer_abstract else None,
                **counts,
                "checkpoint_bytes": checkpoint_bytes,
            },
            error_type="MemoryError",
        )
