"""``tensorviz capture``: run a saved setup in the isolated worker and write a ``.tvg``.

    tensorviz capture --workspace DIR --profile NAME [-o OUT.tvg] [--python PATH] [--timeout S]
                      [--env NAME=VALUE …]
    tensorviz capture FILE.py:SYMBOL --input x=float32[2,3] [--init width=8]
                      [--init 'config=GPTConfig(n_layer=2)'] [--init-factory REF]
                      [--inputs-factory REF] [--abstract] [--framework jax] [--device cpu]
                      [--profile NAME] [-o OUT.tvg]

The shorthand form saves (or updates) the profile in ``.tensorviz/recipes.toml`` first,
then captures it; without ``--framework`` the framework is the one discovery finds for
the symbol (a JAX function or Flax module saves ``framework = "jax"``). Before anything is
saved or run, the setup is checked against discovery's reading of the symbol
(:mod:`tensorviz_lsp.setup.setup_check`): a required constructor field or input nothing gives,
or an input name the callable does not take, is a usage error listing what is needed and
a command that would work (``--profile NAME`` alone is checked the same way). ``--env``
sets environment variables for the capture worker only (``JAX_ENABLE_X64=1`` for 64-bit
JAX inputs); they are not saved. The graph file goes where the editor's go too,
``.tensorviz/captures/NAME.tvg`` (``-o`` writes another file instead); a failed capture is
still written, as a failure capture, but never over a good graph file: it then goes
beside it, ``NAME.failed.tvg`` (see :mod:`capture.session.graph_files`). A successful one
is also kept in the workspace's capture history (``.tensorviz/captures/history/NAME/``,
the last 10: ``tensorviz diff --profile NAME``). Both through
:func:`capture.session.run_session`, as in the editor.
Exit status: 0 captured, 1 a failure capture was written (why on stderr), 2 usage error.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
import contextlib
import io
import re
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

from capture.frameworks import declared_by, framework_names
from capture.graph.compiled import kind_counts
from capture.units import bytes_text, flops_text
from capture.graph.failure_text import cut_note, readable_message
from capture.graph.frame_repeats import frame_lines
from capture.graph.model import Capture
from capture.recipe import MODEL_DTYPES, Recipe, RecipeError
from capture.session import CAPTURES_DIR, CaptureRequest, SessionResult, limits_for, run_session
from capture.session.checks import workspace_python
from capture.session.launcher import kept
from capture.worker.limits import Limits
from capture.worker.protocol import environment_needed, inputs_needed, model_dependencies, shadowed_libraries
from capture.worker.shadowing import shadowing_note

from ...recipes_store import RecipeStoreError, existing_profile, load_profile, save_profile
from ...setup.hints import failure_hint
from ...setup.recipe_errors import setup_error_text
from ...setup.setup_check import describe, example_value, fixed_command, setup_problems
from ...setup.shorthand import (
    BEFORE_HELP,
    GRAMMAR_HELP,
    STEP_HELP,
    ArgumentError,
    Discovered,
    ShorthandError,
    Target,
    TokenIds,
    build_recipe,
    default_profile_name,
    discover_symbol,
    factory_ref,
    integer_tensor_without_generator,
    kept_from_saved,
    names_for,
    parse_target,
    profile_for_target,
    workspace_file,
)

DESCRIPTION = """\
Capture a model as a graph file (.tvg): a saved setup (--profile NAME), or the shorthand
FILE.py:SYMBOL with its inputs (--input) and constructor arguments (--init), which saves
or updates the symbol's profile in .tensorviz/recipes.toml first. The setup is checked
against the symbol's parameters (read from source) before anything is saved or run.
Exit status: 0 captured, 1 the capture failed (a failure record is written), 2 usage error."""

def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "capture",
        help="capture a saved setup (or FILE.py:SYMBOL with --input …) into a .tvg graph file",
        description=DESCRIPTION, epilog=GRAMMAR_HELP + "\n" + STEP_HELP + "\n" + BEFORE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
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
    p.add_argument("--input", action="append", default=[], metavar="[NAME=]VALUE",
                   help="shorthand: an input (repeatable), e.g. x=float32[2,3] or idx=int64[1,16]; VALUE below")
    p.add_argument("--init", action="append", default=[], metavar="[NAME=]VALUE",
                   help="shorthand: a constructor argument (repeatable), e.g. width=8 or "
                        "'config=GPTConfig(n_layer=4, n_embd=128)'; VALUE below")
    p.add_argument("--then", action="append", default=[], metavar="STEP",
                   help="shorthand: a step after construction (repeatable, in order), e.g. "
                        "'model.setup_caches(max_batch_size=1, max_seq_length=64)' or \"config.model_type='gpt-nano'\"; "
                        "STEP below")
    p.add_argument("--before", action="append", default=[], metavar="CALL",
                   help="shorthand: a call made before the model is built (repeatable, in order), for library state "
                        "its constructor reads, e.g. "
                        "'fairscale.nn.model_parallel.initialize.initialize_model_parallel(1)'; BEFORE below")
    p.add_argument("--init-factory", metavar="REF",
                   help="shorthand: a function of yours that builds the model, MODULE:FUNCTION or FILE.py:FUNCTION "
                        "(called with no arguments; returns the module, a bound Linen module, an NNX module or a "
                        "configured callable)")
    p.add_argument("--inputs-factory", metavar="REF",
                   help='shorthand: a function of yours that returns the inputs, {"args": (...), "kwargs": {...}} '
                        "or a mapping of named inputs")
    # Who each choice is for, as the frameworks declare it ("Torch", "JAX").
    abstract = declared_by(lambda c: "abstract" in c.evidence)
    dtype, saved = declared_by(lambda c: c.model_dtype), declared_by(lambda c: c.saved_files)
    compiles = declared_by(lambda c: c.compile)
    evidence = p.add_mutually_exclusive_group()
    evidence.add_argument("--abstract", dest="evidence", action="store_const", const="abstract",
                          help=f"shorthand ({abstract}): abstract evidence, shapes only, nothing computed (no parameter "
                               "storage: models larger than memory)")
    evidence.add_argument("--eager", dest="evidence", action="store_const", const="eager",
                          help=f"shorthand ({abstract}): run the model (the default; undoes a saved --abstract)")
    p.add_argument("--dtype", choices=MODEL_DTYPES, metavar="DTYPE",
                   help=f"shorthand ({dtype}): build the model in this floating dtype (bfloat16, float16, float32, "
                        "float64); default: the model's own, a transformers config's dtype when it names one")
    # Read when the parser is built, so a test plug-in (TENSORVIZ_TEST_PLUGINS) is a choice too.
    names = framework_names()
    p.add_argument("--framework", choices=names,
                   help=f"shorthand: {' or '.join(names)} (default: what discovery finds for the symbol)")
    p.add_argument("--device", metavar="DEVICE",
                   help=f"shorthand: cpu, cuda:N, or tpu / tpu:N ({declared_by(lambda c: 'tpu' in c.devices)})")
    p.add_argument("--seed", type=int, help="shorthand: the profile seed")
    p.add_argument("--compile", choices=("auto", "on", "off"), dest="compile_mode",
                   help=f"shorthand ({compiles}): compile the traced program for the recipe's devices and show what XLA runs "
                        "(the collectives it adds, per-device FLOPs and memory); auto (default): with a mesh")
    p.add_argument("--mesh", metavar="AXES",
                   help="shorthand: run under a device mesh, e.g. data=4,model=2 (axis=size, major to minor; a JAX "
                        "axis is Explicit as jax.make_mesh makes it, or says its type, model=2:auto); on cpu the devices are simulated (JAX: XLA's host "
                        "device count; Torch: the fake process group); 'none' removes a saved mesh")
    p.add_argument("--checkpoint", metavar="PATH",
                   help=f"shorthand ({saved}): a state dict to load, .pt/.pth/.bin (weights-only) or .safetensors")
    p.add_argument("--no-strict", dest="strict", action="store_false", default=None,
                   help="shorthand: load the checkpoint without strict key checking")
    p.add_argument("--fixture", metavar="PATH", help=f"shorthand ({saved}): a saved batch as the inputs, .pt, .safetensors or .npz")
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
    p.add_argument("--compile-timeout", type=float, metavar="S",
                   help="JAX: seconds XLA may take to compile the program for the recipe's devices (default "
                        f"{Limits().compile_seconds:g}); past them the graph comes without the compiled figures "
                        "(the recipe's compile = \"off\" skips the compile)")
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
            raise ShorthandError(f"the shorthand does not make a valid setup: {setup_error_text(exc)}") from None
    else:
        if (args.input or args.init or args.then or args.before or args.framework or args.device or args.seed is not None
                or args.checkpoint or args.fixture or args.fixture_key or args.strict is not None
                or args.init_factory or args.inputs_factory or args.evidence or args.dtype or args.mesh
                or args.compile_mode):
            raise ShorthandError(
                "--input/--init/--then/--before/--init-factory/--inputs-factory/--abstract/--dtype/--framework/--device/"
                "--seed/--mesh/--compile/"
                "--checkpoint/--fixture need FILE.py:SYMBOL (the shorthand form)")
        if not args.profile:
            raise ShorthandError("give FILE.py:SYMBOL (with --input …), or --profile NAME (a saved setup)")
        workspace = Path(args.workspace or ".").expanduser().resolve()
        profile = args.profile
        if workspace.is_dir():
            check_saved_profile(args, workspace, profile)
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

    first: list[Path] = []

    def on_graph(capture: Capture, path: Path | None) -> None:
        """The graph first (its statistics or its compiled program follow): its path and
        what it holds now, the rest when it arrives."""
        if path is None:
            return
        first.append(path)
        print(path, flush=True)
        print(f"tensorviz capture: {captured_line(capture, path)}{following(capture)}", file=sys.stderr, flush=True)

    result = capture_in_session(
        "capture", workspace, profile, args, timeout=args.timeout, env=env, progress=progress, log=log,
        output=Path(args.output) if args.output else None, on_graph=on_graph,
    )
    shown = bool(first) and first[-1] == result.graph_file
    if result.graph_file is not None and not shown:
        print(result.graph_file)
    for problem in result.problems:
        print(f"tensorviz capture: {problem}", file=sys.stderr)
    if result.capture.failure is not None:
        print(describe_failure(result.capture, graph_file=result.graph_file), file=sys.stderr, end="")
        _drop_failed_mesh(args, workspace, profile)
        return 1
    if result.graph_file is not None and not shown:
        print(f"tensorviz capture: {captured_line(result.capture, result.graph_file)}", file=sys.stderr)
    line = compiled_line(result.capture)
    if line is not None:
        print(f"tensorviz capture: {line}", file=sys.stderr)
    # A history that could not keep the capture leaves the graph file standing: 0.
    return 0 if result.graph_file is not None else 1


def _drop_failed_mesh(args: argparse.Namespace, workspace: Path, profile: str) -> None:
    """A ``--mesh`` given with an attempt that failed is not left in the profile (the next
    attempt without ``--mesh`` would run under it, its legend over the model): the saved
    mesh goes back to what it was, and the terminal says so."""
    before, given = getattr(args, "_mesh_before", (None, False))
    if not given:
        return
    try:
        saved = existing_profile(workspace, profile)
        if saved is None or saved.mesh == before:
            return
        save_profile(workspace, replace(saved, mesh=before))
    except (RecipeError, RecipeStoreError, OSError):
        return
    print(f"tensorviz capture: the --mesh of this failed attempt is not kept in profile {profile} "
          f"({'no mesh' if before is None else 'its mesh as saved before'}); give --mesh again to retry with it",
          file=sys.stderr)


def captured_line(capture: Capture, graph_file: Path) -> str:
    """What a capture holds and how to see it, for the terminal (stdout keeps only the
    graph file's path, for scripts): ``128 nodes, 14 layers; view it with: tensorviz view …``."""
    nodes = len(capture.nodes)
    layers = sum(1 for g in capture.groups if getattr(g, "kind", None) == "module")
    what = f"{nodes:,} node{'s' if nodes != 1 else ''}" + (f", {layers:,} layer{'s' if layers != 1 else ''}"
                                                          if layers else "")
    shown = shlex.quote(_shown_path(graph_file))
    return f"captured {what}; view it with: tensorviz view {shown} (or tensorviz summary {shown})"


def following(capture: Capture) -> str:
    """What follows a graph shown first, for its first line (empty when nothing does)."""
    parts = []
    compiled = capture.compiled if isinstance(capture.compiled, dict) else {}
    if compiled.get("status") == "pending":
        n = compiled.get("devices", 1)
        parts.append(f"XLA is compiling it for {n} device{'' if n == 1 else 's'} "
                     f"(at most {compiled.get('limit_seconds', 0):g} s, --compile-timeout)")
    if capture.meta.get("stats_pending"):
        parts.append("its parameters' statistics are being measured")
    if not parts:
        return ""
    return "; " + " and ".join(parts) + "; the file is written again when they arrive"


def compiled_line(capture: Capture) -> str | None:
    """The compiled program in one line (``compiled by XLA for 64 devices in 41.2 s: …``),
    or why it was not compiled; None when the capture was not compiled (no mesh,
    ``compile = "off"``, a failure)."""
    compiled = capture.compiled if capture.failure is None else None
    if not isinstance(compiled, dict):
        return None
    status, n = compiled.get("status"), compiled.get("devices", 1)
    devices = f"{n} device{'' if n == 1 else 's'}"
    if status == "pending":  # cannot stay so once the session ended; said plainly if it does
        return f"the compiled program for {devices} did not arrive"
    if status != "compiled":
        return f"not compiled for {devices} ({status}): {compiled.get('reason', '')}"
    items = compiled.get("collectives") or []
    text = f"compiled by XLA for {devices} in {float(compiled.get('seconds') or 0):.1f} s: "
    if items:
        text += (f"{len(items):,} collective{'' if len(items) == 1 else 's'} ({kind_counts(items)}), "
                 f"{compiled.get('attributed', 0):,} drawn on their "
                 f"nodes, {compiled.get('unattributed', 0):,} unattributed")
    else:
        text += "no communication"
    figures = []
    cost, memory = compiled.get("cost") or {}, compiled.get("memory") or {}
    if isinstance(cost.get("flops"), (int, float)):
        figures.append(flops_text(cost["flops"]))
    if isinstance(memory.get("peak"), (int, float)):
        figures.append(f"peak {bytes_text(memory['peak'])}")
    return text + (f"; per device: {', '.join(figures)}" if figures else "")


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
    installed: frozenset[str] | set[str] = frozenset(),
    on_graph: Callable[[Capture, Path | None], None] | None = None,
) -> SessionResult:
    """:func:`capture.session.run_session` for a command typed in a terminal: trusted (the
    user typed it), no editor buffers, a one-shot worker, ended when the user interrupts
    (Ctrl-C, SIGTERM, SIGHUP). Says on stderr which interpreter runs the model's code,
    and why that one: the CLI asks no trust question, but it never runs code silently.
    When the model's own libraries are missing from that interpreter, offers their
    install (:func:`offer_model_dependencies`) and, once it ran, captures again
    (``installed``: what was installed already, never offered twice)."""
    print(f"tensorviz {command}: the model's code runs in {interpreter_note(workspace, args.python)}", file=sys.stderr)
    request = CaptureRequest(
        workspace, profile, python=args.python, env=env, progress=progress, log=log, output=output,
        limits=limits_for(timeout, args.max_saved_file_mb, args.memory, getattr(args, "compile_timeout", None)),
        on_graph=on_graph,
    )
    with terminate_like_interrupt():
        try:
            result = run_session(request)
        except KeyboardInterrupt:
            request.cancel.set()
            raise
    shadowed = shadowed_libraries(result.capture.meta if result.capture.failure is None
                                  else result.capture.failure.details)
    if shadowed:
        print(f"tensorviz {command}: note: {shadowing_note(shadowed)}", file=sys.stderr)
    wanted = model_dependencies(result.capture.failure, result.job.python)
    if wanted is not None and not set(wanted["missing"]) & installed and offer_model_dependencies(command, result):
        print(f"tensorviz {command}: capturing again", file=sys.stderr)
        return capture_in_session(command, workspace, profile, args, timeout=timeout, env=env, progress=progress,
                                  log=log, output=output, installed=installed | set(wanted["missing"]), on_graph=on_graph)
    return result


