"""Captures on a machine whose accelerator another program holds (issue 47), timed.

    python benchmarks/bench_busy_accelerator.py [--old ROOT] [--python PATH] [--json FILE]

Meant for a TPU VM (one chip, which one process at a time can open); runs anywhere, and
on a machine without an accelerator says so and measures the captures alone. A small
Flax Linen model (plain JAX where Flax is missing) is captured:

* ``cli, chip held``: ``tensorviz capture`` (``python -m tensorviz_lsp capture``) of a
  ``device = "cpu"`` profile while another process holds the chip (a Python that opened
  it with ``jax.devices()`` and sleeps), with this checkout, and with ``--old ROOT``
  (another checkout, e.g. the code before the fix) for comparison;
* ``cli, chip free``: the same with nothing holding the chip;
* ``program during capture``: a capture starts, and 1.5 s later (the capture still
  running) another program opens the chip: whether it could, and how long it took;
* ``lsp``: the language server over stdio (``tensorviz.captureProfile`` twice: the
  folder's warm worker starts, then serves), with the chip held;
* ``device tpu``: a ``device = "tpu"`` profile with a 1-device mesh, chip free (captured
  on the TPU) and chip held (refused: the message).

``--python``: the interpreter the captures run in (default: this one). Prints figures;
asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

FLAX_MODEL = """
import flax.linen as nn


class Net(nn.Module):
    width: int = 256

    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Dense(self.width)(x))
        x = nn.relu(nn.Dense(self.width)(x))
        return nn.Dense(10)(x)
"""

JAX_MODEL = """
import jax
import jax.numpy as jnp


def Net(x):
    w = jnp.ones((x.shape[-1], 256), x.dtype)
    return jnp.tanh(x @ w).sum(-1)
