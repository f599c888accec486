"""A heavy committed recipes file through the real language server (issue 52 item 14).

The reported case: a 15 MB ``.tensorviz/recipes.toml`` of 2,217 profiles (under the
bound then) made the model lens take 6.4 s; after 20 saves a hover took 79 s and
``shutdown`` 207 s, the server at up to 2.2 GB.

This script starts ``python -m tensorviz_lsp lsp`` on a raw pipe (as an editor does), in
a workspace holding the spec's ``net`` and a generated recipes file, and times, one
after the other: the model file's lenses; opening the recipes file in the editor; 20
edits of one line, each followed by a save (an incremental ``didChange``, as Neovim and
VS Code send it to a server that syncs incrementally, then ``didSave``; without waiting,
as an editor with auto-save sends them); a hover on the model right
after the last save; and ``shutdown``. It prints each wall time and the server's peak
resident memory (``VmHWM``)::

    python benchmarks/bench_recipes_editor.py [--profiles 2217] [--pad 6700] [--saves 20]

A file over the recipes bound (``capture/recipe/parse.py`` ``MAX_RECIPES_BYTES``) is
refused with one diagnostic; the figures then show what that refusal costs.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tensorviz_lsp.cli.commands.demo import MODEL_PY as SPEC_NET  # noqa: E402


def _frame(obj: dict) -> bytes:
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


class Server:
    def __init__(self, ws: Path) -> None:
        env = {**os.environ, "TENSORVIZ_CONFIG_DIR": str(ws.parent / "cfg"),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        self.proc = subprocess.Popen([sys.executable, "-m", "tensorviz_lsp", "lsp"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=ws)
        self.next_id = 1
        self.inbox: queue.Queue[dict | None] = queue.Queue()
        threading.Thread(target=self._read_all, daemon=True).start()

    def send(self, obj: dict) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(_frame(obj))
        self.proc.stdin.flush()

    def notify(self, method: str, params: dict) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params: dict | None) -> dict:
        msg_id = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        while True:
            msg = self.inbox.get(timeout=900)
            if msg is None:
                raise RuntimeError("the server closed its output")
            if msg.get("id") == msg_id and "method" not in msg:
                return msg
            if "method" in msg and "id" in msg:  # a request from the server: answer it
                self.send({"jsonrpc": "2.0", "id": msg["id"], "result": None})

    def _read_all(self) -> None:
        """Read the server's output as it comes, as an editor does (a client that
        stops reading while it writes a large didChange deadlocks both pipes)."""
        assert self.proc.stdout is not None
        length = None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                self.inbox.put(None)
                return
            if line.startswith(b"Content-Length:"):
                length = int(line.split(b":")[1])
            elif line in (b"\r\n", b"\n") and length is not None:
                self.inbox.put(json.loads(self.proc.stdout.read(length)))
                length = None

    def peak_mb(self) -> float:
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return float("nan")


def recipes_text(profiles: int, pad: int) -> str:
    filler = "# " + "x" * max(0, pad - 3) + "\n" if pad else ""
    return "version = 1\n" + "".join(f'[profiles.p{i}]\nmodel = "m{i}.py:Net"\n' + filler for i in range(profiles))


def run(profiles: int, pad: int, saves: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        (ws / ".tensorviz").mkdir(parents=True)
        model = ws / "model.py"
        model.write_text(SPEC_NET)
        recipes = ws / ".tensorviz" / "recipes.toml"
        text = recipes_text(profiles, pad)
        recipes.write_text(text)
        size = len(text.encode()) / 1e6
        s = Server(ws)
        figures: list[tuple[str, float]] = []
        try:
            s.request("initialize", {"processId": None, "rootUri": ws.as_uri(), "capabilities": {}})
            s.notify("initialized", {})
            t = time.perf_counter()
            s.notify("textDocument/didOpen", {"textDocument": {"uri": model.as_uri(), "languageId": "python",
                                                               "version": 1, "text": SPEC_NET}})
            s.request("textDocument/codeLens", {"textDocument": {"uri": model.as_uri()}})
            figures.append(("model lens", time.perf_counter() - t))
            t = time.perf_counter()
            s.notify("textDocument/didOpen", {"textDocument": {"uri": recipes.as_uri(), "languageId": "toml",
                                                               "version": 1, "text": text}})
            s.request("textDocument/codeLens", {"textDocument": {"uri": model.as_uri()}})
            figures.append(("open recipes.toml, then a lens", time.perf_counter() - t))
            t = time.perf_counter()
            first = text.splitlines()[2]  # model = "m0.py:Net", of the first profile
            width = len(first)
            for i in range(saves):
                now = f'model = "m0.py:Net{i}"'
                # An edit of one line, as Neovim and VS Code send it to a server that syncs
                # incrementally; then the save, with the file on disk changed too.
                change = {"range": {"start": {"line": 2, "character": 0}, "end": {"line": 2, "character": width}},
                          "text": now}
                s.notify("textDocument/didChange", {"textDocument": {"uri": recipes.as_uri(), "version": i + 2},
                                                    "contentChanges": [change]})
                width = len(now)
                recipes.write_text(text.replace(first, now, 1))
                s.notify("textDocument/didSave", {"textDocument": {"uri": recipes.as_uri()}})
            figures.append((f"{saves} edits + saves sent", time.perf_counter() - t))
            s.request("textDocument/hover", {"textDocument": {"uri": model.as_uri()},
                                             "position": {"line": 4, "character": 6}})
            figures.append((f"hover right after the {saves} saves", time.perf_counter() - t))
            t = time.perf_counter()
            s.request("shutdown", None)
            figures.append(("shutdown", time.perf_counter() - t))
            peak = s.peak_mb()
            s.notify("exit", None)
            s.proc.wait(timeout=60)
        finally:
            if s.proc.poll() is None:
                s.proc.kill()
                s.proc.wait()
        print(f"recipes.toml {size:.1f} MB, {profiles} profiles:")
        for what, secs in figures:
            print(f"  {what:<40} {secs:7.2f} s")
        print(f"  {'server peak resident memory':<40} {peak:7.0f} MB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profiles", type=int, default=2217)
    ap.add_argument("--pad", type=int, default=6700, help="bytes of comment per profile (6,700: the 15 MB case)")
    ap.add_argument("--saves", type=int, default=20)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}")
    run(args.profiles, args.pad, args.saves)


if __name__ == "__main__":
    main()
