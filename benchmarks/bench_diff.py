"""``tensorviz diff`` on two large captures, end to end and by phase.

    python benchmarks/bench_diff.py [--nodes 50000] [--repeat 3]

Builds a synthetic capture of ``--nodes`` nodes (tests/synthetic.py: 48 layer groups of
attention/mlp scopes) and three captures to compare it with:
  * identical: the same capture written again;
  * edited: 10 ops inserted at spread-out places, 20 ops replaced by another op, 20 outputs
    with a changed shape and one extra layer group of 200 ops: an edit as a person makes it;
  * reshuffled: the same size with another seed, every group's op sequence different (the
    sequence alignment's worst case here).
For each it measures, best of ``--repeat``: the whole command as a user runs it (a new
``python -m tensorviz_lsp diff A B --json`` process: start-up, imports, both file reads,
the diff, the JSON), wall-clock and CPU time, and, in process, reading the two files,
the diff itself, and the JSON. Target: the whole command under 2 s for two 50,000-node captures. Prints figures;
asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "tests"))  # synthetic.py: test-only, not shipped

from capture.graph import graphfile  # noqa: E402
from capture.graph.diff import diff, to_json  # noqa: E402
from capture.graph.model import Capture, Group, Node, Operand, Value  # noqa: E402
from synthetic import synthetic_capture  # noqa: E402


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def edited(base: Capture, seed: int = 1) -> Capture:
    """``base`` after a local edit: inserted ops, replaced ops, changed shapes, a new layer."""
    rng = random.Random(seed)
    n = len(base.nodes)
    values = [Value(v.id, list(v.shape), v.dtype) for v in base.values]
    groups = [Group(g.id, g.kind, g.name, g.parent, dict(g.attrs)) for g in base.groups]
    inserts = set(rng.sample(range(1, n), 10))
    replaces = set(rng.sample(range(n), 20)) - inserts
    reshapes = set(rng.sample(range(n), 20)) - inserts - replaces
    nodes: list[Node] = []

    def add(op, inputs, outputs, params, group, frame, opaque=False):
        nodes.append(Node(len(nodes), op, inputs, outputs, params, group, frame, opaque))

    for i, nd in enumerate(base.nodes):
        if i in inserts:  # a new op reading the previous op's output
            values.append(Value(len(values), [128, 128], "float32"))
            add("tanh", [Operand(0, nd.inputs[0].value if nd.inputs and nd.inputs[0].value is not None else 0)],
                [len(values) - 1], {}, nd.group, nd.frame)
        op = "sin" if i in replaces else nd.op
        if i in reshapes:
            for v in nd.outputs:
                values[v] = Value(v, [64, 256], values[v].dtype)
        add(op, list(nd.inputs), list(nd.outputs), dict(nd.params), nd.group, nd.frame, nd.opaque)
    # One more layer at the end, under the jit group.
    layer = Group(len(groups), "scope", f"layer_{len(groups)}", 0)
    groups.append(layer)
    last = nodes[-1].outputs[0]
    for k in range(200):
        values.append(Value(len(values), [128, 128], "float32"))
        add(("add", "mul", "exp", "dot_general")[k % 4], [Operand(0, last)], [len(values) - 1], {}, layer.id, 0)
        last = len(values) - 1
    return Capture(backend=base.backend, framework=base.framework, framework_version=base.framework_version,
                   coverage=base.coverage, values=values, nodes=nodes, groups=groups, frames=base.frames,
                   inputs=base.inputs, outputs={"value": last}, sources=base.sources, recipe=base.recipe,
                   meta=dict(base.meta))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    base = synthetic_capture(args.nodes, opaque_every=97)
    pairs = {
        "identical": synthetic_capture(args.nodes, opaque_every=97),
        "edited": edited(base),
        "reshuffled": synthetic_capture(args.nodes, opaque_every=89, seed=7),
    }
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    print(f"tensorviz diff, A: {len(base.nodes):,} nodes, {len(base.groups)} groups")
    print(f"{'B':<11} {'B nodes':>8} {'changes':>22} {'command':>9} {'cmd CPU':>8} {'read A+B':>9} {'diff':>7} {'json':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        a_path = Path(tmp) / "a.tvg"
        graphfile.write(base, a_path)
        for name, other in pairs.items():
            b_path = Path(tmp) / f"{name}.tvg"
            graphfile.write(other, b_path)

            def command() -> None:
                done = subprocess.run([sys.executable, "-m", "tensorviz_lsp", "diff", str(a_path), str(b_path), "--json"],
                                      cwd=tmp, env=env, capture_output=True, timeout=600)
                if done.returncode not in (0, 1):
                    raise SystemExit(done.stderr.decode())

            t_cmd = best(command, args.repeat)
            cpu = []
            for _ in range(args.repeat):
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                command()
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            t_cpu = min(cpu)
            t_read = best(lambda: (graphfile.read(a_path), graphfile.read(b_path)), args.repeat)
            a, b = graphfile.read(a_path), graphfile.read(b_path)
            t_diff = best(lambda: diff(a, b), args.repeat)
            d = diff(a, b)
            t_json = best(lambda: json.dumps(to_json(d)), args.repeat)
            c = d.counts()
            changes = f"{c['groups_added']}+g {c['nodes_added']}+ {c['nodes_removed']}- {c['nodes_changed']}~"
            print(f"{name:<11} {len(other.nodes):>8,} {changes:>22} {t_cmd:>8.2f}s {t_cpu:>7.2f}s {t_read:>8.2f}s {t_diff:>6.2f}s {t_json:>6.2f}s")
    print(f"target: the whole command under 2 s for two 50,000-node captures "
          f"(load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs: "
          "on a busy machine the command's CPU time is the steadier figure)")


if __name__ == "__main__":
    main()
