"""RNG streams (issue 12 item 4): a Linen module bound with ``bind(variables, rngs=...)``
keeps its streams; a fresh Linen module's other streams get keys derived from the seed,
per stream name; NNX ``Rngs`` from a factory or the inputs keep working; the capture's
``meta["rng_streams"]`` names each stream and where it came from."""

from __future__ import annotations

import zlib

import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("flax")

from capture.jax.rngs import derivation, derived_key  # noqa: E402

from jax_workspace import capture_in_process, forget_workspace_modules, profile, tensor, write  # noqa: E402

pytestmark = pytest.mark.jax

# The Flax seq2seq example's shape: an LSTM encoder, and a decoder cell that samples its
# next token from the "lstm" stream, scanned with nn.RNN (split_rngs per step).
SEQ2SEQ = '''
import jax
import jax.numpy as jnp
from flax import linen as nn


class DecoderLSTMCell(nn.RNNCellBase):
    teacher_force: bool
    vocab_size: int

    @nn.compact
    def __call__(self, carry, x):
        lstm_state, last_prediction = carry
        if not self.teacher_force:
            x = last_prediction
        lstm_state, y = nn.LSTMCell(lstm_state[0].shape[-1])(lstm_state, x)
        logits = nn.Dense(features=self.vocab_size)(y)
        predicted_token = jax.random.categorical(self.make_rng("lstm"), logits)
        prediction = jax.nn.one_hot(predicted_token, self.vocab_size, dtype=jnp.float32)
        return (lstm_state, prediction), (logits, prediction)

    @property
    def num_feature_axes(self) -> int:
        return 1


class Seq2seq(nn.Module):
    teacher_force: bool = False
    hidden_size: int = 16
    vocab_size: int = 12

    @nn.compact
    def __call__(self, encoder_inputs, decoder_inputs):
        encoder = nn.RNN(nn.LSTMCell(self.hidden_size), return_carry=True, name="encoder")
        decoder = nn.RNN(DecoderLSTMCell(self.teacher_force, self.vocab_size),
                         split_rngs={"params": False, "lstm": True}, name="decoder")
        encoder_state, _ = encoder(encoder_inputs)
        first = jax.nn.one_hot(jnp.zeros(decoder_inputs.shape[:1], jnp.int32), self.vocab_size)
        logits, predictions = decoder(decoder_inputs[:, :-1], initial_carry=(encoder_state, first))
        return logits, predictions


def _variables(model):
    enc, dec = jnp.ones((2, 5, 12)), jnp.ones((2, 4, 12))
    return model.init({"params": jax.random.key(0), "lstm": jax.random.key(1)}, enc, dec)


def bound_model():
    model = Seq2seq()
    return model.bind(_variables(model), rngs={"lstm": jax.random.key(2)})


def bound_without_rngs():
    model = Seq2seq()
    return model.bind(_variables(model))


class Noisy(nn.Module):
    """Dropout in training mode and a custom stream."""

    @nn.compact
    def __call__(self, x):
        x = nn.Dense(8)(x)
        x = nn.Dropout(rate=0.1, deterministic=False)(x)
        return x + 0.01 * jax.random.normal(self.make_rng("noise"), x.shape)


def noisy_inputs_with_rngs():
    return {"args": (jnp.ones((2, 4)),), "kwargs": {"rngs": {"noise": jax.random.key(9)}}}


def inputs_with_rngs():
    return {"args": (jnp.ones((2, 5, 12)), jnp.ones((2, 4, 12))), "kwargs": {"rngs": {"lstm": jax.random.key(9)}}}
'''

NNX = '''
import jax
import jax.numpy as jnp
from flax import nnx


class Block(nnx.Module):
    def __init__(self, din: int, dout: int, *, rngs: nnx.Rngs):
        self.linear = nnx.Linear(din, dout, rngs=rngs)
        self.dropout = nnx.Dropout(0.2, rngs=rngs)
        self.rngs = rngs

    def __call__(self, x):
        h = self.dropout(self.linear(x))
        return h + 0.01 * self.rngs.noise.normal(h.shape)


def build():
    return Block(4, 8, rngs=nnx.Rngs(0, dropout=1, noise=2))


class Sampler(nnx.Module):
    def __init__(self, din: int, *, rngs: nnx.Rngs):
        self.linear = nnx.Linear(din, 3, rngs=rngs)

    def __call__(self, x, rngs: nnx.Rngs):
        return jax.random.categorical(rngs.sample(), self.linear(x))


def sampler():
    return Sampler(4, rngs=nnx.Rngs(0))


def sampler_inputs():
    return {"args": (jnp.ones((2, 4)), nnx.Rngs(sample=5))}
'''


