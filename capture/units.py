"""Units: the one dtype table, array sizes and how bytes, FLOPs, counts and times are written.

Every front end (the CLI, the language server's hovers and lenses, the viewer's server and,
through ``viewer/static/format.js``, which mirrors :func:`bytes_text`, :func:`flops_text`,
:func:`count_text` and :func:`seconds_text` rule for rule, the browser) and every analysis
(sharding, per-device memory, the cost table, group cards) reads sizes and writes them here,
so one value prints the same way everywhere. Standard library only.

The rules:

* **Unknown is said, never guessed.** :func:`dtype_bits` answers ``None`` for a dtype the
  table does not hold (never a silent 32 bits or 0); :func:`element_count` and
  :func:`nbytes` answer ``None`` when a dimension is symbolic or unknown (``None``, a name,
  a negative or non-integer number) or the dtype is unknown. ``None`` propagates through
  sums (:func:`add`) and is written ``unknown``.
* **Exact integers.** Sizes are Python integers, so 17 dimensions of 2^62 are a number
  (2^1054 elements), never an ``OverflowError``; the formatters write such a number in
  scientific notation in the largest unit instead of converting it to a float.
* **Binary units for bytes** (``B``, ``KiB``, ``MiB``, ``GiB``, ``TiB``, ``PiB``, ``EiB``),
  decimal prefixes for FLOPs (``kFLOPs`` … ``EFLOPs``) and counts (``k``, ``M``, ``B``,
  ``T``). Three significant digits, never fewer than the integer part, trailing zeros
  dropped, rounded half up; the unit is chosen after rounding, so 1,048,575 bytes is
  ``1 MiB``, never ``1e+03 KiB`` or ``1024 KiB``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

#: What the formatters write for a size or figure that is not known.
UNKNOWN = "unknown"

#: The largest FLOP or byte count one op may carry: the graph file stores them in signed
#: 64-bit columns. A count beyond it is never clipped to it: the op is uncounted, with
#: :data:`OVERFLOW_REASON`.
COUNT_LIMIT = (1 << 63) - 1
OVERFLOW_REASON = ("overflow: its count is more than 2^63-1, the most a graph file stores for one op "
                   "(not clipped: the op is left uncounted)")

#: Bits per element of each dtype a graph file spells (JAX/NumPy and Torch names; a Torch
#: name may carry its ``torch.`` prefix). Packed Torch dtypes (``quint4x2``, ``bits4x2``,
#: ``float4_e2m1fn_x2``) hold several values in one byte-sized element: 8 bits each.
DTYPE_BITS: dict[str, int] = {
    "float64": 64, "float32": 32, "float16": 16, "bfloat16": 16, "half": 16, "float": 32, "double": 64,
    "int64": 64, "int32": 32, "int16": 16, "int8": 8, "int4": 4, "int2": 2, "int1": 1,
    "int3": 3, "int5": 5, "int6": 6, "int7": 7,
    "uint64": 64, "uint32": 32, "uint16": 16, "uint8": 8, "uint4": 4, "uint2": 2, "uint1": 1,
    "uint3": 3, "uint5": 5, "uint6": 6, "uint7": 7,
    "complex32": 32, "complex64": 64, "complex128": 128, "bool": 8,
    "float8_e4m3fn": 8, "float8_e5m2": 8, "float8_e4m3fnuz": 8, "float8_e5m2fnuz": 8,
    "float8_e4m3b11fnuz": 8, "float8_e8m0fnu": 8, "float8_e3m4": 8, "float8_e4m3": 8,
    "float4_e2m1fn": 4, "float4_e2m1fn_x2": 8, "float6_e2m3fn": 6, "float6_e3m2fn": 6,
    "float0": 0,  # JAX's dtype of the tangent of an integer: no storage
    "qint8": 8, "quint8": 8, "qint32": 32, "quint4x2": 8, "quint2x4": 8,
    "bits1x8": 8, "bits2x4": 8, "bits4x2": 8, "bits8": 8, "bits16": 16,
}

_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
_FLOP_PREFIXES = ("", "k", "M", "G", "T", "P", "E")
_COUNT_SUFFIXES = ("", " k", " M", " B", " T")
_TIME_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))


def dtype_bits(dtype: Any) -> int | None:
    """Bits per element of ``dtype`` (``"float32"``, ``"torch.float8_e4m3fn"``); ``None``
    for a dtype the table does not hold."""
    if not isinstance(dtype, str):
        return None
    return DTYPE_BITS.get(dtype[6:] if dtype.startswith("torch.") else dtype)


def known_dim(d: Any) -> bool:
    """Whether ``d`` is a known dimension: a non-negative integer (not a bool)."""
    return type(d) is int and d >= 0


def element_count(shape: Any) -> int | None:
    """Elements of an array of ``shape``, exactly; ``None`` when ``shape`` is not a list
    or tuple or any dimension is not known (:func:`known_dim`)."""
    if not isinstance(shape, (list, tuple)):
        return None
    n = 1
    for d in shape:
        if not known_dim(d):
            return None
        n *= d
    return n


def nbytes(shape: Any, dtype: Any) -> int | None:
    """Bytes of an array of ``shape`` and ``dtype`` (sub-byte dtypes packed, rounded up to
    a whole byte); ``None`` when a dimension or the dtype is unknown."""
    bits = dtype_bits(dtype)
    n = element_count(shape)
    if bits is None or n is None:
        return None
    return (n * bits + 7) // 8


def add(values: Iterable[int | None]) -> int | None:
    """The sum of ``values``; ``None`` (unknown) when any of them is."""
    total = 0
    for v in values:
        if v is None:
            return None
        total += v
    return total


# --------------------------------------------------------------------------- writing


def _round_half_up(x: float, decimals: int) -> float:
    scale = 10 ** decimals
    return math.floor(x * scale + 0.5) / scale


def _digits(x: float) -> tuple[str, float]:
    """``x`` (0 <= x) to three significant digits, never fewer than its integer part,
    rounded half up, trailing zeros dropped; with the rounded value."""
    decimals = 2 if x < 10 else 1 if x < 100 else 0
    r = _round_half_up(x, decimals)
    if r >= 10 and decimals == 2 or r >= 100 and decimals == 1:  # 9.996 -> 10.0, 99.96 -> 100
        decimals -= 1
        r = _round_half_up(x, decimals)
    text = f"{r:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text, r


def _scientific(n: int) -> str:
    """A positive integer too large for the largest unit: ``1.80e317`` (three significant
    digits, by integer arithmetic: no float conversion, no digit-string limit)."""
    exp = max(int((n.bit_length() - 1) * math.log10(2)) - 1, 0)
    while 10 ** (exp + 1) <= n:
        exp += 1
    while exp > 0 and 10 ** exp > n:
        exp -= 1
    lead = (n * 100 + 10 ** exp // 2) // 10 ** exp  # three digits, rounded half up
    if lead >= 1000:
        lead //= 10
        exp += 1
    return f"{lead // 100}.{lead % 100:02d}e{exp}"


def _scaled(n: Any, base: int, units: tuple[str, ...], joiner: str) -> str:
    if n is None or isinstance(n, bool) or not isinstance(n, (int, float)):
        return UNKNOWN
    if isinstance(n, float) and not math.isfinite(n):
        return UNKNOWN if math.isnan(n) else f"{'-' if n < 0 else ''}∞{joiner}{units[0]}".rstrip()
    if n < 0:
        return "-" + _scaled(-n, base, units, joiner)
    top = len(units) - 1
    if n >= 1000 * base ** top:  # beyond the largest unit: exact, in scientific notation
        n = int(n)
        return f"{_scientific(n // base ** top)}{joiner}{units[top]}"
    k = 0
    while k < top and n >= base ** (k + 1):
        k += 1
    if k == 0 and isinstance(n, int):
        return f"{n}{joiner}{units[0]}"
    text, r = _digits(n / base ** k)
    if r >= base and k < top:  # 1023.6 KiB rounds to 1024: write it in the next unit
        k += 1
        text, r = _digits(n / base ** k)
    return f"{text}{joiner}{units[k]}"


def bytes_text(n: int | float | None) -> str:
    """``512 B``, ``1.5 KiB``, ``28.4 MiB``, ``1 GiB``; ``unknown`` for None."""
    return _scaled(n, 1024, _BYTE_UNITS, " ")


def flops_text(n: int | float | None) -> str:
    """``0 FLOPs``, ``523 kFLOPs``, ``2.42 GFLOPs`` (a multiply-add counts 2); ``unknown``
    for None."""
    return _scaled(n, 1000, tuple(p + "FLOPs" for p in _FLOP_PREFIXES), " ")


def count_text(n: int | float | None) -> str:
    """``999``, ``7.09 M``, ``1.2 B``; ``unknown`` for None."""
    return _scaled(n, 1000, _COUNT_SUFFIXES, "")


def rate_text(n: int | float | None, unit: str) -> str:
    """A rate with a decimal prefix: ``197 TFLOP/s`` (``unit`` after the prefix; a byte
    rate is :func:`bytes_text` and ``/s``); ``unknown`` for None."""
    return _scaled(n, 1000, tuple(p + unit for p in _FLOP_PREFIXES), " ")


def seconds_text(s: int | float | None) -> str:
    """An estimated time: ``3.2 ms``, ``41 µs``, ``2.27 ns``; ``0`` for zero or less,
    ``unknown`` for None or NaN, ``∞`` for infinity."""
    if s is None or isinstance(s, bool) or not isinstance(s, (int, float)) or s != s:
        return UNKNOWN
    if not s > 0:
        return "0"
    if math.isinf(s):
        return "∞"
    for i, (factor, unit) in enumerate(_TIME_UNITS):
        if s >= factor or i == len(_TIME_UNITS) - 1:
            text, r = _digits(s / factor)
            if r >= 1000 and i > 0:  # 999.96 ms rounds to 1000: write it as 1 s
                factor, unit = _TIME_UNITS[i - 1]
                text, r = _digits(s / factor)
            return f"{text} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover
