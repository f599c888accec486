"""Capture limits beside the recipe's input limits: each configurable, each reported
by name when hit (``Failure(stage="limit")``, or ``stage="deadline"`` for seconds)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping


@dataclass(frozen=True, slots=True)
class Limits:
    """``max_ops``: nodes in the graph. ``max_values``: values. ``max_groups``:
    groups of every kind (module calls, jit/remat/custom-derivative scopes, unexecuted
    control-flow bodies). ``max_body_ops``: the equations one unexecuted control-flow
    body (a scan/while/cond template) may have; a larger one stays closed, and says why.
    ``max_result_bytes``: the encoded graph the worker sends back. ``max_seconds``: the
    parent's deadline for the whole worker run (start, imports, tracing, result).
    ``max_saved_file_bytes``: the size of each file a recipe loads (a Torch
    ``init.checkpoint`` or ``inputs.fixture``), checked before it is read.
    ``max_memory_bytes``: the capture's memory: each of its processes' private memory
    (``RLIMIT_DATA``: heap and private mappings), and the shared memory they have mapped
    in all (``MAP_SHARED``, ``/dev/shm`` and memfd files, System V segments: ``RssShmem``,
    counted every 50 ms by the worker's keeper or the warm worker); 0, the default: no
    limit. Running out is a ``MemoryError`` failure that names the limit (stage ``limit``
    for shared memory). Not counted: files written to a tmpfs and not mapped (storage,
    like a disk), and memory of processes started outside the capture's tree."""

    max_ops: int = 1_000_000
    max_values: int = 2_000_000
    max_groups: int = 100_000
    max_body_ops: int = 20_000
    max_result_bytes: int = 256 * 1024 * 1024
    max_seconds: float = 120.0
    max_saved_file_bytes: int = 4 * 1024 * 1024 * 1024
    max_memory_bytes: int = 0
    # JAX: the seconds XLA may take to compile the traced program for the capture's devices
    # (``capture.jax.compiled``); past it the capture goes on without the compiled figures.
    compile_seconds: float = 40.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> "Limits":
        """Known keys with positive numbers; anything else keeps the default."""
        if not data:
            return cls()
        out: dict[str, Any] = {}
        for f in fields(cls):
            v = data.get(f.name)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
                out[f.name] = float(v) if f.name in ("max_seconds", "compile_seconds") else int(v)
        return cls(**out)
