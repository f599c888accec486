"""The captured program as the compiler will run it: compiled once, for the recipe's
(simulated) devices, and read back (``Capture.compiled``).

A traced program says which collectives the *program* writes (``psum``, ``all_gather``
inside a ``shard_map``…). Under a mesh with automatic axes, XLA's SPMD partitioner adds
the rest: the all-reduce after a matmul that contracts a split dimension, the all-gather
of a weight split over the batch axis, the collective-permute of a reshard. Those exist
only in the compiled program. So, after tracing, the worker lowers and compiles the
traced program itself (``jax.jit`` of the closed jaxpr: the user's Python does not run
again) over abstract inputs (``ShapeDtypeStruct``) placed as the capture placed them, and
reads:

* every collective of the compiled HLO (``all-reduce``, ``all-gather``,
  ``reduce-scatter``, ``all-to-all``, ``collective-permute``, ``collective-broadcast``,
  ``ragged-all-to-all``, and their asynchronous ``-start`` forms, counted once), with
  its replica groups (and the mesh axes they span), the bytes of one device's operand,
  what one device sends, and the ``op_name`` / source line XLA kept from the equation it
  was made for;
* ``cost_analysis()`` (FLOPs, bytes accessed, transcendentals) and ``memory_analysis()``
  (arguments, outputs, temporaries, aliases, and the peak they make): figures of the
  program one device runs (SPMD: every device runs the same one), so *per device*.

Attribution. Each collective is mapped onto the node of the equation it came from: the
equation's primitive is the last part of the ``op_name`` (``…/transpose(jvp())/dot_general``),
its name stack the parts before it, and its traceback holds the source line XLA records
(``stack_frame_id`` into the module's ``FileLocations``). A candidate node must have the
primitive or the line; among candidates the one that agrees on most wins (primitive,
innermost line, name stack). A collective that agrees with no node stays *unattributed*
and is counted as such (never silently dropped).

The compile is optional and bounded: ``recipe.compile`` (``auto``: with a mesh; ``on``;
``off``) and ``Limits.compile_seconds`` (past it the capture goes on without the
compiled figures, and says so). JAX is passed in, never imported at module level.
"""

from __future__ import annotations

import math
import os
import re
import threading
import time
from typing import Any

from ..graph.sharding import collective_record
from ..units import dtype_bits
from .collective_axes import mesh_axes, operand_bytes
from .hlo_text import DTYPE, FRAME_ID, LINE_HEAD, OP_NAME, SOURCE, Frames, dims, frames_table, metadata, operand_ref

#: What ``Capture.compiled`` holds, in words (``compiled["note"]``).
NOTE = ("the captured program compiled by XLA for the capture's devices (simulated on the CPU when the recipe's "
        "device is cpu): collectives the compiler runs, with the node each came from; FLOPs and memory are "
        "XLA's own figures for the program one device runs (per device)")
COMPILE_MODES = ("auto", "on", "off")
#: HLO collective opcodes (their ``-start`` forms are the same collective, asynchronous).
HLO_COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
                   "collective-broadcast", "ragged-all-to-all")
#: The name a compiled collective has among the program's own (``collective_record``'s bytes rule).
_AS_PRIMITIVE = {"all-reduce": "all_reduce", "all-gather": "all_gather", "reduce-scatter": "reduce_scatter",
                 "all-to-all": "all_to_all", "ragged-all-to-all": "all_to_all",
                 "collective-permute": "ppermute", "collective-broadcast": "broadcast"}
MAX_COLLECTIVES = 20_000
MAX_TEXT = 240

_INSTR = re.compile(LINE_HEAD + r"(?P<type>.*?)\s+(?P<op>" + "|".join(HLO_COLLECTIVES) + r")(?P<start>-start)?\(")
_GROUPS = re.compile(r"replica_groups=(\{(?:\{[\d,]*\},?)*\}|\[[\d,]+\]<=\[[\d,]+\](?:T\([\d,]+\))?"
                     r"|mesh\[[^\]]*\]\s*\{[^}]*\})")
_PAIRS = re.compile(r"source_target_pairs=(\{(?:\{\d+,\d+\},?)*\})")
_ARRAY = re.compile(r"\b([a-z]+\d*(?:e\d+m\d+(?:fn|fnuz|b11fnuz)?)?)\[([\d,]*)\]")
_HLO_DTYPES = {"f32": "float32", "f64": "float64", "f16": "float16", "bf16": "bfloat16", "s8": "int8",
               "s16": "int16", "s32": "int32", "s64": "int64", "u8": "uint8", "u16": "uint16", "u32": "uint32",
               "u64": "uint64", "pred": "bool", "c64": "complex64", "c128": "complex128",
               "f8e4m3fn": "float8_e4m3fn", "f8e5m2": "float8_e5m2", "s4": "int4", "u4": "uint4"}


