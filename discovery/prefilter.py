"""Rejecting, before any parse, files that cannot contain a candidate.

Most files in a workspace are not models. Parsing is the expensive step, so a
substring test decides first; it may let through a file that turns out to have
nothing (a comment mentioning torch), never the reverse.
"""

from __future__ import annotations

import re

from .frameworks import framework_namespaces

# A class with a base it could inherit from another workspace file.
_CLASS_WITH_BASE = re.compile(r"^[ \t]*class[ \t]+\w+[ \t]*\([ \t\\\r\n]*[\w.]", re.MULTILINE)
# A top-level function annotated to return a class (``-> MixtralForCausalLM:``), or
# returning a call of one (``return GPT2LMHeadModel(config)``): a factory of an imported
# model class (discovery.factories).
_CLASS_FACTORY = re.compile(r"\)[ \t]*->[ \t]*[\w.]*\b[A-Z]\w*[ \t]*:|^[ \t]+(?:return|\w+[ \t]*=)[ \t]+"
                            r"[\w.]*\b[A-Z]\w*\(", re.MULTILINE)


def may_contain_candidates(text: str, *, workspace: bool) -> bool:
    """Could discovery find a candidate in ``text``?

    Every candidate spells its framework somewhere (JAX, or the package of a framework's
    base classes: ``torch``, ``flax``), except a class deriving from a workspace base, which
    needs an import and a base, or a factory of an imported class, which needs an import and
    the class in its return annotation or in the call it returns.
    """
    if "jax" in text or any(ns.root.split(".", 1)[0] in text for ns in framework_namespaces()):
        return True
    return workspace and "import" in text and (_CLASS_WITH_BASE.search(text) is not None
                                               or may_build_imported_class(text))


# A function returning a call of an imported function (``return resnet18(num_classes=10)``,
# ``model = models.resnet18(); return model``): that function may be annotated to return
# a model class.
_FUNCTION_FACTORY = re.compile(r"^[ \t]+(?:return|\w+[ \t]*=)[ \t]+[\w.]*\b[a-z_]\w*\(", re.MULTILINE)


def may_build_imported_class(text: str) -> bool:
    """Could a function of ``text`` build a class it imports (a factory of an imported
    model class: ``-> MixtralForCausalLM:``, ``return GPT2LMHeadModel(config)``)?"""
    return _CLASS_FACTORY.search(text) is not None


def may_build_imported_model(text: str) -> bool:
    """For a parsed file: could a function of ``text`` build an imported model class,
    itself or through an imported function (``return resnet18(num_classes=10)``)? Looser
    than :func:`may_build_imported_class`, which decides what is parsed."""
    return may_build_imported_class(text) or _FUNCTION_FACTORY.search(text) is not None


def may_provide_bases(text: str) -> bool:
    """Could other files find a base class here, defined or re-exported?"""
    return "class" in text or "import" in text
