"""Run one capture in an isolated worker: the parent side, used by the CLI, the language
server and the viewer.

:func:`run_capture` always returns a :class:`~capture.graph.model.Capture`: the graph, or a
failure capture saying which check or phase failed. Checks run in DESIGN.md's order and
each fails before any user code is imported:

1. ``trust``        - the caller says whether the workspace is trusted;
2. ``source``       - no unsaved editor buffer for workspace Python files or the recipes;
3. ``interpreter``  - the selected Python exists and runs (3.10+);
4. ``dependencies`` - the worker's packages are present (probed without importing them),
   else the exact install command for the selected interpreter (pinning the installed
   Torch build: torch, ``nvidia-*``, ``triton``…, so that pip refuses rather than
   replaces it);
5. ``device``       - the recipe's device backend is available (checked in the worker,
   by the framework, before the model is imported; no CPU fallback);
6. ``recipe``       - the profile is valid, within the input limits, with every
   dimension known (else ``details["needs"]`` lists the dimensions to ask for);
7. ``import`` / ``trace`` - in the worker.

The worker runs in its own process group; the parent owns the deadline and kills the
whole group when it passes, on cancellation, and after the result (stray children).
A worker that crashes, exits early or sends garbage becomes a failure capture.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ..graph import graphfile
from ..graph.frame_repeats import collapse_failure
from ..frameworks import framework_info, framework_names
from ..graph.model import Capture, Failure, Frame, Source, failure_from_json
from ..worker.procs import MARKER_ENV, PARENT_ENV, LogPump, describe_escaped, kill_worker_tree, new_marker, release_worker
from ..recipe import RECIPES_FILE, Recipe, RecipeError, load_recipes_table, module_file, profile_from_document
from ..worker.limits import Limits
from ..worker.protocol import MAX_CONTROL_FRAME, PROTOCOL_VERSION, FrameReader, ProtocolError, encode_frame
from ..worker.workspace_files import WorkspaceFiles, file_sha256

Progress = Callable[[str, "float | None"], None]
Log = Callable[[str], None]

MIN_PYTHON = (3, 11)  # pyproject.toml's requires-python; the worker uses code.co_qualname (3.11+)
PROBE_TIMEOUT_S = 30.0
# After the final message the worker exits at once; allow it this long before the
# process group is killed anyway.
EXIT_GRACE_S = 2.0
# A worker's failure message longer than this is cut (any file TensorViz writes stays
# readable by it: the graph file reader refuses strings over 16 MiB).
_MAX_MESSAGE_CHARS = 64 * 1024


def default_interpreter(workspace: str | os.PathLike[str]) -> str:
    """The workspace's ``.venv`` interpreter when there is one, else this Python."""
    root = Path(workspace)
    for candidate in (root / ".venv" / "bin" / "python", root / ".venv" / "Scripts" / "python.exe"):
        if candidate.exists():
            return str(candidate)
    return sys.executable


def run_capture(
    workspace: str | os.PathLike[str],
    recipe: Recipe | str | Mapping[str, Any],
    *,
    python: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
    limits: Limits | None = None,
    unsaved: Iterable[str] | Callable[[], Iterable[str]] = (),
    trusted: bool = True,
    progress: Progress | None = None,
    log: Log | None = None,
    cancel: threading.Event | None = None,
    env: Mapping[str, str] | None = None,
    warm: Any = None,
) -> Capture:
    """Capture ``recipe`` (a :class:`Recipe`, a profile name saved in the workspace's
    ``.tensorviz/recipes.toml``, or ``Recipe.to_dict()`` data) in a worker running
    ``python`` (default :func:`default_interpreter`).

    ``timeout``: seconds for the worker (default ``limits.max_seconds``).
    ``unsaved``: paths (or a callable returning them) of editor buffers with unsaved
    changes. ``progress(message, fraction)`` and ``log(line)`` (the worker's stdout and
    stderr, line by line) are called from this thread and a reader thread respectively.
    ``cancel``: set it to stop the capture (the worker's group is killed).
    ``env``: extra environment variables for the worker (e.g. ``JAX_ENABLE_X64``).
    ``warm``: a :class:`capture.session.warm.WarmPool` to run the capture on the folder's warm
    worker (the language server); None (the CLI): a one-shot worker. The checks are
    the same either way.
    Never raises for a capture problem; returns a failure capture instead."""
    started = time.monotonic()
    limits = limits or Limits()
    if timeout is not None and timeout > 0:
        limits = Limits(**{**limits.to_dict(), "max_seconds": float(timeout)})
    run = _Run(Path(workspace), limits, progress, log, cancel, started, env)
    run.warm = warm
    try:
        return run.execute(recipe, python, unsaved, trusted)
    except Exception as exc:  # a bug here must still give the caller a failure capture
        return run.fail(
            "crash",
            type(exc).__name__,
            f"TensorViz could not run the capture: {exc}",
        )


