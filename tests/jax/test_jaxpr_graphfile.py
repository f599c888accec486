"""A graph file holding a Jaxpr capture refuses runtime timings, as a traced program
refuses measured evidence: the reader, not only the writer's habits, keeps the distinction.

Spec ("Graph evidence and limits"): "The capture records backend = "jaxpr", its JAX
version and coverage.scope = "traced_program". It cannot carry runtime timings or claim
PyTorch execution coverage. Shared graph projection, paginated inspection and portable
graph files retain this distinction."
"""

from __future__ import annotations

import msgpack
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

from capture.graph import graphfile  # noqa: E402
from capture.graph.model import Coverage  # noqa: E402
from capture.jax.convert import convert  # noqa: E402

from synthetic import synthetic_capture  # noqa: E402

pytestmark = pytest.mark.jax


def _traced_capture():
    return convert(jax.make_jaxpr(lambda x: jax.nn.relu(x @ jnp.ones((3, 4))))(jnp.ones((2, 3))))


def _with_meta(data: bytes, **meta) -> bytes:
    """``data`` with ``meta`` added to the file's body, as a hand-made file would carry it."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
    unpacker.feed(data)
    header, body = unpacker.unpack(), unpacker.unpack()
    body["meta"] = {**(body.get("meta") or {}), **meta}
    return msgpack.packb(header) + msgpack.packb(body)


@pytest.mark.parametrize("version", graphfile.READ_VERSIONS)
@pytest.mark.parametrize("key", ["elapsed_s", "capture_s", "checkpoint_load_s", "trace_ms", "timings"])
def test_a_traced_program_with_runtime_timings_is_refused(version, key):
    """The capture records backend = "jaxpr", its JAX version and coverage.scope =
    "traced_program". It cannot carry runtime timings or claim PyTorch execution
    coverage. Shared graph projection, paginated inspection and portable graph files
    retain this distinction."""
    good = graphfile.encode(_traced_capture(), version=version)
    assert graphfile.decode(good).meta.get("graph")  # the file itself is valid
    with pytest.raises(graphfile.GraphFileError) as info:
        graphfile.decode(_with_meta(good, **{key: 0.25}), name="hand-made.tvg")
    assert str(info.value) == f"hand-made.tvg: invalid field meta.{key}: a traced program carries no runtime timings"


def test_an_eager_capture_keeps_its_timings():
    """Only the Jaxpr capture is refused: an eager capture measures its run."""
    eager = synthetic_capture(20, framework="torch")
    eager.backend, eager.coverage = "torch_eager", Coverage("eager_forward")
    data = _with_meta(graphfile.encode(eager), elapsed_s=1.5, capture_s=0.5)
    assert graphfile.decode(data).meta["elapsed_s"] == 1.5


def test_meta_names_that_are_not_timings_are_kept():
    """Names that merely contain a unit-like part (``state_s…``, ``jax_enable_x64``) are
    no timings."""
    data = _with_meta(graphfile.encode(_traced_capture()), states={"a": 1}, status_note="x", jax_enable_x64=False)
    assert graphfile.decode(data).meta["states"] == {"a": 1}
