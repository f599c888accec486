"""Values for a suggested command, chosen so that it has reason to run (issue 36, item 3).

``tensorviz capture model.py:Transformer`` with nothing given lists what is needed with a
command that would work. That command used to be built from the annotations alone:
``config=8`` for an untyped config, ``train=float32[2,3]`` for a flag, ``cache=float32[2,3]``
for ``Cache | None``, gpt-fast's class defaults (a 7B model that ran 39 s into a
MemoryError). A value here is one of:

* **known**: types respected (a flag is ``true``/``false``, ``X | None`` is ``none``, an
  enum field its first member), sizes small (a config's layers, heads, widths, vocabulary
  and context shrunk by their names, kept consistent: widths divisible by heads, token ids
  of a shrunk vocabulary inside it), bounds read from the config (token ids below its
  vocabulary, sequences within its context), shapes from what the code shows
  (:class:`discovery.results.ValueHints`: a shape comment, the first layer, a literal
  array it multiplies);
* **unknown**: nothing in the code says it; the suggestion names what it could not
  infer and puts ``…`` there, so the command cannot run as printed.

Discovery's facts arrive in their JSON contract (``SetupField.to_json()``,
``CallInput.to_json()``, ``Candidate.to_json()``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from capture.frameworks import capabilities

#: The placeholder of a value nothing in the code tells.
UNKNOWN = "…"
#: The batch and sequence length a suggestion uses.
BATCH, SEQUENCE = 1, 16

# Size classes by name (lower case), each with the small value a suggestion uses. The
# order matters: the first that matches wins (head_dim before heads before dims).
_SIZES: tuple[tuple[str, re.Pattern[str], int], ...] = tuple((name, re.compile(rx), value) for name, rx, value in (
    ("token_id", r"(^|_)(pad|bos|eos|sep|cls|mask|unk|decoder_start)_token_id$", 0),
    ("layers", r"(^|_)(n_)?(num_)?(hidden_|encoder_|decoder_|audio_|text_)?layers?$|^depth$|^n_layers?$", 2),
    ("head_dim", r"head_dim$|head_size$|^d_head$|^d_kv$", 16),
    ("kv_heads", r"(kv|key_value|local)_heads$", 2),
    ("heads", r"(^|_)(n_|num_)?(attention_|audio_|text_)?heads?$", 4),
    ("experts_per_token", r"experts_per_tok|^top_k$|^num_selected", 2),
    ("experts", r"(^|_)(n_|num_)(local_)?experts$", 4),
    ("vocab", r"vocab|^num_embed(dings)?$|^num_tokens$", 100),
    ("context", r"ctx$|^block_size$|max_position_embeddings|max_seq_len|^max_len$|^seq_len$|context|"
                r"^n_positions$|max_length$", 64),
    ("ffn", r"intermediate|ffn|mlp_dim|hidden_dim$|^d_ff$|^inner_dim$", 128),
    ("width", r"(^|_)dim$|hidden_size$|n_embd$|embed_dim$|^d_model$|(^|_)state$|^width$|emb_dim$|^n_hidden$", 64),
    ("classes", r"num_classes$|^n_classes$|^num_labels$", 10),
    ("image", r"image_size$|img_size$", 32),
    ("patch", r"patch_size$", 4),
))
# Numbers whose name says their usual value (a required ``norm_eps: float`` is 1e-05, not
# 1.0; ``rope_theta: int`` is 10000, not a size of 8): the first that matches wins.
_NAMED_NUMBERS: tuple[tuple[re.Pattern[str], float], ...] = tuple((re.compile(rx), v) for rx, v in (
    (r"(^|_)(eps|epsilon)$|_eps_|layer_norm_eps|rms_norm_eps", 1e-05),
    (r"theta$|rope_base$|^rotary_base$|^base_freq", 10000.0),
    (r"drop(out)?(_rate|_prob|_p)?$|^p_drop|_dropout_", 0.0),
    (r"initializer_range$|(^|_)init_std$|^std$", 0.02),
    (r"multiple_of$", 32),
    (r"temperature$|(^|_)scale$|multiplier$|_factor$", 1.0),
    (r"^(start_pos|start_position|start|offset|pos_offset|cache_offset)$", 0),  # a prompt starts at 0
))
_TOKEN_ID_VALUES = {"pad": 0, "bos": 1, "eos": 2, "sep": 3, "cls": 4, "mask": 5, "unk": 6, "decoder_start": 1}
_FLAG_DEFAULTS = {"deterministic": True}
_FLAG_NAMES = frozenset({"train", "training", "is_training", "deterministic", "use_cache", "return_dict",
                         "output_attentions", "output_hidden_states", "causal", "is_causal"})
_POSITION_NAMES = frozenset({"input_pos", "positions", "position_ids", "pos", "position", "positions_ids"})
_TENSOR_ANNOTATIONS = re.compile(r"(^|[.\[\s|])(Tensor|LongTensor|FloatTensor|BoolTensor|IntTensor|Array|ndarray|ArrayLike)"
                                 r"(\b|$)")
_IMAGE_NAMES = frozenset({"image", "images", "img", "imgs", "pixel_values", "pixels"})
_DIM_NAMES = {"b": BATCH, "batch": BATCH, "n": BATCH, "bs": BATCH, "l": SEQUENCE, "s": SEQUENCE, "t": SEQUENCE,
              "seq": SEQUENCE, "seq_len": SEQUENCE, "len": SEQUENCE, "length": SEQUENCE, "time": SEQUENCE}


def is_image_input(name: str) -> bool:
    """An input named like a batch of images (``image``, ``pixel_values``): suggested as one
    224x224 RGB image."""
    return name.lower() in _IMAGE_NAMES


def is_sequence_input(name: str) -> bool:
    """An input named like ids, positions or a mask over a sequence (``segment_ids``,
    ``input_pos``, ``attention_mask``): suggested at a batch of 1 and 16 positions, which
    such inputs run at whatever the model's sizes."""
    lowered = name.lower()
    return (lowered.endswith(("_tokens", "_ids")) and "position" not in lowered or lowered in _POSITION_NAMES
            or "mask" in lowered)


