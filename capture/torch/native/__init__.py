"""The native Torch recorder: the capture's fast path (issue 51).

``recorder.cpp`` is a C++ ``RecordFunction`` callback (the recording thread's) that records the ops a
``TorchDispatchMode`` would see (an event is a graph op when every event above it is
``CompositeImplicitAutograd`` and it is not one itself), with the trace's value identity,
versions, storages, literals, frames and activation statistics, in C++ columns that
:mod:`capture.torch.native.recording` turns into the same graph the Python path builds.

It is compiled from this package's own source with ``torch.utils.cpp_extension.load_inline``
(g++ and ninja) into a per-user cache folder keyed by the torch version, the Python
version and the source's hash (``$TENSORVIZ_NATIVE_CACHE``, else
``$XDG_CACHE_HOME/tensorviz/torch-native``, else ``~/.cache/tensorviz/torch-native``),
under a file lock. Nothing is installed: the folder holds one build of one source.

``TENSORVIZ_TORCH_RECORDER``: ``auto`` (default), ``python`` or ``native``. In ``auto``
mode a capture never waits for a compile: the first one starts the build in a detached
background process (its log: ``build.log`` in the cache folder) and records with the
Python path; later captures load the built module. ``native`` builds (and waits) when
needed and fails with the reason when it cannot be used; ``python`` never loads it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from ...graph.meta import RECORDER_NOT_BUILT
from ...worker.procs import MARKER_ENV

ENV = "TENSORVIZ_TORCH_RECORDER"
# What a capture's note says while no build exists (after "python: ").
NOT_BUILT = RECORDER_NOT_BUILT.removeprefix("python: ")
MODES = ("auto", "python", "native")
SOURCE = Path(__file__).with_name("recorder.cpp")
CFLAGS = ["-O2", "-DNDEBUG"]
_ROOT = Path(__file__).resolve().parents[3]  # the folder holding the ``capture`` package

_loaded: list[Any] = []  # the loaded module, once


class NativeUnavailable(RuntimeError):
    """The native recorder cannot be used (the reason is the message)."""


def requested() -> str:
    """The recorder the environment asks for (``TENSORVIZ_TORCH_RECORDER``)."""
    got = os.environ.get(ENV, "auto").strip().lower() or "auto"
    if got not in MODES:
        raise ValueError(f"{ENV} must be one of {', '.join(MODES)}, not {got!r}")
    return got


def _digest() -> str:
    import torch

    text = SOURCE.read_text(encoding="utf-8") + " ".join(CFLAGS) + torch.__version__ + sys.version
    return hashlib.sha256(text.encode()).hexdigest()


def cache_dir() -> Path:
    """This source's build folder (made if needed)."""
    import torch

    base = os.environ.get("TENSORVIZ_NATIVE_CACHE")
    if not base:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = str(Path(xdg) / "tensorviz" / "torch-native") if xdg else str(Path.home() / ".cache" / "tensorviz" / "torch-native")
    folder = Path(base) / f"torch{torch.__version__}-py{sys.version_info[0]}.{sys.version_info[1]}-{_digest()[:16]}"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    _check_private(folder)
    return folder


def _check_private(folder: Path) -> None:
    """The build folder holds a library this process will load: it must be this user's
    and writable by no one else (else another user could put their own code there)."""
    st = folder.stat()
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise NativeUnavailable(f"the native recorder's cache folder {folder} belongs to another user")
    if st.st_mode & 0o022:
        raise NativeUnavailable(f"the native recorder's cache folder {folder} is writable by others "
                                f"(mode {st.st_mode & 0o777:o}); make it private (chmod 700) to use it")


def missing_tools() -> str | None:
    """What the build needs and this machine lacks, or None."""
    from torch.utils.cpp_extension import is_ninja_available

    cxx = os.environ.get("CXX", "c++")
    if shutil.which(cxx) is None and shutil.which("g++") is None:
        return f"no C++ compiler ({cxx} / g++ not on PATH)"
    if not is_ninja_available():
        return "no ninja (needed by torch.utils.cpp_extension)"
    import sysconfig

    include = sysconfig.get_paths()["include"]
    if not os.path.isfile(os.path.join(include, "Python.h")):
        return f"no Python headers ({include}/Python.h: on Debian, apt-get install python3-dev)"
    return None


def _name(digest: str | None = None) -> str:
    """The module's name: this source's digest (``digest``, when already read) shortened."""
    return f"tensorviz_native_{(digest or _digest())[:12]}"