def wanted(recipe: Any) -> bool:
    """Whether this capture compiles: ``compile = "on"``, or ``"auto"`` (the default) with a mesh."""
    mode = getattr(recipe, "compile", "auto") or "auto"
    return mode == "on" or (mode == "auto" and getattr(recipe, "mesh", None) is not None)


# --------------------------------------------------------------------------- compiling


class _Compile:
    """XLA lowering and compiling ``closed`` over ``args`` on a thread of its own (started at
    once: the graph is converted meanwhile), awaited within a deadline."""

    def __init__(self, jax: Any, closed: Any, args: list, mesh: Any) -> None:
        from contextlib import nullcontext

        from jax.extend.core import jaxpr_as_fun

        self.box: dict[str, Any] = {}
        self.platform = device_platform(jax, mesh)

        options = compiler_options(jax, mesh)
        delay = _test_delay()

        def run() -> None:
            try:
                if delay:
                    time.sleep(delay)
                with jax.set_mesh(mesh) if mesh is not None else nullcontext():
                    t = time.perf_counter()
                    lowered = jax.jit(jaxpr_as_fun(closed)).lower(*args)
                    self.box["lower_seconds"] = round(time.perf_counter() - t, 3)
                    self.box["compiled"] = lowered.compile(options) if options else lowered.compile()
            except BaseException as exc:  # reported in the capture, never raised: the graph stands without it
                self.box["error"] = exc

        self.start = time.perf_counter()
        self.thread = threading.Thread(target=run, name="tensorviz-compile", daemon=True)
        self.thread.start()

    def wait(self, seconds: float) -> dict[str, Any]:
        """``{"status": "compiled", "compiled": <jax Compiled>, "seconds": s}`` or a record of
        why not (``timeout`` / ``failed``); ``seconds`` counts from the start."""
        self.thread.join(max(0.0, seconds - (time.perf_counter() - self.start)))
        took = round(time.perf_counter() - self.start, 3)
        if self.thread.is_alive():
            return {"status": "timeout", "seconds": took,
                    "reason": f"XLA had not finished compiling after {seconds:g} s (--compile-timeout, "
                              "limits.compile_seconds); the graph is shown without the compiled program's figures"}
        if "error" in self.box:
            exc = self.box["error"]
            return {"status": "failed", "seconds": took,
                    "reason": f"XLA could not compile the traced program: {type(exc).__name__}: {exc}"[:2000]}
        return {"status": "compiled", "compiled": self.box["compiled"], "seconds": took,
                "lower_seconds": self.box.get("lower_seconds")}


#: Seconds a test holds the compile back (a slow compile, made on a small program): read by
#: the worker, never set by TensorViz.
TEST_DELAY_ENV = "TENSORVIZ_TEST_COMPILE_DELAY_S"


def _test_delay() -> float:
    try:
        return max(0.0, min(600.0, float(os.environ.get(TEST_DELAY_ENV) or 0)))
    except ValueError:
        return 0.0


#: XLA options for a compile that is read, never run, on the CPU: the figures read (the HLO's
#: collectives, ``cost_analysis``, ``memory_analysis``) come from the HLO passes, before LLVM
#: makes machine code, so LLVM's optimisation is skipped. Measured on a 20-layer Llama-3-70B-
#: width Gemma over 64 simulated devices: 7.8 s of compile CPU time without, 4.1 s with,
#: the same FLOPs, memory and collectives.
CPU_READ_ONLY_OPTIONS = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


def device_platform(jax: Any, mesh: Any) -> str | None:
    """The platform (``cpu``, ``gpu``, ``tpu``) of the devices the program is compiled for."""
    try:
        devices = mesh.devices.flat if mesh is not None else jax.devices()
        return str(next(iter(devices)).platform)
    except Exception:
        return None


def compiler_options(jax: Any, mesh: Any) -> dict[str, Any] | None:
    """The compile's options: :data:`CPU_READ_ONLY_OPTIONS` when it is for CPU devices (the
    simulated ones), else XLA's defaults."""
    return dict(CPU_READ_ONLY_OPTIONS) if device_platform(jax, mesh) == "cpu" else None


def compile_program(jax: Any, closed: Any, args: list, mesh: Any, seconds: float) -> dict[str, Any]:
    """Lower and compile ``closed`` (a closed jaxpr) over ``args`` (``ShapeDtypeStruct`` per
    input), under ``mesh`` when there is one, within ``seconds`` (:class:`_Compile`)."""
    return _Compile(jax, closed, args, mesh).wait(seconds)


def keep_results(closed: Any) -> tuple[Any, int]:
    """``closed`` with every top-level result nothing uses made an output too, and how many.

    The graph shows what a traced step computes even where the trace returns less: an NNX
    train step updates the model and the optimizer in place, so the updated state is a
    result of the jitted call that no later equation reads and the traced function does
    not return. Compiled as it is, XLA would drop the whole backward pass and update; kept
    as outputs, it compiles what the graph draws (as ``nnx.jit`` does, which returns them)."""
    from jax.extend.core import ClosedJaxpr

    jaxpr = closed.jaxpr
    used = {id(v) for eqn in jaxpr.eqns for v in eqn.invars} | {id(v) for v in jaxpr.outvars}
    extra, seen = [], set()
    for eqn in jaxpr.eqns:
        for v in eqn.outvars:
            if type(v).__name__ != "DropVar" and id(v) not in used and id(v) not in seen:
                seen.add(id(v))
                extra.append(v)
    if not extra:
        return closed, 0
    return ClosedJaxpr(jaxpr.replace(outvars=list(jaxpr.outvars) + extra), closed.consts), len(extra)