def size_class(name: str) -> tuple[str, int] | None:
    """``(class, small value)`` for a field or parameter named ``name``, else None."""
    lowered = name.lower()
    for cls, rx, value in _SIZES:
        if rx.search(lowered):
            if cls == "token_id":
                which = rx.search(lowered).group(2)  # type: ignore[union-attr]
                return cls, _TOKEN_ID_VALUES.get(which, 0)
            return cls, value
    return None


def named_number(name: str) -> float | None:
    """The usual value of a number named ``name`` (``norm_eps`` → 1e-05, ``rope_theta`` →
    10000.0), or None when its name does not say."""
    lowered = name.lower()
    return next((v for rx, v in _NAMED_NUMBERS if rx.search(lowered)), None)


@dataclass
class Example:
    """A VALUE for one argument: ``text`` (``…`` where something is unknown), what
    could not be inferred (``unknown``, for people), and, for a config built by a
    builder method, the ``--then`` steps it takes (``steps``)."""

    text: str
    unknown: list[str] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    #: For a config class's call: the value of each field it sets, by field name (a
    #: nested config's own fields inside its Example): what the setup form prefills.
    fields: dict[str, "Example"] = field(default_factory=dict)

    @property
    def known(self) -> bool:
        return not self.unknown


def _literal(v: Any) -> str:
    return "true" if v is True else "false" if v is False else "none" if v is None else repr(v)


def _annotation(p: Mapping[str, Any]) -> str:
    return (p.get("annotation") or "").strip()


def _optional(annotation: str) -> bool:
    return bool(re.search(r"\|\s*None\b|\bNone\s*\||^Optional\[", annotation))


def _int_like(annotation: str) -> bool:
    """``int``, ``int | None``, ``Optional[int]``."""
    return bool(re.fullmatch(r"(Optional\[)?int\]?( \| None)?|None \| int", annotation))


