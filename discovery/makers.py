"""Same-file functions that build a value a model takes (issue 49, item 3).

bonsai's Qwen3 is called with ``cache``, which nothing annotates; the file defines
``def init_cache(cfg: ModelConfig, batch_size: int, token_len: int, generate_steps: int,
dtype=jnp.bfloat16) -> Cache``. A suggestion that cannot say what ``cache`` is stops at
"could not infer"; one that calls ``init_cache`` with the model's own config and small
sizes runs. A top-level function of the candidate's file is a parameter's *maker* when

* its return annotation is the parameter's (``-> Cache`` for ``cache: Cache``), an
  annotation that is neither an array, a builtin nor ``Any``; or
* its name says it builds the parameter: ``init_cache``, ``make_cache``,
  ``create_cache``, ``build_cache``, ``new_cache``, ``empty_cache`` or ``cache_init``
  for ``cache``.

The maker and its required parameters (name and annotation) are the parameter's
:attr:`~discovery.results.ValueHints.made_by`, and its dtype parameters that default to
half precision (``dtype=jnp.bfloat16``) its ``made_by_float32``; the suggestion picks their values
(:mod:`tensorviz_lsp.setup.suggestions`).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TypeVar

import libcst as cst

from .namespace import Namespace, identifier
from .parameters import parameters_of, source_text
from .results import CallInput, SetupField, ValueHints

_PREFIXES = ("init_", "make_", "create_", "build_", "new_", "empty_")
# Annotations a maker's return never stands for: arrays (a shape is what they need),
# builtins, and what says nothing.
_OPAQUE = re.compile(r"(^|[.\[\s|,])(Tensor|LongTensor|FloatTensor|BoolTensor|IntTensor|Array|ndarray|ArrayLike|"
                     r"int|float|bool|str|bytes|None|Any|object|dict|list|tuple|Module)(\b|$)")

_LOW_PRECISION = re.compile(r"\b(bfloat16|float16|half)\b")

Param = TypeVar("Param", CallInput, SetupField)


class Makers:
    """The top-level functions of one file, by name and by return annotation."""

    def __init__(self, ns: Namespace) -> None:
        self.by_name: dict[str, cst.FunctionDef] = {}
        self.by_return: dict[str, cst.FunctionDef] = {}
        for function in ns.top_level_functions():
            if function.asynchronous is not None:
                continue
            name = identifier(function.name.value)
            self.by_name[name] = function
            if function.returns is not None:
                returned = _squeezed(source_text(function.returns.annotation))
                if returned and not _OPAQUE.search(returned):
                    self.by_return.setdefault(returned, function)

    def __bool__(self) -> bool:
        return bool(self.by_name)

    def maker_of(self, name: str, annotation: str | None, exclude: str | None = None) -> cst.FunctionDef | None:
        """The function that builds a parameter ``name`` annotated ``annotation``; None
        when none does (``exclude``: the candidate's own function)."""
        found = None
        if annotation:
            wanted = _squeezed(annotation)
            if not _OPAQUE.search(wanted):
                found = self.by_return.get(wanted)
        if found is None:
            found = next((self.by_name[n] for n in (*(p + name for p in _PREFIXES), f"{name}_init")
                          if n in self.by_name), None)
        if found is None or identifier(found.name.value) == exclude:
            return None
        return found

    def with_maker(self, param: Param, exclude: str | None = None) -> Param:
        """``param`` with the maker that builds it in its hints; unchanged when it has a
        configuration class, a subclass to call, or no maker."""
        hints = param.hints or ValueHints()
        if param.config is not None or hints.subclass is not None or hints.builder is not None:
            return param
        function = self.maker_of(param.name, param.annotation, exclude)
        if function is None:
            return param
        params = parameters_of(function, bound=False)
        needed = tuple((p.name, p.annotation_text or "") for p in params
                       if p.default is None and p.kind in ("positional", "keyword_only"))
        # ``dtype=jnp.bfloat16``: a cache in half precision beside freshly initialised
        # float32 parameters fails their first update ("requires arguments to have the same
        # dtypes, got bfloat16, float32"); the suggestion passes float32.
        low = tuple(p.name for p in params if p.default is not None and "dtype" in p.name.lower()
                    and _LOW_PRECISION.search(source_text(p.default)))
        return replace(param, hints=replace(hints, made_by=(identifier(function.name.value), needed),
                                            made_by_float32=low))


def _squeezed(text: str) -> str:
    return re.sub(r"\s+", "", text)