def abstract_inputs(jax: Any, closed: Any, leaves: list, records: list | None, mesh: Any) -> list:
    """One ``ShapeDtypeStruct`` per input of ``closed``: its shape and dtype, placed where the
    capture placed it (the leaf's own ``NamedSharding``, else its sharding record on
    ``mesh``; replicated on ``mesh`` when nothing says; unplaced without a mesh)."""
    NamedSharding, P = jax.sharding.NamedSharding, jax.sharding.PartitionSpec
    out = []
    for i, aval in enumerate(closed.in_avals):
        leaf = leaves[i] if i < len(leaves) else None
        try:
            sh = getattr(leaf, "sharding", None)
        except Exception:
            sh = None
        if not isinstance(sh, NamedSharding) or type(getattr(sh, "mesh", None)).__name__ == "AbstractMesh":
            sh = None
            rec = records[i] if records is not None and i < len(records) else None
            if mesh is not None:
                spec = rec.get("spec") if isinstance(rec, dict) else None
                dims = [None if not s else (s[0] if len(s) == 1 else tuple(s)) for s in (spec or [])]
                aval_spec = getattr(getattr(aval, "sharding", None), "spec", None)
                if not dims and aval_spec is not None:
                    dims = list(aval_spec)
                sh = NamedSharding(mesh, P(*dims))
        out.append(jax.ShapeDtypeStruct(aval.shape, aval.dtype, sharding=sh))
    return out


# --------------------------------------------------------------------------- reading


def read_compiled(compiled: Any, per_device: bool = False) -> dict[str, Any]:
    """The figures of a compiled program: ``cost`` (per device), ``memory`` (per device, with
    its ``peak``), ``collectives`` (parsed from the HLO text), ``partitions``; with
    ``per_device``, ``instructions`` (every instruction's per-device shape, for
    :mod:`capture.jax.per_device`)."""
    took: dict[str, float] = {}
    t = time.perf_counter()
    text = compiled.as_text() or ""
    took["text"] = time.perf_counter() - t
    out: dict[str, Any] = {"cost": _cost(compiled), "memory": _memory(compiled)}
    took["analyses"] = time.perf_counter() - t - took["text"]
    m = re.search(r"num_partitions=(\d+)", text[:text.find("\n") + 1 or 4000] or text[:4000])
    out["partitions"] = int(m.group(1)) if m else 1
    frames = frames_table(text)
    out["collectives"] = parse_collectives(text, frames)
    took["parse"] = time.perf_counter() - t - took["text"] - took["analyses"]
    if per_device:  # the shape each device computes per instruction (capture.jax.per_device)
        out["instructions"] = instructions(text, frames)
        took["instructions"] = time.perf_counter() - t - took["text"] - took["analyses"] - took["parse"]
        out["xla_flops"] = _instruction_flops(compiled, text, frames)
        took["xla_flops"] = time.perf_counter() - t - sum(took.values())
    out["read_parts"] = {k: round(v, 3) for k, v in took.items()}
    return out


def _instruction_flops(compiled: Any, text: str, frames: Frames) -> dict[str, Any] | None:
    """XLA's own FLOPs per instruction (:mod:`capture.jax.xla_flops`); None where the platform's
    cost analysis cannot be reached."""
    from .xla_flops import instruction_flops, platform_cost

    try:
        cost = platform_cost(compiled.runtime_executable().client)
    except Exception:
        return None
    return instruction_flops(text, cost, frames, seconds=XLA_FLOPS_SECONDS)


def _cost(compiled: Any) -> dict[str, float] | None:
    try:
        cost = compiled.cost_analysis()
    except Exception:
        return None
    if isinstance(cost, (list, tuple)):
        cost = cost[0] if cost else None
    if not isinstance(cost, dict):
        return None
    out = {}
    for key, name in (("flops", "flops"), ("bytes accessed", "bytes_accessed"), ("transcendentals", "transcendentals")):
        v = cost.get(key)
        if isinstance(v, (int, float)) and math.isfinite(v) and v >= 0:
            out[name] = float(v)
    return out or None


def _memory(compiled: Any) -> dict[str, int] | None:
    try:
        mem = compiled.memory_analysis()
    except Exception:
        return None
    if mem is None:
        return None
    out = {}
    for key, name in (("argument_size_in_bytes", "arguments"), ("output_size_in_bytes", "outputs"),
                      ("temp_size_in_bytes", "temporaries"), ("alias_size_in_bytes", "aliases"),
                      ("generated_code_size_in_bytes", "generated_code")):
        v = getattr(mem, key, None)
        if isinstance(v, int) and v >= 0:
            out[name] = v
    if not {"arguments", "outputs", "temporaries"} <= out.keys():
        return None
    out["peak"] = out["arguments"] + out["outputs"] + out["temporaries"] - out.get("aliases", 0)
    return out


