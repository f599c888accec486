"""Saved setups (recipes): the typed model of one ``[profiles.NAME]`` table.

A workspace keeps its recipes in ``.tensorviz/recipes.toml``::

    version = 1

    [profiles.jax_example]
    kind = "model"
    framework = "jax"                 # omitted -> "torch"
    model = "model:net"               # "pkg.module:qualname", relative to the workspace root,
                                      # or "dir/06_file.py:Qualname" (a workspace-relative path)
    mode = "eval"                     # "eval" | "train"
    device = "cpu"                    # "cpu" | "cuda:N" | "tpu" / "tpu:N" (JAX only)
    grad_enabled = false
    seed = 0
    init = { args = [], kwargs = {} }                 # or { factory = "pkg.mod:function" }
                                                      # (or "path/to/file.py:function")
    inputs = { args = [{ kind = "tensor", shape = [2, 3], dtype = "float32",
                         requires_grad = false, generator = { kind = "full", value = 1 } }],
               kwargs = {} }                          # or { factory = "pkg.mod:function" }
    model_factory = false             # true: model names a function that builds the model,
                                      # called with init's args/kwargs; what it returns is
                                      # captured with the inputs (not with init.factory)

Torch recipes may also load saved files (workspace-relative paths; read, bounded and
hashed in the worker by :mod:`capture.torch.saved`)::

    init = { args = [], kwargs = {}, checkpoint = "runs/best.pt", strict = true }
    inputs = { fixture = "data/batch.pt", fixture_keys = { ids = "input_ids" }, kwargs = {} }

A recipe may run the capture under a device mesh (:class:`MeshSetup`)::

    mesh = { data = 4, model = 2 }                              # axis = size, major to minor
    mesh = { data = 4, model = { size = 2, type = "auto" } }  # a JAX axis type (default: jax.make_mesh's, Explicit)

On ``device = "cpu"`` the worker simulates the devices the mesh needs; on ``cuda:N`` and
``tpu`` it uses the real ones of that platform and fails when there are fewer.

``init.checkpoint`` (``.pt``/``.pth``/``.bin``/``.safetensors``) joins literal ``args``/``kwargs``
or a ``factory``; ``inputs.fixture`` (``.pt``/``.pth``/``.safetensors``/``.npz``) replaces
``args`` and a factory (literal ``kwargs`` may join it). A JAX recipe naming either fails:
JAX uses workspace factories.

A Torch recipe may ask for abstract evidence: ``evidence = "abstract"`` (default
``"eager"``) builds and runs the model on fake tensors (no parameter storage, nothing
computed; see :mod:`capture.torch.abstract`), for ``kind = "model"`` only; a checkpoint's
names and shapes are checked, not loaded. ``dtype = "bfloat16"`` (Torch, one of
:data:`MODEL_DTYPES`) builds the model in that floating dtype; omitted, a model is built
in its own (a ``transformers`` config's ``dtype`` when it names one).

Value descriptions (what ``args`` / ``kwargs`` hold), see :func:`parse_value`:

* a bare TOML boolean, integer, float or string: a static Python value;
* a bare TOML array: a ``list`` of descriptions;
* ``{ kind = "tensor", shape = [...], dtype = "float32", requires_grad = false,
  generator = {...} }``: an array leaf (:class:`TensorDesc`);
* ``{ kind = "none" }``: Python ``None`` (TOML has no null);
* ``{ kind = "list" | "tuple", items = [...] }``, ``{ kind = "dict", items = { k = ... } }``;
* ``{ kind = "static", value = X }``: the explicit spelling of a static scalar/string;
* ``{ kind = "call", target = "model:GPTConfig", args = [...], kwargs = {...} }``: an object
  built by calling ``target`` (the ``model`` reference forms, or an installed package's
  ``"transformers:LlamaConfig"``) with described arguments, nested to any depth
  (:class:`CallDesc`; built only in the worker, :mod:`capture.worker.values`);
* ``{ kind = "ref", target = "models:ResNetBlock" }``: the object ``target`` names, passed
  as it is, not called (a class or function a field takes; :class:`RefDesc`).

Steps after construction (``then``, an array): on what a ``call`` built
(``{ kind = "call", target = "mingpt.model:GPT.get_default_config", then = [{ set =
"model_type", value = "gpt-nano" }] }``) and, as ``init.then``, on the model once built
and its checkpoint loaded (``then = [{ call = "setup_caches", kwargs = { max_batch_size
= 1, max_seq_length = 64 } }]``): ``{ set = "a.b", value = VALUE }`` sets an attribute,
``{ call = "a.method", args = [...], kwargs = {...} }`` calls a method for its effect.
Paths are dotted identifiers, none starting with ``__``; run in the worker after the
trust check, in order (:class:`SetStep`, :class:`CallStep`).

Shape entries are non-negative integers, or unknown: ``null`` (from JSON/dicts; TOML has
no null), ``"?"``, or a named dimension such as ``"batch"``. Unknown dimensions are never
guessed: :meth:`Recipe.unknown_dims` lists them and capture stops before importing
anything (:class:`NeededDim`).

Errors are :class:`RecipeError`: one line naming the file, the TOML line where it could
be found, the key path (``profiles.jax_example.inputs.args[0].dtype``) and the problem.

Standard library only (``tomllib`` for reading): the worker imports this module inside
the user's selected interpreter. Writing recipes (comment-preserving) lives in
``tensorviz_lsp.recipes_store``.
The recipe lives in four modules, all re-exported here (import from ``capture.recipe``),
each importing only those listed before it: :mod:`capture.recipe.refs` (model and
factory refs, and the workspace files they name), :mod:`capture.recipe.model` (the
vocabulary, :class:`RecipeError`, the value descriptions, key paths),
:mod:`capture.recipe.parse` (reading files, validating values and sections, TOML lines
for errors) and :mod:`capture.recipe.profile` (:class:`Recipe` and the validation of a
whole profile).
"""

