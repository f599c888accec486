"""Library frames: which installed files are worth a frame when no workspace frame exists.

A model built from a library (a ``transformers`` GPT-2 from a config, a torchvision
ResNet, a Linen model of ``nn.Dense`` layers) runs no workspace code while its ops
execute. Such an op records the innermost frame in *library* code instead, marked
``library: true`` with the absolute (real) path of the installed file: navigation only,
never hashed for freshness (``capture.graph.model.Frame``).

Library code is any real ``.py`` file except:

* the frameworks' own internals: ``torch``, ``jax``/``jaxlib``, ``numpy`` and their
  helper packages (a frame in ``torch/nn/functional.py`` says nothing about the model);
* Flax's core and its module machinery; Flax's *layers* (``flax/linen/*.py`` such as
  ``linear.py``, ``flax/nnx/nn/*.py``) are library code and are recorded;
* the standard library, and TensorViz's own ``capture`` package.

:func:`environment` is what the worker records in ``meta["environment"]``: the selected
interpreter's prefix and its ``site-packages`` folders, the only places the standalone
viewer shows library source lines from.
"""

from __future__ import annotations

import os
import re
import site
import sys
import sysconfig

from ..graph.meta import Environment

# Top-level packages whose frames are internals, never a library frame: these, and
# each framework's own (its declaration's ``internal_packages``: torch, jax…).
INTERNAL_PACKAGES = frozenset({
    "numpy", "typing_extensions", "_pytest", "pytest", "pluggy", "msgpack", "capture",
})


def internal_packages() -> frozenset[str]:
    """:data:`INTERNAL_PACKAGES` and every registered framework's internal packages."""
    from ..frameworks import capabilities, framework_names

    return INTERNAL_PACKAGES.union(*(capabilities(n).internal_packages for n in framework_names()))
# Inside flax: the layer files are library code; everything else is Flax's machinery.
_FLAX_MACHINERY = frozenset({
    "module.py", "transforms.py", "kw_only_dataclasses.py", "summary.py", "partitioning.py",
    "spmd.py", "dtypes.py", "initializers.py", "__init__.py",
})
_SITE_DIRS = ("site-packages", "dist-packages")
_CAPTURE_PACKAGE = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


def _stdlib_prefixes() -> tuple[str, ...]:
    out = set()
    for key in ("stdlib", "platstdlib"):
        p = sysconfig.get_path(key)
        if p:
            out.add(os.path.realpath(p).rstrip(os.sep) + os.sep)
    return tuple(sorted(out))


def _flax_is_layer(rel_parts: list[str]) -> bool:
    """``rel_parts``: the path below the ``flax`` folder. True for layer files."""
    if len(rel_parts) == 2 and rel_parts[0] == "linen":
        return rel_parts[1] not in _FLAX_MACHINERY
    if len(rel_parts) >= 3 and rel_parts[0] == "nnx" and rel_parts[1] == "nn":
        return rel_parts[-1] not in _FLAX_MACHINERY
    return False


class LibraryFiles:
    """Decides, per ``co_filename``, whether a frame there is a library frame, and
    gives its absolute real path (cached: one ``realpath`` and ``stat`` per file)."""

    def __init__(self) -> None:
        self._stdlib = _stdlib_prefixes()
        self._cache: dict[str, str | None] = {}
        self._capture: dict[str, bool] = {}
        # Internal packages loaded from outside a site-packages folder (an editable or
        # source checkout of torch/jax): their folders, as prefixes.
        extra = {_CAPTURE_PACKAGE}
        self._internal = internal_packages()
        for name in self._internal:
            mod = sys.modules.get(name)
            f = getattr(mod, "__file__", None)
            if isinstance(f, str) and os.path.basename(f).startswith("__init__."):  # a package
                extra.add(os.path.dirname(os.path.realpath(f)))
        flax = sys.modules.get("flax")
        #: Whether Flax was imported when this was made (its layer files are told apart).
        self.flax_imported = flax is not None
        f = getattr(flax, "__file__", None)
        self._flax_dir = os.path.dirname(os.path.realpath(f)) if isinstance(f, str) else None
        self._internal_dirs = tuple(sorted(d.rstrip(os.sep) + os.sep for d in extra))

    def path(self, filename: str) -> str | None:
        """The absolute real path of ``filename`` when a frame there is a library frame."""
        try:
            return self._cache[filename]
        except KeyError:
            pass
        out = self._classify(filename)
        if len(self._cache) < 100_000:
            self._cache[filename] = out
        return out

    def is_capture(self, filename: str) -> bool:
        """True for a file of TensorViz's own ``capture`` package."""
        try:
            return self._capture[filename]
        except KeyError:
            pass
        out = bool(filename) and not filename.startswith("<") and \
            os.path.realpath(os.path.abspath(filename)).startswith(_CAPTURE_PACKAGE + os.sep)
        if len(self._capture) < 100_000:
            self._capture[filename] = out
        return out

    def _classify(self, filename: str) -> str | None:
        if not filename or filename.startswith("<") or not filename.endswith(".py"):
            return None
        real = os.path.realpath(os.path.abspath(filename))
        if real.startswith(self._stdlib) and not _in_site_dir(real):
            return None
        if real.startswith(self._internal_dirs):
            return None
        parts = real.split(os.sep)
        top_index = _package_index(parts)
        if top_index is not None:
            top = parts[top_index].removesuffix(".py")
            if top in self._internal:
                return None
            if top == "flax" and not _flax_is_layer(parts[top_index + 1:]):
                return None
        elif self._flax_dir is not None and real.startswith(self._flax_dir + os.sep):
            if not _flax_is_layer(real[len(self._flax_dir) + 1:].split(os.sep)):
                return None
        if not os.path.isfile(real):
            return None
        return real


