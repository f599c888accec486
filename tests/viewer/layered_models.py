"""Captures shaped like the real models people open, built directly in the canonical model
(imported by name: test files put their own folder on ``sys.path``; the projection
benchmark imports it too).

Each is written in the style of the real code's capture, not copied from it:

* :func:`decoder_capture`: a Llama-style causal LM as the Torch capture records it
  (``transformers``' ``LlamaForCausalLM``): token embedding, rotary ``cos``/``sin`` made
  after the embedding (so layer 0 receives its inputs in a different order from the
  later layers), ``layers.N`` of RMSNorm / attention / MLP with Torch function groups
  (``linear`` of ``view``/``t``/``mm``/``_unsafe_view``), eval-mode dropout modules that
  run nothing, the final norm, ``lm_head`` and the ``aten::alias`` Torch returns logits
  through; optionally a ``lift_fresh`` of a constant.
* :func:`vit_capture`: vit-pytorch's ``ViT``: patch embedding, then a ``Transformer``
  whose forward is ``x = attn(x) + x; x = ff(x) + x`` over ``depth`` (Attention,
  FeedForward) pairs, the residual adds between the blocks.
* :func:`pattern_capture`: Gemma-style (local × 5, global) × n sibling blocks.
* :func:`cnn_capture`: a ResNet-style stem (Conv2d, BatchNorm2d with its zero-element
  reserve, ReLU), a ``Sequential(Linear)`` wrapper and a head.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from capture.graph.model import Capture, Coverage, Frame, Group, Node, Operand, Value


class Builder:
    """A capture built op by op inside nested groups (``with b.group(...)``)."""

    def __init__(self, framework: str = "torch", *, measured: bool = False) -> None:
        self.framework = framework
        #: Give every value an op makes the measured fields an eager Torch capture records
        #: (device, bytes, strides, statistics): the heap a real capture brings along.
        self.measured = measured
        self.values: list[Value] = []
        self.nodes: list[Node] = []
        self.groups: list[Group] = []
        self.frames: list[Frame] = []
        self._stack: list[int] = []
        self._frame_ids: dict[tuple, int] = {}

    def frame(self, file: str, line: int, function: str = "forward") -> int:
        key = (file, line, function)
        got = self._frame_ids.get(key)
        if got is None:
            got = self._frame_ids[key] = len(self.frames)
            self.frames.append(Frame(file, line, 4, function))
        return got

    def value(self, shape: list, dtype: str = "float32", measured: dict | None = None) -> int:
        self.values.append(Value(len(self.values), list(shape), dtype, measured))
        return len(self.values) - 1

    def param(self, name: str, shape: list) -> int:
        return self.value(shape, measured={"param": name, "device": "cpu"})

    def external(self, shape: list) -> int:
        return self.value(shape, measured={"external": True, "device": "cpu"})

    def input(self, name: str, shape: list, dtype: str = "float32") -> int:
        return self.value(shape, dtype, measured={"input": name, "device": "cpu"})

    @contextmanager
    def group(self, kind: str, name: str, **attrs) -> Iterator[int]:
        gid = len(self.groups)
        self.groups.append(Group(gid, kind, name, self._stack[-1] if self._stack else None, dict(attrs)))
        self._stack.append(gid)
        try:
            yield gid
        finally:
            self._stack.pop()

    def module(self, cls: str, path: str, name: str | None = None):
        """A module call, named as the Torch capture names it: its path below the
        enclosing module's (``layers.0.0`` inside ``transformer``)."""
        outer = next((self.groups[g].attrs.get("path") for g in reversed(self._stack)
                      if self.groups[g].kind == "module"), "")
        below = path[len(outer) + 1:] if outer and path.startswith(outer + ".") else path
        return self.group("module", name or below or cls, **{"class": cls, "path": path})

    def op(self, op: str, inputs: list, outs: list[tuple], line: int | None = None, file: str = "model.py") -> list[int]:
        """Node ``op`` reading ``inputs`` (value ids; ``("lit", x)`` for a literal),
        making one value per ``(shape, dtype)`` in ``outs``."""
        operands = [Operand(k, None, x[1]) if isinstance(x, tuple) else Operand(k, x) for k, x in enumerate(inputs)]
        made = [self.value(shape, dtype, _measured(shape) if self.measured else None) for shape, dtype in outs]
        frame = self.frame(file, line) if line is not None else None
        self.nodes.append(Node(len(self.nodes), op, operands, made, {}, self._stack[-1] if self._stack else None, frame))
        return made

    def one(self, op: str, inputs: list, shape: list, dtype: str = "float32", line: int | None = None) -> int:
        return self.op(op, inputs, [(shape, dtype)], line)[0]

    def capture(self, inputs: dict, outputs: dict) -> Capture:
        return Capture(
            backend="torch_dispatch", framework=self.framework, framework_version="2.0-test",
            coverage=Coverage(scope="eager_forward"), values=self.values, nodes=self.nodes, groups=self.groups,
            frames=self.frames, inputs=inputs, outputs=outputs,
        )