def offer_model_dependencies(command: str, result: SessionResult,
                             ask: Callable[[str], str] | None = None) -> bool:
    """When the model's import failed for libraries the capture interpreter lacks: show
    the exact install command and, in a terminal, run it only if the person says yes
    (nothing is installed otherwise). True when it ran and succeeded (capture again).
    The command is only ever the parent's: ``python -m pip install`` of checked
    distribution names into the interpreter this capture ran (issue 52); it runs under a
    keeper (:func:`capture.session.launcher.kept`), so that it and whatever it starts
    end with this process, however it ends."""
    wanted = model_dependencies(result.capture.failure, result.job.python)
    if wanted is None:
        return False
    cmd = wanted["install"]
    print(f"tensorviz {command}: the model imports {', '.join(wanted['missing'])}, which the capture interpreter "
          f"{wanted['python']} lacks (a model's own libraries belong in the interpreter that captures it). "
          f"To install, run:\n  {shlex.join(cmd)}", file=sys.stderr)
    if ask is None:
        if not (sys.stdin.isatty() and sys.stderr.isatty()):
            return False  # no one to ask: nothing is installed
        ask = input
    try:
        answer = ask("Run this command now? [y/N] ").strip().lower()
    except EOFError:
        answer = ""
    if answer not in ("y", "yes"):
        print(f"tensorviz {command}: nothing was installed", file=sys.stderr)
        return False
    done = subprocess.run(kept(cmd), stdin=subprocess.DEVNULL)  # pip's output as it comes, on the terminal
    if done.returncode != 0:
        print(f"tensorviz {command}: the install failed (exit status {done.returncode}); nothing else was changed",
              file=sys.stderr)
        return False
    return True


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