@pytest.fixture
def ws(tmp_path):
    write(tmp_path, {"seq2seq.py": SEQ2SEQ, "nnxm.py": NNX})
    yield tmp_path
    forget_workspace_modules(tmp_path)


def ops(cap) -> set[str]:
    return {n.op for n in cap.nodes}


@pytest.mark.slow
def test_linen_seq2seq_bound_with_rngs_keeps_its_stream(ws):
    args = [tensor([2, 5, 12]), tensor([2, 4, 12])]
    cap, _ = capture_in_process(ws, profile("seq2seq:Seq2seq", args=args, init={"factory": "seq2seq:bound_model"}))
    assert cap.meta["state"] == "factory_variables"
    assert cap.meta["rng_streams"] == [{
        "name": "lstm", "origin": "bound", "where": "model.bind(variables, rngs=...)",
        "note": "bound by seq2seq:bound_model with model.bind(variables, rngs=...)",
    }]
    # the decoder's per-step keys are split from the bound key before the scan
    assert "random_split" in ops(cap) and "scan" in ops(cap)


@pytest.mark.slow
def test_linen_bound_without_rngs_gets_the_stream_from_the_seed(ws):
    args = [tensor([2, 5, 12]), tensor([2, 4, 12])]
    table = profile("seq2seq:Seq2seq", args=args, init={"factory": "seq2seq:bound_without_rngs"}, seed=11)
    cap, _ = capture_in_process(ws, table)
    (entry,) = cap.meta["rng_streams"]
    assert (entry["name"], entry["origin"], entry["where"]) == ("lstm", "seed", "seed 11")
    assert derivation(11, "lstm") in entry["note"]


def test_fresh_linen_dropout_and_a_custom_stream_derive_from_the_seed(ws):
    cap, _ = capture_in_process(ws, profile("seq2seq:Noisy", args=[tensor([2, 4])], seed=3))
    got = {e["name"]: e for e in cap.meta["rng_streams"]}
    assert sorted(got) == ["dropout", "noise"]
    for name in ("dropout", "noise"):
        assert got[name]["origin"] == "seed" and got[name]["where"] == "seed 3"
        assert got[name]["note"] == f"derived from seed 3 and the stream name ({derivation(3, name)})"
    # dropout's mask and the normal noise are drawn in the program
    assert {"random_bits", "random_fold_in"} <= ops(cap)
    assert cap.meta["state"] == "fresh_init"


def test_the_derivation_is_the_documented_one():
    key = derived_key(jax, 3, "dropout")
    want = jax.random.fold_in(jax.random.key(3), zlib.crc32(b"dropout") & 0x7FFFFFFF)
    assert (jax.random.key_data(key) == jax.random.key_data(want)).all()
    other = derived_key(jax, 3, "noise")
    assert not (jax.random.key_data(key) == jax.random.key_data(other)).all()
    assert not (jax.random.key_data(key) == jax.random.key_data(derived_key(jax, 4, "dropout"))).all()


@pytest.mark.slow
def test_linen_rngs_given_as_input_win_over_bound_ones(ws):
    table = profile("seq2seq:Seq2seq", init={"factory": "seq2seq:bound_model"}, inputs={"factory": "seq2seq:inputs_with_rngs"})
    cap, _ = capture_in_process(ws, table)
    assert [(e["name"], e["origin"], e["where"]) for e in cap.meta["rng_streams"]] == [
        ("lstm", "input", "rngs.lstm")]
    # the key is a traced input of the program, named as given
    assert "rngs.lstm" in {name for _, name in cap.meta["input_names"]}
    assert "random_split" in ops(cap)


