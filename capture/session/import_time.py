"""What a model needs when it is imported, from source alone (``ast``; issue 49, item 4).

The dependency advice (:mod:`.model_dependencies`) lists the libraries the model's files
import. A file a package imports only inside a function (timm's TensorFlow reader, loaded
by ``create_reader`` when a TFDS dataset is asked for) is not imported with the model, so
its libraries are not the model's needs: :func:`import_time_files` keeps the workspace files
reachable from the model's file through statements that run at import time (the module's
top level, and the top level of its ``if``/``try`` blocks), not through function bodies.

A package's declared requirements (``[project].dependencies`` of ``pyproject.toml``,
``requirements.txt``) name what it needs though its imports hide it behind a ``try``
(timm's ``huggingface_hub``): :func:`declared_imports` gives their import names, and those
the files import at import time (optionally or not) join the advice.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path
from typing import Callable, Iterator

from ..recipe import module_file
from .import_closure import AST_MAX_CHARS

#: Distributions whose import name differs (pip normalises ``-``/``_`` and case).
IMPORT_NAMES = {
    "pillow": "PIL", "pyyaml": "yaml", "opencv-python": "cv2", "opencv-python-headless": "cv2",
    "scikit-learn": "sklearn", "beautifulsoup4": "bs4", "attrs": "attr", "protobuf": "google",
    "scikit-image": "skimage", "python-dateutil": "dateutil", "pycryptodome": "Crypto",
    "huggingface-hub": "huggingface_hub",
}
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _import_time_nodes(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of ``body`` that run when the module is imported: its own, and
    those of its top-level ``if``/``try``/``with`` blocks (never a function's or class
    method's body)."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            yield from _import_time_nodes(node.body)
            yield from _import_time_nodes(node.orelse)
        elif isinstance(node, ast.Try):
            for part in (node.body, node.orelse, node.finalbody, *[h.body for h in node.handlers]):
                yield from _import_time_nodes(part)
        elif isinstance(node, ast.With):
            yield from _import_time_nodes(node.body)
        elif isinstance(node, ast.ClassDef):
            yield from _import_time_nodes(node.body)  # a class body runs at import


def _imported(node: ast.stmt, package: list[str]) -> list[str]:
    """The dotted names an import statement may load (``from pkg import sub`` may name a
    submodule); ``package``: the importing file's package, for relative imports."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = package[: len(package) - (node.level - 1)] if node.level and node.level - 1 <= len(package) else []
    mod = ".".join(base + ([node.module] if node.module else []))
    out = [mod] if mod else []
    out += [f"{mod}.{a.name}" if mod else a.name for a in node.names if a.name != "*"]
    return out


def import_time_files(root: Path, start: list[Path], read: Callable[[Path], str | None],
                      limit: int = 2000) -> list[Path]:
    """Workspace files imported when ``start`` is imported (``start`` included): imports
    at import time only, followed within ``root``."""
    root = root.resolve()
    seen: dict[Path, None] = {}
    queue = [p.resolve() for p in start]
    roots = _roots(root, queue)
    while queue and len(seen) < limit:
        path = queue.pop()
        if path in seen or root not in path.parents:
            continue
        seen[path] = None
        tree = _tree(read, path)
        if tree is None:
            continue
        # A module's package (a package's __init__ is its own): relative imports start there.
        package = list(path.relative_to(root).with_suffix("").parts)[:-1]
        for node in _import_time_nodes(tree.body):
            for name in _imported(node, package):
                parts = name.split(".")
                # Importing a.b.c runs a/__init__.py and a/b/__init__.py too.
                prefixes = (_found(roots, ".".join(parts[:i])) for i in range(1, len(parts) + 1))
                queue += [f for f in prefixes if f is not None and f not in seen]
    return list(seen)


def _roots(root: Path, start: list[Path]) -> list[Path]:
    """Where imports resolve: the workspace, and a start file's folder that is no package
    (a script folder is on the worker's ``sys.path``)."""
    return [root] + [p.parent for p in start if p.parent != root and not (p.parent / "__init__.py").is_file()]


def _tree(read: Callable[[Path], str | None], path: Path) -> ast.Module | None:
    """The file's syntax tree; None when it cannot be read, does not parse, or is too long
    for ``ast`` (:data:`~.import_closure.AST_MAX_CHARS`, as the other walks bound it)."""
    text = read(path)
    if text is not None and len(text) > AST_MAX_CHARS:
        return None
    try:
        return ast.parse(text) if text is not None else None
    except (SyntaxError, ValueError, RecursionError):
        return None


def _found(roots: list[Path], name: str) -> Path | None:
    """The workspace file of module ``name`` under the first root that has it."""
    for base in roots:
        found = module_file(base, name)
        if found is not None:
            return found.resolve()
    return None


