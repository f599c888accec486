"""``tensorviz view FILE.tvg``: serve a graph file in the browser viewer and print its URL.

The URL is the only thing written to standard output (one line, flushed at once), so a
script or a test can read it, fetch from it and stop the process (Ctrl-C, SIGTERM, or
``--timeout``). ``open`` and ``demo`` serve the same way through :func:`serve`.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
import webbrowser
from pathlib import Path
from typing import Any, Callable

from capture.graph import graphfile
from capture.graph.model import Capture


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("view", help="serve a .tvg graph file in the browser viewer and print its URL")
    p.add_argument("file", help="a portable graph file (.tvg)")
    p.add_argument(
        "--workspace", metavar="DIR", default=None,
        help="the folder whose files go-to-source may show (default: none; the graph's own recorded "
             "sources are shown from the folder that holds them unchanged: the current folder, else "
             "the folder around the graph file, as for WORKSPACE/.tensorviz/captures/NAME.tvg)",
    )
    add_serve_options(p)
    p.set_defaults(func=run)


def add_serve_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-browser", action="store_true", help="only print the URL; do not open a browser")
    p.add_argument("--port", type=int, default=0, metavar="N", help="port on 127.0.0.1 (default: a free one)")
    p.add_argument(
        "--timeout", type=float, default=None, metavar="SECONDS",
        help="stop serving after SECONDS (default: run until Ctrl-C)",
    )


def run(args: argparse.Namespace) -> int:
    try:
        capture = graphfile.read(args.file)
    except graphfile.GraphFileError as exc:
        print(f"tensorviz view: {exc}", file=sys.stderr)
        return 1
    workspace = Path(args.workspace) if args.workspace else recorded_workspace(capture, Path(args.file), Path.cwd())
    if not workspace.is_dir():
        print(f"tensorviz view: {workspace}: not a folder", file=sys.stderr)
        return 1
    if not args.workspace and workspace != Path.cwd():
        print(f"tensorviz view: showing the graph's sources from {workspace} (they match there)", file=sys.stderr)
    # A graph file of unknown origin: its recorded sources must not widen what is served,
    # and without --workspace the current folder (a home directory?) is not browsable.
    return serve("view", capture, capture_title(capture, Path(args.file)), workspace, args, trusted_sources=False,
                 browse_workspace=args.workspace is not None)


def capture_title(capture: Capture, file: Path) -> str:
    """What the page is titled by: the profile the capture came from (as ``tensorviz
    open`` and the editor title it), else the model it captured, else the file's name."""
    recipe = capture.recipe if isinstance(capture.recipe, dict) else {}
    name, model = recipe.get("name"), recipe.get("model")
    if isinstance(name, str) and name:
        return name
    if isinstance(model, str) and ":" in model:
        return model.rpartition(":")[2]
    return file.name


def recorded_workspace(capture: Capture, file: Path, cwd: Path) -> Path:
    """The folder a graph file's recorded sources are relative to: the current folder,
    else the nearest folder around the file, where a recorded source exists with its
    recorded sha256 (a capture written to ``WORKSPACE/.tensorviz/captures/NAME.tvg``
    and opened from elsewhere). The current folder when no folder holds one: the viewer
    still checks every file's sha256 before showing it."""
    from viewer.server.sources import sha256_of  # the viewer's own check, as it will make it

    relative = [s for s in capture.sources if s.path and not Path(s.path).is_absolute()][:16]
    if not relative:
        return cwd
    try:
        around = file.resolve().parent
    except (OSError, RuntimeError):
        return cwd
    for folder in (cwd, around, *around.parents):
        for src in relative:
            path = folder / src.path
            if path.is_file() and sha256_of(path) == str(src.sha256).lower():
                return folder
    return cwd