# --------------------------------------------------------------------------- the run


class _Run:
    def __init__(self, workspace, limits, progress, log, cancel, started, env) -> None:
        self.workspace = Path(os.path.realpath(os.path.abspath(workspace)))
        self.limits: Limits = limits
        self.progress = progress or (lambda message, fraction: None)
        self.log = log or (lambda line: None)
        self.cancel = cancel
        self.started = started
        self.env = dict(env or {})
        self.recipe: Recipe | None = None
        self.recipe_dict: dict[str, Any] | None = None
        self.framework = "unknown"
        self._raw_table: Any = None
        self.warm: Any = None
        self.path_stamp: tuple = ()

    # ------------------------------------------------------------- failures

    def fail(self, stage: str, type_name: str, message: str, details: dict | None = None, frames=None, sources=None) -> Capture:
        return Capture.failed_capture(
            # A crash dump's frames (faulthandler) repeat as a traceback's do: collapsed alike.
            collapse_failure(Failure(type=type_name, message=message, stage=stage, frames=list(frames or []),
                                     details=dict(details or {}))),
            framework=self.framework,
            recipe=self.recipe_dict,
            sources=sources if sources is not None else self._guess_sources(),
            meta={"elapsed_s": round(time.monotonic() - self.started, 3)},
        )

    def _guess_sources(self) -> list[Source]:
        """The files the recipe names, for failures before the worker reported any."""
        out = {}
        for path in self._recipe_module_files():
            digest = file_sha256(path) if path is not None else None
            if digest is not None:
                out[path.relative_to(self.workspace).as_posix()] = digest
        return [Source(p, h) for p, h in sorted(out.items())]

    def _recipe_module_files(self) -> list[Path | None]:
        """The workspace file of each module the recipe names (model, then factories),
        None where there is none; empty before the recipe resolved."""
        if self.recipe is None:
            return []
        refs = [self.recipe.model, *self.recipe.factory_refs()]
        return [module_file(self.workspace, ref.split(":", 1)[0]) for ref in refs]

    # ------------------------------------------------------------- checks

    def execute(self, recipe, python, unsaved, trusted) -> Capture:
        recipe_error = self._resolve_recipe(recipe)

        if not trusted:
            return self.fail(
                "trust", "WorkspaceNotTrusted",
                f"the workspace {self.workspace} is not trusted; capture runs its code, so trust it first",
            )
        dirty = self._unsaved_sources(unsaved)
        if dirty:
            return self.fail(
                "source", "UnsavedSource",
                f"save {', '.join(dirty)} first: capture reads files from disk", {"unsaved": dirty},
            )

        python = str(python) if python else default_interpreter(self.workspace)
        info = framework_info(self.framework if self.framework in framework_names() else "torch")
        requires = info.requirements(self._model_source())
        probe = self._probe_interpreter(python, requires)
        if isinstance(probe, Capture):
            return probe
        self.path_stamp = _path_stamp(probe.get("path"))
        missing = [m for m in requires if not probe["modules"].get(m, {}).get("found")]
        if missing:
            return self._missing_dependencies(python, missing, probe)

        if recipe_error is not None:
            # DESIGN.md checks the device before the recipe; a CUDA device still gets its
            # own check (in a worker) even when something else in the recipe is wrong.
            stand_in = self._device_stand_in()
            if stand_in is not None and stand_in.device != "cpu":
                device_failure = self._worker(python, stand_in, action="probe_device")
                if device_failure is not None and device_failure.failure is not None and device_failure.failure.stage == "device":
                    return device_failure
            return self.fail("recipe", "RecipeError", str(recipe_error), recipe_error.to_dict())

        assert self.recipe is not None
        needs = self.recipe.unknown_dims()
        if needs:
            listed = ", ".join(
                f"{n.section} {n.input} axis {n.axis}" + (f" ({n.name})" if n.name else "") for n in needs
            )
            return self.fail(
                "recipe", "InputsNeeded",
                f"profile {self.recipe.name!r} has unknown input dimensions: {listed}; give them a size to capture",
                {"needs": [n.to_dict() for n in needs]},
            )
        result = self._worker(python, self.recipe, action="capture")
        assert result is not None
        return result

    def _resolve_recipe(self, recipe) -> RecipeError | None:
        try:
            if isinstance(recipe, Recipe):
                r = recipe
            elif isinstance(recipe, str):
                path = self.workspace / RECIPES_FILE
                self.recipe_dict = {"name": recipe}
                try:
                    doc, text = load_recipes_table(path)
                except RecipeError as exc:
                    return exc
                self._raw_table = (doc.get("profiles") or {}).get(recipe)
                r = profile_from_document(doc, recipe, text=text, file=str(path))
            else:
                self.recipe_dict = {"name": str(recipe.get("name")) if isinstance(recipe, Mapping) else "?"}
                self._raw_table = recipe
                r = Recipe.from_dict(recipe)
        except RecipeError as exc:
            raw = self._raw_table
            if isinstance(raw, Mapping) and raw.get("framework", "torch") in framework_names():
                self.framework = raw.get("framework", "torch")
            return exc
        self.recipe = r
        self.recipe_dict = r.to_dict()
        self.framework = r.framework
        return None

    def _model_source(self) -> str | None:
        """The text of the model's and factories' workspace modules (read, never
        imported), to tell which optional model packages the capture needs; ``None``
        when the recipe did not resolve or a module cannot be read from disk."""
        if self.recipe is None:
            return None
        texts = []
        for path in self._recipe_module_files():
            if path is None:
                return None
            try:
                texts.append(path.read_text(encoding="utf-8", errors="replace"))
            except OSError:
                return None
        return "\n".join(texts)

    def _device_stand_in(self) -> Recipe | None:
        """A minimal recipe carrying only the framework and device of an invalid one,
        so the worker can check the device (nothing is imported from the workspace)."""
        raw = self._raw_table
        if not isinstance(raw, Mapping):
            return None
        try:
            return Recipe.from_dict(
                {"name": "device_check", "model": "device_check:probe",
                 "framework": raw.get("framework", "torch"), "device": raw.get("device", "cpu")}
            )
        except RecipeError:
            return None

    def _unsaved_sources(self, unsaved) -> list[str]:
        paths = unsaved() if callable(unsaved) else unsaved
        files = WorkspaceFiles(self.workspace)
        out = []
        for p in paths or ():
            p = os.fspath(p)
            if p.startswith("file://"):
                from urllib.parse import unquote, urlparse

                p = unquote(urlparse(p).path)
            full = p if os.path.isabs(p) else os.path.join(self.workspace, p)
            rel = files.relative(full)
            if rel is not None and (rel.endswith(".py") or rel == RECIPES_FILE):
                out.append(rel)
        return sorted(set(out))

    def _probe_interpreter(self, python: str, requires: tuple[str, ...]) -> dict | Capture:
        self.progress(f"checking {python}", None)
        if not os.path.exists(python):
            return self.fail(
                "interpreter", "InterpreterNotFound",
                f"the selected interpreter {python} does not exist; select another Python", {"python": python},
            )
        if not os.access(python, os.X_OK) or os.path.isdir(python):
            return self.fail(
                "interpreter", "InterpreterNotExecutable",
                f"the selected interpreter {python} is not an executable file", {"python": python},
            )
        key = _probe_key(python, requires, self.env)
        cached = _probe_cache.get(key)
        if cached is not None and cached[1] == _path_stamp(cached[0].get("path")):
            return cached[0]
        source = (Path(__file__).parent.parent / "worker" / "probe_script.py").read_text(encoding="utf-8")
        try:
            proc = subprocess.run(
                [python, "-c", source, json.dumps(list(requires))],
                capture_output=True, timeout=PROBE_TIMEOUT_S, env=self._worker_env(),
                cwd=os.path.dirname(launcher_script()), start_new_session=True,
            )
        except subprocess.TimeoutExpired:
            return self.fail(
                "interpreter", "InterpreterTimeout",
                f"the selected interpreter {python} did not answer a version probe in {PROBE_TIMEOUT_S:.0f} s",
                {"python": python},
            )
        except OSError as exc:
            return self.fail(
                "interpreter", "InterpreterNotRunnable",
                f"the selected interpreter {python} cannot run: {exc.strerror or exc}", {"python": python},
            )
        try:
            data = json.loads(proc.stdout.decode("utf-8", "replace").strip().splitlines()[-1])
            version = tuple(int(x) for x in data["version"])
            data["modules"] = dict(data["modules"])
        except Exception:
            tail = proc.stderr.decode("utf-8", "replace").strip()[-2000:]
            return self.fail(
                "interpreter", "InterpreterNotRunnable",
                f"the selected interpreter {python} did not run a Python probe (exit status {proc.returncode})"
                + (f": {tail}" if tail else ""),
                {"python": python, "exit_code": proc.returncode},
            )
        if version < MIN_PYTHON:
            return self.fail(
                "interpreter", "InterpreterTooOld",
                f"the selected interpreter {python} is Python {'.'.join(map(str, version))}; "
                f"capture needs Python {'.'.join(map(str, MIN_PYTHON))} or newer",
                {"python": python, "version": list(version)},
            )
        with _launcher_lock:
            if len(_probe_cache) > 64:
                _probe_cache.clear()
            _probe_cache[key] = (data, _path_stamp(data.get("path")))
        return data

    def _missing_dependencies(self, python: str, missing: list[str], probe: dict) -> Capture:
        command = install_command(
            python, missing, probe["modules"], device=self.recipe.device if self.recipe else "cpu",
            torch_build=probe.get("torch_build"),
        )
        pip = bool(probe["modules"].get("pip", {}).get("found"))
        names = ", ".join(missing)
        message = (
            f"the selected interpreter {python} is missing {names}, needed by the "
            f"{self.framework if self.framework in framework_names() else 'capture'} worker; install with: "
            + shlex.join(command)
        )
        if any("==" in spec for spec in command[4:]):
            message += " (the installed Torch build is pinned, so pip refuses rather than replaces it)"
        if not pip:
            message += " (pip is not installed in that interpreter: add it first, e.g. python -m ensurepip)"
        return self.fail(
            "dependencies", "MissingDependencies", message,
            {"missing": missing, "install": command, "python": python, "pip_available": pip,
             "installed": {k: v.get("version") for k, v in probe["modules"].items() if v.get("found")},
             "pinned": [spec for spec in command[4:] if "==" in spec]},
        )

    # ------------------------------------------------------------- the worker

    def _worker_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONINSPECT")}
        env["PYTHONUNBUFFERED"] = "1"
        env.update(self.env)
        # Every process of this worker inherits the marker (capture.worker.procs finds and kills
        # them, also in sessions of their own); the worker dies with this process.
        env[MARKER_ENV] = new_marker()
        env[PARENT_ENV] = str(os.getpid())
        return env

    def _worker(self, python: str, recipe: Recipe, *, action: str) -> Capture | None:
        """Run the worker once. ``capture``: returns the capture (or a failure).
        ``probe_device``: returns a failure capture, or None when the device is fine."""
        launcher = launcher_script()
        request = {
            "protocol": PROTOCOL_VERSION,
            "action": action,
            "workspace": str(self.workspace),
            "recipe": recipe.to_dict(),
            "limits": self.limits.to_dict(),
        }
        if self.warm is not None and action == "capture":
            from .warm import NOT_RUN, run_warm

            result = run_warm(self, self.warm, python, request, self.path_stamp)
            if result is not NOT_RUN:
                return result
        read_fd, write_fd = os.pipe()
        log_r, log_w = os.pipe()
        env = self._worker_env()
        try:
            proc = subprocess.Popen(
                [python, launcher, "--fd", str(write_fd)],
                stdin=subprocess.PIPE, stdout=log_w, stderr=subprocess.STDOUT,
                pass_fds=(write_fd,), cwd=str(self.workspace), env=env,
                start_new_session=True,
            )
        except OSError as exc:
            for fd in (read_fd, write_fd, log_r, log_w):
                os.close(fd)
            return self.fail("interpreter", "InterpreterNotRunnable", f"cannot start {python}: {exc.strerror or exc}")
        os.close(write_fd)
        os.close(log_w)
        watch = _WorkerWatch(proc, read_fd, log_r, self.log, env[MARKER_ENV])
        try:
            return self._converse(watch, request)
        finally:
            watch.close()

    def _converse(self, watch: "_WorkerWatch", request: dict) -> Capture | None:
        deadline = self.started + self.limits.max_seconds
        request["seconds_left"] = deadline - time.monotonic()
        watch.send_request(encode_frame(request))
        reader = FrameReader(max(self.limits.max_result_bytes + (1 << 20), MAX_CONTROL_FRAME))
        final: dict | None = None
        exited_since: float | None = None
        while final is None:
            if self.cancel is not None and self.cancel.is_set():
                watch.kill_group()
                return self.fail("cancelled", "Cancelled", f"the capture was cancelled after {self._elapsed()}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                watch.kill_group()
                elapsed = self._elapsed()
                escaped = list(getattr(watch, "escaped", []))
                details: dict[str, Any] = {"limit": "max_seconds", "maximum": self.limits.max_seconds,
                                           "elapsed_s": round(time.monotonic() - self.started, 3)}
                if escaped:
                    details["escaped_processes"] = escaped
                return self.fail(
                    "deadline", "DeadlineExceeded",
                    f"the capture did not finish within its {self.limits.max_seconds:g} s deadline; "
                    f"the worker process group was killed after {elapsed}" + describe_escaped(escaped),
                    details,
                    frames=crash_frames(watch.log_tail(), WorkspaceFiles(self.workspace)),
                )
            chunk = watch.read(min(remaining, 0.05))
            if chunk is None:
                if exited_since is None and _exited(watch):
                    exited_since = time.monotonic()
                elif exited_since is not None and time.monotonic() - exited_since > 0.5:
                    break  # the worker is gone; a process it left holds the result pipe
                continue
            if chunk == b"":
                break
            try:
                for msg in reader.feed(chunk):
                    kind = msg.get("kind")
                    if kind == "progress":
                        fraction = msg.get("fraction")
                        self.progress(str(msg.get("message", "")), fraction if type(fraction) in (int, float) else None)
                    elif kind in ("result", "failure", "device_ok"):
                        final = msg
                        break
            except ProtocolError as exc:
                watch.kill_group()
                return self.fail("crash", "ProtocolError", f"the worker sent an invalid message: {exc}")

        if final is None:
            return self._crashed(watch)
        watch.finish()
        kind = final["kind"]
        if kind == "device_ok":
            return None
        if kind == "failure":
            return self._worker_failure(final)
        graph = final.get("graph")
        if not isinstance(graph, bytes):
            return self.fail("crash", "ProtocolError", "the worker's result carried no graph")
        try:
            capture = graphfile.decode(graph, name="worker result", max_bytes=self.limits.max_result_bytes + (1 << 20))
        except graphfile.GraphFileError as exc:
            return self.fail("crash", "InvalidResult", f"the worker's graph is invalid: {exc.problem}")
        if capture.backend != "jaxpr":
            # A traced program carries no runtime timings (spec); eager captures may.
            capture.meta.setdefault("elapsed_s", round(time.monotonic() - self.started, 3))
        return capture

    def _worker_failure(self, msg: dict) -> Capture:
        try:
            failure = failure_from_json(msg["failure"])
            sources = [Source(str(p), str(h)) for p, h in msg.get("sources") or []]
        except Exception:
            return self.fail("crash", "ProtocolError", "the worker sent a malformed failure")
        if len(failure.message) > _MAX_MESSAGE_CHARS:
            # An exception's message may be any size; the failure file must stay readable.
            cut = len(failure.message) - _MAX_MESSAGE_CHARS
            failure.message = failure.message[:_MAX_MESSAGE_CHARS] + f" … [{cut:,} more characters cut]"
        capture = Capture.failed_capture(
            failure,
            framework=str(msg.get("framework") or self.framework),
            framework_version=str(msg.get("framework_version") or ""),
            recipe=self.recipe_dict,
            sources=sources or self._guess_sources(),
            meta={"elapsed_s": round(time.monotonic() - self.started, 3)},
        )
        return capture

    def _crashed(self, watch: "_WorkerWatch") -> Capture:
        code = watch.wait_exit(EXIT_GRACE_S)
        tail = watch.log_tail()
        watch.kill_group()  # what it left behind (also in sessions of their own)
        frames = crash_frames(tail, WorkspaceFiles(self.workspace))
        if code is None:
            how = "closed its result pipe without a result and did not exit"
            details: dict[str, Any] = {}
        elif code < 0:
            sig = _signal_name(-code)
            hint = {"SIGSEGV": " (segmentation fault)", "SIGKILL": " (possibly out of memory)",
                    "SIGABRT": " (aborted)", "SIGBUS": " (bus error)"}.get(sig, "")
            how = f"was killed by signal {sig}{hint}"
            details = {"signal": sig, "exit_code": code}
        else:
            how = f"exited with status {code} without reporting a result"
            details = {"exit_code": code}
        last = _last_error_line(tail)
        details["log_tail"] = _bounded_tail(tail)
        if self.limits.max_memory_bytes and (code is None or code != 0):
            # Native code that cannot allocate under the limit aborts rather than raising.
            details["memory_limit"] = self.limits.max_memory_bytes
            how += f" (the capture memory limit was {self.limits.max_memory_bytes / (1 << 20):g} MB)"
        escaped = list(getattr(watch, "escaped", []))
        if escaped:
            details["escaped_processes"] = escaped
        return self.fail(
            "crash", "WorkerCrashed",
            f"the capture worker {how} after {self._elapsed()}" + (f": {last}" if last else "") + describe_escaped(escaped),
            details, frames=frames,
        )

    def _elapsed(self) -> str:
        return f"{time.monotonic() - self.started:.1f} s"


class _WorkerWatch:
    """The running worker: its result pipe, a thread collecting its log (bounded), and
    the kill (its group and every process that came from it, see :mod:`capture.worker.procs`).
    Nothing here blocks on a pipe that a process the worker left behind may hold."""

    def __init__(self, proc: subprocess.Popen, read_fd: int, log_fd: int, log: Log, marker: str | None = None) -> None:
        self.proc = proc
        self.read_fd = read_fd
        self.marker = marker
        self._pump = LogPump(log_fd, log)
        self._killed = False
        #: Processes the worker started outside its group, found and killed (for the failure).
        self.escaped: list[dict[str, Any]] = []

    def send_request(self, data: bytes) -> None:
        def write() -> None:
            try:
                self.proc.stdin.write(data)
                self.proc.stdin.close()
            except (OSError, ValueError):
                pass  # the worker died first; its exit is reported instead

        threading.Thread(target=write, name="tensorviz-worker-request", daemon=True).start()

    def read(self, timeout: float) -> bytes | None:
        """Bytes from the result pipe; b"" at end of file; None when nothing came."""
        ready, _, _ = select.select([self.read_fd], [], [], max(0.0, timeout))
        if not ready:
            return None
        try:
            return os.read(self.read_fd, 1 << 20)
        except OSError:
            return b""

    def exited(self) -> bool:
        """Whether the worker process has terminated (it is not reaped)."""
        try:
            return os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except (ChildProcessError, AttributeError, OSError):
            return self.proc.returncode is not None

    def log_tail(self) -> str:
        return self._pump.text(wait=0.5)

    def wait_exit(self, timeout: float) -> int | None:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill_group()
            return None

    def finish(self) -> None:
        """After the final message: let the worker exit, then clear its process group."""
        _wait_unreaped(self.proc.pid, EXIT_GRACE_S)
        self.kill_group()

    def kill_group(self) -> None:
        # The group is killed while its leader is unreaped (alive or a zombie), so its
        # id cannot have been reused by an unrelated group.
        if not self._killed:
            self._killed = True
            try:
                self.escaped = kill_worker_tree(self.proc.pid, self.marker)
            except Exception:  # never let the search stop the kill
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    def close(self) -> None:
        self.kill_group()
        release_worker(self.proc, self._pump, self.read_fd)


def _exited(watch: Any) -> bool:
    check = getattr(watch, "exited", None)
    return bool(check()) if callable(check) else False


def _bounded_tail(tail: str, lines: int = 40, chars: int = 64 * 1024) -> str:
    """The last ``lines`` lines of a log tail, at most ``chars`` characters (each line is
    already cut by :class:`capture.worker.procs.LogPump`): a failure file stays small."""
    text = "\n".join(tail.splitlines()[-lines:])
    return text if len(text) <= chars else "… " + text[-chars:]


def _wait_unreaped(pid: int, timeout: float) -> None:
    """Wait for ``pid`` to exit without reaping it (so its group id stays reserved)."""
    waitid = getattr(os, "waitid", None)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if waitid is None:
            return
        try:
            if waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return
        except ChildProcessError:
            return
        time.sleep(0.005)


# --------------------------------------------------------------------------- helpers

# Probe answers per interpreter, reused while nothing on that interpreter's path changed
# (installing or removing a package changes its folder's modification time).
_probe_cache: dict[tuple, tuple[dict, tuple]] = {}


def _probe_key(python: str, requires: tuple[str, ...], env: Mapping[str, str]) -> tuple:
    try:
        st = os.stat(python)
        stamp = (st.st_mtime_ns, st.st_ino)
    except OSError:
        stamp = None
    return (os.path.abspath(python), stamp, tuple(requires), tuple(sorted(env.items())))


def _path_stamp(paths: Any) -> tuple:
    out = []
    for p in paths if isinstance(paths, list) else ():
        try:
            out.append((p, os.stat(p).st_mtime_ns))
        except (OSError, TypeError, ValueError):
            out.append((p, None))
    return tuple(out)



def install_command(
    python: str,
    missing: list[str],
    modules: Mapping[str, Any],
    *,
    device: str = "cpu",
    torch_build: Iterable[Iterable[str]] | None = None,
) -> list[str]:
    """``[python, "-m", "pip", "install", …]`` adding ``missing``.

    When Torch is already installed, its build is pinned so that adding JAX never
    replaces the selected Torch/CUDA build: ``torch==<installed>`` and, from the probe's
    ``torch_build`` (``[name, version]`` pairs), every installed distribution that build
    could share with the new packages (``nvidia-*``, ``triton``…), each ``name==version``.
    pip then refuses an install that would need to change them rather than replacing them."""
    specs = []
    for name in missing:
        if name == "jax" and device.startswith("cuda"):
            specs.append("jax[cuda12]")
        else:
            specs.append(name)
    if "torch" in missing:
        return [python, "-m", "pip", "install", *specs]
    pins: dict[str, str] = {}
    torch = modules.get("torch") or {}
    if torch.get("found") and torch.get("version"):
        pins["torch"] = str(torch["version"])
    for entry in torch_build or ():
        try:
            name, version = (str(x) for x in entry)
        except (TypeError, ValueError):
            continue
        key = re.sub(r"[-_.]+", "-", name).lower()
        if (
            not re.fullmatch(r"[a-z0-9][a-z0-9-]*", key)
            or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.+!_-]*", version)
            or key in missing
        ):
            continue
        if key == "torch" and not torch.get("found"):
            continue
        pins[key] = version
    specs += [f"{name}=={version}" for name, version in pins.items()]
    return [python, "-m", "pip", "install", *specs]