def _measured(shape: list) -> dict:
    count = 1
    for d in shape:
        count *= d
    strides, step = [], 1
    for d in reversed(shape):
        strides.insert(0, step)
        step *= d
    return {"device": "cpu", "bytes": 4 * count, "strides": strides,
            "stats": {"min": -1.5, "max": 2.25, "mean": 0.125, "std": 0.75, "nan": 0, "inf": 0}}


def linear(b: Builder, path: str, x: int, shape_in: list, width: int, *, functions: bool = True, line: int = 10) -> int:
    """``nn.Linear`` at ``path`` on a ``[batch, seq, in]`` input: the kernels Torch runs
    (``view``, ``t``, ``mm``, ``_unsafe_view``), inside a ``linear`` function group."""
    batch, seq, width_in = shape_in
    w = b.param(f"{path}.weight", [width, width_in])
    with b.module("Linear", path):
        def kernels() -> int:
            flat = b.one("aten::view", [x, ("lit", [batch * seq, width_in])], [batch * seq, width_in], line=line)
            wt = b.one("aten::t", [w], [width_in, width], line=line)
            mm = b.one("aten::mm", [flat, wt], [batch * seq, width], line=line)
            return b.one("aten::_unsafe_view", [mm, ("lit", [batch, seq, width])], [batch, seq, width], line=line)

        if not functions:
            return kernels()
        with b.group("function", "linear", function="torch.nn.functional.linear", frame=b.frame("model.py", line)):
            return kernels()


def rms_norm(b: Builder, path: str, x: int, shape: list, line: int = 20) -> int:
    w = b.param(f"{path}.weight", shape[-1:])
    with b.module("RMSNorm", path):
        sq = b.one("aten::pow.Tensor_Scalar", [x, ("lit", 2)], shape, line=line)
        mean = b.one("aten::mean.dim", [sq, ("lit", [-1])], shape[:-1] + [1], line=line)
        eps = b.one("aten::add.Tensor", [mean, ("lit", 1e-6)], shape[:-1] + [1], line=line)
        inv = b.one("aten::rsqrt", [eps], shape[:-1] + [1], line=line)
        normed = b.one("aten::mul.Tensor", [x, inv], shape, line=line)
        return b.one("aten::mul.Tensor", [w, normed], shape, line=line + 1)