def describe_failure(capture: Capture, command: str = "capture", graph_file: Path | None = None) -> str:
    """The failure as a few lines for a terminal, headed ``tensorviz COMMAND:``: the
    message cut to what a person reads (:func:`capture.graph.failure_text.readable_message`),
    the frames, and where the whole text is (``tensorviz inspect`` of the graph file
    written, which keeps it whole). TensorViz's own failure (stage ``internal``) says so."""
    f = capture.failure
    assert f is not None
    short = readable_message(f.message)
    lines = [f"tensorviz {command}: [{f.stage}] {f.type}: {short.text}"]
    lines += [f"    {line}" for line in frame_lines(f)]
    if graph_file is not None:
        cause = f.details.get("cause") if f.stage == "internal" and isinstance(f.details, dict) else None
        whole = readable_message(cause) if isinstance(cause, str) else short
        note = cut_note(whole, f"tensorviz inspect {shlex.quote(_shown_path(graph_file))}")
        if note:
            lines.append(f"    {note}")
    if f.stage == "internal":
        lines.append("    this is TensorViz's own failure, not your model's: please report it with the lines above "
                     "(capture again with -v for the worker's whole output)")
    for need in inputs_needed(f):
        name = f" ({need['name']})" if need["name"] else ""
        lines.append(f"    needs: {need['section']} {need['input']} axis {need['axis']}{name}")
    torch_version = capture.framework_version if capture.framework == "torch" else None
    hint = failure_hint(f.message, torch_version) if f.stage in ("trace", "import", "recipe") else None
    if hint:
        lines.append(f"    hint: {hint}")
    wanted = environment_needed(f)
    if wanted:
        flags = " ".join(f"--env {k}={v}" for k, v in wanted.items())
        lines.append(f"    hint: capture again with {flags}")
    return "\n".join(lines) + "\n"


