"""Library frames in Torch captures of real library models (issue 14, item 2).

A GPT-2 or BERT built from a ``transformers`` config runs no workspace code while its
ops execute: each node records the innermost frame in library code (``library: true``,
the installed file's absolute path), never one inside torch itself; module groups record
their call site and where their class is defined. A workspace frame, when there is one,
still wins. Library files are navigation only: never among the hashed ``sources``."""

from __future__ import annotations

import linecache
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from capture.recipe import parse_profile  # noqa: E402
from capture.session.runner import run_capture  # noqa: E402
from torch_workspace import capture_in_process, forget_workspace_modules, make_workspace, profile, tensor  # noqa: E402

pytestmark = pytest.mark.torch

TRANSFORMERS_DIR = os.path.dirname(os.path.realpath(transformers.__file__)) + os.sep
TORCH_DIR = os.path.dirname(os.path.realpath(torch.__file__)) + os.sep

LIBRARY_MODELS = '''
from torch import nn
from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel


def gpt2(n_layer=2):
    return GPT2LMHeadModel(GPT2Config(n_layer=n_layer, n_embd=32, n_head=2, vocab_size=64,
                                      n_positions=16, use_cache=False))


def gpt2_4():
    return gpt2(4)


def bert():
    return BertModel(BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
                                intermediate_size=64, vocab_size=64, max_position_embeddings=16))


class Tagger(nn.Module):
    """The user's own model around a library encoder."""

    def __init__(self):
        super().__init__()
        self.encoder = bert()
        self.head = nn.Linear(32, 5)

    def forward(self, ids):
        hidden = self.encoder(ids).last_hidden_state
        return self.head(hidden)
'''


@pytest.fixture
def lib_ws(ws: Path) -> Path:
    (ws / "libmodels.py").write_text(LIBRARY_MODELS)
    return ws


@pytest.fixture(scope="module")
def gpt2_capture(tmp_path_factory):
    """The 2-layer GPT-2 of ``gpt2_profile()``, captured in process once for the tests
    that only read it (each of them used to capture it again)."""
    root = make_workspace(tmp_path_factory.mktemp("gpt2-ws"))
    (root / "libmodels.py").write_text(LIBRARY_MODELS)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as tests/torch/conftest.py's fixture does for each test
    try:
        cap, _ = capture_in_process(root, gpt2_profile())
    finally:
        torch.set_num_threads(threads)
        forget_workspace_modules(root)
    return cap


def ids(n=8):
    return tensor([1, n], dtype="int64", generator={"kind": "randint", "low": 0, "high": 64})


def gpt2_profile(factory="libmodels:gpt2"):
    return profile("libmodels:GPT2LMHeadModel", args=[ids()], init={"factory": factory})


def line_text(frame) -> str:
    return linecache.getline(frame.file, frame.line).strip()


def test_gpt2_from_a_config_gets_library_frames_on_its_nodes(gpt2_capture):
    cap = gpt2_capture
    framed = [cap.frames[n.frame] for n in cap.nodes if n.frame is not None]
    assert len(framed) >= 0.9 * len(cap.nodes), (len(framed), len(cap.nodes))
    assert all(f.library and os.path.isabs(f.file) for f in framed)
    # The innermost library frame: transformers' code, never torch's own internals.
    assert not any(f.file.startswith(TORCH_DIR) for f in framed)
    assert sum(f.file.startswith(TRANSFORMERS_DIR) for f in framed) >= 0.9 * len(framed)
    attention = [f for f in framed if f.file.endswith("models/gpt2/modeling_gpt2.py") and f.function == "GPT2Attention.forward"]
    assert attention, sorted({(f.file, f.function) for f in framed})
    for f in framed:  # each frame names a real line of that function's file
        assert line_text(f), f
    # Deduplicated: one frame per code location, far fewer than nodes.
    assert len(cap.frames) < len(cap.nodes)


def test_module_groups_record_their_call_site_and_class_definition(gpt2_capture):
    cap = gpt2_capture
    modules = [g for g in cap.groups if g.kind == "module"]
    assert modules and all("class_frame" in g.attrs for g in modules)
    by_path = {g.attrs["path"]: g for g in modules}
    block = by_path["transformer.h.0"]
    defined = cap.frames[block.attrs["class_frame"]]
    assert defined.library and defined.file.endswith("transformers/models/gpt2/modeling_gpt2.py")
    assert line_text(defined).startswith("class GPT2Block"), line_text(defined)
    called = cap.frames[block.attrs["frame"]]
    assert called.library and called.file == defined.file and called.function == "GPT2Model.forward"
    assert "block(" in line_text(called), line_text(called)  # hidden_states = block(...)
    # A torch layer's class is defined in torch (navigation only), its call in transformers.
    ln = by_path["transformer.h.0.ln_1"]
    assert line_text(cap.frames[ln.attrs["class_frame"]]).startswith("class LayerNorm")
    assert cap.frames[ln.attrs["frame"]].function == "GPT2Block.forward"