def decoder_capture(layers: int = 4, *, width: int = 16, seq: int = 8, functions: bool = True,
                    lift_fresh: bool = False, measured: bool = False) -> Capture:
    """A Llama-style causal LM of ``layers`` decoder layers (see the module docstring);
    ``measured``: every value carries measured fields, as an eager capture's do."""
    b = Builder(measured=measured)
    ids = b.input("input_ids", [1, seq], "int64")
    shape = [1, seq, width]
    with b.module("CausalLM", "", "CausalLM"):
        with b.module("Decoder", "model"):
            table = b.param("model.embed_tokens.weight", [128, width])
            with b.module("Embedding", "model.embed_tokens"):
                hidden = b.one("aten::embedding", [table, ids], shape, line=5)
            with b.module("RotaryEmbedding", "model.rotary_emb"):
                inv_freq = b.value([width // 2], measured={"buffer": "model.rotary_emb.inv_freq", "device": "cpu"})
                pos = b.one("aten::arange", [("lit", seq)], [seq], "int64", line=30)
                freqs = b.one("aten::mul.Tensor", [pos, inv_freq], [seq, width // 2], line=31)
                emb = b.one("aten::cat", [freqs, freqs], [seq, width], line=32)
                cos = b.one("aten::cos", [emb], [seq, width], line=33)
                sin = b.one("aten::sin", [emb], [seq, width], line=34)
            scale = b.external([]) if lift_fresh else None
            for i in range(layers):
                p = f"model.layers.{i}"
                with b.module("DecoderLayer", p):
                    normed = rms_norm(b, f"{p}.input_layernorm", hidden, shape)
                    with b.module("Attention", f"{p}.self_attn"):
                        q = linear(b, f"{p}.self_attn.q_proj", normed, shape, width, functions=functions, line=40)
                        k = linear(b, f"{p}.self_attn.k_proj", normed, shape, width, functions=functions, line=41)
                        v = linear(b, f"{p}.self_attn.v_proj", normed, shape, width, functions=functions, line=42)
                        q = b.one("aten::mul.Tensor", [q, cos], shape, line=43)
                        q = b.one("aten::add.Tensor", [q, b.one("aten::mul.Tensor", [q, sin], shape, line=43)], shape, line=43)
                        k = b.one("aten::mul.Tensor", [k, cos], shape, line=44)
                        if scale is not None:
                            fresh = b.one("aten::lift_fresh", [scale], [], line=45)
                            k = b.one("aten::mul.Tensor", [k, fresh], shape, line=45)
                        att = b.one("aten::_scaled_dot_product_flash_attention_for_cpu", [q, k, v], shape, line=46)
                        with b.module("Dropout", f"{p}.self_attn.attn_dropout"):
                            pass  # eval mode: runs nothing
                        att = linear(b, f"{p}.self_attn.o_proj", att, shape, width, functions=functions, line=47)
                    hidden = b.one("aten::add.Tensor", [hidden, att], shape, line=50)
                    normed = rms_norm(b, f"{p}.post_attention_layernorm", hidden, shape)
                    with b.module("MLP", f"{p}.mlp"):
                        gate = linear(b, f"{p}.mlp.gate_proj", normed, shape, 2 * width, functions=functions, line=60)
                        up = linear(b, f"{p}.mlp.up_proj", normed, shape, 2 * width, functions=functions, line=61)
                        act = b.one("aten::silu", [gate], [1, seq, 2 * width], line=62)
                        prod = b.one("aten::mul.Tensor", [act, up], [1, seq, 2 * width], line=62)
                        down = linear(b, f"{p}.mlp.down_proj", prod, [1, seq, 2 * width], width, functions=functions, line=63)
                    hidden = b.one("aten::add.Tensor", [hidden, down], shape, line=64)
            hidden = rms_norm(b, "model.norm", hidden, shape)
        logits = linear(b, "lm_head", hidden, shape, 128, functions=functions, line=70)
        (out,) = b.op("aten::alias", [logits], [([1, seq, 128], "float32")], line=71)
    return b.capture({"dict": [["args", {"tuple": [{"value": ids}]}], ["kwargs", {"dict": []}]]}, {"value": out})


def vit_capture(depth: int = 12, *, width: int = 16, tokens: int = 5) -> Capture:
    """vit-pytorch's ``ViT`` (see the module docstring)."""
    b = Builder()
    img = b.input("img", [1, 3, 8, 8])
    shape = [1, tokens, width]
    with b.module("ViT", "", "ViT"):
        with b.module("Sequential", "to_patch_embedding"):
            with b.module("Rearrange", "to_patch_embedding.0"):
                patches = b.one("aten::permute", [img], [1, tokens - 1, 48], line=5)
            w = b.param("to_patch_embedding.2.weight", [width, 48])
            with b.module("Linear", "to_patch_embedding.2"):
                x = b.one("aten::linear", [patches, w], [1, tokens - 1, width], line=6)
        cls_token = b.param("cls_token", [1, 1, width])
        x = b.one("aten::cat", [cls_token, x], shape, line=7)
        with b.module("Dropout", "dropout"):
            pass
        with b.module("Transformer", "transformer"):
            for i in range(depth):
                with b.module("Attention", f"transformer.layers.{i}.0"):
                    normed = b.one("aten::layer_norm", [x], shape, line=20)
                    qkv = linear(b, f"transformer.layers.{i}.0.to_qkv", normed, shape, 3 * width, line=21)
                    att = b.one("aten::_softmax", [qkv], shape, line=22)
                    att = linear(b, f"transformer.layers.{i}.0.to_out.0", att, shape, width, line=23)
                x = b.one("aten::add.Tensor", [att, x], shape, line=40)
                with b.module("FeedForward", f"transformer.layers.{i}.1"):
                    normed = b.one("aten::layer_norm", [x], shape, line=30)
                    h = linear(b, f"transformer.layers.{i}.1.net.1", normed, shape, 2 * width, line=31)
                    h = b.one("aten::gelu", [h], [1, tokens, 2 * width], line=32)
                    h = linear(b, f"transformer.layers.{i}.1.net.4", h, [1, tokens, 2 * width], width, line=33)
                x = b.one("aten::add.Tensor", [h, x], shape, line=41)
            x = b.one("aten::layer_norm", [x], shape, line=42)
        cls = b.one("aten::select.int", [x, ("lit", 1), ("lit", 0)], [1, width], line=50)
        head = b.param("mlp_head.weight", [10, width])
        with b.module("Linear", "mlp_head"):
            logits = b.one("aten::linear", [cls, head], [1, 10], line=51)
    return b.capture({"dict": [["args", {"tuple": [{"value": img}]}], ["kwargs", {"dict": []}]]}, {"value": logits})


def pattern_capture(repeats: int = 3, *, local: int = 5, width: int = 8) -> Capture:
    """Gemma-style blocks: (``local`` sliding-window blocks, one global block) ×
    ``repeats``, siblings under ``model``; a local block masks its scores, a global one
    does not."""
    b = Builder()
    x = b.input("x", [1, 4, width])
    shape = [1, 4, width]
    with b.module("Gemma", "", "Gemma"):
        with b.module("Model", "model"):
            k = 0
            for _ in range(repeats):
                for kind in ["local"] * local + ["global"]:
                    with b.module("Block", f"model.layers.{k}"):
                        h = b.one("aten::layer_norm", [x], shape, line=10)
                        h = b.one("aten::mm", [h, b.param(f"model.layers.{k}.w", [width, width])], shape, line=11)
                        if kind == "local":
                            h = b.one("aten::masked_fill", [h], shape, line=12)
                        h = b.one("aten::softmax", [h], shape, line=13)
                        x = b.one("aten::add.Tensor", [x, h], shape, line=14)
                    k += 1
            x = b.one("aten::layer_norm", [x], shape, line=20)
    return b.capture({"dict": [["args", {"tuple": [{"value": 0}]}], ["kwargs", {"dict": []}]]}, {"value": x})


def cnn_capture() -> Capture:
    """A ResNet-style stem and head (see the module docstring)."""
    b = Builder()
    img = b.input("x", [1, 3, 8, 8])
    with b.module("Net", "", "Net"):
        w = b.param("conv1.weight", [4, 3, 3, 3])
        with b.module("Conv2d", "conv1"):
            x = b.one("aten::convolution", [img, w], [1, 4, 8, 8], line=5)
        with b.module("BatchNorm2d", "bn1"):
            gamma = b.param("bn1.weight", [4])
            mean = b.value([4], measured={"buffer": "bn1.running_mean", "device": "cpu"})
            reserve = b.one("aten::empty.memory_format", [("lit", [0])], [0], "uint8", line=6)
            x = b.op("aten::_native_batch_norm_legit_no_training", [x, gamma, mean, reserve],
                     [([1, 4, 8, 8], "float32"), ([0], "float32"), ([0], "float32")], line=6)[0]
        with b.module("ReLU", "relu"):
            x = b.one("aten::relu", [x], [1, 4, 8, 8], line=7)
        pooled = b.one("aten::mean.dim", [x, ("lit", [2, 3])], [1, 4], line=8)
        with b.module("Sequential", "head"):
            hw = b.param("head.0.weight", [10, 4])
            with b.module("Linear", "head.0"):
                logits = b.one("aten::linear", [pooled, hw], [1, 10], line=9)
    return b.capture({"dict": [["args", {"tuple": [{"value": img}]}], ["kwargs", {"dict": []}]]}, {"value": logits})