def save_shorthand(args: argparse.Namespace) -> tuple[Path, str]:
    """Save (or update) the profile the shorthand describes; ``(workspace, name)``.

    Without ``--framework`` the framework comes from discovery (import-free): a JAX
    function or Flax module is saved with ``framework = "jax"``. A symbol discovery
    does not know is a usage error, unless the framework is given or the profile being
    updated names its framework already. The profile is the one saved for the symbol
    (found by its ``model``), else a new one named like the symbol. A setup that lacks
    what the symbol needs is a usage error, and nothing is saved."""
    target, recipe, discovered = shorthand_recipe(args)
    if discovered is not None:
        _note_zero_tokens(args, recipe)
    existing = getattr(args, "_existing", None)
    if existing is not None and not args.profile:  # found by its model, not named
        _note_reused(args, target, existing)
    save_profile(target.workspace, recipe)
    return target.workspace, recipe.name


def shorthand_recipe(args: argparse.Namespace, *, check_suggestion: bool = True
                     ) -> tuple[Target, Recipe, Discovered | None]:
    """``(target, recipe, discovery's reading or None)`` the shorthand describes, checked
    against the symbol; nothing saved. A setup that lacks what the symbol needs raises
    :class:`ShorthandError` with a command that would work, itself built and checked the
    same way first (``check_suggestion``) so that a command TensorViz prints is one it
    accepts."""
    target = parse_target(args.target, args.workspace)
    checkpoint = workspace_file(args.checkpoint, target.workspace, "--checkpoint") if args.checkpoint else None
    fixture = workspace_file(args.fixture, target.workspace, "--fixture") if args.fixture else None
    init_factory = factory_ref(args.init_factory, target.workspace, "--init-factory") if args.init_factory else None
    inputs_factory = (factory_ref(args.inputs_factory, target.workspace, "--inputs-factory")
                      if args.inputs_factory else None)
    found, taken = profile_for_target(target)
    name = args.profile or found or default_profile_name(target, taken)
    # An absent profile is written afresh; an invalid one (a hand edit TensorViz does not
    # understand) is left alone with the error naming the key and line (RecipeStoreError).
    existing = existing_profile(target.workspace, name)
    args._existing = existing
    # What the saved profile's mesh was: a mesh this attempt adds is not kept if it fails.
    args._mesh_before = (existing.mesh if existing is not None else None, args.mesh is not None)
    discovered: Discovered | None = None
    try:
        discovered = discover_symbol(target, getattr(args, "python", None))
        args._discovered = discovered
    except ShorthandError:
        if args.framework is None and (existing is None or not existing.framework_explicit):
            raise
        # The framework is given, or the saved profile names it: nothing is guessed, and
        # nothing discovery cannot see is checked.
    try:
        recipe = build_recipe(
            target,
            inputs=args.input,
            inits=args.init,
            framework=args.framework,
            device=args.device,
            seed=args.seed,
            name=name,
            existing=existing,
            discovered=discovered.framework if discovered is not None and args.framework is None else None,
            checkpoint=checkpoint,
            strict=args.strict,
            fixture=fixture,
            fixture_key=args.fixture_key,
            init_factory=init_factory,
            inputs_factory=inputs_factory,
            evidence=args.evidence,
            dtype=args.dtype,
            mesh=args.mesh,
            compile_mode=args.compile_mode,
            resolve=names_for(target, discovered),
            tokens=TokenIds.of(discovered.candidate) if discovered is not None else None,
            steps=args.then,
            before=args.before,
            model_factory=discovered is not None and discovered.candidate.model_factory,
        )
    except ArgumentError as exc:
        example = _argument_example(exc, discovered)
        raise ShorthandError(str(exc) + (f"\n  e.g. {exc.flag} {example}" if example else "")) from None
    if discovered is not None:
        problems = setup_problems(recipe, discovered.candidate)
        if problems:
            shown = f"{_shown_file(target)}:{target.qualname}"
            argv = _typed_arguments(args)
            command = fixed_command(args.command, shown, argv, problems, args.profile)
            refused = suggestion_refused(args, command) if check_suggestion else None
            raise ShorthandError(describe(problems, shown, command, refused=refused))
    return target, recipe, discovered