def _bool_like(p: Mapping[str, Any]) -> bool:
    annotation = _annotation(p)
    if re.fullmatch(r"(Optional\[)?bool\]?( \| None)?|bool \| None|None \| bool", annotation):
        return True
    if type(p.get("default_value")) is bool and p.get("default_is_literal"):
        return True
    hints = p.get("hints") or {}
    if annotation or p.get("token"):
        return False
    return p["name"].lower() in _FLAG_NAMES or bool(hints.get("flag"))


_MAKER_SIZES: tuple[tuple[re.Pattern[str], int], ...] = tuple((re.compile(rx), v) for rx, v in (
    (r"(^|_)max|capacity", 4 * SEQUENCE),  # an upper bound: room for any input (max_batch_size)
    (r"batch", BATCH),
    (r"(^|_)(len|length|seq|seq_len|seqlen|tokens?|token_len|num_tokens|prompt_len)$", SEQUENCE),
    (r"steps?$|size$|ctx|context|positions$", 4 * SEQUENCE),
))


def _maker_size(name: str, annotation: str) -> int | float | None:
    """A maker's sized parameter (``batch_size`` → 1, ``token_len`` → 16, ``generate_steps``
    → 64: room for the inputs), else a number its name says; None when nothing does."""
    if annotation not in ("", "int", "float"):
        return None
    lowered = name.lower()
    size = next((v for rx, v in _MAKER_SIZES if rx.search(lowered)), None)
    if size is not None:
        return size
    named = named_number(lowered)
    if named is not None:
        return int(named) if annotation == "int" else named
    cls = size_class(lowered)
    return cls[1] if cls is not None and cls[0] != "token_id" else None


