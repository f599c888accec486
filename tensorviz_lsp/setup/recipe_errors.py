"""A recipe error met while building a setup from the shorthand or the setup form, worded
by what the user wrote (``--input tokens``), not by the key path of a recipe file they
never wrote (``profiles.Transformer.inputs.kwargs.tokens.generator.high``)."""

from __future__ import annotations

import re

from capture.recipe import RecipeError

# (key path below ``profiles.NAME.``, how the user gave it): the first that matches wins.
_PLACES: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(rx), text) for rx, text in (
    (r"^inputs\.kwargs\.([A-Za-z_]\w*)", "--input {0}"),
    (r"^inputs\.args\[(\d+)\]", "--input (positional {n})"),
    (r"^inputs\.factory", "--inputs-factory"),
    (r"^inputs\.fixture", "--fixture"),
    (r"^init\.kwargs\.([A-Za-z_]\w*)", "--init {0}"),
    (r"^init\.args\[(\d+)\]", "--init (positional {n})"),
    (r"^init\.then\[(\d+)\]", "--then (step {n})"),
    (r"^init\.before\[(\d+)\]", "--before (step {n})"),
    (r"^init\.factory", "--init-factory"),
    (r"^(model)$", "FILE.py:SYMBOL"),
    (r"^(evidence)$", "--abstract/--eager"),
    (r"^(mesh)\b", "--mesh"),
    (r"^(dtype|device|seed|framework|checkpoint)\b", "--{0}"),
))


def flag_of(key_path: str, profile: str | None) -> str | None:
    """The flag a key path of profile ``profile`` comes from, or None when it is none of them."""
    prefix = f"profiles.{profile}." if profile else "profiles."
    rest = key_path[len(prefix):] if key_path.startswith(prefix) else None
    if rest is None and not profile:
        rest = key_path.split(".", 2)[2] if key_path.count(".") >= 2 else None
    if rest is None:
        return None
    for rx, text in _PLACES:
        m = rx.search(rest)
        if m:
            first = m.group(1) if m.groups() else ""
            return text.format(first, n=int(first) + 1 if first.isdigit() else "")
    return None


def setup_error_text(exc: RecipeError) -> str:
    """``--input tokens: high must be greater than low (0)`` for a recipe error inside a
    setup the user described with flags (key paths inside the message worded the same);
    the error's own text when no flag says where."""
    profile = exc.profile

    def worded(m: re.Match[str]) -> str:
        return flag_of(m.group(0), profile) or m.group(0)

    problem = re.sub(r"profiles\.[\w-]+(\.[\w-]+|\[\d+\])+", worded, exc.problem)
    if not exc.key_path or exc.key_path == f"profiles.{profile}":
        return problem
    where = flag_of(exc.key_path, profile)
    return f"{where}: {problem}" if where else str(exc)