def suggestion_refused(args: argparse.Namespace, command: str) -> str | None:
    """Why TensorViz would refuse ``command`` (a suggestion about to be printed), or None
    when it parses, builds a valid setup and passes the setup checks. A command with ``…``
    to fill in is not checked: it says it cannot run as printed."""
    if "…" in command:
        return None
    parser = argparse.ArgumentParser(prog="tensorviz", add_help=False)
    register(parser.add_subparsers(dest="command"))
    words = shlex.split(command)
    try:
        with contextlib.redirect_stderr(io.StringIO()) as err:
            ns = parser.parse_args(["capture", *words[2:]])
    except SystemExit:
        return err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else "it does not parse"
    ns.command = args.command
    try:
        shorthand_recipe(ns, check_suggestion=False)
    except RecipeError as exc:
        return setup_error_text(exc)
    except ShorthandError as exc:
        return str(exc).splitlines()[0]
    return None


def _note_reused(args: argparse.Namespace, target: Target, existing: Any) -> None:
    """The shorthand updates the profile already saved for the symbol (perhaps one the
    workspace committed): say which, and what of it is kept because the command line
    does not give it, and how to start afresh instead."""
    kept = kept_from_saved(
        existing, inputs=bool(args.input or args.fixture or args.inputs_factory),
        init=bool(args.init or args.init_factory), steps=bool(args.then), checkpoint=bool(args.checkpoint),
        mesh=args.mesh is not None)
    if not kept:
        return
    fresh = default_profile_name(target, [existing.name])
    print(f"tensorviz {args.command}: note: updating the saved profile {existing.name} (its model is "
          f"{existing.model}); kept from it: {', '.join(kept)}. To start from nothing saved, give "
          f"--profile {fresh}", file=sys.stderr)


