"""LSP ranges: 0-based lines, UTF-16 characters, decorators included, names exact."""

from __future__ import annotations

import ast
import sys
import textwrap

import libcst as cst
import pytest
from discovery_helpers import discover_snippet

from discovery.locate import AstLocator, CstLocator, definition_spans
from discovery.parsing import ParsedSource, parse_source
from discovery.positions import LineIndex


def ranges(source: str) -> dict[str, tuple]:
    result = discover_snippet(source)
    assert result.errors == ()
    return {
        c.qualname: (
            (c.name_range.start.line, c.name_range.start.character, c.name_range.end.character),
            (c.range.start.line, c.range.start.character, c.range.end.line, c.range.end.character),
        )
        for c in result.candidates
    }


def test_decorators_and_multiline_headers():
    found = ranges(
        """\
        from functools import partial
        import jax

        # a comment before the decorators
        @partial(
            jax.jit,
            static_argnums=1,
        )
        @jax.named_call  # trailing comment
        def step(
            x,
            n,
        ):
            return x * n
        """
    )
    # name on line 9; definition from the first decorator (line 4) to "return x * n".
    assert found["step"] == ((9, 4, 8), (4, 0, 13, 16))


def test_nested_class_ranges_are_indented():
    found = ranges(
        """\
        from flax import linen as nn

        class Outer(nn.Module):
            width: int = 2

            class Inner(nn.Module):
                @nn.compact
                def __call__(self, x):
                    return x

            def __call__(self, x):
                return x
        """
    )
    assert found["Outer"] == ((2, 6, 11), (2, 0, 11, 16))
    assert found["Outer.Inner"] == ((5, 10, 15), (5, 4, 8, 20))


def test_utf16_columns():
    found = ranges(
        """\
        from flax import linen as nn
        class 𝐀(nn.Module):  # 𝐀 is outside the BMP: two UTF-16 units
            def __call__(self, x):
                return x  # 😀
        """
    )
    # Python binds 𝐀 as "A" (NFKC); the name range still covers the written 𝐀.
    assert found["A"] == ((1, 6, 8), (1, 0, 3, 22))


def test_trailing_comments_and_blank_lines_are_not_part_of_the_definition():
    found = ranges(
        """\
        import torch.nn as nn
        class A(nn.Module):
            def forward(self, x):
                return x
            # a trailing comment, indented

        # a comment after
        x = 1
        """
    )
    assert found["A"][1] == (1, 0, 3, 16)


def test_crlf_line_endings():
    text = "import torch.nn as nn\r\n\r\nclass A(nn.Module):\r\n    pass\r\n"
    result = discover_snippet(text)
    (c,) = result.candidates
    assert (c.name_range.start.line, c.name_range.start.character) == (2, 6)
    assert (c.range.end.line, c.range.end.character) == (3, 8)


def test_later_definition_wins():
    found = ranges(
        """\
        import torch.nn as nn
        class A(nn.Module):
            pass
        class A(nn.Module):
            pass
        """
    )
    assert found["A"][0][0] == 3


NEWER_SYNTAX = """\
from flax import linen as nn

class Box[T](nn.Module):
    size: int = 3

    def __call__(self, x: T) -> T:
        return x
"""


def test_syntax_newer_than_this_interpreter_still_discovered():
    found = ranges(NEWER_SYNTAX)
    assert found["Box"] == ((2, 6, 9), (2, 0, 6, 16))


def _both_locators(text: str):
    parsed = parse_source(text)
    assert isinstance(parsed, ParsedSource)
    lines = LineIndex(text)
    spans = parsed.definitions if parsed.definitions is not None else definition_spans(ast.parse(text))
    return AstLocator(spans, lines), CstLocator(parsed.module, lines)


LOCATOR_CASES = [
    pytest.param(
        """\
        \"\"\"Docstring mentioning
        class NotReal(nn.Module):
        \"\"\"
        import torch.nn as nn  # header comment

        x = (1,
             2)


        @dec
        # between decorator and def
        class A(nn.Module):
            '''doc'''
            y: int = 1
            class B:
                class C(nn.Module):
                    pass
            def f(self):
                s = \"\"\"
        def fake(): pass
        \"\"\"
                return s
            # trailing
        def g(x): return x  # one line
        async def h():
            pass
        class D: pass
        """,
        {"A", "A.B", "A.B.C", "g", "h", "D"},
        id="mixed",
    ),
    pytest.param(
        "import jax\ndef f(x):\n    return x",  # no trailing newline
        {"f"},
        id="no-final-newline",
    ),
    pytest.param(
        "import jax\r\n\r\n@jax.jit\r\ndef f(x):\r\n    return x\r\n\r\n# end\r\n",
        {"f"},
        id="crlf",
    ),
    pytest.param(
        "import jax\nif True:\n    def hidden(): pass\ndef é(x):\n    return '😀'\n",
        {"é"},
        id="non-ascii",
    ),
    pytest.param(
        "from functools import partial\r\nimport functools\r\nclass A: pass\r\n"
        "Small = partial(A,\r\n                x=1)  # two lines\r\n\r\n"
        "Tiny = functools.partial(Small)\r\nnotpartial = print(A)\r\nSmall.x = partial(A)\r\n",
        {"A", "Small", "Tiny"},
        id="partial-assignments",
    ),
]


@pytest.mark.parametrize("text, defined", LOCATOR_CASES)
def test_ast_and_cst_locators_agree(text, defined):
    text = textwrap.dedent(text)
    by_ast, by_cst = _both_locators(text)
    names = ["A", "A.B", "A.B.C", "g", "h", "D", "f", "é", "hidden", "fake", "NotReal", "A.f", "Small", "Tiny",
             "notpartial"]
    for name in names:
        located = by_ast.locate(name)
        assert located == by_cst.locate(name), name
        assert (located is not None) == (name in defined), name


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12 parses PEP 695 itself")
def test_newer_syntax_takes_the_cst_locator():
    parsed = parse_source(NEWER_SYNTAX)
    assert isinstance(parsed, ParsedSource) and parsed.definitions is None
    assert isinstance(parsed.module, cst.Module)
