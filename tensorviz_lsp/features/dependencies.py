"""Reviewed dependency installation (``tensorviz.installDependencies``).

When the worker reports missing capture dependencies, the user sees the exact
command (interpreter path and packages) in a ``window/showMessageRequest`` and
nothing runs unless they accept. The command's output streams to the log, its
progress to ``$/progress`` (cancellable), and a failure is reported with its exit
status. The command only ever *adds* the missing packages: it never upgrades or
reinstalls what the interpreter has (Torch stays the selected build when JAX is
added).
"""

from __future__ import annotations

import asyncio
import logging
import os
import select
import shlex
import signal
from pathlib import Path
from typing import Any

from lsprotocol import types

from capture.session.launcher import kept
from capture.worker.distributions import install_spec, safe_install
from capture.worker.procs import not_started, register_child

from ..backends import InstallPlan
from ..feature import Feature, hook
from ..host import Host
from ..registry import register
from .args import InstallArgs
from .interpreter import InterpreterSelection
from .progress import Progress
from .trust import Trust

log = logging.getLogger(__name__)

INSTALL = "Install"
CANCEL = "Cancel"

# Flags that could replace an already-installed build (e.g. a CUDA Torch).
_REPLACING_FLAGS = {"-U", "--upgrade", "--force-reinstall", "--ignore-installed", "-I"}


def default_command(python: str, packages: list[str]) -> list[str]:
    return [python, "-m", "pip", "install", *packages]