def serve(command: str, capture: Capture, title: str, workspace: Path | None, args: argparse.Namespace,
          *, trusted_sources: bool = False, baseline: tuple[Capture | Callable[[], Capture], str] | None = None,
          browse_workspace: bool = True) -> int:
    """Serve ``capture``, print the URL, open a browser unless ``--no-browser``, and block
    until Ctrl-C, SIGTERM or ``--timeout``. Returns the exit status. ``trusted_sources``:
    this process's own worker produced ``capture`` (see ``ViewerServer.add_capture``).
    ``baseline=(capture, label)``: the page offers a diff against it (diff mode)."""
    started = start_serving(command, capture, title, workspace, args, trusted_sources=trusted_sources,
                            baseline=baseline, browse_workspace=browse_workspace)
    if isinstance(started, int):
        return started
    return keep_serving(command, started[0], args)


def start_serving(command: str, capture: Capture, title: str, workspace: Path | None, args: argparse.Namespace,
                  *, trusted_sources: bool = False,
                  baseline: tuple[Capture | Callable[[], Capture], str] | None = None,
                  browse_workspace: bool = True) -> "tuple[Any, int] | int":
    """:func:`serve` up to the URL printed and the browser opened: ``(server, capture id)``,
    or the exit status when it cannot listen. :func:`keep_serving` then blocks."""
    if not 0 <= args.port <= 65535:
        print(f"tensorviz {command}: --port must be between 0 and 65535", file=sys.stderr)
        return 2
    from viewer.server.app import ViewerServer  # not at import: `tensorviz diff` without --view never serves

    server = ViewerServer(workspace=workspace, port=args.port, browse_workspace=browse_workspace)
    # warm: the index and the first view's pages are made while the browser starts (no
    # idle gap between serving and the page's first request)
    cid = server.add_capture(capture, title, warm=True, trusted_sources=trusted_sources, baseline=baseline)
    try:
        url = server.start()
        if baseline is not None and command == "diff":
            url = server.url_for(cid) + "&diff=previous"  # the page opens in diff mode
    except OSError as exc:
        print(f"tensorviz {command}: cannot listen on 127.0.0.1:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    # SIGTERM stops the server cleanly from the moment the URL is out: a script that reads
    # the URL, fetches and stops the process may do so before keep_serving starts waiting
    # (the warm-up thread competes for the interpreter meanwhile): exit status -15 before.
    _listen_for_sigterm()
    print(url, flush=True)
    print(f"TensorViz viewer for {title} at {url}  (Ctrl-C to stop)", file=sys.stderr, flush=True)
    if not args.no_browser:
        open_browser(url)
    return server, cid


def keep_serving(command: str, server: Any, args: argparse.Namespace) -> int:
    """Block until Ctrl-C, SIGTERM or ``--timeout``, then stop ``server``."""
    try:
        timed_out = _wait(args.timeout)
    except KeyboardInterrupt:
        timed_out = False
    finally:
        server.stop()
    if timed_out:
        # --timeout: the viewer stops saying so, not silently.
        print(f"tensorviz {command}: stopped serving after {args.timeout:g} s (--timeout)", file=sys.stderr)
    return 0


def open_browser(url: str) -> None:
    """Open ``url`` in the user's browser when there is a graphical one to use."""
    graphical = sys.platform in ("darwin", "win32") or os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    if not graphical and not os.environ.get("BROWSER"):
        print("No graphical browser here: open the URL above in a browser on this machine.", file=sys.stderr)
        return
    # webbrowser may wait for the browser process; the server must not.
    threading.Thread(target=webbrowser.open, args=(url,), name="open-browser", daemon=True).start()


_sigterm = threading.Event()  # set by SIGTERM once :func:`_listen_for_sigterm` ran


def _listen_for_sigterm() -> None:
    """From now on SIGTERM asks :func:`_wait` to return (in the main thread only, where
    Python delivers signals)."""
    _sigterm.clear()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda signum, frame: _sigterm.set())


def _wait(timeout: float | None) -> bool:
    """Block until SIGTERM (False) or ``timeout`` seconds passed (True)."""
    stop = _sigterm
    deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
    # Short waits so that Ctrl-C is seen at once on every platform.
    while not stop.is_set():
        if deadline is not None and time.monotonic() >= deadline:
            return True
        stop.wait(0.2 if deadline is None else min(0.2, max(0.0, deadline - time.monotonic())))
    return False
