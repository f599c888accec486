"""Repeated frames in a failure's traceback, collapsed as Python's own traceback does.

Deep recursion in user code (a ``RecursionError``) records about a thousand identical
frames. Like :mod:`traceback` (``[Previous line repeated N more times]``), a run of the
same frame is kept three times and the rest counted; so is a short repeating cycle of 2
to 4 frames (mutual recursion: ``even → odd → even …``), which Python does not fold.

The collapse is recorded in ``failure.details["repeated_frames"]``: a list of
``{"after": I, "frames": K, "times": N}`` meaning that after ``failure.frames[I]`` the
``K`` frames ending there repeat ``N`` more times. :func:`frame_lines` prints the frames
with those markers (the CLI, ``tensorviz inspect`` and the language server's diagnostic).

Standard library only (part of ``capture``)."""

from __future__ import annotations

from typing import Any, Sequence

#: Occurrences kept before the rest are counted (Python's ``_RECURSIVE_CUTOFF``).
KEPT = 3
#: The longest repeating cycle folded (mutual recursion of up to four functions).
MAX_CYCLE = 4


def _key(frame: Any) -> tuple[Any, ...]:
    return (frame.file, frame.line, frame.function)


def collapse(frames: Sequence[Any]) -> tuple[list[Any], list[dict[str, int]]]:
    """``(kept frames, repeats)``: runs of one frame, or of a cycle of 2-4 frames, that
    occur more than :data:`KEPT` times keep :data:`KEPT` occurrences; ``repeats`` says
    where the rest were and how many (see the module docstring). Frames compare by file,
    line and function, as Python's traceback compares them."""
    keys = [_key(f) for f in frames]
    n = len(keys)
    out: list[Any] = []
    repeats: list[dict[str, int]] = []
    i = 0
    while i < n:
        best: tuple[int, int] | None = None  # (occurrences, cycle length)
        for k in range(1, MAX_CYCLE + 1):
            if i + k > n:
                break
            cycle = keys[i:i + k]
            if k > 1 and all(c == cycle[0] for c in cycle):
                continue  # one frame repeated: the k == 1 case
            count, j = 1, i + k
            while j + k <= n and keys[j:j + k] == cycle:
                count, j = count + 1, j + k
            # The longest stretch wins; on a tie, the shorter cycle.
            if count > KEPT and (best is None or count * k > best[0] * best[1]):
                best = (count, k)
        if best is None:
            out.append(frames[i])
            i += 1
            continue
        count, k = best
        out.extend(frames[i:i + KEPT * k])
        repeats.append({"after": len(out) - 1, "frames": k, "times": count - KEPT})
        i += count * k
    return out, repeats


def collapse_failure(failure: Any) -> Any:
    """Collapse ``failure.frames`` in place (see :func:`collapse`), recording the repeats
    in ``failure.details["repeated_frames"]``; returns ``failure``. What the worker does
    to every failure it reports."""
    frames, repeats = collapse(failure.frames)
    if repeats:
        failure.frames = frames
        failure.details = {**(failure.details or {}), "repeated_frames": repeats}
    return failure


def repeated(details: Any) -> dict[int, tuple[int, int]]:
    """``failure.details["repeated_frames"]`` as ``{after: (frames, times)}``; entries
    that are not well-formed are ignored (the graph file is outside input)."""
    out: dict[int, tuple[int, int]] = {}
    items = details.get("repeated_frames") if isinstance(details, dict) else None
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        after, k, times = item.get("after"), item.get("frames"), item.get("times")
        if type(after) is int and type(k) is int and type(times) is int and after >= 0 and k >= 1 and times >= 1:
            out[after] = (k, times)
    return out


def marker(k: int, times: int) -> str:
    """Python's wording: ``[Previous line repeated 996 more times]``."""
    what = "line" if k == 1 else f"{k} lines"
    return f"[Previous {what} repeated {times:,} more time{'s' if times != 1 else ''}]"


def frame_lines(failure: Any) -> list[str]:
    """The failure's frames as ``at FILE:LINE in FUNCTION`` lines, outermost first, with
    a :func:`marker` line after each collapsed repeat."""
    marks = repeated(getattr(failure, "details", None))
    lines = []
    for index, fr in enumerate(getattr(failure, "frames", None) or []):
        lines.append(f"at {fr.file}:{fr.line} in {fr.function}")
        if index in marks:
            lines.append(marker(*marks[index]))
    return lines


def summary(failure: Any) -> str:
    """One phrase for a one-line message (the language server's diagnostic), e.g.
    ``"recursion: 2 lines repeated 497 more times after rec.py:4 in odd"``; empty when
    nothing was collapsed."""
    frames = getattr(failure, "frames", None) or []
    parts = []
    for after, (k, times) in sorted(repeated(getattr(failure, "details", None)).items()):
        where = f" after {frames[after].file}:{frames[after].line} in {frames[after].function}" if after < len(frames) else ""
        parts.append(marker(k, times).strip("[]").replace("Previous ", "", 1) + where)
    return ("recursion: " + "; ".join(parts)) if parts else ""