_FAULT_FRAME = re.compile(r'^\s*File "(?P<file>.+)", line (?P<line>\d+) in (?P<func>.+?)\s*$')


def crash_frames(log_tail: str, files: WorkspaceFiles) -> list[Frame]:
    """Workspace frames from the last ``faulthandler`` dump of a crashed worker,
    outermost first (faulthandler prints the innermost first)."""
    lines = log_tail.splitlines()
    start = None
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith(("Fatal Python error", "Current thread", "Thread 0x")):
            start = i
            if lines[i].startswith("Current thread") or lines[i].startswith("Fatal Python error"):
                break
    if start is None:
        return []
    frames = []
    for line in lines[start:]:
        m = _FAULT_FRAME.match(line)
        if m:
            rel = files.relative(m.group("file"))
            if rel is not None:
                frames.append(Frame(rel, int(m.group("line")), 0, m.group("func")))
        elif frames and not line.strip():
            break
    frames.reverse()
    return frames


def _last_error_line(tail: str) -> str:
    for line in reversed(tail.splitlines()):
        s = line.strip()
        if s.startswith("Fatal Python error") or re.match(r"^[A-Za-z_][\w.]*(Error|Exception)\b", s):
            return s[:500]
    return ""


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


# --------------------------------------------------------------------------- launcher

_launcher_lock = threading.Lock()
_launcher_dir: str | None = None

_LAUNCHER = '''"""TensorViz capture worker launcher (generated; safe to delete)."""
import sys
from capture.worker.main import main
sys.exit(main())
'''


def launcher_script() -> str:
    """A script in a private folder holding only a link to this ``capture`` package:
    run by the selected interpreter, it puts ``capture`` (and nothing else of this
    environment) first on the worker's path."""
    global _launcher_dir
    with _launcher_lock:
        if _launcher_dir is None or not os.path.exists(os.path.join(_launcher_dir, "capture")):
            folder = tempfile.mkdtemp(prefix="tensorviz-worker-")
            package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
            try:
                os.symlink(package, os.path.join(folder, "capture"), target_is_directory=True)
            except (OSError, NotImplementedError):
                shutil.copytree(package, os.path.join(folder, "capture"), ignore=shutil.ignore_patterns("__pycache__"))
            with open(os.path.join(folder, "tensorviz_worker.py"), "w", encoding="utf-8") as fh:
                fh.write(_LAUNCHER)
            _launcher_dir = folder
            atexit.register(shutil.rmtree, folder, True)
        return os.path.join(_launcher_dir, "tensorviz_worker.py")