def parse_collectives(text: str, frames: Frames | None = None) -> list[dict[str, Any]]:
    """Every collective instruction of an HLO module's text (a ``-done`` is the same
    collective as its ``-start``: not counted again)."""
    frames = frames_table(text) if frames is None else frames
    out: list[dict[str, Any]] = []
    for line in text.splitlines():
        if "all-" not in line and "collective-" not in line and "reduce-scatter" not in line:
            continue  # most lines: no collective (a substring test is far cheaper than the pattern)
        m = _INSTR.match(line)
        if m is None:
            continue
        op = m.group("op")
        record: dict[str, Any] = {"kind": op, "async": bool(m.group("start")), "hlo": m.group("name")[:MAX_TEXT]}
        groups = _groups(line, op)
        if groups is not None:
            record["group_size"] = len(groups[0]) if groups else 1
            record["groups"] = groups
        result_bytes = _result_bytes(m.group("type"), op, bool(m.group("start")))
        record["result_bytes"] = result_bytes
        name = OP_NAME.search(line)
        if name:
            record["op_name"] = name.group(1)[:1000]
        fid = FRAME_ID.search(line)
        src = SOURCE.search(line)
        if fid and int(fid.group(1)) in frames:
            record["frames"] = frames[int(fid.group(1))]
        elif src:
            record["frames"] = [(src.group(1), int(src.group(2)))]
        out.append(record)
        if len(out) >= MAX_COLLECTIVES:
            break
    return out


# --------------------------------------------------------------------------- every instruction's shape

#: The most instructions read for per-device shapes (capture.jax.per_device).
MAX_INSTRUCTIONS = 400_000
#: How long costing the compiled instructions one by one may take (capture.jax.xla_flops):
#: past it the per-device FLOPs are TensorViz's own rule at the compiled shapes.
XLA_FLOPS_SECONDS = 10.0
_ANY_LINE = re.compile(LINE_HEAD + r"(?P<dtype>" + DTYPE + r")"
                       r"\[(?P<dims>[\d,]*)\](?:\{[^}]*\})?\s+(?P<op>[\w\-]+)\((?P<args>[^)]*)\)")
_CONTRACT = re.compile(r"lhs_contracting_dims=\{([\d,]*)\}")
# Instructions whose shape says nothing of an equation's result (structure and bookkeeping).
# A collective's result is the value after communication (a gathered operand), not the shape
# the equation's work was done at.
_NOT_WORK = frozenset({"parameter", "constant", "get-tuple-element", "tuple", "while", "conditional", "call",
                       "after-all", "partition-id", "replica-id", "iota", "all-gather", "all-gather-start",
                       "all-gather-done", "all-reduce", "all-reduce-start", "all-reduce-done", "reduce-scatter",
                       "all-to-all", "collective-permute", "collective-permute-start", "collective-permute-done",
                       "collective-broadcast", "ragged-all-to-all", "async-start", "async-done"})


def instructions(text: str, frames: Frames) -> list[dict[str, Any]]:
    """Every instruction of the compiled module with an array result and an ``op_name``:
    ``{"shape", "op", "op_name", "frames", "k"}`` (``k``: a dot's contracted elements per
    device, from its left operand's shape: instruction names are unique in a module)."""
    out: list[dict[str, Any]] = []
    dims_of: dict[str, list[int]] = {}
    dots: list[tuple[dict[str, Any], str, list[int]]] = []
    for line in text.splitlines():
        m = _ANY_LINE.match(line)
        if m is None:
            continue
        shape = dims(m.group("dims"))
        dims_of[m.group("name")] = shape
        if m.group("op") in _NOT_WORK or "op_name=" not in line or len(out) >= MAX_INSTRUCTIONS:
            continue
        meta = metadata(line)
        if meta is None:
            continue
        rec: dict[str, Any] = {"shape": shape, "op": m.group("op"), "op_name": meta[0]}
        if meta[1] in frames:
            rec["frames"] = frames[meta[1]]
        if m.group("op") == "dot":
            contract = _CONTRACT.search(line)
            lhs = operand_ref(m.group("args").split(",")[0])
            if contract and lhs:
                dots.append((rec, lhs, dims(contract.group(1))))
        out.append(rec)
    for rec, lhs, axes in dots:
        lhs_shape = dims_of.get(lhs)
        if lhs_shape is not None and all(d < len(lhs_shape) for d in axes):
            rec["k"] = math.prod(lhs_shape[d] for d in axes)
    return out