def test_bert_from_a_config_gets_library_frames(lib_ws):
    table = profile("libmodels:BertModel", args=[ids()], init={"factory": "libmodels:bert"})
    cap, _ = capture_in_process(lib_ws, table)
    framed = [cap.frames[n.frame] for n in cap.nodes if n.frame is not None]
    assert len(framed) >= 0.9 * len(cap.nodes)
    assert all(f.library for f in framed)
    assert any(f.file.endswith("models/bert/modeling_bert.py") for f in framed)
    modules = [g for g in cap.groups if g.kind == "module"]
    classes = {g.attrs["class"]: cap.frames[g.attrs["class_frame"]] for g in modules}
    assert line_text(classes["BertLayer"]).startswith("class BertLayer")
    assert line_text(classes["BertSelfAttention"]).startswith("class BertSelfAttention")


def test_a_workspace_frame_wins_over_library_frames(lib_ws):
    """Ops inside the library encoder of a workspace model link to the workspace line that
    called it; only frames with no workspace code above them are library frames."""
    table = profile("libmodels:Tagger", args=[ids()])
    cap, _ = capture_in_process(lib_ws, table)
    framed = [cap.frames[n.frame] for n in cap.nodes if n.frame is not None]
    assert len(framed) == len(cap.nodes)
    assert all(not f.library and f.file == "libmodels.py" for f in framed)
    assert {line_text_ws(lib_ws, f) for f in framed} == {
        "hidden = self.encoder(ids).last_hidden_state", "return self.head(hidden)"}
    tagger = next(g for g in cap.groups if g.kind == "module" and g.attrs["class"] == "Tagger")
    assert cap.frames[tagger.attrs["class_frame"]].file == "libmodels.py"
    assert not cap.frames[tagger.attrs["class_frame"]].library


def line_text_ws(ws: Path, frame) -> str:
    return (ws / frame.file).read_text().splitlines()[frame.line - 1].strip()


def test_the_frame_table_does_not_grow_with_depth(lib_ws, gpt2_capture):
    """Layers run the same code: a 4-layer GPT-2 has the frames of a 2-layer one."""
    two = gpt2_capture
    four, _ = capture_in_process(lib_ws, gpt2_profile("libmodels:gpt2_4"))
    assert len(four.nodes) > len(two.nodes)
    assert len(four.frames) == len(two.frames)


@pytest.mark.slow
def test_through_the_worker_library_files_are_not_sources(lib_ws):
    """The worker records where the interpreter's libraries live (the viewer shows
    library lines only from there); freshness stays about workspace files."""
    cap = run_capture(lib_ws, parse_profile("p", gpt2_profile()), timeout=240)
    assert cap.failure is None, cap.failure
    assert [s.path for s in cap.sources] == ["libmodels.py"]
    library = {f.file for f in cap.frames if f.library}
    assert library and all(f.startswith(TRANSFORMERS_DIR) or "site-packages" in f for f in library)
    env = cap.meta["environment"]
    assert env["prefix"] and any(TRANSFORMERS_DIR.startswith(d + os.sep) for d in env["site_packages"])


VENDORED = {
    "uses_lib.py": (
        "import os, sys\n"
        "sys.path.insert(0, os.path.join(os.path.dirname(__file__), 'env', 'site-packages'))\n"
        "from fakelib.layers import Scale\n\n\n"
        "def build():\n"
        "    return Scale()\n"
    ),
    "env/site-packages/fakelib/__init__.py": "",
    "env/site-packages/fakelib/layers.py": (
        "import torch\n\n\n"
        "class Scale(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return x * 2.0 + 1.0\n"
    ),
}


def test_library_files_are_never_hashed_for_freshness(ws):
    """An installed library (here a site-packages folder inside the workspace, as a
    workspace .venv is) gives library frames, is not among the sources, and editing it
    leaves the graph fresh; editing the workspace file that uses it makes it stale."""
    from capture.graph.freshness import stale_sources

    for rel, text in VENDORED.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    cap, ctx = capture_in_process(ws, profile("uses_lib:Scale", args=[tensor([2, 3])], init={"factory": "uses_lib:build"}))
    layer = (ws / "env/site-packages/fakelib/layers.py").resolve()
    framed = [cap.frames[n.frame] for n in cap.nodes if n.frame is not None]
    assert framed and all(f.library and f.file == str(layer) for f in framed)
    assert {f.line for f in framed} == {6}
    sources = ctx.files.imported_sources(ctx.requested_sources)
    assert [s.path for s in sources] == ["uses_lib.py"]
    layer.write_text(layer.read_text().replace("2.0", "3.0"))
    assert stale_sources(sources, ws) == []
    (ws / "uses_lib.py").write_text(VENDORED["uses_lib.py"] + "# edited\n")
    assert [c.path for c in stale_sources(sources, ws)] == ["uses_lib.py"]
