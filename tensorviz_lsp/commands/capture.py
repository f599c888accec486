"""``tensorviz capture``: run a saved setup in the isolated worker and write a ``.tvg``.

    tensorviz capture --workspace DIR --profile NAME [-o OUT.tvg] [--python PATH] [--timeout S]
                      [--env NAME=VALUE …]
    tensorviz capture FILE.py:SYMBOL --input x=float32[2,3] [--init width=8]
                      [--framework jax] [--device cpu] [--profile NAME] [-o OUT.tvg]

The shorthand form saves (or updates) the profile in ``.tensorviz/recipes.toml`` first,
then captures it; without ``--framework`` the framework is the one discovery finds for
the symbol (a JAX function or Flax module saves ``framework = "jax"``). ``--env`` sets
environment variables for the capture worker only (``JAX_ENABLE_X64=1`` for 64-bit JAX
inputs); they are not saved. The graph file goes where the editor's go too,
``.tensorviz/captures/NAME.tvg`` (``-o`` writes another file instead); a failed capture is
still written, as a failure capture. A successful one is also kept in the workspace's
capture history (``.tensorviz/captures/history/NAME/``, the last 10: ``tensorviz diff
--profile NAME``). Both through :func:`capture.session.run_session`, as in the editor.
Exit status: 0 captured, 1 a failure capture was written (why on stderr), 2 usage error.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Callable

from capture.frameworks import framework_names
from capture.graph.frame_repeats import frame_lines
from capture.graph.model import Capture
from capture.recipe import RecipeError
from capture.session import CAPTURES_DIR, CaptureRequest, SessionResult, limits_for, run_session
from capture.session.checks import workspace_python
from capture.worker.limits import Limits
from capture.worker.protocol import environment_needed, inputs_needed

from ..recipes_store import RecipeStoreError, existing_profile, save_profile
from ..shorthand import (
    ShorthandError,
    build_recipe,
    call_setup,
    default_profile_name,
    discovered_framework,
    parse_target,
    workspace_file,
)

def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "capture",
        help="capture a saved setup (or FILE.py:SYMBOL with --input …) into a .tvg graph file",
        description=__doc__.split("\n\n")[0],
    )
    add_setup_options(p)
    p.add_argument("-o", "--output", metavar="OUT.tvg", help=f"graph file to write (default: {CAPTURES_DIR.as_posix()}/NAME.tvg)")
    add_worker_options(p, timeout_flag="--timeout")
    p.set_defaults(func=run)


def add_setup_options(p: argparse.ArgumentParser) -> None:
    """What to capture, for ``capture`` and ``open``: ``--profile NAME``, or the shorthand
    ``FILE.py:SYMBOL`` with what its setup needs (read by :func:`resolve_profile`)."""
    p.add_argument("target", nargs="?", metavar="FILE.py:SYMBOL", help="shorthand: the symbol to capture")
    p.add_argument("--workspace", metavar="DIR", help="workspace root (default: the current folder, or the file's)")
    p.add_argument("--profile", metavar="NAME", help="the saved setup to capture (shorthand: the name to save as)")
    p.add_argument("--input", action="append", default=[], metavar="[NAME=]VALUE", help="shorthand: an input, e.g. x=float32[2,3]")
    p.add_argument("--init", action="append", default=[], metavar="[NAME=]VALUE", help="shorthand: a constructor argument, e.g. width=8")
    # Read when the parser is built, so a test plug-in (TENSORVIZ_TEST_PLUGINS) is a choice too.
    names = framework_names()
    p.add_argument("--framework", choices=names,
                   help=f"shorthand: {' or '.join(names)} (default: what discovery finds for the symbol)")
    p.add_argument("--device", metavar="DEVICE", help="shorthand: cpu or cuda:N")
    p.add_argument("--seed", type=int, help="shorthand: the profile seed")
    p.add_argument("--checkpoint", metavar="PATH",
                   help="shorthand (Torch): a state dict to load, .pt/.pth/.bin (weights-only) or .safetensors")
    p.add_argument("--no-strict", dest="strict", action="store_false", default=None,
                   help="shorthand: load the checkpoint without strict key checking")
    p.add_argument("--fixture", metavar="PATH", help="shorthand (Torch): a saved batch as the inputs, .pt, .safetensors or .npz")
    p.add_argument("--fixture-key", action="append", default=[], metavar="KEY=PARAM",
                   help="shorthand: map a fixture key to a forward parameter, e.g. ids=input_ids")


def add_worker_options(p: argparse.ArgumentParser, *, timeout_flag: str) -> None:
    """How to run the capture worker, for ``capture``, ``open`` and ``demo``. ``timeout_flag``:
    ``--timeout``, or ``--capture-timeout`` where ``--timeout`` is the viewer's."""
    p.add_argument("--python", metavar="PATH", help="interpreter to capture with (default: the workspace's .venv or venv, else this one)")
    p.add_argument(timeout_flag, type=float, metavar="S",
                   help=f"deadline for the capture, in seconds (default {Limits().max_seconds:g})")
    add_env_option(p)
    p.add_argument("--max-saved-file-mb", type=_positive_mb, metavar="MB",
                   help="largest checkpoint or fixture file a capture loads, in MiB "
                        f"(default {Limits().max_saved_file_bytes >> 20})")
    p.add_argument("--memory", type=_positive_mb, metavar="MB",
                   help="memory limit for the capture worker, in MiB (default: none); running out is "
                        "reported as a MemoryError failure")
    p.add_argument("-v", "--verbose", action="store_true", help="show the worker's output (and progress) on stderr")


