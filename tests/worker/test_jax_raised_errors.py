"""An error JAX raises where TensorViz calls the model (issue 46, item 5): JAX removes its
own frames from the traceback, so only TensorViz's remain; the failure is still the
model's (stage ``trace``, at the model's definition), never "a bug in TensorViz"."""

from __future__ import annotations

import pytest

from capture.recipe.profile import parse_profile
from capture.session.runner import run_capture

from capture_workspace import profile_table, tensor, write

pytestmark = [pytest.mark.jax, pytest.mark.slow]

MODEL = '''
import jax


def two(x, y):
    return x + y


step = jax.jit(two)
'''


def test_a_jitted_model_called_with_too_few_arguments_is_the_models_failure(tmp_path):
    pytest.importorskip("jax")
    ws = write(tmp_path, {"m.py": MODEL})
    c = run_capture(ws, parse_profile("p", profile_table("m:step", args=[tensor([4])], framework="jax")), timeout=180)
    f = c.failure
    assert f is not None and f.stage == "trace" and f.type == "TypeError"
    assert "missing 1 required positional argument: 'y'" in f.message and "raised by JAX" in f.message
    assert "bug in TensorViz" not in f.message
    assert [(fr.file, fr.line, fr.function) for fr in f.frames] == [("m.py", 4, "two")]