def _in_site_dir(real: str) -> bool:
    return any(d in real.split(os.sep) for d in _SITE_DIRS)


def _package_index(parts: list[str]) -> int | None:
    """Index of the top-level package folder just below the last site-packages folder."""
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] in _SITE_DIRS:
            return i + 1
    return None


def environment() -> Environment:
    """The selected interpreter's environment (``meta["environment"]``): ``prefix`` and
    ``site_packages``, the folders library frames may be shown from by a viewer."""
    dirs: list[str] = []
    candidates = [sysconfig.get_path("purelib"), sysconfig.get_path("platlib")]
    try:
        candidates += list(site.getsitepackages())
    except AttributeError:  # some embedded interpreters lack it
        pass
    try:
        candidates.append(site.getusersitepackages())
    except AttributeError:
        pass
    candidates += [p for p in sys.path if p and os.path.basename(p.rstrip(os.sep)) in _SITE_DIRS]
    for p in candidates:
        if not p:
            continue
        real = os.path.realpath(p)
        if os.path.basename(real) in _SITE_DIRS and os.path.isdir(real) and real not in dirs:
            dirs.append(real)
    return {"prefix": os.path.realpath(sys.prefix), "site_packages": dirs}


_CLASS_LINES: dict[str, dict[str, int]] = {}
# The real path of each module file class_location was asked about (a module file does not
# move while the process lives).
_REAL_PATHS: dict[str, str] = {}


def class_location(cls: type) -> tuple[str, int] | None:
    """(absolute real path, 1-based line of the ``class`` statement) of ``cls``'s
    definition, found without importing or parsing: the module's file is scanned once
    for ``class NAME`` lines (cached per file), and ``__firstlineno__`` (Python 3.13+)
    wins when present. None for classes without a source file (built-ins, ``exec``)."""
    mod = sys.modules.get(getattr(cls, "__module__", "") or "")
    filename = getattr(mod, "__file__", None)
    if not isinstance(filename, str) or not filename.endswith(".py"):
        return None
    real = _REAL_PATHS.get(filename)
    if real is None:  # ~50 us of system calls each time: once per module file
        real = _REAL_PATHS[filename] = os.path.realpath(filename)
    if real.startswith(_CAPTURE_PACKAGE + os.sep):
        return None
    line = getattr(cls, "__firstlineno__", None)
    if type(line) is not int:
        lines = _CLASS_LINES.get(real)
        if lines is None:
            lines = _CLASS_LINES[real] = _scan_classes(real)
        qual = getattr(cls, "__qualname__", cls.__name__)
        line = lines.get(qual) or lines.get(cls.__name__)
        if line is None:
            return None
    return real, line


def _scan_classes(path: str) -> dict[str, int]:
    """``qualname -> line`` of the ``class`` statements of a file (nesting by indent;
    the first definition of a name wins, as a module's namespace holds the last one
    rarely differently)."""
    out: dict[str, int] = {}
    try:
        with open(path, "rb") as fh:
            text = fh.read(8 << 20).decode("utf-8", errors="replace")
    except OSError:
        return out
    pattern = re.compile(r"^([ \t]*)class[ \t]+([A-Za-z_][A-Za-z0-9_]*)")
    stack: list[tuple[int, str]] = []  # (indent, qualname) of enclosing classes
    for n, line in enumerate(text.splitlines(), 1):
        m = pattern.match(line)
        if m is None:
            continue
        indent = len(m.group(1).expandtabs())
        while stack and stack[-1][0] >= indent:
            stack.pop()
        qual = (stack[-1][1] + "." if stack else "") + m.group(2)
        out.setdefault(qual, n)
        stack.append((indent, qual))
    return out