from __future__ import annotations

from ..frameworks import FRAMEWORK_NAMES, framework_names  # noqa: F401
from .model import (  # noqa: F401
    COMPLEX_DTYPES,
    DEFAULT_EVIDENCE,
    DEFAULT_FRAMEWORK,
    DTYPES,
    EVIDENCE,
    FLOAT_DTYPES,
    FRAMEWORKS,
    GENERATORS,
    INT_DTYPES,
    INT_RANGES,
    KINDS,
    MAX_DEPTH,
    MAX_DESCRIPTIONS,
    MAX_INPUT_ARRAYS,
    MAX_INPUT_ELEMENTS,
    MAX_MESH_AXES,
    MAX_MESH_DEVICES,
    MAX_RANK,
    MAX_SEED,
    MAX_STRING,
    MESH_AXIS_NAME,
    MESH_AXIS_TYPES,
    MODEL_DTYPES,
    MODES,
    PROFILE_NAME,
    PROFILE_NAME_INVALID,
    PROFILE_NAME_MAX,
    PROFILE_NAME_RULE,
    RECIPES_FILE,
    RECIPES_VERSION,
    SIXTY_FOUR_BIT_DTYPES,
    MAX_STEP_PATH,
    MAX_STEPS,
    CallDesc,
    CallSetup,
    CallStep,
    DictDesc,
    Dim,
    Generator,
    ListDesc,
    MeshSetup,
    NeededDim,
    NoneDesc,
    RecipeError,
    RefDesc,
    SetStep,
    StaticDesc,
    Step,
    StepSetup,
    TensorDesc,
    TensorLeaf,
    TupleDesc,
    ValueDesc,
    key_segment,
    leaf_seed,
    profile_name,
    split_key_path,
)
from .parse import (  # noqa: F401
    CHECKPOINT_SUFFIXES,
    FIXTURE_SUFFIXES,
    default_generator,
    load_recipes_table,
    parse_recipes_text,
    parse_value,
    profile_names,
)
from .profile import Recipe, load_profile, parse_profile, profile_from_document  # noqa: F401
from .toml_lines import key_path_line, locator_for  # noqa: F401
from .refs import (  # noqa: F401
    dotted_module_problem,
    is_path_ref,
    model_ref_for,
    module_file,
    path_ref_file,
    path_ref_problem,
    path_ref_stem,
    split_ref,
)