def _build(folder: Path) -> Any:
    """Compile (or load what was compiled) under the folder's lock."""
    import fcntl

    from torch.utils.cpp_extension import load_inline

    with open(folder / "tensorviz.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            module = load_inline(_name(), cpp_sources=[SOURCE.read_text(encoding="utf-8")], extra_cflags=CFLAGS,
                                 build_directory=str(folder), verbose=False)
        except Exception as exc:  # noqa: BLE001 - the reason is kept for the user
            first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
            with open(folder / "build.log", "a", encoding="utf-8") as log:
                log.write(f"{type(exc).__name__}: {exc}\n")
            (folder / "failed").write_text(f"{type(exc).__name__}: {first}", encoding="utf-8")
            raise NativeUnavailable(f"the native recorder did not build: {type(exc).__name__}: {first} "
                                    f"(log: {folder / 'build.log'})") from None
        (folder / "ready").write_text(_digest(), encoding="utf-8")
        return module


def _import_built(folder: Path, digest: str) -> Any:
    """The module a finished build left in ``folder`` (its ``ready`` mark names this
    source's digest), imported straight from its library: no ``torch.utils.cpp_extension``
    (which imports setuptools) and no ninja run, ~0.15 s of every worker's first capture.
    None when there is no such build: :func:`_build` then compiles or loads it."""
    import importlib.util

    try:
        ready = (folder / "ready").read_text(encoding="utf-8")
    except OSError:
        return None
    name = _name(digest)
    library = folder / f"{name}{'.pyd' if os.name == 'nt' else '.so'}"
    if ready != digest or not library.is_file():
        return None
    spec = importlib.util.spec_from_file_location(name, library)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _building(folder: Path) -> bool:
    """Whether another process holds the folder's lock (a build under way)."""
    import fcntl

    try:
        with open(folder / "tensorviz.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(lock, fcntl.LOCK_UN)
            return False
    except OSError:
        return True


def start_background_build(folder: Path) -> None:
    """Compile in a detached process (the capture goes on with the Python path)."""
    log = open(folder / "build.log", "ab")
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from capture.torch.native import build_main; "
            "build_main()")
    subprocess.Popen([sys.executable, "-c", code, str(_ROOT)], stdin=subprocess.DEVNULL, stdout=log,
                     stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)
    log.close()


def build_main() -> None:
    """The background build's entry point: builds unless built, failed or under way."""
    try:
        folder = cache_dir()
    except NativeUnavailable as exc:
        print(exc, flush=True)
        raise SystemExit(1) from None
    if (folder / "ready").is_file() or (folder / "failed").is_file() or _building(folder):
        return
    missing = missing_tools()
    if missing is not None:
        print(f"the native recorder cannot be built here: {missing}", flush=True)
        raise SystemExit(1)
    try:
        _build(folder)
        print(f"built {folder}", flush=True)
    except NativeUnavailable as exc:
        print(exc, flush=True)
        raise SystemExit(1) from None


def load(wait: bool) -> Any:
    """The compiled module. ``wait``: compile now when needed (else a missing build starts
    in the background and :class:`NativeUnavailable` says so). Raises
    :class:`NativeUnavailable` with the reason when it cannot be had."""
    if _loaded:
        return _loaded[0]
    folder = cache_dir()
    ready = (folder / "ready").is_file()
    failed = folder / "failed"
    if not ready and failed.is_file() and not wait:
        raise NativeUnavailable(f"the native recorder did not build: {failed.read_text(encoding='utf-8')} "
                                f"(log: {folder / 'build.log'})")
    if not ready:
        missing = missing_tools()
        if missing is not None:
            raise NativeUnavailable(f"the native recorder cannot be built here: {missing}")
        if not wait:
            if _building(folder):
                raise NativeUnavailable(f"the native recorder is being built in the background (log: "
                                        f"{folder / 'build.log'}); this capture used the Python recorder")
            if MARKER_ENV in os.environ:
                # In a capture worker: its process tree is swept when the capture ends
                # (a detached build would be killed as an escaped process). The parent
                # starts the build on reading this note (capture.session.native_build).
                raise NativeUnavailable(f"{NOT_BUILT}; TensorViz builds it in the background with this "
                                        f"interpreter (log: {folder / 'build.log'})")
            start_background_build(folder)
            raise NativeUnavailable(f"{NOT_BUILT}; it is being built in the background (log: "
                                    f"{folder / 'build.log'}); this capture used the Python recorder")
    module = _import_built(folder, _digest()) if ready else None
    if module is None:
        module = _build(folder)
    _loaded.append(module)
    return module


__all__ = ["ENV", "NativeUnavailable", "cache_dir", "load", "requested"]
