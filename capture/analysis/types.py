"""The shapes of the analysis's results (TypedDicts): what the CLI prints, the language
server shows and the viewer sends, read by key, so typed once here."""

from __future__ import annotations

from typing import TypedDict


class ParamCounts(TypedDict):
    """The parameters a group uses; ``count``/``bytes`` None: a size is unknown (a symbolic
    dimension, an unknown dtype), never a guess."""

    tensors: int
    count: int | None
    bytes: int | None
