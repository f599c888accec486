"""``Capture.meta``'s keys are declared once (``capture/graph/meta.py``'s ``CaptureMeta``):
every key the shipped code writes or reads is declared there, every declared key is
written somewhere, and a graph file from a newer writer keeps the keys this one does not
know (docs/graph-files.md: readers ignore what they do not know).

The scan reads the code's syntax (no import): a write is ``M["k"] = …``,
``M.setdefault("k", …)``, ``M.update(k=…)`` / ``M.update({"k": …})``, a dict literal
assigned to ``M`` or returned by a function declared to return ``CaptureMeta``,
``CaptureMeta(k=…)``, and ``meta={…}`` passed to a call; a read is ``M["k"]``,
``M.get("k")``, ``M.pop("k")``. ``M`` is ``….meta``, a name annotated ``CaptureMeta``, a
parameter named ``meta``, or a name assigned from an expression holding ``….meta`` or
``CaptureMeta()``. A key given by a module-level string constant (``KEY``,
``PENDING_KEY``) is resolved. mypy checks the typed writers as well; this scan also sees
code that handles ``meta`` as ``Any``. Real captures' keys: tests/torch and tests/jax
(``test_*_meta_keys.py``)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from capture.graph import graphfile
from capture.graph.meta import KEYS, CaptureMeta, unknown_keys
from capture.graph.model import Capture, Coverage, Node, Value, to_json

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("capture", "tensorviz_lsp", "viewer", "discovery")


@dataclass
class Found:
    writes: dict[str, list[str]] = field(default_factory=dict)  # key -> where
    reads: dict[str, list[str]] = field(default_factory=dict)

    def add(self, kind: str, key: str, where: str) -> None:
        (self.writes if kind == "write" else self.reads).setdefault(key, []).append(where)


def _mentions_capture_meta(node: ast.AST | None) -> bool:
    """An annotation naming ``CaptureMeta`` (``CaptureMeta | None``, ``"CaptureMeta"``)."""
    if node is None:
        return False
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id == "CaptureMeta":
            return True
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and "CaptureMeta" in sub.value:
            return True
    return False


def _holds_meta(node: ast.AST, makers: frozenset[str] = frozenset()) -> bool:
    """An expression that is a capture's meta: ``….meta`` (an attribute, not a ``meta()``
    method), ``CaptureMeta(…)``, a call of a function declared to return ``CaptureMeta``
    (``makers``), or a copy of one (``dict(…)``, ``….copy()``, either side of ``… if …
    else …``)."""
    if isinstance(node, ast.Attribute):
        return node.attr == "meta"
    if isinstance(node, ast.IfExp):
        return _holds_meta(node.body, makers) or _holds_meta(node.orelse, makers)
    if isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Name) and (f.id == "CaptureMeta" or f.id in makers):
            return True
        if isinstance(f, ast.Attribute) and f.attr in makers:
            return True
        if isinstance(f, ast.Name) and f.id == "dict" and node.args:
            return _holds_meta(node.args[0], makers)
        if isinstance(f, ast.Attribute) and f.attr == "copy":
            return _holds_meta(f.value, makers)
    return False


class _Scope(ast.NodeVisitor):
    """One module's meta keys, function by function (names tracked per function)."""

    def __init__(self, where: str, constants: dict[str, set[str]], makers: frozenset[str], found: Found) -> None:
        self.where, self.constants, self.makers, self.found = where, constants, makers, found
        self.tracked: list[set[str]] = [set()]
        self.returns_meta: list[bool] = [False]

    # -- names
    def _is_meta(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Attribute) and node.attr == "meta":
            return True
        return isinstance(node, ast.Name) and node.id in self.tracked[-1]

    def _keys(self, node: ast.AST) -> set[str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return {node.value}
        if isinstance(node, ast.Name):
            return self.constants.get(node.id, set())
        return set()

    def _record(self, kind: str, node: ast.AST, line: int) -> None:
        for key in self._keys(node):
            self.found.add(kind, key, f"{self.where}:{line}")

    def _dict_keys(self, node: ast.AST, line: int) -> None:
        if isinstance(node, ast.Dict):
            for k in node.keys:
                if k is not None:
                    self._record("write", k, line)

    # -- scopes
    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        names = set(self.tracked[-1])
        args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
        for a in args:
            if a.arg == "meta" or _mentions_capture_meta(a.annotation):
                names.add(a.arg)
        self.tracked.append(names)
        self.returns_meta.append(_mentions_capture_meta(node.returns))
        self.generic_visit(node)
        self.tracked.pop()
        self.returns_meta.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    # -- writes
    def _assigned(self, target: ast.AST, value: ast.AST | None, annotation: ast.AST | None, line: int) -> None:
        if isinstance(target, ast.Name) and (_mentions_capture_meta(annotation)
                                             or (value is not None and _holds_meta(value, self.makers))):
            self.tracked[-1].add(target.id)
        if isinstance(target, ast.Subscript) and self._is_meta(target.value):
            self._record("write", target.slice, line)
        elif self._is_meta(target) and value is not None:
            self._dict_keys(value, line)

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._assigned(t, node.value, None, node.lineno)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._assigned(node.target, node.value, node.annotation, node.lineno)
        self.generic_visit(node)

    def visit_Return(self, node: ast.Return) -> None:
        if self.returns_meta[-1] and node.value is not None:
            self._dict_keys(node.value, node.lineno)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        if isinstance(f, ast.Attribute) and self._is_meta(f.value) and node.args:
            if f.attr == "setdefault":
                self._record("write", node.args[0], node.lineno)
            elif f.attr in ("get", "pop"):
                self._record("read", node.args[0], node.lineno)
            elif f.attr == "update":
                self._dict_keys(node.args[0], node.lineno)
        if isinstance(f, ast.Attribute) and self._is_meta(f.value) and f.attr == "update":
            for kw in node.keywords:
                if kw.arg is not None:
                    self.found.add("write", kw.arg, f"{self.where}:{node.lineno}")
        if isinstance(f, ast.Name) and f.id == "CaptureMeta":
            for kw in node.keywords:
                if kw.arg is not None:
                    self.found.add("write", kw.arg, f"{self.where}:{node.lineno}")
        for kw in node.keywords:
            if kw.arg == "meta":
                self._dict_keys(kw.value, node.lineno)
        self.generic_visit(node)

    # -- reads
    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, ast.Load) and self._is_meta(node.value):
            self._record("read", node.slice, node.lineno)
        self.generic_visit(node)


