"""Where a key path sits in a recipes file's TOML text (:func:`key_path_line`), without a
position-aware parser: what a :class:`~capture.recipe.model.RecipeError` and the editor's
diagnostics point at. One :class:`_Locator` per text (:func:`locator_for`)."""

from __future__ import annotations

import bisect
import re
import threading

from .model import split_key_path


class _Locator:
    """Finds the TOML line where a key path can be found, without a position-aware parser.

    The longest table header (``[profiles.p]``, ``[profiles.p.inputs]``) that prefixes the
    path is found first; the remaining keys are then searched for, in order, from that
    header to the next one. Inline tables on one line resolve to that line. Returns the
    best line found (the header when no key matches), or None when even the profile's
    table is absent from the text.

    Built once per text (:func:`locator_for`), a lookup costs the path's depth and the
    lines of one table, not the whole file: every profile of a 4,000-profile file is
    checked against one locator."""

    _HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        #: Header line numbers in order, and each header's keys -> its first line.
        self.header_lines: list[int] = []
        self.headers: dict[tuple[str, ...], int] = {}
        for i, line in enumerate(self.lines):
            m = self._HEADER.match(line)
            if m:
                self.header_lines.append(i)
                self.headers.setdefault(tuple(_split_header(m.group(1))), i)

    def line(self, segments: list[str | int]) -> int | None:
        keys = [s for s in segments if isinstance(s, str)]
        best_i, best_len = -1, 0
        for n in range(len(keys), 0, -1):
            i = self.headers.get(tuple(keys[:n]))
            if i is not None:
                best_i, best_len = i, n
                break
        if best_i < 0:
            start, end = 0, self.header_lines[0] if self.header_lines else len(self.lines)
            # Top-level keys only live before the first header; a dotted top-level key
            # (``profiles.p.model = …``) is rare enough to be searched there too.
        else:
            start = best_i + 1
            k = bisect.bisect_right(self.header_lines, best_i)
            end = self.header_lines[k] if k < len(self.header_lines) else len(self.lines)
        rest = keys[best_len:]
        found = best_i if best_i >= 0 else None
        pos = start
        for key in rest:
            pattern = re.compile(r'(^|[\s{,.])("?)' + re.escape(key) + r'\2\s*[=.]')
            for j in range(pos, end):
                if pattern.search(self.lines[j]):
                    found, pos = j, j
                    break
            else:
                break
        return None if found is None else found + 1


_LOCATORS_KEPT = 8
_locators: list[tuple[str, _Locator]] = []  # newest last
_locators_lock = threading.Lock()


def locator_for(text: str) -> _Locator:
    """The locator of ``text``, built once however many profiles and problems ask.

    Found by identity first: an equal text held by another string object costs one
    comparison of the whole text (about 1 ms for 15 MB), and is then kept under that
    object too, so the next of a 2,217-profile file's lookups costs nothing."""
    with _locators_lock:
        for held, loc in reversed(_locators):
            if held is text:
                return loc
        found = next((loc for held, loc in _locators if len(held) == len(text) and held == text), None)
    loc = found if found is not None else _Locator(text)
    with _locators_lock:
        _locators.append((text, loc))
        del _locators[:-_LOCATORS_KEPT]
    return loc


def key_path_line(text: str, key_path: str) -> int | None:
    """The 1-based line of ``text`` (a recipes file) where ``key_path``
    (``profiles.p.init.checkpoint``) can be found: the key's line, else the nearest
    table header above it; None when even the profile's table is absent."""
    return locator_for(text).line(split_key_path(key_path))


def _split_header(text: str) -> list[str]:
    out = []
    for m in re.finditer(r'"((?:[^"\\]|\\.)*)"|\'([^\']*)\'|([A-Za-z0-9_-]+)', text):
        out.append(m.group(1) if m.group(1) is not None else m.group(2) if m.group(2) is not None else m.group(3))
    return out
