"""The structure report: the numbers issue 37 asks to hold, measured in one run.

    python -m tools.structure            # print the report
    python -m tools.structure --check    # and exit 1 when a number is over its budget

What it measures (each from the tool that owns it, never estimated):

* lines: shipped Python per package, the browser app (``viewer/static``, vendored files
  left out), tests, benchmarks;
* Python types: mypy over every shipped package as ``pyproject.toml`` configures it
  (``check_untyped_defs``), and ``mypy --strict`` over :data:`STRICT` (the graph model and
  file format, the worker protocol, the capture session, the recipe model, the plug-in
  contract, the language server's hooks and registries), with the share of shipped lines
  it covers;
* browser types and lint: ``tsc`` over ``viewer/tsconfig.json`` (``checkJs``, every module
  of the app), over ``viewer/tsconfig.strict.json`` (``strict``, the modules listed there),
  and ESLint (``viewer/eslint.config.js``); installed by ``npm ci`` in ``viewer/``;
* complexity: functions over cyclomatic complexity 15 (ruff's C901, also those a ``noqa``
  excuses in the lint run), and over 10;
* import circles, between modules and between folders (:mod:`tools.imports`);
* duplicated runs: six or more identical lines (blank lines, comments, imports and lone
  punctuation left out, white space folded) standing in two places of the shipped code.

``tests/foundation/test_structure.py`` runs ``--check`` (the suite's one run of mypy, tsc and
ESLint; a checker that is missing fails the check). A budget above zero is a debt
being paid down: lower it when the number drops, never raise it.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tools.imports import PACKAGES, ROOT, all_modules, cycles, folder_graph, module_graph, python_files

# mypy --strict over these (files or folders): the typed contracts.
STRICT = (
    "capture/graph/model.py", "capture/graph/tables.py", "capture/graph/graphfile.py",  # graph model, file format
    "capture/worker",  # the worker: its protocol, plug-in contract, request, context, limits
    "capture/session",  # the capture session
    "capture/recipe",  # the recipe model
    "capture/graph/freshness.py", "capture/graph/frame_repeats.py", "capture/frameworks",
    "capture/graph/meta.py",  # every key Capture.meta may hold
    "capture/analysis",  # the shared analysis: its results (types.py) are what the CLI, hover and viewer read
    # the viewer's projection, its answers typed (answers.py), the pages (views.py) among them
    "viewer/projection/projection.py", "viewer/projection/answers.py", "viewer/projection/views.py",
    "viewer/projection/search.py",
    "viewer/projection/presentation.py", "viewer/projection/trunk.py", "viewer/projection/expert_cards.py",
    "viewer/projection/compiled_view.py", "viewer/projection/page_flow.py", "viewer/projection/plumbing.py",
    "viewer/projection/library_sources.py",
    "discovery",  # import-free analysis: its results are what the server and the CLI read
    "safe_read",
    "tensorviz_lsp/*.py",  # the server's own modules: wiring, hooks, registries, records, settings, trust
    "tools",
)


def strict_targets() -> list[str]:
    """:data:`STRICT` as mypy's arguments (an entry ``folder/*.py``: that folder's modules,
    not its subfolders)."""
    out: list[str] = []
    for entry in STRICT:
        if entry.endswith("/*.py"):
            out += sorted(str(p.relative_to(ROOT)) for p in (ROOT / entry[:-5]).glob("*.py"))
        else:
            out.append(entry)
    return out
STRICT_ARGS = ("--strict", "--follow-imports=silent", "--implicit-reexport", "--no-incremental",
               "--cache-dir", "/dev/null")

# Budgets for --check: what each number may be at most.
BUDGETS = {
    "mypy errors": 0,
    "mypy --strict errors": 0,
    "tsc --checkJs errors": 0,
    "tsc --checkJs strict errors": 0,
    "eslint problems": 0,
    "import circles": 0,
    "functions over complexity 15": 0,
    "duplicated runs": 0,
    "shipped Python files over 900 lines": 0,
}
#: The most lines a shipped Python module may have (the browser app's is ESLint's ``max-lines``).
MAX_FILE_LINES = 900

VIEWER = ROOT / "viewer"
_TSC = VIEWER / "node_modules" / ".bin" / "tsc"
_ESLINT = VIEWER / "node_modules" / ".bin" / "eslint"
STATIC = VIEWER / "static"
DUPLICATE_MIN_LINES = 6
DUPLICATE_MAX_PLACES = 8  # a run standing in more places is boilerplate, not a copy


@dataclass
class Report:
    numbers: dict[str, int | None] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)

    def say(self, text: str = "") -> None:
        self.lines.append(text)

    def number(self, name: str, value: int | None, detail: str = "") -> None:
        self.numbers[name] = value
        budget = BUDGETS.get(name)
        shown = "not measured" if value is None else f"{value:,}"
        limit = "" if budget is None else f" (budget {budget})"
        self.say(f"  {name}: {shown}{limit}{'; ' + detail if detail else ''}")

    def over_budget(self) -> list[str]:
        """The numbers over their budgets, and those with a budget that could not be
        measured (a checker missing or failing to run is not a pass)."""
        return [f"{name}: not measured" if value is None or value < 0 else f"{name}: {value} > {BUDGETS[name]}"
                for name, value in self.numbers.items()
                if name in BUDGETS and (value is None or value < 0 or value > BUDGETS[name])]


def _run(args: list[str], cwd: Path = ROOT, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout)


#: The checkers' runs (mypy twice, tsc twice, ESLint) by name, started together when the
#: report starts (:func:`report`): they are most of its time, and each waits on its own process.
_started: dict[str, Future[subprocess.CompletedProcess[str]]] = {}


def _checker_runs() -> dict[str, tuple[list[str], Path]]:
    """Every checker run by name: its command and folder (tsc and ESLint where installed)."""
    runs = {"mypy": ([sys.executable, "-m", "mypy"], ROOT),
            "mypy --strict": ([sys.executable, "-m", "mypy", *STRICT_ARGS, *strict_targets()], ROOT)}
    if _TSC.exists():
        runs.update({config: ([str(_TSC), "-p", config], VIEWER) for config in ("tsconfig.json", "tsconfig.strict.json")})
    if _ESLINT.exists():
        runs["eslint"] = ([str(_ESLINT), "--format", "json", "static"], VIEWER)
    return runs


def _checker(name: str) -> subprocess.CompletedProcess[str]:
    """The run named ``name`` of :func:`_checker_runs`: the one :func:`report` started,
    else one run now."""
    future = _started.get(name)
    if future is not None:
        return future.result()
    args, cwd = _checker_runs()[name]
    return _run(args, cwd)


def _line_count(paths: list[Path]) -> int:
    return sum(len(p.read_text(encoding="utf-8", errors="replace").splitlines()) for p in paths)


def _python_files(folder: str) -> list[Path]:
    return python_files(folder)


def _browser_files() -> list[Path]:
    return sorted(p for p in STATIC.rglob("*.js") if "vendor" not in p.relative_to(STATIC).parts)


def _strict_files() -> list[Path]:
    out: list[Path] = []
    for entry in strict_targets():
        p = ROOT / entry
        out += python_files(entry) if p.is_dir() else [p]
    return out


# --------------------------------------------------------------------------- sections


def lines_section(r: Report) -> None:
    r.say("lines")
    shipped = 0
    for package in PACKAGES:
        n = _line_count(_python_files(package))
        shipped += n
        r.say(f"  {package}: {n:,}")
    r.number("shipped Python lines", shipped)
    long = sorted(((n, p) for package in PACKAGES for p in _python_files(package)
                   if (n := _line_count([p])) > MAX_FILE_LINES), reverse=True)
    r.number(f"shipped Python files over {MAX_FILE_LINES} lines", len(long),
             ", ".join(f"{p.relative_to(ROOT)} {n:,}" for n, p in long))
    r.number("browser app lines", _line_count(_browser_files()), "viewer/static, vendor/ left out")
    r.number("test lines", _line_count(_python_files("tests")))
    r.number("benchmark lines", _line_count(_python_files("benchmarks")))
    largest = sorted(((_line_count([p]), p) for p in _browser_files()), reverse=True)[:3]
    r.say("  largest browser modules: " + ", ".join(f"{p.relative_to(ROOT)} {n:,}" for n, p in largest))
    r.say("  largest Python classes: " + ", ".join(f"{name} {n:,}" for n, name in _largest_classes(3)))


def _largest_classes(count: int) -> list[tuple[int, str]]:
    """The longest classes of the shipped Python, by lines, with where they are."""
    found: list[tuple[int, str]] = []
    for package in PACKAGES:
        for path in _python_files(package):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef):
                    n = (node.end_lineno or node.lineno) - node.lineno + 1
                    found.append((n, f"{path.relative_to(ROOT)}:{node.name}"))
    return sorted(found, reverse=True)[:count]


def _mypy_errors(proc: subprocess.CompletedProcess[str]) -> int:
    m = re.search(r"Found (\d+) errors?", proc.stdout)
    if m:
        return int(m.group(1))
    return 0 if "Success" in proc.stdout else -1


def python_types_section(r: Report) -> None:
    r.say("Python types")
    proc = _checker("mypy")
    n = _mypy_errors(proc)
    r.number("mypy errors", n, "every shipped package, pyproject.toml's [tool.mypy] (check_untyped_defs)")
    if n:
        r.lines += ["    " + line for line in proc.stdout.splitlines()[:20]]
    proc = _checker("mypy --strict")
    n = _mypy_errors(proc)
    shipped = sum(_line_count(_python_files(p)) for p in PACKAGES)
    covered = _line_count([p for p in _strict_files() if p.parts[len(ROOT.parts)] in PACKAGES])
    r.number("mypy --strict errors", n, f"over {len(STRICT)} entries of tools/structure.py STRICT")
    if n:
        r.lines += ["    " + line for line in proc.stdout.splitlines()[:20]]
    r.say(f"  strict-typed coverage: {covered:,} of {shipped:,} shipped lines ({100 * covered / max(shipped, 1):.1f} %)")


def _tsc(r: Report, name: str, config: str, detail: str) -> None:
    """tsc over ``config``: its error count, and the first of them with their places."""
    if not _TSC.exists():
        r.number(name, None, detail)
        return
    proc = _checker(config)
    r.number(name, len(re.findall(r"error TS\d+", proc.stdout)), detail)
    r.lines += ["    viewer/" + line for line in proc.stdout.splitlines() if "error TS" in line][:20]


def _eslint(r: Report) -> None:
    if not _ESLINT.exists():
        r.number("eslint problems", None)
        return
    proc = _checker("eslint")
    results = json.loads(proc.stdout or "[]")
    found = [f"    {Path(f['filePath']).relative_to(ROOT)}:{m.get('line', '?')} {m.get('ruleId')}: {m.get('message')}"
             for f in results for m in f.get("messages", [])]
    r.number("eslint problems", len(found))
    r.lines += found[:20]
    # ESLint holds functions to complexity 15 (viewer/eslint.config.mjs); one over it says why
    # it is one function (`eslint-disable-next-line complexity -- why`): counted here.
    excused = sum(p.read_text(encoding="utf-8").count("eslint-disable-next-line complexity") for p in _browser_files())
    r.number("browser functions over complexity 15, each saying why", excused)


def browser_section(r: Report) -> None:
    r.say("browser code (viewer/static)")
    if not (VIEWER / "node_modules").exists():
        r.say("  not measured: run `npm ci` in viewer/ (the TypeScript checker and ESLint)")
    _tsc(r, "tsc --checkJs errors", "tsconfig.json", "every module")
    _tsc(r, "tsc --checkJs strict errors", "tsconfig.strict.json", "the modules tsconfig.strict.json lists")
    strict = json.loads((VIEWER / "tsconfig.strict.json").read_text(encoding="utf-8")).get("files", [])
    covered = _line_count([VIEWER / f for f in strict])
    total = _line_count(_browser_files())
    r.say(f"  strict-typed coverage: {covered:,} of {total:,} lines ({100 * covered / max(total, 1):.1f} %)")
    _eslint(r)


def _ruff_complexity(limit: int) -> list[dict[str, object]]:
    ruff = shutil.which("ruff")
    cmd = [ruff] if ruff else [sys.executable, "-m", "ruff"]
    proc = _run([*cmd, "check", "--no-cache", "--select", "C901", "--ignore-noqa", "--config",
                 f"lint.mccabe.max-complexity={limit}", "--output-format", "json", "--exit-zero", *PACKAGES,
                 "tools", "tests", "benchmarks"])
    found: list[dict[str, object]] = json.loads(proc.stdout or "[]")
    return found


def complexity_section(r: Report) -> None:
    r.say("complexity (ruff C901, noqa ignored)")
    over = _ruff_complexity(15)
    r.number("functions over complexity 15", len(over))
    for f in sorted(over, key=lambda f: str(f["message"])):
        where = Path(str(f["filename"])).relative_to(ROOT)
        row = f["location"]["row"] if isinstance(f["location"], dict) else "?"
        r.say(f"    {where}:{row} {f['message']}")
    r.number("functions over complexity 10", len(_ruff_complexity(10)))


def circles_section(r: Report) -> None:
    r.say("import circles")
    graph = module_graph()
    modules, folders = cycles(graph), cycles(folder_graph(graph, all_modules()))
    r.number("import circles", len(modules) + len(folders), f"{len(modules)} between modules, {len(folders)} between folders")
    for c in modules + folders:
        r.say("    " + " <-> ".join(c))


_SKIP = re.compile(r"^(?:#|//|/\*|\*|import\s|from\s\S+\simport\s|[\[\](){}:;,.]+$)")


def _normalised(path: Path) -> list[tuple[int, str]]:
    """The lines that count, numbered: white space folded; blank lines, comments, lone
    punctuation and import statements (a parenthesised or braced one whole) left out."""
    out = []
    in_import = False
    for i, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        text = " ".join(line.split())
        if in_import:
            in_import = not (text.startswith(")") or text.startswith("}"))
            continue
        if re.match(r"^(?:from \S+ import \($|import \{$|import \{[^}]*$|export \{$)", text):
            in_import = True
            continue
        if text and not _SKIP.match(text):
            out.append((i, text))
    return out


def duplicated_runs(paths: list[Path], min_lines: int = DUPLICATE_MIN_LINES) -> list[tuple[str, str]]:
    """Runs of ``min_lines`` or more identical normalised lines standing in two places:
    ``("a.py:10-24", "b.py:40-54")`` per run, the longest of each pair of places."""
    files = {p: _normalised(p) for p in paths}
    places: dict[bytes, list[tuple[Path, int]]] = defaultdict(list)
    for p, rows in files.items():
        for k in range(len(rows) - min_lines + 1):
            key = hashlib.blake2b("\n".join(t for _, t in rows[k:k + min_lines]).encode(), digest_size=16).digest()
            places[key].append((p, k))
    starts: set[tuple[Path, int, Path, int]] = set()
    for spots in places.values():
        if 2 <= len(spots) <= DUPLICATE_MAX_PLACES:
            for a in range(len(spots)):
                for b in range(a + 1, len(spots)):
                    (pa, ka), (pb, kb) = spots[a], spots[b]
                    if pa != pb or abs(ka - kb) >= min_lines:
                        starts.add((pa, ka, pb, kb))
    runs = []
    for pa, ka, pb, kb in sorted(starts, key=lambda s: (str(s[0]), s[1], str(s[2]), s[3])):
        if (pa, ka - 1, pb, kb - 1) in starts:
            continue  # inside a run that began earlier
        length = 1
        while (pa, ka + length, pb, kb + length) in starts:
            length += 1
        ra, rb = files[pa], files[pb]
        end = length - 1 + min_lines - 1
        runs.append((f"{pa.relative_to(ROOT)}:{ra[ka][0]}-{ra[ka + end][0]}",
                     f"{pb.relative_to(ROOT)}:{rb[kb][0]}-{rb[kb + end][0]}"))
    return runs


def duplicates_section(r: Report) -> None:
    r.say(f"duplicated runs ({DUPLICATE_MIN_LINES}+ identical lines, shipped Python and the browser app)")
    paths = [p for package in PACKAGES for p in _python_files(package)] + _browser_files()
    runs = duplicated_runs(paths)
    r.number("duplicated runs", len(runs))
    for a, b in runs:
        r.say(f"    {a} ~ {b}")


SECTIONS = (lines_section, python_types_section, browser_section, complexity_section, circles_section,
            duplicates_section)


def report() -> Report:
    r = Report()
    # Three checkers at a time: the sections measured here in Python run meanwhile.
    with ThreadPoolExecutor(max_workers=3) as pool:
        for name, (args, cwd) in _checker_runs().items():
            _started[name] = pool.submit(_run, args, cwd)
        try:
            for section in SECTIONS:
                section(r)
        finally:
            _started.clear()
    return r


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.structure", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when a number is over its budget or could not be measured")
    args = parser.parse_args(argv)
    r = report()
    print("\n".join(r.lines))
    over = r.over_budget()
    if args.check and over:
        print("\nover budget or not measured:\n  " + "\n  ".join(over))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