def _groups(line: str, op: str) -> list[list[int]] | None:
    if op == "collective-permute":
        m = _PAIRS.search(line)
        if not m:
            return None
        pairs = [[int(x) for x in p.split(",")] for p in re.findall(r"\{(\d+,\d+)\}", m.group(1))]
        return pairs or None
    m = _GROUPS.search(line)
    if not m:
        return None
    text = m.group(1)
    if text.startswith("{"):
        groups = [[int(x) for x in g.split(",") if x] for g in re.findall(r"\{([\d,]*)\}", text[1:-1])]
        return [g for g in groups if g] or None
    if text.startswith("mesh"):
        return _mesh_groups(text)
    return _iota_groups(text)


def _mesh_groups(text: str) -> list[list[int]] | None:
    """``mesh['axis_0'=4,'axis_1'=2] {'axis_0'}``: the devices (row-major over XLA's mesh)
    that differ only along the named axes form one group."""
    import numpy as np

    m = re.match(r"mesh\[([^\]]*)\]\s*\{([^}]*)\}", text)
    if not m:
        return None
    dims = re.findall(r"'([^']*)'\s*=\s*(\d+)", m.group(1))
    chosen = set(re.findall(r"'([^']*)'", m.group(2)))
    if not dims or not chosen <= {n for n, _ in dims}:
        return None
    sizes = [int(s) for _, s in dims]
    a = np.arange(math.prod(sizes)).reshape(sizes)
    inner = [i for i, (n, _) in enumerate(dims) if n in chosen]
    outer = [i for i in range(len(dims)) if i not in inner]
    a = a.transpose(outer + inner)
    size = math.prod(sizes[i] for i in inner)
    return a.reshape(-1, size).tolist()


def _iota_groups(text: str) -> list[list[int]] | None:
    """``[G,S]<=[d0,d1…]T(p…)``: XLA's iota replica groups, expanded."""
    import numpy as np

    m = re.match(r"\[([\d,]+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?", text)
    if not m:
        return None
    shape = [int(x) for x in m.group(1).split(",")]
    dims = [int(x) for x in m.group(2).split(",")]
    a = np.arange(math.prod(dims)).reshape(dims)
    if m.group(3):
        a = a.transpose([int(x) for x in m.group(3).split(",")])
    if len(shape) != 2 or a.size != shape[0] * shape[1]:
        return None
    return a.reshape(shape).tolist()


