"""Captures of programs split across simulated devices, run in one fresh interpreter.

JAX fixes its CPU device count when its backend starts, and Torch's fake process group
is process-wide state: a test process that has run other captures can have neither. So
the cases of a test module are captured together in a child interpreter (the framework
captures in process, in the worker's order, then ``capture.graph.device_memory`` as the
worker's result does), each written to a graph file; the tests read the files.

``python sharded_captures.py CASES.json OUT_DIR``: CASES maps a case name to
``{"framework": "jax"|"torch", "root": workspace, "table": profile table, "limits": {...}}``
(limits optional: ``capture.worker.limits.Limits.from_dict``), plus an
optional ``"extra"``: the name of a function of this module run after the captures
(its JSON result goes to ``OUT_DIR/extra.json``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def capture_all(cases: dict, out: Path, *, timeout: float = 300) -> dict[str, Path]:
    """Run every case in one child interpreter; ``{case: graph file}`` (a failed case's
    file holds its failure text instead: read it with :func:`read`)."""
    out.mkdir(parents=True, exist_ok=True)
    spec = out / "cases.json"
    spec.write_text(json.dumps(cases))
    proc = subprocess.run([sys.executable, str(Path(__file__)), str(spec), str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"the capture process failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}")
    return {name: out / f"{name}.tvg" for name in cases if name != "extra"}


def read(path: Path):
    from capture.graph import graphfile

    failed = path.with_suffix(".failed")
    if failed.exists():
        raise AssertionError(f"{path.stem}: {failed.read_text()}")
    return graphfile.read(path)


def _main(spec: str, out: str) -> int:
    sys.path[:0] = [str(ROOT), str(HERE)]
    from capture.graph import graphfile
    from capture.graph.device_memory import annotate
    from capture_workspace import run_framework

    cases = json.loads(Path(spec).read_text())
    extra = cases.pop("extra", None)
    for name, case in cases.items():
        if case["framework"] == "jax":
            from capture.jax import framework as fw
        else:
            from capture.torch import framework as fw
        try:
            from capture.worker.limits import Limits

            limits = Limits.from_dict(case["limits"]) if case.get("limits") else None
            cap, _ = run_framework(fw, Path(case["root"]), case["table"], limits)
            annotate(cap)
            graphfile.write(cap, Path(out) / f"{name}.tvg")
        except Exception:
            (Path(out) / f"{name}.failed").write_text(traceback.format_exc())
    if extra:
        result = globals()[extra["function"]](**extra.get("kwargs", {}))
        (Path(out) / "extra.json").write_text(json.dumps(result))
    return 0


def jaxpr_primitives(root: str, module: str, function: str, inputs: str, mesh: dict) -> dict:
    """The primitive sequence ``jax.make_jaxpr`` gives for ``module.function`` on the
    inputs factory's arguments, under the mesh (``jax.set_mesh``), with the calls a
    capture expands in place (jit, custom_jvp/vjp, checkpoint) expanded: what the
    capture's nodes must match, equation for equation."""
    import importlib

    import jax

    sys.path.insert(0, root)
    m = jax.make_mesh(tuple(mesh.values()), tuple(mesh), axis_types=(jax.sharding.AxisType.Auto,) * len(mesh))
    with jax.set_mesh(m):
        mod = importlib.import_module(module)
        got = getattr(mod, inputs)()
        closed = jax.make_jaxpr(getattr(mod, function))(*got["args"])
    expand = {"jit": "jaxpr", "pjit": "jaxpr", "checkpoint": "jaxpr", "remat2": "jaxpr",
              "custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr", "custom_vjp_call_jaxpr": "fun_jaxpr"}
    out: list[str] = []

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            name = eqn.primitive.name
            body = eqn.params.get(expand.get(name, ""), None)
            if body is not None:
                walk(getattr(body, "jaxpr", body))
            else:
                out.append(name)

    walk(closed.jaxpr)
    return {"primitives": out}


if __name__ == "__main__":
    code = _main(sys.argv[1], sys.argv[2])
    sys.stdout.flush()
    sys.stderr.flush()
    # As the worker ends (capture.worker.request.flush_and_exit): without finalising the
    # interpreter, where a compile past its deadline still runs on its thread.
    os._exit(code)
