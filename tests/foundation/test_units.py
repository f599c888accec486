"""capture/units.py: the one dtype table, sizes and the one way bytes, FLOPs, counts and
times are written, in Python and (``viewer/static/format.js``, run by Node) in the browser,
compared value for value; and the front ends (CLI, hover, viewer) use it."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from capture import units
from capture.units import bytes_text, count_text, dtype_bits, element_count, flops_text, nbytes, seconds_text

ROOT = Path(__file__).resolve().parents[2]

BYTES = [
    (0, "0 B"), (1, "1 B"), (512, "512 B"), (1023, "1023 B"), (1024, "1 KiB"), (1152, "1.13 KiB"),
    (1536, "1.5 KiB"), (10 * 1024 - 1, "10 KiB"), (1000 * 1024, "1000 KiB"), (1023 * 1024 + 1000, "1 MiB"),
    ((1 << 20) - 1, "1 MiB"), (1 << 20, "1 MiB"), (29_779_968, "28.4 MiB"), (3 << 29, "1.5 GiB"),
    ((1 << 30) - 1, "1 GiB"), (7 << 40, "7 TiB"), (5 << 50, "5 PiB"), (999 << 60, "999 EiB"),
    (1 << 70, "1.02e3 EiB"), (1 << 80, "1.05e6 EiB"), (-2048, "-2 KiB"), (None, "unknown"),
    (12.5, "12.5 B"), (99.96, "100 B"),
]
FLOPS = [
    (0, "0 FLOPs"), (999, "999 FLOPs"), (1000, "1 kFLOPs"), (523_000, "523 kFLOPs"), (999_999, "1 MFLOPs"),
    (2_420_000_000, "2.42 GFLOPs"), (1.5e15, "1.5 PFLOPs"), (10 ** 18, "1 EFLOPs"), (10 ** 22, "1.00e4 EFLOPs"),
    (None, "unknown"),
]
COUNTS = [
    (0, "0"), (999, "999"), (1000, "1 k"), (7_090_000, "7.09 M"), (1_234_567_890, "1.23 B"),
    (99_950, "100 k"), (999_500, "1 M"), (3 * 10 ** 12, "3 T"), (None, "unknown"),
]
TIMES = [
    (0, "0"), (-1, "0"), (2.27e-9, "2.27 ns"), (41e-6, "41 µs"), (3.2e-3, "3.2 ms"), (0.99996, "1 s"),
    (0.5, "500 ms"), (12.0, "12 s"), (None, "unknown"), (float("inf"), "∞"),
]


@pytest.mark.parametrize(("value", "text"), BYTES)
def test_bytes_text(value, text):
    assert bytes_text(value) == text


@pytest.mark.parametrize(("value", "text"), FLOPS)
def test_flops_text(value, text):
    assert flops_text(value) == text


@pytest.mark.parametrize(("value", "text"), COUNTS)
def test_count_text(value, text):
    assert count_text(value) == text


@pytest.mark.parametrize(("value", "text"), TIMES)
def test_seconds_text(value, text):
    assert seconds_text(value) == text


def test_never_scientific_below_the_largest_unit():
    """Every byte count from 1,000 to 2^40 around each power of two and ten: no ``e+``,
    never four digits before a unit change (``1024 KiB``)."""
    for k in range(10, 41):
        for n in (2 ** k - 1, 2 ** k, 2 ** k + 1, 10 ** (k // 3) * 999, 1000 * 2 ** (k - 10 if k >= 10 else 0)):
            text = bytes_text(n)
            assert "e" not in text and not text.startswith("1024 "), (n, text)


DTYPES = [
    ("float32", 32), ("torch.float32", 32), ("bfloat16", 16), ("float8_e4m3fn", 8), ("float8_e5m2fnuz", 8),
    ("float8_e8m0fnu", 8), ("float4_e2m1fn", 4), ("int4", 4), ("uint4", 4), ("int2", 2), ("bool", 8),
    ("complex128", 128), ("float0", 0), ("quint4x2", 8), ("made_up_dtype", None), ("", None), (None, None),
]


@pytest.mark.parametrize(("dtype", "bits"), DTYPES)
def test_dtype_bits(dtype, bits):
    assert dtype_bits(dtype) == bits


SIZES = [
    ([], "float32", 4), ([3, 5], "float4_e2m1fn", 8), ([7], "int4", 4), ([2, 3], "float8_e4m3fn", 6),
    ([None, 3], "float32", None), (["batch", 3], "float32", None), ([-1, 3], "float32", None),
    ([True, 3], "float32", None), ([2.0, 3], "float32", None), ([3], "no_such_dtype", None),
    ([2 ** 62] * 17, "float32", 2 ** (62 * 17) * 4), ("not a shape", "float32", None),
]


@pytest.mark.parametrize(("shape", "dtype", "size"), SIZES)
def test_nbytes(shape, dtype, size):
    assert nbytes(shape, dtype) == size


def test_unknown_propagates_through_sums():
    assert units.add([1, 2, 3]) == 6
    assert units.add([1, None, 3]) is None
    assert element_count([4, None]) is None


def test_huge_values_are_written_without_overflow():
    n = nbytes([2 ** 62] * 17, "float32")
    assert bytes_text(n) == "6.70e299 EiB"  # 2^1056 B = 2^996 EiB
    assert flops_text(2 ** 4000).endswith("EFLOPs")
    assert count_text(10 ** 5000).endswith(" T")  # beyond int->str's 4,300-digit limit


# --------------------------------------------------------------------------- the browser's mirror

NODE = shutil.which("node")


# Runs format.js's formatters (a copy named .mjs, for Node 20's ES-module rules) over a
# table of function name -> values given as JSON.
_NODE_SCRIPT = (
    "import * as f from './format.mjs';\n"
    "const table = JSON.parse(process.argv[2]);\n"
    "const out = {};\n"
    "for (const [name, values] of Object.entries(table)) out[name] = values.map((v) => f[name](v));\n"
    "process.stdout.write(JSON.stringify(out));\n"
)


@pytest.mark.skipif(NODE is None, reason="needs Node.js to run the browser's format.js")
def test_browser_formatters_mirror_python(tmp_path):
    """The same table through capture/units.py and viewer/static/format.js: the same text."""
    values = {
        "formatBytes": [v for v, _ in BYTES] + [2 ** k + d for k in range(0, 52, 3) for d in (-1, 0, 1)]
        + [1000 * 1024 ** k - 1 for k in range(1, 5)] + [1023.5 * 1024, 1152, 1024 * 1.005, 12345678],
        "formatFlops": [v for v, _ in FLOPS] + [10 ** k * m for k in range(0, 16) for m in (1, 9.995, 99.95, 999.5)],
        "formatCount": [v for v, _ in COUNTS] + [10 ** k * m for k in range(0, 13) for m in (1, 1.005, 9.995, 999.5)],
        "formatTime": [v for v, _ in TIMES if v != float("inf")] + [10.0 ** -k * m for k in range(0, 12)
                                                                    for m in (1, 9.995, 999.5)],
    }
    python = {"formatBytes": bytes_text, "formatFlops": flops_text, "formatCount": count_text,
              "formatTime": seconds_text}
    (tmp_path / "format.mjs").write_text((ROOT / "viewer/static/format.js").read_text())
    (tmp_path / "run.mjs").write_text(_NODE_SCRIPT)
    done = subprocess.run([NODE, "run.mjs", json.dumps(values)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, check=True)
    got = json.loads(done.stdout)
    for name, vals in values.items():
        want = [python[name](v) for v in vals]
        mismatched = [(v, w, g) for v, w, g in zip(vals, want, got[name]) if w != g]
        assert not mismatched, (name, mismatched[:10])


# --------------------------------------------------------------------------- one formatter everywhere


def test_cli_hover_and_viewer_print_a_value_the_same_way(tmp_path):
    """One capture's bytes moved, FLOPs and parameter bytes: ``tensorviz inspect`` and
    ``summary`` (the CLI), the editor's hover and the browser's formatters (run by Node over
    what api/cost sends) write each the same way."""
    from tensorviz_lsp.cli.commands import inspect as cli_inspect
    from tensorviz_lsp.cli.commands import summary as cli_summary
    from tensorviz_lsp.features import hover
    from capture.analysis.cost import executed_totals
    from viewer.projection.projection import Projection

    from capture.graph import graphfile

    capture = graphfile.read(ROOT / "tests/viewer/real_models/captures/gpt2_torch.tvg")
    totals = executed_totals(capture)
    moved, flops = bytes_text(totals["bytes"]), flops_text(totals["flops"])
    assert "MiB" in moved or "GiB" in moved
    assert f"{flops} (a multiply-add counts 2), {moved} moved" in cli_inspect.summary(capture)
    assert f"{flops} (a multiply-add counts 2), {moved} moved" in hover._size(capture)
    params = Projection(capture).costs().totals()["params"]
    done = subprocess.run([sys.executable, "-m", "tensorviz_lsp", "summary", "--depth", "1",
                           str(ROOT / "tests/viewer/real_models/captures/gpt2_torch.tvg")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    assert f"Total FLOPs:      {flops}" in done.stdout
    assert f"{count_text(params['count'])} in {params['tensors']:,} tensors, {bytes_text(params['bytes'])}" in done.stdout
    assert cli_summary.bytes_text is bytes_text and hover.bytes_text is bytes_text
    if NODE is not None:
        (tmp_path / "format.mjs").write_text((ROOT / "viewer/static/format.js").read_text())
        (tmp_path / "run.mjs").write_text(_NODE_SCRIPT)
        table = {"formatBytes": [totals["bytes"], params["bytes"]], "formatFlops": [totals["flops"]],
                 "formatCount": [params["count"]]}
        done = subprocess.run([NODE, "run.mjs", json.dumps(table)], cwd=tmp_path, capture_output=True, text=True,
                              timeout=60, check=True)
        got = json.loads(done.stdout)
        assert got == {"formatBytes": [moved, bytes_text(params["bytes"])], "formatFlops": [flops],
                       "formatCount": [count_text(params["count"])]}


# Functions that wrote bytes by their own rules before capture/units.py: none may come back.
_OWN_FORMATTERS = {"size_text", "human_bytes", "size_words", "_bytes", "si", "dtype_bytes"}
_PACKAGES = ("capture", "viewer", "tensorviz_lsp")


def test_no_second_dtype_table_or_byte_formatter():
    """No module but capture/units.py defines a dtype-bits table or a byte formatter of its
    own (a function that divides by 1024 or 1 << 10/20/30, or names KiB/MiB/GiB)."""
    offenders = []
    for pkg in _PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            if path == ROOT / "capture/units.py":
                continue
            text = path.read_text()
            if "DTYPE_BITS" not in text and not any(u in text for u in ('"KiB"', '"MiB"', '"GiB"', '" GB"')):
                continue  # nothing to look at: no tree
            lines = text.splitlines()
            tree = ast.parse(text)
            for node in ast.walk(tree):
                if isinstance(node, ast.Assign) and any(
                        isinstance(t, ast.Name) and "DTYPE_BITS" in t.id for t in node.targets):
                    offenders.append(f"{path.relative_to(ROOT)}: a dtype table")
                if isinstance(node, ast.FunctionDef):
                    body = "\n".join(lines[node.lineno - 1:node.end_lineno])
                    if any(u in body for u in ('"KiB"', '"MiB"', '"GiB"', '" GB"')) and "_UNITS" not in body:
                        offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert not offenders, offenders