def test_fresh_linen_with_rngs_given_as_input(ws):
    table = profile("seq2seq:Noisy", inputs={"factory": "seq2seq:noisy_inputs_with_rngs"})
    cap, _ = capture_in_process(ws, table)
    got = {e["name"]: (e["origin"], e["where"]) for e in cap.meta["rng_streams"]}
    assert got == {"noise": ("input", "rngs.noise"), "dropout": ("seed", "seed 0")}
    assert cap.meta["state"] == "fresh_init"


@pytest.mark.slow
def test_nnx_rngs_built_by_a_factory(ws):
    cap, _ = capture_in_process(ws, profile("nnxm:Block", args=[tensor([2, 4])], init={"factory": "nnxm:build"}))
    entries = [(e["name"], e["origin"], e["where"]) for e in cap.meta["rng_streams"]]
    assert entries == [("dropout", "factory", "dropout.rngs"), ("default", "factory", "rngs.default"),
                       ("dropout", "factory", "rngs.dropout"), ("noise", "factory", "rngs.noise")]
    assert cap.meta["rng_streams"][0]["note"] == "carried by the module that nnxm:build built"
    assert {"random_bits", "random_fold_in"} <= ops(cap)
    names = {name for _, name in cap.meta["input_names"]}
    assert {"rngs.noise.key", "rngs.noise.count", "dropout.rngs.key"} <= names


def test_nnx_rngs_supplied_from_the_seed(ws):
    cap, _ = capture_in_process(ws, profile("nnxm:Block", args=[tensor([2, 4])],
                                            init={"args": [4, 8], "kwargs": {}}, seed=5))
    entries = {(e["name"], e["origin"], e["where"]) for e in cap.meta["rng_streams"]}
    assert entries == {("default", "seed", "dropout.rngs"), ("default", "seed", "rngs.default")}
    assert "nnx.Rngs(5)" in cap.meta["rng_streams"][0]["note"]


def test_nnx_rngs_given_as_input(ws):
    table = profile("nnxm:Sampler", init={"factory": "nnxm:sampler"}, inputs={"factory": "nnxm:sampler_inputs"})
    cap, _ = capture_in_process(ws, table)
    assert cap.meta["rng_streams"] == [{"name": "sample", "origin": "input", "where": "rngs.sample",
                                        "note": "given as input"}]
    assert "random_bits" in ops(cap)


def test_a_plain_function_with_a_key_input(ws):
    write(ws, {"noise.py": (
        "import jax\nimport jax.numpy as jnp\n\n"
        "def add_noise(x, key):\n    return x + jax.random.normal(key, x.shape)\n\n"
        "def inputs():\n    return {'args': (jnp.ones((2, 3)), jax.random.key(4))}\n")})
    cap, _ = capture_in_process(ws, profile("noise:add_noise", inputs={"factory": "noise:inputs"}))
    assert cap.meta["rng_streams"] == [{"name": "key", "origin": "input", "where": "key", "note": "a key given as input"}]
    assert "random_bits" in ops(cap)


def test_a_program_without_randomness_records_no_streams(ws):
    cap, _ = capture_in_process(ws, profile("seq2seq:Noisy", args=[tensor([2, 4])]))
    assert cap.meta["rng_streams"]  # (Noisy draws)
    write(ws, {"plain.py": "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sin(x)\n"})
    cap, _ = capture_in_process(ws, profile("plain:f", args=[tensor([2])]))
    assert "rng_streams" not in cap.meta


@pytest.mark.slow
def test_the_issue_case_through_the_worker(ws):
    """The report: a seq2seq factory returning model.bind(variables, rngs={"lstm": key})
    failed with InvalidRngError ("needs PRNG for lstm"); through the real worker now."""
    from capture.session.runner import run_capture

    args = [tensor([2, 5, 12]), tensor([2, 4, 12])]
    table = profile("seq2seq:Seq2seq", args=args, init={"factory": "seq2seq:bound_model"})
    cap = run_capture(ws, {"name": "seq2seq", **table}, timeout=240)
    assert cap.failure is None, cap.failure
    assert [(e["name"], e["origin"]) for e in cap.meta["rng_streams"]] == [("lstm", "bound")]
    assert "random_split" in ops(cap)