@register
class Dependencies(Feature):
    name = "dependencies"

    def __init__(self, server: Host, trust: Trust, interpreters: InterpreterSelection) -> None:
        super().__init__(server)
        self.trust = trust
        self.interpreters = interpreters
        self.last_plan: dict[str, InstallPlan] = {}
        self._procs: set[asyncio.subprocess.Process] = set()

    def commands(self):
        return {"tensorviz.installDependencies": self.install_command}

    def command_for(self, root: Path | None, plan: InstallPlan) -> list[str]:
        """The command offered: the plan's own when the parent made it (``python -m pip
        install`` of checked names into the plan's interpreter), else ``python -m pip
        install`` of the plan's names; the user's ``installCommand`` setting when set.
        Only checked names ever reach it (:mod:`capture.worker.distributions`): never an
        option, path or URL a capture's failure named."""
        packages = [p for p in plan.missing if install_spec(p)]
        pinned = [p for p in plan.pinned if install_spec(p)]
        template = self.server.settings_for(root).install_command
        if not template:
            own = [c for c in plan.command if c not in _REPLACING_FLAGS]
            cmd = own if safe_install(own, plan.python) else default_command(plan.python, packages + pinned)
        else:
            cmd = []
            for part in template:
                if part == "{packages}":
                    cmd += packages + pinned
                else:
                    cmd.append(part.replace("{python}", plan.python))
        return [c for c in cmd if c not in _REPLACING_FLAGS]

    async def offer(self, root: Path | None, plan: InstallPlan) -> bool:
        """Ask, then install; True only when the command ran and succeeded."""
        if not [p for p in plan.missing if install_spec(p)]:
            self.server.show_message(
                "TensorViz: the packages named are not valid distribution names: "
                f"{', '.join(map(repr, plan.missing))[:300]}; nothing is offered", types.MessageType.Error)
            return False
        origin = self.interpreters.for_root(root).origin if root is not None else ""
        if root is not None:
            self.last_plan[str(root)] = plan
            # An interpreter inside the workspace is the workspace's code: running it (pip
            # runs it, and its site hooks) needs the same trust as a capture.
            if inside(plan.python, root) and not await self.trust.ensure(
                root, "installing capture dependencies", python=plan.python,
                runs="(an interpreter that lives inside the workspace)",
            ):
                return False
        cmd = self.command_for(root, plan)
        where = f" ({origin})" if origin else ""
        answer = await self.server.ask(
            f"TensorViz: the capture interpreter {plan.python}{where} lacks {', '.join(plan.missing)}. "
            f"Install by running:\n{shlex.join(cmd)}\nNothing is installed unless you choose {INSTALL}.",
            [INSTALL, CANCEL],
            types.MessageType.Warning,
        )
        if answer != INSTALL:
            self.server.show_message(
                f"TensorViz: nothing was installed. To install later, run {shlex.join(cmd)} "
                "or the command 'tensorviz.installDependencies'."
            )
            return False
        return await self.run(cmd, plan)

    async def run(self, cmd: list[str], plan: InstallPlan) -> bool:
        log.info("installing capture dependencies: %s", shlex.join(cmd))
        async with Progress(self.server, "TensorViz: installing " + ", ".join(plan.missing), cancellable=True) as progress:
            try:
                # Under a keeper (capture.session.launcher.kept): pip and whatever it starts
                # end with this server, however it ends (exit without shutdown, SIGKILL).
                proc = await asyncio.create_subprocess_exec(
                    *kept(cmd),
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.STDOUT,
                    start_new_session=True,
                    env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONUNBUFFERED": "1"},
                )
            except OSError as exc:
                self.server.show_message(f"TensorViz: could not run {cmd[0]}: {exc}", types.MessageType.Error)
                return False
            self._procs.add(proc)
            register_child(proc.pid)  # an install is never a capture's adopted orphan
            tail: list[str] = []
            cancel_task = asyncio.ensure_future(progress.cancelled.wait())
            try:
                assert proc.stdout is not None
                while True:
                    read = asyncio.ensure_future(proc.stdout.readline())
                    done, _ = await asyncio.wait({read, cancel_task}, return_when=asyncio.FIRST_COMPLETED)
                    if cancel_task in done:
                        read.cancel()
                        _kill(proc)
                        await proc.wait()
                        self.server.show_message("TensorViz: installation cancelled.", types.MessageType.Warning)
                        return False
                    raw = read.result()
                    if not raw:
                        break
                    line = raw.decode("utf-8", "replace").rstrip()
                    if line:
                        log.info("[install] %s", line)
                        tail = (tail + [line])[-5:]
                        progress.report(line[:120])
                rc = await proc.wait()
                reason = not_started(rc, "\n".join(tail))
                if reason is not None:
                    self.server.show_message(f"TensorViz: could not run {cmd[0]}: {reason}", types.MessageType.Error)
                    return False
                if rc != 0:
                    progress.outcome = f"failed (exit status {rc})"
            finally:
                cancel_task.cancel()
                self._procs.discard(proc)
        if rc != 0:
            last = tail[-1] if tail else ""
            self.server.show_message(
                f"TensorViz: installing {', '.join(plan.missing)} failed (exit status {rc}). {last} "
                "See the log for the full output.",
                types.MessageType.Error,
            )
            return False
        self.server.show_message(f"TensorViz: installed {', '.join(plan.missing)} into {plan.python}.")
        return True

    async def install_command(self, args: list[Any]) -> dict[str, Any]:
        parsed = InstallArgs.parse(args)
        root = await self.trust.pick_folder(parsed.folder, "install capture dependencies for")
        interp = self.interpreters.for_root(root)
        plan: InstallPlan | None
        if parsed.packages:
            refused = [p for p in parsed.packages if not install_spec(p)]
            if refused:
                self.server.show_message(
                    f"TensorViz: not a distribution name: {refused[0]!r}; packages are names such as "
                    "'tiktoken' or 'scikit-learn' (no options, paths or URLs). Nothing was installed.",
                    types.MessageType.Error)
                return {"ok": False, "error": f"not a distribution name: {refused[0]!r}"}
            plan = InstallPlan(interp.path, list(parsed.packages), default_command(interp.path, list(parsed.packages)))
        else:
            plan = self.last_plan.get(str(root)) if root is not None else None
            if plan is None:
                self.server.show_message(
                    "TensorViz: no missing capture dependencies are known for this workspace; "
                    "open a graph first, or pass {\"packages\": [...]}."
                )
                return {"ok": False}
        ok = await self.offer(root, plan)
        return {"ok": ok}

    @hook
    def shutdown(self) -> None:
        for proc in list(self._procs):
            _kill(proc)


def inside(python: str, root: Path) -> bool:
    """True when ``python`` lies in ``root``: its folder resolved (symlinked folders
    followed), the file itself not (a venv's python links to its base interpreter)."""
    folder = os.path.realpath(os.path.dirname(os.path.abspath(os.path.expanduser(python))))
    try:
        Path(folder).relative_to(root.resolve())
        return True
    except ValueError:
        return False


def _kill(proc: asyncio.subprocess.Process) -> None:
    """Stop an install: its keeper is told (SIGTERM: it kills every process below it,
    whatever session they moved to, then exits); its process group is killed as well, in
    case the keeper itself cannot act."""
    try:
        os.kill(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError, OSError):
        pass
    if not _exits(proc.pid, 0.5):  # the keeper's kill takes milliseconds
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            pass


def _exits(pid: int, timeout: float) -> bool:
    """Whether process ``pid`` (a child of this one) has terminated within ``timeout``."""
    try:
        fd = os.pidfd_open(pid)
    except (OSError, AttributeError):
        return False
    try:
        return bool(select.select([fd], [], [], timeout)[0])
    finally:
        os.close(fd)