def _string_constants(trees: dict[str, ast.Module]) -> dict[str, set[str]]:
    """Module-level ``NAME = "text"`` (and ``NAME: Final = "text"``) of every module, by
    name; ``from m import NAME as ALIAS`` adds ``ALIAS``."""
    out: dict[str, set[str]] = {}
    for tree in trees.values():
        for node in tree.body:
            target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
                node.target if isinstance(node, ast.AnnAssign) else None
            value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
            if isinstance(target, ast.Name) and isinstance(value, ast.Constant) and isinstance(value.value, str):
                out.setdefault(target.id, set()).add(value.value)
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.asname and alias.name in out:
                        out.setdefault(alias.asname, set()).update(out[alias.name])
    return out


def scan_sources(sources: dict[str, str]) -> Found:
    """The meta keys the modules ``sources`` (path -> text) write and read."""
    trees = {path: ast.parse(text, path) for path, text in sources.items()}
    constants = _string_constants(trees)
    makers = frozenset(n.name for tree in trees.values() for n in ast.walk(tree)
                       if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and _mentions_capture_meta(n.returns))
    found = Found()
    for path, tree in trees.items():
        _Scope(path, constants, makers, found).visit(tree)
    return found


def shipped_sources() -> dict[str, str]:
    out: dict[str, str] = {}
    for package in PACKAGES:
        for p in sorted((ROOT / package).rglob("*.py")):
            text = p.read_text(encoding="utf-8") if "node_modules" not in p.parts else ""
            if "meta" in text:  # (only these can touch it: parsing all takes seconds)
                out[str(p.relative_to(ROOT))] = text
    return out


@pytest.fixture(scope="module")
def shipped() -> Found:
    return scan_sources(shipped_sources())


# --------------------------------------------------------------------------- the scanner itself

SCANNER_CASES = [
    # (source, kind, key)
    ('def f(capture):\n    capture.meta["a_key"] = 1\n', "write", "a_key"),
    ('def f(capture):\n    capture.meta.setdefault("a_key", 1)\n', "write", "a_key"),
    ('def f(capture):\n    capture.meta.update(a_key=1)\n', "write", "a_key"),
    ('def f(capture):\n    capture.meta.update({"a_key": 1})\n', "write", "a_key"),
    ('def f():\n    meta: CaptureMeta = {"a_key": 1}\n', "write", "a_key"),
    ('def f():\n    out = CaptureMeta()\n    out["a_key"] = 1\n', "write", "a_key"),
    ('def f():\n    return CaptureMeta(a_key=1)\n', "write", "a_key"),
    ('def f() -> CaptureMeta:\n    return {"a_key": 1}\n', "write", "a_key"),
    ('def f(b: CaptureMeta | None):\n    b["a_key"] = 1\n', "write", "a_key"),
    ('def f(c):\n    m = dict(c.meta)\n    m["a_key"] = 1\n', "write", "a_key"),
    ('def f(c):\n    return Capture(meta={"a_key": 1})\n', "write", "a_key"),
    ('def g() -> CaptureMeta:\n    return {}\ndef f():\n    m = g()\n    m["a_key"] = 1\n', "write", "a_key"),
    ('def f(c):\n    m = c.meta if c else {}\n    m["a_key"] = 1\n', "write", "a_key"),
    ('KEY = "a_key"\ndef f(c):\n    c.meta[KEY] = 1\n', "write", "a_key"),
    ('def f(c):\n    return c.meta.get("a_key")\n', "read", "a_key"),
    ('def f(c):\n    return c.meta["a_key"]\n', "read", "a_key"),
    ('def f(meta):\n    return meta.get("a_key")\n', "read", "a_key"),
    ('def f(c):\n    c.meta.pop("a_key", None)\n', "read", "a_key"),
]