class Suggester:
    """Picks the values of one suggested command for a candidate (its JSON), for
    ``framework`` (``torch``/``jax``: the dtype of token ids and positions)."""

    def __init__(self, framework: str) -> None:
        self.framework = framework
        #: The values chosen so far, by dotted path (``config.vocab_size`` → 100): what an
        #: input's bound or shape is read from.
        self.chosen: dict[str, Any] = {}
        #: The constructor arguments suggested so far: name → (its annotation or config
        #: class name, the Example): what a maker of an input is given for the same value.
        self.init_examples: dict[str, tuple[str, Example]] = {}

    @property
    def channels_last(self) -> bool:
        """Images as the framework's declaration writes them (Flax's NHWC)."""
        return capabilities(self.framework).image_layout == "NHWC"

    @property
    def int_dtype(self) -> str:
        """Token ids and positions: the framework's declared integer dtype (int32 for JAX)."""
        return capabilities(self.framework).int_dtype

    # --- constructor arguments -----------------------------------------------------------

    def init_value(self, p: Mapping[str, Any]) -> Example:
        """A VALUE for constructor parameter ``p``."""
        name = p["name"]
        cfg = p.get("config_class")
        hints = p.get("hints") or {}
        if cfg:
            example = self._config(name, cfg)
        elif hints.get("builder"):
            example = self._built(name, hints)
        else:
            example = self._plain(p, "--init", name)
        self.init_examples[name] = (cfg["name"] if cfg else _annotation(p), example)
        return example

    def _config(self, path: str, cfg: dict[str, Any]) -> Example:
        """``Config(field=…)``: the required fields, and the fields whose default a small
        size replaces (and the token ids a smaller vocabulary then needs)."""
        parts: list[str] = []
        unknown: list[str] = []
        fields = cfg["fields"]
        shrunk_vocab = None
        chosen: list[tuple[str, str]] = []
        examples: dict[str, Example] = {}
        for f in fields:
            if f.get("supplied_by"):
                continue
            value = self._field(f, f"{path}.{f['name']}")
            if value is None:
                continue
            chosen.append((f["name"], value.text))
            examples[f["name"]] = value
            unknown += value.unknown
            if (size_class(f["name"]) or ("",))[0] == "vocab":
                shrunk_vocab = self.chosen.get(f"{path}.{f['name']}")
        for f in fields:  # token ids a shrunk vocabulary no longer holds
            cls = size_class(f["name"])
            default = f.get("default_value")
            if cls and cls[0] == "token_id" and type(default) is int and shrunk_vocab is not None \
                    and default >= shrunk_vocab and all(n != f["name"] for n, _ in chosen):
                chosen.append((f["name"], str(cls[1])))
                examples[f["name"]] = Example(str(cls[1]))
                self.chosen[f"{path}.{f['name']}"] = cls[1]
        parts = [f"{n}={v}" for n, v in chosen]
        return Example(f"{cfg['name']}({', '.join(parts)})", unknown, fields=examples)

    def _field(self, f: Mapping[str, Any], path: str) -> Example | None:
        """A config field's VALUE, or None to leave it at its default."""
        default = f.get("default_value")
        has_default = not f.get("required")
        nested = f.get("config_class")
        cls = size_class(f["name"])
        if has_default:
            # A size larger than a suggestion needs is shrunk. A vocabulary left as a
            # sentinel (llama3's ``vocab_size: int = -1``, set later from a tokenizer) is no
            # size at all; other sentinels (``n_local_heads = -1``: as many as the heads) the
            # config resolves itself.
            sentinel = cls is not None and cls[0] == "vocab" and (
                type(default) is int and default <= 0
                or default is None and bool(f.get("default_is_literal")) and _int_like(_annotation(f)))
            if cls is not None and (sentinel or cls[0] != "token_id" and type(default) is int
                                    and not isinstance(default, bool) and cls[1] < default):
                self.chosen[path] = cls[1]
                return Example(str(cls[1]))
            if type(default) is int:
                self.chosen[path] = default
            return None
        if nested:
            return self._config(path, nested)
        return self._plain(f, "--init", path)

    def _built(self, name: str, hints: dict[str, Any]) -> Example:
        """A value a builder method of the model class makes (minGPT's
        ``GPT.get_default_config()``), with ``--then`` steps for what the constructor
        asserts is set and the smallest preset it looks up."""
        steps: list[str] = []
        unknown: list[str] = []
        preset = hints.get("preset")
        if preset:
            steps.append(f'{name}.{preset[0]}="{preset[1]}"')
        for attr in hints.get("must_set") or []:
            cls = size_class(attr)
            if cls is None:
                unknown.append(f"{name}.{attr} (the constructor asserts it is set)")
                steps.append(f"{name}.{attr}={UNKNOWN}")
            else:
                self.chosen[f"{name}.{attr}"] = cls[1]
                steps.append(f"{name}.{attr}={cls[1]}")
        return Example(f"{hints['builder']}()", unknown, steps)

    # --- any single value ----------------------------------------------------------------

    def _plain(self, p: Mapping[str, Any], flag: str, path: str) -> Example:
        """A field or input without a config class: by its type, name and hints."""
        name = p["name"]
        annotation = _annotation(p)
        hints = p.get("hints") or {}
        if hints.get("enum"):
            return self._enum(hints["enum"], path)
        if _bool_like(p):
            return Example(_literal(_FLAG_DEFAULTS.get(name.lower(), False)))
        if _optional(annotation) and not _TENSOR_ANNOTATIONS.search(annotation.replace("| None", "")):
            return Example("none")
        if _optional(annotation) and flag == "--init":
            return Example("none")
        for word, text in (("int", None), ("float", "1.0"), ("str", None)):
            if annotation == word or annotation == f"Optional[{word}]":
                named = named_number(name.rsplit(".", 1)[-1])
                if named is not None and word in ("int", "float"):
                    value = int(named) if word == "int" else float(named)
                    if word == "int":
                        self.chosen[path] = value
                    return Example(repr(value))
                if word == "int":
                    cls = size_class(name.rsplit(".", 1)[-1])
                    value = cls[1] if cls and cls[0] != "token_id" else 8
                    self.chosen[path] = value
                    return Example(str(value))
                if word == "str":
                    return Example(UNKNOWN, [f"{path} (a string: which one, the code does not say)"])
                return Example(text or UNKNOWN)
        if hints.get("made_by"):
            return self._made(path, hints["made_by"])
        sized = self._by_name_or_subclass(p, path, annotation, hints) if flag == "--init" else None
        if sized is not None:
            return sized
        if flag == "--init":
            reads = hints.get("reads") or []
            what = f"; the model reads {', '.join(f'{path}.{r}' for r in reads[:4])}" if reads else ""
            kind = annotation or "no annotation"
            return Example(UNKNOWN, [f"{path} ({kind}{what})"])
        return self.input_tensor(p)

    def _by_name_or_subclass(self, p: Mapping[str, Any], path: str, annotation: str,
                             hints: Mapping[str, Any]) -> Example | None:
        """A constructor argument nothing types as a number: a size where an unannotated
        name says so (x-transformers' ``num_tokens``, ``max_seq_len``), a call of the
        file's subclass of its base-class annotation; None otherwise."""
        if not annotation and not hints.get("reads") and type(p.get("default_value")) is not str:
            short = p["name"].rsplit(".", 1)[-1]
            cls = size_class(short)
            # ``attn_layers`` holds layers, ``n_layers`` counts them: a count says so.
            counts = cls is not None and (cls[0] != "layers" or re.match(r"^(n_|num_)|^depth$", short.lower()))
            if cls is not None and cls[0] != "token_id" and counts:
                self.chosen[path] = cls[1]
                return Example(str(cls[1]))
        if hints.get("subclass"):
            return self._subclass(path, hints["subclass"])
        return None

    def _subclass(self, path: str, sub: Mapping[str, Any]) -> Example:
        """``Decoder(dim=64, depth=2)`` for a parameter typed with a base class the file
        subclasses; a parameter without a size class is left to fill in (``…``)."""
        parts, unknown = [], []
        for name in sub.get("parameters") or []:
            cls = size_class(name)
            named = named_number(name)
            if cls is not None and cls[0] != "token_id":
                self.chosen[f"{path}.{name}"] = cls[1]
                parts.append(f"{name}={cls[1]}")
            elif named is not None:
                parts.append(f"{name}={named!r}")
            else:
                parts.append(f"{name}={UNKNOWN}")
                unknown.append(f"{path}: {sub['name']}'s {name} (the code does not say)")
        return Example(f"{sub['name']}({', '.join(parts)})", unknown)

    def _enum(self, enum: Mapping[str, Any], path: str) -> Example:
        """An enum field's first member; for a sequence of them, one per layer chosen."""
        member = f"{enum['name']}.{enum['members'][0]}"
        if not enum.get("many"):
            return Example(member)
        layers = next((v for k, v in self.chosen.items()
                       if k.rsplit(".", 1)[0] == path.rsplit(".", 1)[0]
                       and (size_class(k.rsplit(".", 1)[-1]) or ("",))[0] == "layers"), None)
        if layers is None:
            return Example(f"({member},)")
        return Example("(" + ", ".join([member] * int(layers)) + ("," if int(layers) == 1 else "") + ")")

    def _made(self, path: str, made: Mapping[str, Any]) -> Example:
        """``init_cache(cfg=ModelConfig(…), batch_size=1, token_len=16, generate_steps=16)``: a
        call of the file's function that builds the value (:mod:`discovery.makers`), given
        the constructor's own value where it takes the same one (by name or annotation) and
        small sizes by name."""
        parts, unknown = [], []
        for param in made.get("parameters") or []:
            name, annotation = param["name"], (param.get("annotation") or "").strip()
            same = self._same_as_init(name, annotation)
            if same is not None:
                parts.append(f"{name}={same.text}")
                unknown += same.unknown
                continue
            value = _maker_size(name, annotation)
            if value is None:
                parts.append(f"{name}={UNKNOWN}")
                unknown.append(f"{path}: {made['name']}'s {name} ({annotation or 'no annotation'}; the code does "
                               "not say)")
            else:
                parts.append(f"{name}={value!r}")
        float32 = capabilities(self.framework).float32_name
        parts += [f"{name}={float32}" for name in made.get("float32") or []]
        return Example(f"{made['name']}({', '.join(parts)})", unknown)

    def _same_as_init(self, name: str, annotation: str) -> Example | None:
        """The constructor argument a maker's parameter stands for: the same name, else the
        same annotation (or config class)."""
        if name in self.init_examples:
            return self.init_examples[name][1]
        if annotation:
            return next((ex for typed, ex in self.init_examples.values() if typed == annotation), None)
        return None

    # --- call inputs ---------------------------------------------------------------------

    def input_value(self, p: Mapping[str, Any]) -> Example:
        """A VALUE for call input ``p``."""
        if p.get("static"):
            annotation = _annotation(p)
            if _bool_like(p):
                return Example(_literal(False))
            if annotation in ("", "int"):
                return Example("8")
        cfg = p.get("config_class")
        if cfg:
            return self._config(p["name"], cfg)
        return self._plain(p, "--input", p["name"])

    def input_tensor(self, p: Mapping[str, Any]) -> Example:
        name = p["name"]
        lowered = name.lower()
        hints = p.get("hints") or {}
        shape = self._shape(hints)
        if p.get("token") or lowered.endswith(("_tokens", "_ids")) and "position" not in lowered:
            dims = shape or [BATCH, SEQUENCE]
            return Example(f"{self.int_dtype}[{','.join(map(str, dims))}]")
        if lowered in _POSITION_NAMES:
            dims = shape or ([SEQUENCE] if lowered == "input_pos" else [BATCH, SEQUENCE])
            return Example(f"{self.int_dtype}[{','.join(map(str, dims))}]:arange")
        if "mask" in lowered:
            dims = shape or [BATCH, SEQUENCE]
            dtype = capabilities(self.framework).mask
            return Example(f"{dtype}[{','.join(map(str, dims))}]:ones")
        if shape:
            return Example(f"float32[{','.join(map(str, shape))}]")
        if hints.get("image"):
            c, h, w = hints["image"]
            dims = [BATCH, h, w, c] if self.channels_last else [BATCH, c, h, w]
            return Example(f"float32[{','.join(map(str, dims))}]")
        if lowered in _IMAGE_NAMES and not hints.get("last_dim"):
            # a batch of one RGB image at the size vision models are built for (timm's
            # VisionTransformer asserts its img_size, 224): channels last for Flax
            dims = [BATCH, 224, 224, 3] if self.channels_last else [BATCH, 3, 224, 224]
            return Example(f"float32[{','.join(map(str, dims))}]")
        last = hints.get("last_dim")
        if last is not None:
            size = int(last) if last.isdigit() else self.chosen.get(last.removeprefix("self."))
            rank = hints.get("rank") or 2
            if isinstance(size, int):
                lead = [BATCH if rank > 2 else 2] + [SEQUENCE] * max(0, rank - 3)
                layer = hints.get("first_layer") or ""
                if "Conv" in layer:
                    dims = [BATCH, size] + [32 if rank >= 4 else SEQUENCE] * (rank - 2)
                else:
                    dims = lead + [size] if rank > 1 else [size]
                return Example(f"float32[{','.join(map(str, dims))}]")
        what = _annotation(p) or "no annotation"
        return Example(UNKNOWN, [f"{name} ({what}): its shape, which nothing in the code says"])

    def _shape(self, hints: Mapping[str, Any]) -> list[int] | None:
        """A shape comment's dimensions as sizes, when each is one a suggestion can pick."""
        names = hints.get("shape")
        if not names:
            return None
        out = []
        for d in names:
            key = d.lower().rstrip("'")
            if d.isdigit():
                out.append(int(d))
            elif key in _DIM_NAMES:
                out.append(_DIM_NAMES[key])
            else:
                return None
        return out

    # --- steps ---------------------------------------------------------------------------

    def preparation(self, prep: Mapping[str, Any]) -> Example:
        """``model.setup_caches(max_batch_size=1, max_seq_length=64)`` for a method the
        call method needs called first."""
        args, unknown = [], []
        for param in prep.get("parameters") or []:
            lowered = param.lower()
            if "batch" in lowered:
                args.append(f"{param}={BATCH}")
            elif re.search(r"seq|len|ctx|context|positions", lowered):
                args.append(f"{param}={64}")
            else:
                args.append(f"{param}={UNKNOWN}")
                unknown.append(f"{param} of {prep['method']}")
        return Example(f"model.{prep['method']}({', '.join(args)})", unknown)