def declared_imports(workspace: Path) -> list[str]:
    """Import names of the requirements the workspace declares (``pyproject.toml``'s
    ``[project].dependencies``, ``requirements.txt``), in order; [] when it declares none."""
    names: list[str] = []
    pyproject = workspace / "pyproject.toml"
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project") or {}
        names += [d for d in project.get("dependencies") or [] if isinstance(d, str)]
    except (OSError, ValueError, AttributeError):
        pass
    try:
        lines = (workspace / "requirements.txt").read_text(encoding="utf-8").splitlines()
        names += [line for line in lines if line.strip() and not line.strip().startswith(("#", "-"))]
    except (OSError, ValueError):
        pass
    out: dict[str, None] = {}
    for text in names:
        m = _REQUIREMENT.match(text)
        if m:
            dist = m.group(1).lower().replace("_", "-")
            out[IMPORT_NAMES.get(dist, dist.replace("-", "_"))] = None
    return list(out)


def model_import_view(workspace: Path, model_ref: str | None, files: list[Path]) -> tuple[list[Path], list[str]]:
    """``(the files among ``files`` imported with the model, the workspace's declared
    requirements as import names)``; the files unchanged when the model's file is unknown."""
    start = None
    if model_ref:
        module = model_ref.partition(":")[0]
        try:
            start = module_file(workspace, module)
        except (OSError, ValueError):
            start = None

    def read(path: Path) -> str | None:
        try:
            return path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None

    if start is not None:
        reached = set(import_time_files(workspace, [start], read))
        files = [f for f in files if f.resolve() in reached] or [start]
    # A declared requirement counts where the files import it at import time, even behind a
    # ``try`` (timm's huggingface_hub): the package says it needs it.
    optional = set(_import_time_libraries(files, read))
    return files, [name for name in declared_imports(workspace) if name in optional]


def _import_time_libraries(files: list[Path], read: Callable[[Path], str | None]) -> list[str]:
    """Top-level names of every absolute import the files make at import time, optional
    ones (inside ``try``/``if``) included."""
    out: dict[str, None] = {}
    for path in files:
        tree = _tree(read, path) if path.suffix == ".py" else None
        for node in _import_time_nodes(tree.body) if tree is not None else ():
            if isinstance(node, ast.Import):
                out.update((a.name.split(".")[0], None) for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                out[node.module.split(".")[0]] = None
    return list(out)


def _bound(node: ast.stmt) -> set[str] | None:
    """The names an import statement binds; None for ``from m import *`` (any)."""
    if isinstance(node, ast.Import):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    if isinstance(node, ast.ImportFrom):
        if any(a.name == "*" for a in node.names):
            return None
        return {a.asname or a.name for a in node.names}
    return set()


def _uses(node: ast.stmt, package: list[str]) -> list[tuple[str, frozenset[str] | None]]:
    """``(module, the names wanted of it or None for all of it)`` an import statement
    uses: ``from a.b import c`` wants ``c`` of ``a.b`` (or all of ``a.b.c``, a module)."""
    if isinstance(node, ast.Import):
        return [(a.name, None) for a in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = package[: len(package) - (node.level - 1)] if node.level and node.level - 1 <= len(package) else []
    mod = ".".join(base + ([node.module] if node.module else []))
    names = [a.name for a in node.names]
    out: list[tuple[str, frozenset[str] | None]] = []
    if mod:
        out.append((mod, None if "*" in names else frozenset(names)))
    out += [(f"{mod}.{n}" if mod else n, None) for n in names if n != "*"]
    return out


def _names_used_by(tree: ast.Module, wanted: frozenset[str]) -> set[str]:
    """The names the module's own top-level definitions of ``wanted`` read (a class
    ``Block`` calling ``rms``: ``rms``)."""
    used: set[str] = set()
    for node in _import_time_nodes(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined = {node.name}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        else:
            continue
        if defined & wanted:
            used |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    return used


def used_files(root: Path, start: list[Path], read: Callable[[Path], str | None], limit: int = 2000) -> list[Path]:
    """Workspace files whose definitions ``start`` uses (``start`` included): each
    import-time import followed to the module it names (``from a.b import c``: ``a/b.py``
    or ``a/b/__init__.py``, and ``a/b/c.py`` when ``c`` is a module), never to the parent
    packages it also runs (``a/__init__.py``: importing a package's submodule runs the
    package, whose other imports, a sibling model, the importer does not use). A module
    reached for some of its names (``from pkg import VERSION``) has only the imports that
    bind those names followed."""
    root = root.resolve()
    seen: dict[Path, frozenset[str] | None] = {}
    done: set[tuple[Path, frozenset[str] | None]] = set()
    queue: list[tuple[Path, frozenset[str] | None]] = [(p.resolve(), None) for p in start]
    roots = _roots(root, [p for p, _ in queue])
    while queue and len(done) < limit:
        path, wanted = queue.pop()
        if (path, wanted) in done or root not in path.parents:
            continue
        done.add((path, wanted))
        seen.setdefault(path, wanted)
        tree = _tree(read, path)
        if tree is None:
            continue
        package = list(path.relative_to(root).with_suffix("").parts)[:-1]
        needed = None if wanted is None else wanted | _names_used_by(tree, wanted)
        for node in _import_time_nodes(tree.body):
            bound = _bound(node)
            if needed is not None and bound is not None and not (bound & needed):
                continue  # binds nothing the importer asked for, nor what those definitions use
            for name, names in _uses(node, package):
                found = _found(roots, name)
                if found is not None:
                    queue.append((found, names))
    return list(seen)