@pytest.mark.parametrize("source,kind,key", SCANNER_CASES)
def test_the_scan_finds_each_way_of_writing_and_reading_a_key(source: str, kind: str, key: str) -> None:
    found = scan_sources({"m.py": source})
    assert key in (found.writes if kind == "write" else found.reads), source


@pytest.mark.parametrize("source", [
    # Other things called meta: Flax's metadata, a method named meta, a module.
    'def f(leaf):\n    m = leaf.get_metadata()\n    return m.get("tag")\n',
    'def f(record):\n    out = record.meta()\n    out["x_key"] = 1\n',
    'import sys\ndef f():\n    meta = sys.modules.get("flax.core.meta")\n    return meta.get("tag")\n',
    # A map that holds a capture's meta as one of its entries (the file's body).
    'def f(c):\n    body = {"meta": c.meta, "b_key": 1}\n    body["x_key"] = 2\n',
])
def test_the_scan_leaves_other_dicts_alone(source: str) -> None:
    found = scan_sources({"m.py": source})
    assert not found.writes and not found.reads


# --------------------------------------------------------------------------- the shipped code


def test_every_key_the_code_writes_is_declared(shipped: Found) -> None:
    undeclared = {k: where[:3] for k, where in shipped.writes.items() if k not in KEYS}
    assert not undeclared, f"meta keys written but not declared in capture/graph/meta.py: {undeclared}"


def test_every_key_the_code_reads_is_declared(shipped: Found) -> None:
    undeclared = {k: where[:3] for k, where in shipped.reads.items() if k not in KEYS}
    assert not undeclared, f"meta keys read but not declared in capture/graph/meta.py: {undeclared}"


def test_every_declared_key_is_written_somewhere(shipped: Found) -> None:
    # A declaration nobody writes is a key that was removed or renamed: drop it.
    assert sorted(KEYS - set(shipped.writes)) == []


def test_the_scan_sees_the_writers_of_both_frameworks_and_the_worker(shipped: Found) -> None:
    # Not vacuous: keys each writer adds are found where they are written.
    expect = {
        "state_writes": "capture/torch/framework.py", "checkpoint_load_s": "capture/torch/saved.py",
        "library_model": "capture/torch/library_models.py", "torch_version": "capture/torch/trace.py",
        "jax_platforms": "capture/jax/framework.py", "opaque_primitives": "capture/jax/convert.py",
        "per_device_memory": "capture/graph/device_memory.py", "environment": "capture/worker/request.py",
        "stats_missing": "capture/graph/later_stats.py", "elapsed_s": "capture/session/job.py",
    }
    for key, path in expect.items():
        assert any(w.startswith(path + ":") for w in shipped.writes.get(key, [])), (key, shipped.writes.get(key))


# --------------------------------------------------------------------------- graph files


def _capture(meta: CaptureMeta) -> Capture:
    return Capture(
        backend="torch_eager", framework="torch", framework_version="2.0",
        coverage=Coverage(scope="eager_forward", status="complete", reasons=[], effects="none"),
        values=[Value(0, [2], "float32"), Value(1, [2], "float32")],
        nodes=[Node(0, "aten.relu.default", [], [1])],
        inputs={"value": 0}, outputs={"value": 1}, meta=meta,
    )


@pytest.mark.parametrize("version", [2, 3])
def test_a_file_keeps_the_keys_a_newer_writer_added(version: int) -> None:
    newer = {"compiled_flops": 123, "setup_steps": [{"name": "s", "took_s": 0.5}], "notes": {"a": [1, 2]}}
    meta: CaptureMeta = {"state": "fresh_init", "model_kind": "module", "stats": True}
    meta.update(newer)  # type: ignore[typeddict-item]
    back = graphfile.decode(graphfile.encode(_capture(meta), version=version))
    assert dict(back.meta) == {**meta}
    assert unknown_keys(back.meta) == sorted(newer)
    assert to_json(back)["meta"] == {**meta}  # inspect --json and the viewer's capture show them


def test_unknown_keys_reads_anything() -> None:
    assert unknown_keys(None) == [] and unknown_keys([1]) == []
    assert unknown_keys({"state": "x", "zz": 1, "aa": 2}) == ["aa", "zz"]


def test_the_declaration_is_total_false_and_stdlib_only() -> None:
    assert CaptureMeta.__required_keys__ == frozenset()
    tree = ast.parse((ROOT / "capture/graph/meta.py").read_text(encoding="utf-8"))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= {"__future__", "typing"}