def _note_zero_tokens(args: argparse.Namespace, recipe: Any) -> None:
    """Token ids given as ``int64[1,16]`` whose vocabulary TensorViz cannot tell (an init
    factory builds the model, or a config built another way) stay zeros: say so, and how
    to draw ids that vary, instead of capturing one embedding row silently."""
    kwargs = dict(recipe.inputs.kwargs)
    for text in args.input:
        name, sep, value = text.partition("=")
        desc = kwargs.get(name.strip()) if sep else None
        if desc is None or not integer_tensor_without_generator(value):
            continue
        if getattr(desc, "generator", None) is not None and desc.generator.kind == "zeros" and \
                _is_token_input(args, name.strip()):
            print(f"tensorviz {args.command}: note: --input {name.strip()}: token ids are all zeros, since nothing "
                  f"tells TensorViz the vocabulary size; give {name.strip()}={value.strip()}:randint(0,N) for ids "
                  "below N", file=sys.stderr)


def _is_token_input(args: argparse.Namespace, name: str) -> bool:
    discovered = getattr(args, "_discovered", None)
    cand = discovered.candidate if discovered is not None else None
    return cand is not None and any(i.name == name and i.token is not None for i in cand.call_inputs)


def check_saved_profile(args: argparse.Namespace, workspace: Path, profile: str) -> None:
    """``--profile NAME`` alone: the saved setup checked like the shorthand's, when it
    validates and discovery finds its model (else the capture says what is wrong)."""
    from capture.recipe import RecipeError as _RecipeError, module_file

    try:
        recipe = load_profile(workspace, profile)
    except (_RecipeError, OSError):
        return
    module, _, qualname = recipe.model.partition(":")
    try:
        file = module_file(workspace, module)
    except (OSError, ValueError):
        file = None
    if file is None:
        return
    target = Target(file=file.resolve(), workspace=workspace, module=module, qualname=qualname)
    try:
        discovered = discover_symbol(target, getattr(args, "python", None))
    except ShorthandError:
        return
    problems = setup_problems(recipe, discovered.candidate)
    if problems:
        shown = f"{_shown_file(target)}:{qualname}"
        found, _ = profile_for_target(target)
        command = fixed_command(args.command, shown, [], problems, None if found == profile else profile)
        refused = suggestion_refused(args, command)
        raise ShorthandError(describe(problems, shown, command, refused=refused).replace(
            "; nothing was saved or run:", f" (profile {profile}); nothing was run:", 1))