def _positive_mb(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of MiB") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: give a positive number of MiB")
    return value


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def add_env_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--env", action="append", default=[], metavar="NAME=VALUE",
        help="an environment variable for the capture worker only (repeatable), e.g. JAX_ENABLE_X64=1 "
             "for 64-bit JAX inputs; not saved in the profile",
    )


def parse_env(items: list[str]) -> dict[str, str]:
    """Repeated ``--env NAME=VALUE`` as a mapping (later wins); ShorthandError when malformed."""
    env: dict[str, str] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not _ENV_NAME.fullmatch(name):
            raise ShorthandError(f"--env {item!r}: expected NAME=VALUE with NAME a variable name such as JAX_ENABLE_X64")
        if "\x00" in value:
            raise ShorthandError(f"--env {name}: the value contains a NUL character")
        env[name] = value
    return env


def resolve_profile(args: argparse.Namespace) -> tuple[Path, str]:
    """The workspace and profile a ``capture``/``open`` invocation names: the shorthand
    ``FILE.py:SYMBOL`` (saved or updated first) or ``--profile NAME``. Usage problems
    raise :class:`ShorthandError`; a failed save raises :class:`RecipeStoreError`."""
    if args.target:
        try:
            workspace, profile = save_shorthand(args)
        except RecipeError as exc:
            raise ShorthandError(f"the shorthand does not make a valid setup: {exc}") from None
    else:
        if (args.input or args.init or args.framework or args.device or args.seed is not None
                or args.checkpoint or args.fixture or args.fixture_key or args.strict is not None):
            raise ShorthandError(
                "--input/--init/--framework/--device/--seed/--checkpoint/--fixture need FILE.py:SYMBOL (the shorthand form)")
        if not args.profile:
            raise ShorthandError("give FILE.py:SYMBOL (with --input …), or --profile NAME (a saved setup)")
        workspace = Path(args.workspace or ".").expanduser().resolve()
        profile = args.profile
    if not workspace.is_dir():
        raise ShorthandError(f"the workspace {workspace} is not a folder")
    return workspace, profile


def setup_of(command: str, args: argparse.Namespace) -> tuple[dict[str, str], Path, str] | int:
    """The environment, workspace and profile a command line names (saving a shorthand's
    profile first), or, after saying on stderr what is wrong, the exit status: 2 for a
    usage error, 1 when the setup could not be saved."""
    try:
        env = parse_env(args.env)
        workspace, profile = resolve_profile(args)
    except ShorthandError as exc:
        print(f"tensorviz {command}: {exc}", file=sys.stderr)
        return 2
    except RecipeStoreError as exc:
        print(f"tensorviz {command}: cannot save the setup: {exc}", file=sys.stderr)
        return 1
    return env, workspace, profile


def run(args: argparse.Namespace) -> int:
    if args.timeout is not None and not args.timeout > 0:
        return _usage("--timeout must be a positive number of seconds")
    setup = setup_of("capture", args)
    if isinstance(setup, int):
        return setup
    env, workspace, profile = setup

    verbose = args.verbose

    def progress(message: str, fraction: float | None) -> None:
        if verbose:
            pct = f" {fraction * 100:3.0f}%" if fraction is not None else ""
            print(f"tensorviz capture:{pct} {message}", file=sys.stderr)

    def log(line: str) -> None:
        if verbose:
            print(f"  worker| {line}", file=sys.stderr)

    result = capture_in_session(
        "capture", workspace, profile, args, timeout=args.timeout, env=env, progress=progress, log=log,
        output=Path(args.output) if args.output else None,
    )
    if result.graph_file is not None:
        print(result.graph_file)
    for problem in result.problems:
        print(f"tensorviz capture: {problem}", file=sys.stderr)
    if result.capture.failure is not None:
        print(describe_failure(result.capture), file=sys.stderr, end="")
        return 1
    # A history that could not keep the capture leaves the graph file standing: 0.
    return 0 if result.graph_file is not None else 1


