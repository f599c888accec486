"""The framework plug-in registry: the frameworks a recipe may name, what each needs in
the selected interpreter, and which module implements its capture.

A framework capture is a module in a folder of its own (``capture/torch/framework.py``,
``capture/jax/framework.py``) that implements the typed contract
:class:`capture.worker.plugin.FrameworkPlugin` (its version, the version check, the
device check, the capture; see that module), beside a plain-data ``declaration.py``
whose ``CAPABILITIES`` (:class:`~capture.frameworks.capabilities.Capabilities`) says
what the rest of TensorViz needs to know about it: the kinds of symbol discovery finds,
the recipe keys and devices it accepts, its wording. It is registered here, with one
:func:`register_framework` line; nothing else in TensorViz names it: discovery, the
recipe rules, the language server, the command line and the viewer read
:func:`capabilities`. A third framework adds its folder and one registration
(``tests/lsp/test_third_framework.py`` opens one from every front end).

The registry imports no plug-in and no framework: the parent reads what a framework
requires (``requires``, probed in the selected interpreter without importing it), and
the worker imports the plug-in by its module name when a capture asks for it
(:func:`capture.worker.plugin.load_plugin`, which checks the contract). TensorViz's own
tests register plug-ins that do not ship through :data:`TEST_PLUGINS_ENV`
(``tests/fake_framework.py``).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType, ModuleType

from .capabilities import DEVICE_FORMS, Capabilities, CandidateKind, ClassNamespace, undeclared

__all__ = [
    "FRAMEWORKS", "FRAMEWORK_NAMES", "TEST_PLUGINS_ENV", "Capabilities", "CandidateKind", "ClassNamespace",
    "FrameworkInfo", "candidate_kinds", "capabilities", "declared_by", "device_forms", "framework_info", "framework_names", "framework_of_kind",
    "is_function_kind", "kind_declaration",
    "load_framework", "plugins_for_tests", "register_framework", "unregister_framework",
]


@dataclass(frozen=True, slots=True)
class FrameworkInfo:
    """One registered framework. ``module``: the plug-in, a module implementing
    :class:`capture.worker.plugin.FrameworkPlugin` (imported by name, in the worker
    only). ``requires``: top-level modules the worker needs for this framework, probed
    with ``importlib.util.find_spec``; each is also its pip distribution name."""

    name: str
    module: str
    requires: tuple[str, ...]
    # Packages needed only by some models: each is required when the model's module
    # source mentions it (Flax is an optional model dependency; a plain JAX function
    # must not need it).
    model_requires: tuple[str, ...] = ()
    # Set only for a test plug-in: the file it is loaded from (it is not in a package).
    path: str | None = None
    # The plain-data module whose ``CAPABILITIES`` declares the framework (imports no
    # framework); a test plug-in's file declares it itself.
    declaration: str = ""

    def requirements(self, model_source: str | None) -> tuple[str, ...]:
        """What the selected interpreter must have for a model with this source text
        (``None``: the source is unknown, so every optional package is required)."""
        extra = tuple(m for m in self.model_requires if model_source is None or m in model_source)
        return self.requires + extra


_REGISTERED: dict[str, FrameworkInfo] = {}
#: Every registered framework by name, in registration order (a live, read-only view).
FRAMEWORKS: Mapping[str, FrameworkInfo] = MappingProxyType(_REGISTERED)


def register_framework(info: FrameworkInfo) -> FrameworkInfo:
    """Register a framework plug-in: ``info.module`` implements
    :class:`capture.worker.plugin.FrameworkPlugin`. The name is what a recipe's
    ``framework`` says: an identifier, registered once."""
    if not info.name.isidentifier():
        raise ValueError(f"a framework's name must be an identifier, not {info.name!r}")
    if info.name in _REGISTERED:
        raise ValueError(f"the framework {info.name!r} is already registered (by {_REGISTERED[info.name].module})")
    if not info.requires:
        raise ValueError(f"the framework {info.name!r} names no package the worker needs (requires)")
    _REGISTERED[info.name] = info
    return info


def unregister_framework(name: str) -> None:
    """Remove a registration (a test's own framework, when the test ends)."""
    _REGISTERED.pop(name, None)
    _DECLARED.pop(name, None)
    _kinds.cache_clear()


# The frameworks TensorViz ships, one registration each. The shared worker requires
# Torch for every real framework: adding JAX never replaces the selected Torch build
# (the spec's rule), so JAX recipes need both.
register_framework(FrameworkInfo("torch", "capture.torch.framework", ("msgpack", "torch"),
                                  declaration="capture.torch.declaration"))
register_framework(FrameworkInfo("jax", "capture.jax.framework", ("msgpack", "torch", "jax"), ("flax",),
                                  declaration="capture.jax.declaration"))

# The frameworks a user can name (those TensorViz ships), in the order messages list them.
FRAMEWORK_NAMES: tuple[str, ...] = tuple(_REGISTERED)

# TensorViz's own tests add capture plug-ins that do not ship (a pure-Python framework
# that exercises the runtime without JAX or Torch). They name them here, as
# ``NAME=/abs/path/plugin.py`` entries separated by ``os.pathsep``. The worker inherits
# the environment, so a parent that sets it gets a worker that loads them.
TEST_PLUGINS_ENV = "TENSORVIZ_TEST_PLUGINS"


def plugins_for_tests() -> dict[str, FrameworkInfo]:
    """The plug-ins named by ``TENSORVIZ_TEST_PLUGINS`` (read on every call). Each needs
    only ``msgpack`` and is imported from its file under the file's stem as module name."""
    return dict(_plugins(os.environ.get(TEST_PLUGINS_ENV, ""), tuple(_REGISTERED)))


@lru_cache(maxsize=8)
def _plugins(setting: str, registered: tuple[str, ...]) -> Mapping[str, FrameworkInfo]:
    plugins: dict[str, FrameworkInfo] = {}
    for entry in filter(None, setting.split(os.pathsep)):
        name, sep, path = entry.partition("=")
        if not sep or not name.isidentifier() or name in registered or not os.path.isabs(path):
            raise ValueError(f"{TEST_PLUGINS_ENV}: expected NAME=/absolute/path.py, found {entry!r}")
        plugins[name] = FrameworkInfo(name, Path(path).stem, ("msgpack",), path=path)
    return MappingProxyType(plugins)


def framework_names() -> tuple[str, ...]:
    """The frameworks a recipe may name now: the registered ones (torch, jax), then any
    test plug-ins."""
    return tuple(_REGISTERED) + tuple(plugins_for_tests())


def framework_info(name: str) -> FrameworkInfo:
    info = _REGISTERED.get(name) or plugins_for_tests().get(name)
    if info is None:
        raise KeyError(f"unknown framework {name!r} (known: {', '.join(framework_names())})")
    return info


def load_framework(name: str) -> ModuleType:
    """Import a framework's capture module (it imports the framework itself lazily);
    :func:`capture.worker.plugin.load_plugin` also checks that it keeps the contract."""
    info = framework_info(name)
    if info.path is None:
        return importlib.import_module(info.module)
    loaded = sys.modules.get(info.module)
    if loaded is not None:
        if Path(getattr(loaded, "__file__", "") or "").resolve() != Path(info.path).resolve():
            raise ImportError(f"the test plug-in {name!r}: a module {info.module!r} from elsewhere is already imported")
        return loaded
    spec = importlib.util.spec_from_file_location(info.module, info.path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the test plug-in {name!r} from {info.path}")
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs, as an import would: workspace code of a test imports
    # it by this name (its input factories build the plug-in's arrays).
    sys.modules[info.module] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[info.module]
        raise
    return module


_DECLARED: dict[str, tuple[FrameworkInfo, Capabilities]] = {}


def capabilities(name: str) -> Capabilities:
    """What framework ``name`` declares (its ``declaration`` module's ``CAPABILITIES``;
    a test plug-in's own file). A name registered nowhere here (a graph file written
    where another framework was installed) reads as :func:`~.capabilities.undeclared`:
    readers of captures never fail on a framework they do not know."""
    info = _REGISTERED.get(name) or plugins_for_tests().get(name)
    if info is None:
        return undeclared(name)
    known = _DECLARED.get(name)
    if known is not None and known[0] == info:
        return known[1]
    if info.path is not None:
        declared = getattr(_declaration_of_file(name, info.path), "CAPABILITIES", None)
    else:
        declared = getattr(importlib.import_module(info.declaration), "CAPABILITIES", None) if info.declaration else None
    if declared is not None and not isinstance(declared, Capabilities):
        raise TypeError(f"the framework {name!r}: CAPABILITIES is a {type(declared).__name__}, not a Capabilities")
    caps = declared or undeclared(name)
    _DECLARED[name] = (info, caps)
    return caps


def _declaration_of_file(name: str, path: str) -> ModuleType:
    """A test plug-in's file, run for its declaration under a private name and not kept
    in ``sys.modules``: the worker imports the plug-in itself, by its own name."""
    spec = importlib.util.spec_from_file_location(f"_tensorviz_declaration_{name}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot read the test plug-in {name!r}'s declaration from {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def candidate_kinds() -> Mapping[str, tuple[str, CandidateKind]]:
    """Every kind of symbol discovery may report, by name: its framework and declaration
    (read once per set of frameworks: discovery asks for every class and candidate)."""
    return _kinds(framework_names(), os.environ.get(TEST_PLUGINS_ENV, ""))


@lru_cache(maxsize=16)
def _kinds(names: tuple[str, ...], plugins: str) -> Mapping[str, tuple[str, CandidateKind]]:
    out: dict[str, tuple[str, CandidateKind]] = {}
    for name in names:
        for kind in capabilities(name).kinds:
            out.setdefault(kind.name, (name, kind))
    return MappingProxyType(out)


def declared_by(has: Callable[[Capabilities], bool]) -> str:
    """The registered frameworks whose declaration ``has`` something, as messages and
    help say it ("Torch", "JAX", "Torch/JAX"); "no framework's" when none does."""
    return "/".join(c.word for c in map(capabilities, framework_names()) if has(c)) or "no framework's"


def device_forms() -> dict[str, str]:
    """Every device family a registered framework declares, and how it is written
    (:data:`~.capabilities.DEVICE_FORMS`, then the frameworks' own ``device_forms``), in
    the order messages list them."""
    forms: dict[str, str] = {}
    for name in framework_names():
        caps = capabilities(name)
        for family in caps.devices:
            forms.setdefault(family, caps.device_forms.get(family) or DEVICE_FORMS.get(family, "indexed"))
    return dict(sorted(forms.items(), key=lambda kv: list(DEVICE_FORMS).index(kv[0]) if kv[0] in DEVICE_FORMS
                       else len(DEVICE_FORMS)))


def kind_declaration(kind: str) -> CandidateKind | None:
    """What a framework declares about the candidate kind ``kind`` (None: nothing)."""
    found = candidate_kinds().get(kind)
    return found[1] if found else None


def is_function_kind(kind: str) -> bool:
    """Is a candidate of ``kind`` a function traced as it is (nothing constructs it)?"""
    found = kind_declaration(kind)
    return found is not None and found.symbol == "function"


def framework_of_kind(kind: str) -> str | None:
    """The framework that captures a candidate of ``kind`` (None: no framework declares it)."""
    found = candidate_kinds().get(kind)
    return found[0] if found else None