def _argument_example(exc: ArgumentError, discovered: Discovered | None) -> str | None:
    """A valid ``NAME=VALUE`` for the argument an :class:`ArgumentError` is about."""
    if discovered is None or exc.name is None:
        return None
    cand = discovered.candidate
    params = cand.setup_fields if exc.flag == "--init" else cand.call_inputs
    for p in params:
        if p.name == exc.name:
            return f"{p.name}={example_value(p.to_json(), exc.flag)}"
    return None


def _typed_arguments(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    """The shorthand's setup arguments as typed, for a command line that would work."""
    out: list[tuple[str, str | None]] = [("--before", t) for t in args.before] + [("--init", t) for t in args.init] \
        + [("--then", t) for t in args.then] + [("--input", t) for t in args.input]
    for flag, value in (("--init-factory", args.init_factory), ("--inputs-factory", args.inputs_factory),
                        ("--framework", args.framework), ("--device", args.device), ("--checkpoint", args.checkpoint),
                        ("--fixture", args.fixture), ("--dtype", args.dtype),
                        ("--mesh", args.mesh), ("--compile", args.compile_mode)):
        if value:
            out.append((flag, value))
    if args.seed is not None:
        out.append(("--seed", str(args.seed)))
    if args.evidence:
        out.append((f"--{args.evidence}", None))
    # How the worker runs, as given: the command that would work runs where this one would.
    for flag, value in (("--python", getattr(args, "python", None)), ("--workspace", getattr(args, "workspace", None))):
        if value:
            out.append((flag, value))
    out += [("--env", item) for item in getattr(args, "env", None) or []]
    return out


def _shown_path(path: Path) -> str:
    """``path`` relative to the current folder when it is below it, else absolute."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(path)


def _shown_file(target: Target) -> str:
    try:
        return target.file.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(target.file)


def _usage(message: str) -> int:
    print(f"tensorviz capture: {message}", file=sys.stderr)
    return 2
