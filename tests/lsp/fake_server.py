"""The real language server with fake backends, for fast tests of the server's logic.

Discovery is a regex, captures follow ``.fake/capture.json`` in the workspace, and
the viewer only records what it is told (``.fake/viewer-events.jsonl``, and the log).
Run as ``python tests/lsp/fake_server.py``; an extra command ``fake.reveal`` plays the
viewer asking for go-to-source.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any, Mapping

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "tests"))  # synthetic.py: test-only, not shipped

from capture.graph.frame_repeats import collapse_failure  # noqa: E402
from capture.graph.model import Capture, Failure, Frame, Source  # noqa: E402
from capture.recipe import Recipe, RecipeError  # noqa: E402
from synthetic import synthetic_capture  # noqa: E402
from capture.torch.version_check import check_torch  # noqa: E402
from capture.session import Baseline, CaptureJob, CaptureRequest, SessionResult, WarmWorkers, run_session  # noqa: E402
from capture.worker.errors import CaptureError  # noqa: E402
from capture.worker.protocol import MissingDependenciesDetails  # noqa: E402
from tensorviz_lsp.backends import (  # noqa: E402
    Candidate,
    Discovered,
    Pos,
    Span,
    Viewer,
    ViewerHooks,
)
from tensorviz_lsp.lsplog import LspLogHandler, install  # noqa: E402
from capture.analysis.lines import LineIndex  # noqa: E402
from tensorviz_lsp.wiring import create_server  # noqa: E402

_DEF = re.compile(r"^(?P<indent>\s*)(?:def|class)\s+(?P<name>\w+)")
# Under tensorviz_lsp: the server forwards it to the client (window/logMessage), so a
# test waits for what the fakes did on that notification instead of polling files.
log = logging.getLogger("tensorviz_lsp.fakes")


class FakeViewer:
    def __init__(self, hooks: ViewerHooks, log_path: Path) -> None:
        self.hooks = hooks
        self.url = "http://127.0.0.1:9/tok/"
        self.log_path = log_path
        self.n = 0
        self.held: dict[int, Any] = {}
        self._lines: dict[int, Any] = {}

    def _write(self, event: str, data: Any) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("a") as fh:
            fh.write(json.dumps({"event": event, "data": data}) + "\n")
        log.info("fake viewer: %s %s", event, json.dumps(data))

    def add_capture(
        self, capture: Capture, title: str | None = None, *, warm: bool = False, trusted_sources: bool = False,
        baseline: Baseline | None = None, replaces: int | None = None, in_place: bool = False,
    ) -> int:
        same = in_place and replaces is not None and replaces in self.held  # completes that one: its id
        if not same:
            self.n += 1
        data = {"id": replaces if same else self.n, "title": title, "nodes": len(capture.nodes), "warm": warm,
                "trusted_sources": trusted_sources, "replaces": replaces,
                "marker": capture.meta.get("fake_marker")}
        if baseline is not None:  # the diff offered: its label, and what reading it gives
            data["baseline"] = {"label": baseline[1], "nodes": len(baseline[0]().nodes)}
        self._write("add", data)
        self.held[data["id"]] = capture
        return data["id"]

    def lines(self, capture_id: int) -> LineIndex | None:
        """The real line index of a held capture (capture/analysis/lines.py), as the viewer builds it."""
        from capture.analysis.analysis import Analysis

        cap = self.held.get(int(capture_id))
        if cap is None or cap.failure is not None:
            return None
        if int(capture_id) not in self._lines:
            self._lines[int(capture_id)] = LineIndex.build(Analysis(cap))
        return self._lines[int(capture_id)]

    def pages(self, capture_id: int) -> int:
        """Open pages per capture, as a test sets them (``.fake/pages.json``: ``{"1": 1}``)."""
        try:
            pages = json.loads((self.log_path.parent / "pages.json").read_text())
        except FileNotFoundError:
            return 0
        return int(pages.get(str(capture_id), 0))

    def url_for(self, capture_id: int) -> str:
        return f"{self.url}?capture={capture_id}"

    def publish(self, event: str, data: dict[str, Any] | None = None) -> None:
        self._write(event, data)

    def stop(self) -> None:
        self._write("stopped", {})


class FakeBackends:
    def __init__(self) -> None:
        #: The viewer started for each folder (what fake.reveal plays).
        self.viewers: dict[Path, FakeViewer] = {}
        self._warm = FakeWarmWorkers()

    def discover(self, text: str, path: Path, root: Path | None, python: str | None = None) -> Discovered:
        cands = []
        lines = text.splitlines()
        for i, line in enumerate(lines):
            m = _DEF.match(line)
            prev = lines[i - 1].strip() if i else ""
            if not m or m.group("indent"):
                continue
            is_model = prev.startswith("@jax.jit") or re.search(r"class \w+\((nn\.Module|Module)\)", line)
            if not is_model:
                continue
            name = m.group("name")
            start = line.index(name)
            cands.append(
                Candidate(
                    name=name,
                    qualname=name,
                    kind="jax_function" if line.lstrip().startswith("def") else "torch_module",
                    framework="jax" if "def" in line else "torch",
                    name_range=Span(Pos(i, start), Pos(i, start + len(name))),
                    range=Span(Pos(i, 0), Pos(i + 1, 0)),
                    inputs=[{"name": "x", "kind": "positional"}],
                )
            )
        if "SYNTAX ERROR" in text:
            return Discovered([], ["syntax error"], parsed=False)
        return Discovered(cands)

    def index_changed(self, root: Path, path: Path, text: str | None) -> None:
        pass

    def save_profile(self, root: Path, name: str, recipe: dict[str, Any]) -> list[dict[str, Any]]:
        """Writes the profile's keys into the recipes file as given (tomlkit: the rest of
        the file kept); the real backend validates first."""
        import tomlkit

        path = root / ".tensorviz" / "recipes.toml"
        doc = tomlkit.parse(path.read_text()) if path.exists() else tomlkit.document()
        profiles = doc.setdefault("profiles", tomlkit.table())
        table = profiles.setdefault(name, tomlkit.table())
        for key, value in recipe.items():
            table[key] = value
        path.write_text(tomlkit.dumps(doc))
        log.info("fake backends: saved profile %s (%s)", name, ", ".join(sorted(recipe)))
        return []

    def _behaviour(self, root: Path) -> dict:
        try:
            return json.loads((root / ".fake" / "capture.json").read_text())
        except FileNotFoundError:
            return {}

    def run_session(self, request: CaptureRequest) -> SessionResult:
        """The real capture session (checks, graph file, history) with the fake worker step."""
        return run_session(request, self._worker)

    def warm_workers(self) -> WarmWorkers:
        return self._warm

    def _worker(self, job: CaptureJob) -> Capture:
        """The worker step: the session's own checks (trust, saved source, interpreter)
        ran before; what the fake does follows ``.fake/capture.json``."""
        root = job.workspace
        b = self._behaviour(root)
        recipes = tomllib.loads((root / ".tensorviz" / "recipes.toml").read_text())
        recipe = recipes["profiles"][job.profile]
        module = recipe["model"].split(":")[0]
        rel = module.replace(".", "/") + ".py"
        sources = _sources(root, rel, recipe)
        job.progress("starting worker", 0.1)
        (root / ".fake").mkdir(exist_ok=True)
        (root / ".fake" / "last-env.json").write_text(json.dumps(job.env))
        (root / ".fake" / "last-job.json").write_text(
            json.dumps({"warm_idle_seconds": job.warm_idle_seconds})
        )
        # What the model file said when this capture read it (tells runs apart).
        tag = re.search(r"# marker (\w+)", (root / rel).read_text())
        if b.get("sleep") and not _slept(b["sleep"], job):
            return Capture.failed_capture(Failure("Cancelled", "cancelled", stage="cancelled"))
        missing = b.get("missing")
        if missing:
            marker = root / ".fake" / "installed"
            if not marker.exists():
                return Capture.failed_capture(
                    Failure(
                        "MissingDependencies",
                        f"missing {', '.join(missing)}",
                        stage="dependencies",
                        details=MissingDependenciesDetails(
                            missing=missing, python=job.python, install=[job.python, "-m", "pip", "install", *missing]),
                    )
                )
        if b.get("torch_version"):  # the worker's own Torch floor check, on a Torch of that version
            try:
                check_torch(b["torch_version"])
            except CaptureError as exc:
                return Capture.failed_capture(Failure(exc.error_type or "CaptureError", exc.message, stage=exc.stage,
                                                      details=dict(exc.details)))
        if b.get("recursion"):  # deep recursion in user code, as the worker reports it
            frames = [Frame("model.py", 3, 0, "net")] + [Frame("model.py", 6, 0, "deep")] * b["recursion"]
            return Capture.failed_capture(collapse_failure(Failure(
                "RecursionError", "maximum recursion depth exceeded", stage="trace", frames=frames)))
        if b.get("fail"):
            # ``frames``: [line, function] pairs (or lines, in ``net``), outermost first.
            frames = [Frame(rel, int(f[0]), 4, str(f[1])) if isinstance(f, list) else Frame(rel, int(f), 4, "net")
                      for f in b.get("frames") or []]
            return Capture.failed_capture(Failure("ValueError", b["fail"], stage="trace", frames=frames))
        if b.get("memory") and recipe.get("evidence") != "abstract":
            # The worker's memory failure for an eager Torch capture that cannot fit.
            return Capture.failed_capture(Failure(
                "MemoryError", "the model needs 26.4 GB and the machine has 7.6 GB available", stage="limit",
                details={"limit": "available_memory", "phase": "estimate",
                         "abstract": {"evidence": "abstract", "key_path": f"profiles.{job.profile}.evidence"}}))
        cap = synthetic_capture(10)
        if b.get("lines"):  # the ops ran these lines of the model file, in turn (node i: lines[i % n])
            cap.frames = [Frame(rel, int(n), 4, "net") for n in b["lines"]]
            for node in cap.nodes:
                node.frame = node.id % len(cap.frames)
        cap.sources = sources
        cap.meta["fake_marker"] = tag.group(1) if tag else None
        if recipe.get("evidence") == "abstract":  # as the worker marks an abstract Torch capture
            cap.meta["evidence"] = "abstract"
            cap.coverage.scope = "abstract_forward"
            for value in cap.values:
                value.measured = None
        try:  # the profile as captured, as the real runner records it
            cap.recipe = Recipe.from_dict({"name": job.profile, **recipe}).to_dict()
        except RecipeError:
            cap.recipe = None
        return cap

    def changed_sources(self, capture: Capture, root: Path, open_buffers: dict[str, str]) -> list[str]:
        changed = []
        for s in capture.sources:
            text = open_buffers.get(str(root / s.path))
            data = text.encode() if text is not None else (root / s.path).read_bytes()
            if hashlib.sha256(data).hexdigest() != s.sha256:
                changed.append(s.path)
        return changed

    def start_viewer(self, root: Path | None, hooks: ViewerHooks) -> Viewer:
        folder = root or Path.cwd()
        if (folder / ".fake" / "viewer-unavailable").exists():  # a sandbox without loopback sockets
            raise OSError(97, "Address family not supported by protocol")
        viewer = self.viewers[folder] = FakeViewer(hooks, folder / ".fake" / "viewer-events.jsonl")
        return viewer



class FakeWarmWorkers(WarmWorkers):
    """The server's warm workers, played: what the features ask is logged, nothing starts."""

    def retain(self, root: Path, python: str | None, env: Mapping[str, str]) -> None:
        log.info("fake warm worker of %s: retained for %s", root, python)

    def preload(self, root: Path, python: str, env: Mapping[str, str], names: list[str],
                idle_seconds: float) -> str:
        log.info("fake warm worker of %s: preload %s", root, json.dumps(names))
        return "started"

    def close(self) -> None:
        log.info("fake warm workers: closed")