def _arrays(type_text: str) -> list[int]:
    """The bytes of each array of an HLO result type (a tuple's elements in order)."""
    out = []
    for dtype, shape in _ARRAY.findall(type_text):
        bits = dtype_bits(_HLO_DTYPES.get(dtype, dtype))
        if bits is None:
            continue
        n = math.prod(dims(shape))
        out.append((n * bits + 7) // 8)
    return out


def _result_bytes(type_text: str, op: str, start: bool) -> int | None:
    sizes = _arrays(type_text)
    if not sizes:
        return None
    if start and op in ("all-gather", "collective-permute", "all-to-all", "reduce-scatter") and len(sizes) >= 2:
        # an async start's result holds (operands…, results…): the results are the second half
        half = len(sizes) // 2
        return sum(sizes[half:])
    return sum(sizes)


# --------------------------------------------------------------------------- attribution


class Attributor:
    """Maps compiled collectives onto the nodes of the equations they came from.

    ``nodes`` and ``eqns`` are aligned (``eqns[i]`` made ``nodes[i]``)."""

    def __init__(self, nodes: Any, eqns: list, groups: Any = (), sources: tuple[Any, str] | None = None) -> None:
        self.nodes = nodes
        self.eqns = eqns
        self.groups = groups
        # ``(capture frames, workspace)``: a node's source line from its recorded frame (a
        # traceback's frames cost most of the attribution on a large program); None: tracebacks
        self.sources = sources
        self._paths: dict[int, str] = {}
        self._by_op: dict[str, list[int]] = {}
        for i in range(min(len(nodes), len(eqns))):
            self._by_op.setdefault(nodes[i].op, []).append(i)
        # an equation's name stack and source lines are read when a collective asks for them
        # (a traceback's frames are costly, and a 70B program has 10k equations)
        self._raw: dict[int, tuple[str, list[tuple[str, int]]]] = {}
        self._full: dict[int, tuple[str, list[tuple[str, int]]]] = {}
        self._lines: dict[tuple[str, int], list[int]] | None = None
        self._op_lines: dict[str, dict[tuple[str, int], list[int]]] = {}

    def info(self, i: int, depth: int = 0) -> tuple[str, list[tuple[str, int]]]:
        """Node ``i``'s name stack (a body's: its boundary's before its own) and source lines."""
        got = self._full.get(i)
        if got is None:
            stack, lines = self._raw_info(i)
            outer = self._boundary_stack(i, depth)
            got = self._full[i] = ((f"{outer}/{stack}" if stack else outer) if outer else stack, lines)
        return got

    def _raw_info(self, i: int) -> tuple[str, list[tuple[str, int]]]:
        got = self._raw.get(i)
        if got is None:
            line = self._node_line(i) if self.sources is not None else None
            if line is not None:
                si = getattr(self.eqns[i], "source_info", None)
                got = (str(getattr(si, "name_stack", "") or ""), [line])
            else:
                got = self._eqn_info(self.eqns[i])
            self._raw[i] = got
        return got

    def _node_line(self, i: int) -> tuple[str, int] | None:
        """Node ``i``'s recorded frame as ``(absolute path, line)``."""
        assert self.sources is not None
        frames, workspace = self.sources
        k = self.nodes[i].frame
        if type(k) is not int or not 0 <= k < len(frames):
            return None
        path = self._paths.get(k)
        if path is None:
            f = frames[k]
            path = self._paths[k] = os.path.realpath(f.file if f.library else os.path.join(workspace, f.file))
        return path, frames[k].line

    def by_line(self, key: tuple[str, int]) -> list[int]:
        """The nodes whose innermost user line is ``key`` (built on first use: a fallback)."""
        if self._lines is None:
            self._lines = {}
            for i in range(min(len(self.nodes), len(self.eqns))):
                for k in self._raw_info(i)[1][:1]:
                    self._lines.setdefault(k, []).append(i)
        return self._lines.get(key, [])

    def _boundary_stack(self, i: int, depth: int = 0) -> str:
        """The name stack of the control-flow boundary whose body holds node ``i`` (with its
        own boundary's, for a body inside a body); empty outside bodies."""
        g = self.nodes[i].group
        hops = 0
        while g is not None and hops < 1000 and g < len(self.groups):
            grp = self.groups[g]
            node = grp.attrs.get("node") if grp.kind == "body" and isinstance(grp.attrs, dict) else None
            if type(node) is int and 0 <= node < len(self.eqns) and depth < 16:
                return self.info(node, depth + 1)[0]
            g = grp.parent
            hops += 1
        return ""

    @staticmethod
    def _eqn_info(eqn: Any) -> tuple[str, list[tuple[str, int]]]:
        si = getattr(eqn, "source_info", None)
        stack = str(getattr(si, "name_stack", "") or "")
        lines: list[tuple[str, int]] = []
        tb = getattr(si, "traceback", None)
        try:
            frames = tb.frames if tb is not None else []
        except Exception:
            frames = []
        for f in frames:
            name = getattr(f, "file_name", "") or ""
            if "/jax/_src/" in name or "/jax/" in name and "site-packages/jax/" in name:
                continue
            lines.append((name, int(getattr(f, "line_num", 0) or 0)))
            if len(lines) >= 16:
                break
        return stack, lines

    def attribute(self, record: dict[str, Any]) -> list[tuple[int, str]]:
        """``[(node id, how)]`` for one collective: one per equation its ``op_name`` names
        (XLA's combiner merges several into one, ``prefix/(a:b)``); empty when none maps."""
        frames = [tuple(f) for f in record.get("frames") or []]
        out: list[tuple[int, str]] = []
        for name in alternatives(record.get("op_name") or ""):
            got = self._one(name, frames)
            if got is not None and all(got[0] != i for i, _ in out):
                out.append(got)
        if not out and frames:
            for key in frames:
                ids = self.by_line(key)
                if ids:
                    return [(ids[0], "line")]
        return out

    def _one(self, name: str, frames: list[tuple[str, int]]) -> tuple[int, str] | None:
        parts = [p for p in name.split("/") if p]
        if not parts:
            return None
        prim, path = parts[-1], parts[1:-1]  # the first part is the compiled function's own jit(...)
        best: tuple[int, int, str] | None = None
        for i in self._candidates(prim, frames):
            score, why = self._score(i, prim, path, frames)
            if best is None or score > best[0]:
                best = (score, i, why)
        return (best[1], best[2]) if best is not None else None

    def _candidates(self, prim: str, frames: list[tuple[str, int]]) -> list[int]:
        ids = list(self._by_op.get(prim, ()))
        if ids and frames:  # those of the primitive on one of the collective's lines, when some are
            index = self._op_lines.get(prim)
            if index is None:
                index = self._op_lines[prim] = {}
                for i in ids:
                    for key in self.info(i)[1][:3]:
                        index.setdefault(key, []).append(i)
            near = list(dict.fromkeys(i for key in frames for i in index.get(key, ())))
            if near:
                return near[:5000]
        if not ids:
            for key in frames[:1]:
                ids.extend(self.by_line(key))
        return ids[:5000]

    def _score(self, i: int, prim: str, path: list[str], frames: list[tuple[str, int]]) -> tuple[int, str]:
        stack, lines = self.info(i)
        score, why = 0, []
        if self.nodes[i].op == prim:
            score += 8
            why.append("primitive")
        if frames and lines and frames[0] == lines[0]:
            score += 4
            why.append("line")
        elif frames and any(f in lines for f in frames):
            score += 2
            why.append("line")
        own = [p for p in stack.split("/") if p]
        k, at = 0, 0
        for part in own:  # the node's name stack, in order, within the compiled op's path
            try:
                at = path.index(part, at) + 1
            except ValueError:
                break
            k += 1
        if own and k == len(own):
            score += 1 + k
            why.append("name stack")
        elif not own and not any(p.startswith(("jvp(", "transpose(", "vmap(")) for p in path):
            score += 1
        return score, "+".join(why) or "primitive"


def alternatives(op_name: str) -> list[str]:
    """The equations' names an ``op_name`` holds: ``a;b`` (fused), ``prefix/(a:b)`` (XLA's
    combiner merged collectives of several equations into one)."""
    out: list[str] = []
    for name in op_name.split(";"):
        k = name.find("/(")
        if k >= 0 and name.endswith(")"):
            prefix, inner, depth, cur = name[:k], name[k + 2:-1], 0, ""
            pieces = []
            for ch in inner:
                if ch == ":" and depth == 0:
                    pieces.append(cur)
                    cur = ""
                    continue
                depth += (ch == "(") - (ch == ")")
                cur += ch
            pieces.append(cur)
            out.extend(f"{prefix}/{p}" for p in pieces if p)
        elif name:
            out.append(name)
    return out


def attribute_all(collectives: list[dict[str, Any]], nodes: Any, eqns: list, groups: Any = (),
                  sources: tuple[Any, str] | None = None) -> None:
    """Set ``node`` (an id or None), ``nodes`` (every node of a combined collective) and
    ``how`` on each collective."""
    if not collectives:
        return
    att = Attributor(nodes, eqns, groups, sources)
    real: dict[str, str] = {}
    for c in collectives:  # XLA's paths as the nodes' are: resolved
        if sources is not None and c.get("frames"):
            c["frames"] = [(real.setdefault(f, os.path.realpath(f)), n) for f, n in c["frames"]]
    for c in collectives:
        got = att.attribute(c)
        c["node"] = got[0][0] if got else None
        if len(got) > 1:
            c["nodes"] = [i for i, _ in got]
        if got:
            c["how"] = got[0][1]


# --------------------------------------------------------------------------- the record


def build_record(read: dict[str, Any], seconds: float, mesh: Any, nodes: Any, eqns: list,
                 groups: Any = (), sources: tuple[Any, str] | None = None) -> dict[str, Any]:
    """``Capture.compiled`` from :func:`read_compiled`'s figures."""
    names = [str(n) for n in getattr(mesh, "axis_names", ())] if mesh is not None else []
    sizes = [int(mesh.shape[n]) for n in getattr(mesh, "axis_names", ())] if mesh is not None else []
    collectives = read["collectives"]
    t = time.perf_counter()
    attribute_all(collectives, nodes, eqns, groups, sources)
    parts = dict(read.get("read_parts") or {})
    parts["attribute"] = round(time.perf_counter() - t, 3)
    out_list = []
    for c in collectives:
        groups = c.pop("groups", None)
        size = c.get("group_size") or (len(groups[0]) if groups else 1)
        if c["kind"] == "collective-permute":
            size = 2 if groups else 1
        axes = mesh_axes(groups, c["kind"], names, sizes)
        operand = operand_bytes(c["kind"], c.get("result_bytes"), size)
        sent = collective_record(_AS_PRIMITIVE[c["kind"]], axes, size, operand)["bytes_sent_per_device"]
        frames = c.pop("frames", None) or []
        item: dict[str, Any] = {
            "kind": c["kind"], "async": c["async"], "axes": axes, "devices": size,
            "groups": _groups_text(groups), "operand_bytes": operand, "bytes_sent_per_device": sent,
            "node": c.get("node"), "op_name": (c.get("op_name") or "")[:MAX_TEXT], "hlo": c["hlo"],
        }
        if c.get("how"):
            item["how"] = c["how"]
        if c.get("nodes"):
            item["nodes"] = c["nodes"][:64]
        if frames:
            item["source"] = f"{frames[0][0]}:{frames[0][1]}"[-MAX_TEXT:]
        out_list.append(item)
    attributed = sum(1 for c in out_list if c["node"] is not None)
    record: dict[str, Any] = {
        "status": "compiled", "seconds": seconds, "scope": "per device", "devices": read.get("partitions", 1),
        "collectives": out_list, "attributed": attributed, "unattributed": len(out_list) - attributed,
        "note": NOTE, "read_parts": parts,
    }
    if read.get("cost"):
        record["cost"] = read["cost"]
    if read.get("memory"):
        record["memory"] = read["memory"]
    return record


def _groups_text(groups: list[list[int]] | None) -> str:
    if not groups:
        return ""
    text = ",".join("{" + ",".join(map(str, g)) + "}" for g in groups)
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


class Compilation:
    """One capture's compile: started before the graph is converted (:func:`start`), read
    and attributed once the nodes exist (:meth:`finish`). Never raises for the program's
    sake: a compile that fails or runs out of time is a record that says so."""

    def __init__(self, jax: Any, closed: Any, leaves: list, records: list | None, mesh: Any, seconds: float) -> None:
        self.mesh, self.seconds, self.kept = mesh, seconds, 0
        #: every compiled instruction's per-device shape, once finished (capture.jax.per_device)
        self.instructions: list[dict[str, Any]] | None = None
        #: XLA's own FLOPs per compiled instruction, once finished (capture.jax.xla_flops)
        self.xla_flops: dict[str, Any] | None = None
        self.early: dict[str, Any] | None = None
        self.job: _Compile | None = None
        try:
            args = abstract_inputs(jax, closed, leaves, records, mesh)
        except Exception as exc:
            self.early = {"status": "failed", "seconds": 0.0, "note": NOTE,
                          "reason": f"the inputs could not be placed for compiling: {type(exc).__name__}: {exc}"[:2000]}
            return
        try:
            closed, self.kept = keep_results(closed)
        except Exception:  # a jaxpr that cannot be rebuilt is compiled as traced
            self.kept = 0
        self.job = _Compile(jax, closed, args, mesh)

    def done(self) -> bool:
        """Whether the compile has ended (or never started): :meth:`finish` will not wait."""
        return self.job is None or not self.job.thread.is_alive()

    @property
    def devices(self) -> int:
        return int(getattr(self.mesh, "size", 1) or 1) if self.mesh is not None else 1

    def pending(self) -> dict[str, Any]:
        """The record the graph carries while XLA is still compiling it (the graph first:
        :mod:`capture.graph.later_compiled`)."""
        from ..graph.later_compiled import pending_record

        took = time.perf_counter() - self.job.start if self.job is not None else 0.0
        return pending_record(self.devices, took, self.seconds, NOTE)

    def finish(self, nodes: Any, eqns: list, groups: Any = (), sources: tuple[Any, str] | None = None,
               deadline: float | None = None) -> dict[str, Any]:
        """The compiled record: the compile awaited (within ``compile_seconds``, and before
        ``deadline``, a ``time.monotonic()`` value: the capture's own), read and attributed."""
        if self.early is not None or self.job is None:
            return self.early or skipped("not started")
        seconds = self.seconds
        if deadline is not None:
            seconds = min(seconds, time.perf_counter() - self.job.start + deadline - time.monotonic())
        got = self.job.wait(seconds)
        if got["status"] == "timeout" and seconds < self.seconds:
            got["reason"] = (f"XLA had not finished compiling after {got['seconds']:.0f} s, when the capture's deadline "
                             "was near (--timeout / captureTimeout); the graph is shown without the compiled program's "
                             "figures")
        if got["status"] != "compiled":
            got["note"] = NOTE
            got["devices"] = self.devices
            return got
        start = time.perf_counter()
        read = read_compiled(got["compiled"], per_device=True)
        self.instructions = read.pop("instructions", None)
        self.xla_flops = read.pop("xla_flops", None)
        record = build_record(read, got["seconds"], self.mesh, nodes, eqns, groups, sources)
        record["read_seconds"] = round(time.perf_counter() - start, 3)
        if self.job.platform:  # the backend whose buffer assignment memory_analysis() reports
            record["platform"] = self.job.platform
        if got.get("lower_seconds") is not None:
            record["lower_seconds"] = got["lower_seconds"]
        if self.kept:
            record["kept_results"] = self.kept
            record["kept_note"] = ("results of the traced program that it does not return (state a step updates in "
                                   "place) were compiled as outputs, so that XLA keeps the computation the graph draws")
        return record


def compile_and_read(jax: Any, closed: Any, leaves: list, records: list | None, mesh: Any, seconds: float,
                     nodes: Any, eqns: list, groups: Any = ()) -> dict[str, Any]:
    """The whole step at once: compile (bounded), read, attribute (:class:`Compilation`)."""
    return Compilation(jax, closed, leaves, records, mesh, seconds).finish(nodes, eqns, groups)


def skipped(reason: str) -> dict[str, Any]:
    return {"status": "skipped", "seconds": 0.0, "reason": reason, "note": NOTE}


def start(jax: Any, recipe: Any, limits: Any, closed: Any, leaves: list, records: list | None, mesh: Any,
          axis_env: list) -> Compilation | dict[str, Any] | None:
    """The compile one JAX capture asks for, started: a :class:`Compilation` to finish once
    the graph is converted; a record when there is nothing to compile; None when the recipe
    does not ask (:func:`wanted`). A program traced with an axis bound at size 1
    (``axis_env``: written for ``pmap``) has no devices to compile for: skipped, saying so."""
    if not wanted(recipe):
        return None
    if axis_env:
        names = ", ".join(name for name, _ in axis_env)
        return skipped(f"the program names collective axes no mesh binds ({names}); it was traced with them at size 1, "
                       "so there are no devices to compile it for")
    seconds = float(getattr(limits, "compile_seconds", 40.0) or 40.0)
    if len(leaves) != len(closed.in_avals):
        leaves = []
    return Compilation(jax, closed, leaves, records, mesh, seconds)
