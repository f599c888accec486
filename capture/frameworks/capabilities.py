"""What a framework declares about itself, once, as plain data.

Each framework's folder holds a ``declaration.py`` (``capture/torch/declaration.py``,
``capture/jax/declaration.py``) whose ``CAPABILITIES`` is a :class:`Capabilities`: the
kinds of symbol discovery finds for it and the base classes that make them, the recipe
keys and devices it accepts, the dtypes its suggestions write, the wording the setup
form, the hover and the viewer use. Discovery, the recipe rules, the language server,
the command line and the viewer read it through :func:`capture.frameworks.capabilities`
instead of naming a framework; nothing here imports a framework, so the declaration is
read in processes that must never import one (the language server, discovery).

The defaults describe the plainest framework: a traced program run on the CPU, with no
optional recipe keys; a declaration says only where it differs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True, slots=True)
class ClassNamespace:
    """A package whose classes make a subclass a candidate: ``root`` (``"torch.nn"``;
    its submodules count too), the public base classes found under it (``classes``, by
    their last name) and how people write the root base (``display``: ``"torch.nn.Module"``)."""

    root: str
    classes: frozenset[str]
    display: str


@dataclass(frozen=True, slots=True)
class CandidateKind:
    """One kind of symbol discovery reports for a framework (``torch_module``)."""

    name: str
    #: How the hover and the outline call it: "PyTorch module".
    label: str
    #: A class built and then called, or a function traced as it is.
    symbol: Literal["class", "function"] = "class"
    #: Base classes that make a workspace class of this kind (function kinds: none).
    namespaces: tuple[ClassNamespace, ...] = ()
    #: The method a built instance is called through (``forward`` for a Torch module).
    call_method: str = "__call__"
    #: Packages a capture of this kind imports besides the framework's own (Flax).
    requires: tuple[str, ...] = ()
    #: What the setup form says an ``init.factory`` must return (``{name}``: the symbol).
    init_contract: str = ("Called with no arguments in the capture worker (after the trust check). Returns the "
                          "built {name}, which the capture then calls.")


@dataclass(frozen=True, slots=True)
class Capabilities:
    """One framework's declaration (see the module docstring)."""

    #: How people write its name: "PyTorch", "JAX".
    label: str
    #: The short form messages use ("Torch"); the label when empty.
    short: str = ""
    #: The kinds of symbol discovery finds for it.
    kinds: tuple[CandidateKind, ...] = ()
    #: Device families a recipe may name ("cpu"; "cuda" for ``cuda:N``; "tpu").
    devices: tuple[str, ...] = ("cpu",)
    #: How a device family the table :data:`DEVICE_FORMS` does not know is written:
    #: ``{"mps": "bare"}`` ("bare": the name alone; "indexed": ``name:N``; "both").
    device_forms: dict[str, str] = field(default_factory=dict)
    #: Packages a capture imports in the worker (preloaded by a warm worker), beyond
    #: those of its kinds; the registry's ``requires`` may hold more (the shared worker's).
    imports: tuple[str, ...] = ()
    #: Top-level packages whose frames are the framework's internals, never shown as a
    #: library frame (``torch``, ``torchgen``; a layer library's files are library frames).
    internal_packages: tuple[str, ...] = ()
    #: The lowest versions of its packages the test suite has been run against (CI:
    #: .ci/constraints.txt; ``pyproject.toml``'s extras name the same floors).
    min_versions: dict[str, str] = field(default_factory=dict)
    #: ``pip install`` spellings of a package by device family, when a device needs
    #: another build: ``{"jax": {"cuda": "jax[cuda12]"}}``.
    install_extras: dict[str, dict[str, str]] = field(default_factory=dict)
    #: ``evidence`` values a recipe may name: "eager" always; "abstract" where the model
    #: can be built and run on fake tensors (no storage).
    evidence: tuple[str, ...] = ("eager",)
    #: Whether a recipe may say ``dtype`` (the dtype the model is built in).
    model_dtype: bool = False
    #: Whether a recipe may say ``compile`` (the traced program compiled for the devices).
    compile: bool = False
    #: Whether a recipe may choose training: ``kind = "training_step"``, ``mode = "train"``,
    #: ``grad_enabled`` and per-array ``requires_grad``. None: how to express it instead.
    grad_modes: bool = True
    grad_instead: str = "express grad in the selected callable"
    #: Whether a mesh axis may carry a type (``explicit``/``auto``/``manual``).
    mesh_axis_types: bool = False
    #: Whether ``init.checkpoint`` / ``inputs.fixture`` are loaded (the saved-file loader).
    saved_files: bool = False
    #: What to use instead of a saved file, by section ("init", "inputs"), when it has none.
    saved_files_instead: dict[str, str] = field(default_factory=dict)
    #: The dtype of token ids and positions in suggestions, and of attention masks.
    int_dtype: str = "int64"
    mask_dtype: str = ""
    #: How suggestions write an image batch ("NCHW": channels first, Torch's; "NHWC": Flax's)
    #: and the float32 dtype object a config argument takes ("torch.float32").
    image_layout: str = "NCHW"
    float32_name: str = "float32"
    #: Whether suggestions check a required non-token input given as a tuple of numbers
    #: (every input of this framework is an array).
    array_inputs: bool = False
    #: How a capture's values came to be, in the hover's words.
    values_note: str = "Traced, not measured: shapes and dtypes only (nothing was computed)."
    #: The viewer's word for a value no operation produced and no input holds.
    external_value: str = "const"
    #: The node parameter naming the function a call node called (its library function).
    call_param: str = ""
    #: Whether the memory estimate reuses a dead input buffer for an output, as XLA does.
    reuses_buffers: bool = False
    #: Whether chains of same-shape pointwise ops are fused (XLA's loop fusion: their
    #: intermediates are never written out); eager Torch writes every result.
    fuses_pointwise: bool = False
    #: How FLOPs are counted on a program split over a mesh (the summary's scope line).
    mesh_flops_scope: str = ""
    #: What a per-rank FLOPs figure covers on such a program, where the summary gives one.
    mesh_flops_per_rank: str = ""

    @property
    def word(self) -> str:
        return self.short or self.label

    @property
    def mask(self) -> str:
        return self.mask_dtype or self.int_dtype

    def kind(self, name: str) -> CandidateKind | None:
        return next((k for k in self.kinds if k.name == name), None)

    def takes_device(self, device: str) -> bool:
        return device.partition(":")[0] in self.devices


#: How each known device family is written in a recipe's ``device``: ``cpu`` alone,
#: ``cuda:N``, ``tpu`` or ``tpu:N`` (the first chip, or chip N).
DEVICE_FORMS: dict[str, str] = {"cpu": "bare", "cuda": "indexed", "tpu": "both"}


#: What a framework that declared nothing (or is not registered here: a graph file
#: written elsewhere) is read as.
def undeclared(name: str) -> Capabilities:
    return Capabilities(label=name)
