"""Captures of Python loops over steps, built directly (no framework): what an eager run
of mamba's selective scan or an RNN cell called per time step records, unrolled.

``loop_capture`` builds one module (``SelectiveScan`` at ``model.py``) whose forward
makes its sequences, then runs ``steps`` iterations of ``body`` (ops with source lines,
each reading the one before in the step, the first reading the carried value), then
stacks what the steps returned. Used by the fold tests (tests/viewer/test_loop_folding.py)
and the benchmark (benchmarks/bench_loop_folding.py)."""

from __future__ import annotations

from capture.graph.model import Capture, Coverage, Frame, Group, Node, Operand, Value

#: mamba's selective scan, one step: ``x = deltaA[:, i] * x + deltaB_u[:, i]``,
#: ``y = einsum(x, C[:, i, :])`` (op, line, reads: "seq" a per-step slice source,
#: "carry" the carried value, "prev" the op before).
MAMBA_STEP = [("aten::select.int", 21, "seqA"), ("aten::mul.Tensor", 21, "carry"), ("aten::select.int", 21, "seqB"),
              ("aten::add.Tensor", 21, "prev"), ("aten::select.int", 22, "seqC"), ("aten::bmm", 22, "prev")]


class _Builder:
    def __init__(self) -> None:
        self.values: list[Value] = []
        self.nodes: list[Node] = []
        self.groups: list[Group] = []
        self.frames: list[Frame] = []
        self._frame_of: dict[tuple[str, int], int] = {}

    def value(self, shape: list[int]) -> int:
        self.values.append(Value(len(self.values), list(shape), "float32"))
        return len(self.values) - 1

    def frame(self, file: str, line: int) -> int:
        key = (file, line)
        if key not in self._frame_of:
            self._frame_of[key] = len(self.frames)
            self.frames.append(Frame(file, line, 8, "forward"))
        return self._frame_of[key]

    def node(self, op: str, reads: list[int], group: int | None, line: int | None, shape: list[int] | None = None,
             file: str = "model.py") -> int:
        out = self.value(shape or [2, 8, 4])
        frame = self.frame(file, line) if line is not None else None
        self.nodes.append(Node(len(self.nodes), op, [Operand(k, v) for k, v in enumerate(reads)], [out], {},
                               group, frame))
        return out

    def group(self, kind: str, name: str, parent: int | None, **attrs) -> int:
        self.groups.append(Group(len(self.groups), kind, name, parent, attrs))
        return len(self.groups) - 1

    def capture(self, inputs: list[int], outputs: list[int]) -> Capture:
        return Capture(
            backend="torch_eager", framework="torch", framework_version="0.0-synthetic",
            coverage=Coverage(scope="eager_forward"), values=self.values, nodes=self.nodes, groups=self.groups,
            frames=self.frames, inputs={"tuple": [{"value": v} for v in inputs]},
            outputs={"tuple": [{"value": v} for v in outputs]},
        )


def loop_capture(steps: int, body: list[tuple[str, int, str]] | None = None, *, carry: bool = True,
                 inner: int = 0, file: str = "model.py") -> Capture:
    """One module running ``steps`` iterations of ``body`` (default :data:`MAMBA_STEP`).
    ``carry=False``: each step starts from the same value (a map, no loop-carried value).
    ``inner``: each step also runs an inner loop of that many (mul, add) iterations on
    its own carried value (nested loops)."""
    body = body or MAMBA_STEP
    b = _Builder()
    model = b.group("module", "SelectiveScan", None, path="", **{"class": "SelectiveScan"})
    u = b.value([2, steps, 8])
    seqs = {name: b.node("aten::exp", [u], model, 16, [2, steps, 8, 4], file) for name in ("seqA", "seqB", "seqC")}
    init = b.node("aten::zeros", [], model, 18, file=file)
    x, ys = init, []
    for _ in range(steps):
        prev = None
        start = x if carry else init
        for op, line, reads in body:
            if reads.startswith("seq"):
                args = [seqs[reads]]
            elif reads == "carry":
                args = [prev, start] if prev is not None else [start, start]
            else:
                args = [prev, prev] if prev is not None else [start]
            prev = b.node(op, args, model, line, file=file)
        h = prev
        for _ in range(inner):
            h = b.node("aten::mul.Tensor", [h, h], model, 30, file=file)
            h = b.node("aten::add.Tensor", [h, h], model, 31, file=file)
        assert prev is not None
        x = prev if inner == 0 else h
        ys.append(x)
    out = b.node("aten::stack", ys, model, 24, [2, steps, 8, 4], file)
    return b.capture([u], [out])


def noise_capture(n: int, period: int = 500) -> Capture:
    """A worst case for the search: ``n`` ops in one group whose lines almost repeat with
    a long period (the last op of each stretch is on a line of its own), each reading
    the op before: candidate periods everywhere, no run."""
    b = _Builder()
    model = b.group("module", "Noise", None, path="", **{"class": "Noise"})
    v = b.value([4])
    for i in range(n):
        line = 100 + (i % period) if i % period != period - 1 else 10_000 + i
        v = b.node("aten::add.Tensor", [v, v], model, line, [4])
    return b.capture([0], [v])