def capture_in_session(
    command: str,
    workspace: Path,
    profile: str,
    args: argparse.Namespace,
    *,
    timeout: float | None,
    env: dict[str, str],
    progress: Callable[[str, float | None], None],
    log: Callable[[str], None],
    output: Path | None = None,
) -> SessionResult:
    """:func:`capture.session.run_session` for a command typed in a terminal: trusted (the
    user typed it), no editor buffers, a one-shot worker, ended when the user interrupts
    (Ctrl-C, SIGTERM, SIGHUP). Says on stderr which interpreter runs the model's code,
    and why that one: the CLI asks no trust question, but it never runs code silently."""
    print(f"tensorviz {command}: the model's code runs in {interpreter_note(workspace, args.python)}", file=sys.stderr)
    request = CaptureRequest(
        workspace, profile, python=args.python, env=env, progress=progress, log=log, output=output,
        limits=limits_for(timeout, args.max_saved_file_mb, args.memory),
    )
    with terminate_like_interrupt():
        try:
            return run_session(request)
        except KeyboardInterrupt:
            request.cancel.set()
            raise


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP during a capture: handled like Ctrl-C (the worker and every
    process it started are killed on the way out); the CLI exits with 128 + the signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def terminate_like_interrupt() -> Iterator[None]:
    """While the worker runs: SIGTERM and SIGHUP raise :class:`Terminated` in the main
    thread, as SIGINT raises KeyboardInterrupt. (A SIGKILL cannot be caught: the worker
    then dies with this process, by ``PR_SET_PDEATHSIG``; see capture.worker.procs.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise Terminated(signum)

    previous = {}
    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None:
            previous[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def interpreter_note(workspace: Path, python: str | None) -> str:
    """The interpreter a CLI capture runs, and why that one."""
    if python:
        return f"{python} (--python)"
    venv = workspace_python(workspace)
    if venv is not None:
        return f"{venv} (the workspace's {venv.relative_to(workspace.absolute()).parts[0]}; --python PATH chooses another)"
    return (f"{sys.executable} (the Python running TensorViz: the workspace has no .venv or venv; "
            "--python PATH chooses another)")


def describe_failure(capture: Capture, command: str = "capture") -> str:
    """The failure as a few lines for a terminal, headed ``tensorviz COMMAND:``."""
    f = capture.failure
    assert f is not None
    lines = [f"tensorviz {command}: [{f.stage}] {f.type}: {f.message}"]
    lines += [f"    {line}" for line in frame_lines(f)]
    for need in inputs_needed(f):
        name = f" ({need['name']})" if need["name"] else ""
        lines.append(f"    needs: {need['section']} {need['input']} axis {need['axis']}{name}")
    wanted = environment_needed(f)
    if wanted:
        flags = " ".join(f"--env {k}={v}" for k, v in wanted.items())
        lines.append(f"    hint: capture again with {flags}")
    return "\n".join(lines) + "\n"


def save_shorthand(args: argparse.Namespace) -> tuple[Path, str]:
    """Save (or update) the profile the shorthand describes; ``(workspace, name)``.

    Without ``--framework`` the framework comes from discovery (import-free): a JAX
    function or Flax module is saved with ``framework = "jax"``. A symbol discovery
    does not know is a usage error, unless the profile being updated names its
    framework already."""
    target = parse_target(args.target, args.workspace)
    # Bad --input/--init are reported before anything else is looked at.
    call_setup(args.input, "--input")
    call_setup(args.init, "--init")
    checkpoint = workspace_file(args.checkpoint, target.workspace, "--checkpoint") if args.checkpoint else None
    fixture = workspace_file(args.fixture, target.workspace, "--fixture") if args.fixture else None
    name = args.profile
    # An absent profile is written afresh; an invalid one (a hand edit TensorViz does not
    # understand) is left alone with the error naming the key and line (RecipeStoreError).
    existing = existing_profile(target.workspace, name or default_profile_name(target))
    discovered = None
    if args.framework is None:
        try:
            discovered = discovered_framework(target, getattr(args, "python", None))
        except ShorthandError:
            if existing is None or not existing.framework_explicit:
                raise
            # The saved profile names its framework: nothing is guessed.
    recipe = build_recipe(
        target,
        inputs=args.input,
        inits=args.init,
        framework=args.framework,
        device=args.device,
        seed=args.seed,
        name=name,
        existing=existing,
        discovered=discovered,
        checkpoint=checkpoint,
        strict=args.strict,
        fixture=fixture,
        fixture_key=args.fixture_key,
    )
    save_profile(target.workspace, recipe)
    return target.workspace, recipe.name


def _usage(message: str) -> int:
    print(f"tensorviz capture: {message}", file=sys.stderr)
    return 2