"""

HOLD = "import jax, sys, time; d = jax.devices(); print('held', d, flush=True); time.sleep(900)"
OPEN = ("import jax, time; t = time.time(); d = jax.devices(); "
        "print('opened', d[0].platform, round(time.time() - t, 2), flush=True)")


def has_flax(python: str) -> bool:
    return subprocess.run([python, "-c", "import flax.linen"], capture_output=True).returncode == 0


def platforms(python: str) -> str:
    done = subprocess.run([python, "-c", "import jax; print(jax.devices()[0].platform)"], capture_output=True,
                          text=True, timeout=120)
    return done.stdout.strip() or f"none ({done.stderr.strip().splitlines()[-1:]})"


class Holder:
    """A process holding the chip (``jax.devices()`` then sleep) while it lives."""

    def __init__(self, python: str) -> None:
        self.proc = subprocess.Popen([python, "-c", HOLD], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        started = time.time()
        assert self.proc.stdout is not None
        self.line = ""
        while not self.line.startswith("held"):  # (JAX's warnings come first)
            line = self.proc.stdout.readline()
            if not line:
                break
            self.line = line.strip()
        self.seconds = time.time() - started

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
        time.sleep(5)  # the chip can refuse a program started just after its holder ended


def cli(root: Path, ws: Path, python: str, args: list[str]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    started = time.time()
    done = subprocess.run([sys.executable, "-m", "tensorviz_lsp", "capture", "--workspace", str(ws), "--python",
                           python, *args], capture_output=True, text=True, env=env, cwd=ws, timeout=600)
    out = {"rc": done.returncode, "seconds": round(time.time() - started, 2),
           "said": (done.stderr.strip().splitlines() or [""])[-1][:600], "file": done.stdout.strip()}
    if done.returncode == 0:
        out.update(_graph_facts(root, done.stdout.strip().splitlines()[-1]))
    return out


def _graph_facts(root: Path, path: str) -> dict[str, Any]:
    code = ("import sys, json; from capture.graph import graphfile; c = graphfile.read(sys.argv[1]); "
            "print(json.dumps({'nodes': len(c.nodes), 'jax_platforms': c.meta.get('jax_platforms'), "
            "'devices': c.devices, 'device': c.meta.get('device')}))")
    done = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, cwd=root)
    try:
        return dict(json.loads(done.stdout))
    except ValueError:
        return {"read_error": done.stderr[-300:]}


def program_during_capture(root: Path, ws: Path, python: str, args: list[str]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    started = time.time()
    cap = subprocess.Popen([sys.executable, "-m", "tensorviz_lsp", "capture", "--workspace", str(ws), "--python",
                            python, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ws)
    time.sleep(1.5)
    running = cap.poll() is None
    t0 = time.time()
    other = subprocess.run([python, "-c", OPEN], capture_output=True, text=True, timeout=300)
    out_cap, err_cap = cap.communicate(timeout=600)
    return {"capture_running_when_started": running, "program_rc": other.returncode,
            "program_said": (other.stdout.strip() or other.stderr.strip()).splitlines()[-1][:400],
            "program_seconds": round(time.time() - t0, 2), "capture_rc": cap.returncode,
            "capture_seconds": round(time.time() - started, 2),
            "capture_said": (err_cap.strip().splitlines() or [""])[-1][:400]}


class Lsp:
    """The language server over stdio, with a bare JSON-RPC client."""

    def __init__(self, root: Path, ws: Path, config: Path) -> None:
        env = {**os.environ, "TENSORVIZ_CONFIG_DIR": str(config),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
        self.proc = subprocess.Popen([sys.executable, "-m", "tensorviz_lsp", "lsp"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=ws)
        self.n = 0
        self.answers: dict[int, Any] = {}
        self.messages: list[str] = []
        self.lock = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _send(self, msg: dict) -> None:
        body = json.dumps({"jsonrpc": "2.0", **msg}).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            headers = {}
            while True:
                line = out.readline()
                if not line:
                    return
                if line in (b"\r\n", b"\n"):
                    break
                k, _, v = line.decode().partition(":")
                headers[k.strip().lower()] = v.strip()
            msg = json.loads(out.read(int(headers["content-length"])))
            if "method" in msg and "id" in msg:  # a request of the server's: answer plainly
                items = msg.get("params", {}).get("items") if msg["method"] == "workspace/configuration" else None
                self._send({"id": msg["id"], "result": [None] * len(items) if items is not None else None})
            elif "method" in msg:
                if msg["method"] in ("window/showMessage", "window/logMessage"):
                    self.messages.append(str(msg["params"].get("message"))[:300])
            else:
                with self.lock:
                    self.answers[msg["id"]] = msg
                    self.lock.notify_all()

    def request(self, method: str, params: Any, timeout: float = 600) -> Any:
        self.n += 1
        n = self.n
        self._send({"id": n, "method": method, "params": params})
        with self.lock:
            self.lock.wait_for(lambda: n in self.answers, timeout)
        got = self.answers.get(n, {"error": "timed out"})
        return got.get("result", got.get("error"))

    def notify(self, method: str, params: Any) -> None:
        self._send({"method": method, "params": params})

    def close(self) -> None:
        try:
            self.request("shutdown", None, timeout=20)
            self.notify("exit", None)
            self.proc.wait(timeout=20)
        except Exception:
            self.proc.kill()


def lsp_captures(root: Path, ws: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tv-lsp-config-") as config:
        lsp = Lsp(root, ws, Path(config))
        try:
            lsp.request("initialize", {"processId": os.getpid(), "rootUri": ws.as_uri(), "capabilities": {},
                                       "workspaceFolders": [{"uri": ws.as_uri(), "name": ws.name}]})
            lsp.notify("initialized", {})
            lsp.request("workspace/executeCommand", {"command": "tensorviz.trustWorkspace", "arguments": []})
            runs = []
            for _ in range(2):
                t0 = time.time()
                got = lsp.request("workspace/executeCommand",
                                  {"command": "tensorviz.captureProfile", "arguments": [{"profile": "cpu"}]})
                runs.append({"seconds": round(time.time() - t0, 2),
                             "answer": {k: v for k, v in (got or {}).items() if k in ("ok", "reason", "message", "file",
                                                                                     "nodes")}})
            return {"runs": runs, "messages": lsp.messages[-6:]}
        finally:
            lsp.close()


def held_only(python: str) -> int:
    with tempfile.TemporaryDirectory(prefix="tv-busy-") as tmp:
        ws = Path(tmp)
        (ws / "net.py").write_text(textwrap.dedent(FLAX_MODEL if has_flax(python) else JAX_MODEL))
        args = ["net.py:Net", "--framework", "jax", "--input", "x=float32[8,64]", "--device", "cpu", "--profile", "cpu"]
        print("chip free:", json.dumps(cli(ROOT, ws, python, args)), flush=True)
        holder = Holder(python)
        print(f"holder: {holder.line[:80]} after {holder.seconds:.1f} s", flush=True)
        try:
            for _ in range(2):
                print("chip held:", json.dumps(cli(ROOT, ws, python, ["--profile", "cpu"])), flush=True)
        finally:
            holder.stop()
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", help="another checkout to compare with (its tensorviz_lsp and capture)")
    ap.add_argument("--python", default=sys.executable, help="the interpreter the captures run in")
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--held-only", action="store_true", help="only the captures with the chip held (CLI, twice)")
    args = ap.parse_args()
    if args.held_only:
        return held_only(args.python)
    python = args.python
    old = Path(args.old).resolve() if args.old else ROOT
    out: dict[str, Any] = {"platform": platforms(python), "flax": has_flax(python)}
    print(f"default platform: {out['platform']}; flax: {out['flax']}", flush=True)
    tpu = out["platform"] == "tpu"
    with tempfile.TemporaryDirectory(prefix="tv-busy-") as tmp:
        ws = Path(tmp)
        (ws / "net.py").write_text(textwrap.dedent(FLAX_MODEL if out["flax"] else JAX_MODEL))
        base = ["net.py:Net", "--framework", "jax", "--input", "x=float32[8,64]"]
        cpu = [*base, "--device", "cpu", "--profile", "cpu"]
        first = cli(ROOT, ws, python, cpu)  # saves the profile; warms the disk caches
        out["cli, chip free (first)"] = first
        out["cli, chip free"] = cli(ROOT, ws, python, ["--profile", "cpu"])
        if args.old:
            out["old cli, chip free"] = cli(old, ws, python, ["--profile", "cpu"])
        if python != sys.executable:  # this interpreter, whose packages may be on PYTHONPATH only
            out["cli, this interpreter"] = cli(ROOT, ws, sys.executable, ["--profile", "cpu"])
            if args.old:
                out["old cli, this interpreter"] = cli(old, ws, sys.executable, ["--profile", "cpu"])
        if tpu:
            out["tpu, chip free"] = cli(ROOT, ws, python, [*base, "--device", "tpu", "--mesh", "data=1",
                                                            "--profile", "tpu"])
            out["program during capture"] = program_during_capture(ROOT, ws, python, ["--profile", "cpu"])
            if args.old:
                out["old: program during capture"] = program_during_capture(old, ws, python,
                                                                             ["--profile", "cpu"])
            holder = Holder(python)
            out["holder"] = {"line": holder.line, "seconds_to_open": round(holder.seconds, 2)}
            try:
                out["cli, chip held"] = cli(ROOT, ws, python, ["--profile", "cpu"])
                if args.old:
                    out["old cli, chip held"] = cli(old, ws, python, ["--profile", "cpu"])
                out["tpu, chip held"] = cli(ROOT, ws, python, ["--profile", "tpu"])
                out["lsp, chip held"] = lsp_captures(ROOT, ws)
            finally:
                holder.stop()
        else:
            out["lsp"] = lsp_captures(ROOT, ws)
    for key, value in out.items():
        print(f"{key}: {json.dumps(value)}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