backends = FakeBackends()
server = create_server(backends=backends)


@server.command("fake.reveal")
async def fake_reveal(ls, *args):
    """Play the viewer of the first folder (started by a capture): call its reveal hook
    from another thread, as its HTTP server does."""
    viewer = backends.viewers[ls.folders()[0]]
    return {"handled": "editor" if await ls.run_blocking(viewer.hooks.reveal, args[0]) else "viewer"}


def _sources(root: Path, rel: str, recipe: dict) -> list[Source]:
    """The model's file, and a Torch checkpoint or fixture too, as the real worker records them."""
    sources = [Source(rel, hashlib.sha256((root / rel).read_bytes()).hexdigest())]
    for section, key in (("init", "checkpoint"), ("inputs", "fixture")):
        saved = (recipe.get(section) or {}).get(key)
        if isinstance(saved, str) and (root / saved).is_file():
            sources.append(Source(saved, hashlib.sha256((root / saved).read_bytes()).hexdigest()))
    return sources


def _slept(seconds: float, job: CaptureJob) -> bool:
    """A worker process that runs ``seconds`` (a child of its own session, as a model's
    would be); False when the capture was cancelled meanwhile (the process killed)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    log.info("fake worker started: pid %d", proc.pid)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not job.cancel.is_set():
        time.sleep(0.05)
    if job.cancel.is_set():
        os.killpg(proc.pid, 9)
        proc.wait()
        return False
    proc.kill()
    proc.wait()
    return True


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    for handler in logging.getLogger().handlers:
        handler.setLevel(logging.WARNING)
    install(server, logging.INFO)
    # Follow-cursor's debounce says at DEBUG when a move will be told and when it was told:
    # tests await those instead of sleeping past the debounce (tests/lsp/test_show_in_graph.py).
    cursor_log = logging.getLogger("tensorviz_lsp.features.show_in_graph")
    cursor_log.setLevel(logging.DEBUG)
    cursor_log.addHandler(LspLogHandler(server, logging.DEBUG))
    cursor_log.propagate = False
    server.start_io()
