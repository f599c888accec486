"""The shorthand's VALUE grammar (``--input``/``--init``), read without evaluating
anything, and how a called name becomes a recipe ``call`` target.

A VALUE is a tensor description, a Python literal, or a call, nested to any depth::

    float32[2,3]                  a tensor (numpy dtype names; [] is a scalar tensor)
    float32[batch,3]  int8[?]     unknown dimensions: a name or "?" (capture asks for them)
    int64[1,16]:randint(0,100)    a generator: zeros, ones, arange, full(V),
                                  normal(MEAN,STD), uniform(LOW,HIGH), randint(LOW,HIGH)
    8  -2.5  1e-6  inf            numbers
    true  false  none             booleans and None (True, False, None too)
    'relu'  "a b"                 strings, always quoted
    [1, 2]  (3, 3)  {'k': 1}      lists, tuples, dicts (string keys) of VALUEs
    GPTConfig(n_layer=4)          a call: positional and keyword VALUEs, nested
    transformers.LlamaConfig()    a dotted name: a workspace module, or an installed package

Python's own parser reads the text (``ast``), so spaces are free (``int64 [1, 16]``)
and nothing runs. A name that is neither a literal, a tensor nor a call (``relu``,
``GPTConfig`` without parentheses, ``x + 1``) is an error naming it and saying how to
write it; nothing becomes a string unless it is quoted.

A called name resolves (:class:`Names`) through the model's module first: a class or
function it defines (``model:GPTConfig``) or imports (``from transformers import
LlamaConfig`` gives ``transformers:LlamaConfig``; a workspace module keeps its workspace
reference); then through the configuration classes discovery read for the model's
parameters (``LlamaConfig`` for ``MyLlama(LlamaForCausalLM)``, whose module does not
import it) and what the workspace modules defining them define (an enum beside the config:
Gemma's ``AttentionType.GLOBAL``); then as a dotted path: a workspace module (``configs.small.Cfg`` gives
``configs.small:Cfg``), else an installed package of the capture interpreter
(``transformers.LlamaConfig`` gives ``transformers:LlamaConfig``).
"""

from __future__ import annotations

import ast
import builtins
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from capture.recipe import DTYPES, INT_DTYPES, RecipeError, ValueDesc, model_ref_for, module_file, parse_value


class ShorthandError(ValueError):
    """A shorthand argument that cannot be understood; ``str()`` says which and why."""


#: Resolves a called (dotted) name to a recipe call target, or raises ShorthandError.
Resolve = Callable[[str], str]

_TENSOR = re.compile(r"^(?P<dtype>[A-Za-z0-9_]+)\s*\[(?P<dims>[^\]]*)\](?:\s*:\s*(?P<gen>.+))?$")
_GEN = re.compile(r"^(?P<kind>[a-z]+)(?:\((?P<args>[^)]*)\))?$")
_GEN_PARAMS = {"full": ("value",), "normal": ("mean", "std"), "uniform": ("low", "high"), "randint": ("low", "high"),
               "zeros": (), "ones": (), "arange": ()}
_WORDS = {"true": True, "false": False, "none": None, "inf": float("inf"), "nan": float("nan")}
_REF_LIKE = re.compile(r"^[\w./-]+:[A-Za-z_][\w.]*$")
# Bounds a hostile argument before Python's parser sees it (the recipe bounds the rest).
_MAX_TEXT = 100_000

GRAMMAR_HELP = """\
VALUE (of --input and --init) is one of:
  float32[2,3]                  a tensor (numpy dtype names; [] is a scalar tensor)
  float32[batch,3]  int8[?]     unknown dimensions: a name or "?" (the capture asks for them)
  int64[1,16]:randint(0,100)    with a generator: zeros, ones, arange, full(V),
                                normal(MEAN,STD), uniform(LOW,HIGH), randint(LOW,HIGH)
  8  -2.5  1e-6  inf            numbers
  true  false  none             booleans and None (True, False, None too)
  'relu'  "a b"                 strings, always quoted (mind the shell: "act='relu'")
  [1, 2]  (3, 3)  {'k': 1}      lists, tuples and dicts (string keys) of VALUEs
  GPTConfig(n_layer=4)          an object built by a call, arguments VALUEs, nested;
                                inside a call a tensor takes the default generator
  ResNetBlock  nn.relu          a class or function itself, named, not called
An integer tensor without a generator is zeros, except for an input discovery reads
as token ids (idx, input_ids, or passed to an embedding) whose bound it can tell from
the init (config.vocab_size): randint(0, that bound), as the setup form fills it.
A called or named name is looked up in the model's module (defined or imported there),
then among the config classes discovery reads for the model's parameters, then as a dotted
path: a workspace module (configs.small.Cfg) or an installed package
(transformers.LlamaConfig). Nothing is evaluated: the call is made in the capture
worker, after the trust check.

Examples:
  tensorviz capture model.py:GPT --input idx=int64[1,16] \\
      --init 'config=GPTConfig(n_layer=2, n_head=2, n_embd=64, block_size=32, vocab_size=100)'
  tensorviz capture model.py:net --input x=float32[2,3]
  tensorviz capture model.py:Net --init-factory setup.py:build --inputs-factory setup.py:batch
"""


def integer_tensor_without_generator(text: str) -> bool:
    """``int64[1,16]`` (an integer ``DTYPE[DIMS]`` that names no ``:GENERATOR``): a value
    whose generator the shorthand may choose (token ids below the vocabulary)."""
    m = _TENSOR.match(text.strip())
    return m is not None and m.group("gen") is None and m.group("dtype") in INT_DTYPES


#: A quoted string literal of a value's text (either quote, backslash escapes).
_QUOTED = re.compile(r"'(?:\\.|[^'\\])*'|\"(?:\\.|[^\"\\])*\"")


def parse_value_spec(text: str, resolve: Resolve | None = None, *, flag: str | None = None) -> ValueDesc:
    """One VALUE (see the module docstring) as a value description. ``resolve`` turns
    a called name into its target; without one a call is an error. ``flag``
    (``--init``/``--input``) names the factory option a misplaced reference means."""
    s = text.strip()
    if not s:
        raise ShorthandError("no value: expected a tensor such as float32[2,3], a literal such as 8, or a call")
    if len(s) > _MAX_TEXT:
        raise ShorthandError(f"the value is {len(s):,} characters long; at most {_MAX_TEXT:,}")
    if "…" in _QUOTED.sub("", s):  # a "…" inside a string literal is the string's own
        raise ShorthandError("… marks a value TensorViz could not infer from the code: replace it with the value "
                             "(what is missing is listed above the suggested command)")
    m = _TENSOR.match(s)
    if m:
        return _tensor_text(s, m)
    if _REF_LIKE.match(s):
        instead = {"--init": f"to build the model with a function of yours, give --init-factory {s}",
                   "--input": f"to make the inputs with a function of yours, give --inputs-factory {s}"}.get(
            flag or "", f"a factory is given with --init-factory {s} or --inputs-factory {s}")
        raise ShorthandError(f"{s} is a reference to a function, not a value; {instead}")
    try:
        tree = ast.parse(_python_tensors(s), mode="eval")
    except SyntaxError as exc:
        if re.fullmatch(r"[A-Za-z0-9_]+\s*\[.*", s):
            raise ShorthandError("expected DTYPE[DIMS] such as float32[2,3]") from None
        raise ShorthandError(f"not a value Python can read ({exc.msg}); quote a string: 'text'") from None
    except (ValueError, RecursionError, MemoryError):
        raise ShorthandError("not a value Python can read") from None
    try:
        plain = _Reader(resolve).value(tree.body)
    except RecursionError:
        raise ShorthandError("nested too deeply") from None
    return _checked(plain)


STEP_HELP = """\
STEP (of --then, repeatable, in order) is a statement on something built, run in the
capture worker right after it is built:
  model.setup_caches(max_batch_size=1, max_seq_length=64)   call a method of the model
  config.model_type='gpt-nano'                               set an attribute of an --init value
The first name is `model` (the model, built and its checkpoint loaded) or the name of an
--init argument built by a call (--init 'config=GPT.get_default_config()'); then
attribute names (model.output.scales); arguments and values are VALUEs."""


def parse_step(text: str, resolve: Resolve | None = None) -> tuple[str, dict[str, Any]]:
    """One ``--then`` STEP (see :data:`STEP_HELP`) as ``(root, step)``: the name the step
    acts on (``model``, or an ``--init`` argument's name) and the step as plain data
    (``{"call": "setup_caches", "kwargs": {...}}`` or ``{"set": "vocab_size", "value": 100}``),
    read with ``ast``, never evaluated."""
    s = text.strip()
    example = "model.setup_caches(max_batch_size=1, max_seq_length=64) or config.vocab_size=100"
    if not s:
        raise ShorthandError(f"no step: expected a method call or an attribute set, e.g. {example}")
    if len(s) > _MAX_TEXT:
        raise ShorthandError(f"the step is {len(s):,} characters long; at most {_MAX_TEXT:,}")
    try:
        tree = ast.parse(_python_tensors(s), mode="exec")
    except SyntaxError as exc:
        raise ShorthandError(f"not a statement Python can read ({exc.msg}); e.g. {example}") from None
    except (ValueError, RecursionError, MemoryError):
        raise ShorthandError("not a statement Python can read") from None
    if len(tree.body) != 1:
        raise ShorthandError(f"one step per --then (give --then again for the next), e.g. {example}")
    node = tree.body[0]
    reader = _Reader(resolve)
    try:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            root, path = _step_target(node.targets[0], "set")
            return root, {"set": path, "value": reader.value(node.value)}
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            call = node.value
            root, path = _step_target(call.func, "call")
            step: dict[str, Any] = {"call": path}
            args = []
            for a in call.args:
                if isinstance(a, ast.Starred):
                    raise ShorthandError(f"*{_text(a.value)} cannot be unpacked here; write the arguments")
                args.append(reader.value(a))
            kwargs: dict[str, Any] = {}
            for k in call.keywords:
                if k.arg is None:
                    raise ShorthandError(f"**{_text(k.value)} cannot be unpacked here; write the arguments")
                kwargs[k.arg] = reader.value(k.value)
            if args:
                step["args"] = args
            if kwargs:
                step["kwargs"] = kwargs
            return root, step
    except RecursionError:
        raise ShorthandError("nested too deeply") from None
    raise ShorthandError(f"{_text(node)}: a step is a method call or an attribute set, e.g. {example}")


def _step_target(node: ast.expr, verb: str) -> tuple[str, str]:
    """``model.a.b`` as ``("model", "a.b")``."""
    dotted = _dotted(node)
    if dotted is None or "." not in dotted:
        what = "a method of" if verb == "call" else "an attribute of"
        raise ShorthandError(f"{_text(node)}: a step names {what} something built, as ROOT.NAME "
                             "(model.setup_caches, config.vocab_size)")
    root, _, path = dotted.partition(".")
    return root, path


def _python_tensors(text: str) -> str:
    """``text`` with each tensor's shape in Python syntax, outside quoted strings:
    ``float32[]`` becomes ``float32[()]`` and a ``?`` dimension ``None``, so that a tensor
    nested in a call or a container reads like the top-level one."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "'\"":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
            continue
        m = _NESTED_TENSOR.match(text, i)
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] in "_.")) and m.group(1) in DTYPES:
            dims = m.group(2)
            inner = "()" if not dims.strip() else ",".join("None" if d.strip() == "?" else d for d in dims.split(","))
            out.append(f"{m.group(1)}[{inner}]")
            i = m.end()
            continue
        out.append(c)
        i += 1
    return "".join(out)


_NESTED_TENSOR = re.compile(r"([A-Za-z][A-Za-z0-9_]*)\s*\[([^\[\]'\"]*)\]")


def _checked(value: Any) -> ValueDesc:
    try:
        return parse_value(value, at="value")
    except RecipeError as exc:
        where = exc.key_path.removeprefix("value")
        raise ShorthandError(f"{where.lstrip('.') + ': ' if where else ''}{exc.problem}") from None


class _Reader:
    """An ``ast`` expression as the plain data of a value description."""

    def __init__(self, resolve: Resolve | None) -> None:
        self.resolve = resolve

    def value(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Constant):
            return self.constant(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            inner = node.operand
            number = inner.value if isinstance(inner, ast.Constant) else _WORDS.get(getattr(inner, "id", "").lower())
            if isinstance(number, (int, float)) and not isinstance(number, bool):
                return -number if isinstance(node.op, ast.USub) else number
            raise ShorthandError(f"{_text(node)}: only a number can have a sign")
        if isinstance(node, ast.Name):
            return self.name(node.id)
        if isinstance(node, ast.Attribute) and _dotted(node) is not None:
            return self.ref(_dotted(node) or "", _text(node))
        if isinstance(node, ast.List):
            return [self.value(v) for v in node.elts]
        if isinstance(node, ast.Tuple):
            return {"kind": "tuple", "items": [self.value(v) for v in node.elts]}
        if isinstance(node, ast.Dict):
            items: dict[str, Any] = {}
            for key, v in zip(node.keys, node.values):
                if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                    raise ShorthandError(f"{_text(node)}: dictionary keys are quoted strings ({{'name': VALUE}})")
                items[key.value] = self.value(v)
            return {"kind": "dict", "items": items}
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            return self.tensor(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        raise ShorthandError(
            f"{_text(node)}: nothing is evaluated here; a value is a literal, a tensor such as float32[2,3] "
            "or a call such as Config(n=2)"
        )

    @staticmethod
    def constant(value: Any) -> Any:
        if value is None:
            return {"kind": "none"}
        if type(value) in (bool, int, float, str):
            return value
        raise ShorthandError(f"{value!r}: a {type(value).__name__} is not a value a setup can hold")

    def name(self, name: str) -> Any:
        word = name.lower()
        if word in _WORDS:
            value = _WORDS[word]
            return {"kind": "none"} if value is None else value
        if name in DTYPES:
            raise ShorthandError(f"{name} is a dtype: a tensor also needs its shape, e.g. {name}[2,3]")
        return self.ref(name, name)

    def ref(self, dotted: str, shown: str) -> dict[str, Any]:
        """A name as the object it names (``block_cls=ResNetBlock``, ``act=nn.relu``):
        resolved like a call's name, passed uncalled."""
        if self.resolve is None:
            raise ShorthandError(
                f"{shown} is a name, not a value: a string is quoted ('{shown}'), and an object is built by a "
                f"call ({shown}(), with its arguments)"
            )
        try:
            target = self.resolve(dotted)
        except ShorthandError as exc:
            raise ShorthandError(
                f"{shown} is not a value here: a string is quoted ('{shown}'), an object is built by a call "
                f"({shown}(...)), and a class or function is named as the model's module names it ({exc})"
            ) from None
        return {"kind": "ref", "target": target}

    def tensor(self, node: ast.Subscript) -> dict[str, Any]:
        dtype = node.value.id  # type: ignore[attr-defined]
        if dtype not in DTYPES:
            raise ShorthandError(f"{_text(node)}: unknown dtype {dtype!r} (expected one of {', '.join(DTYPES)})")
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        dims: list[Any] = []
        for d in elts:
            if isinstance(d, ast.Constant) and type(d.value) is int and d.value >= 0:
                dims.append(d.value)
            elif isinstance(d, ast.Constant) and d.value is None:
                dims.append(None)  # a "?" dimension
            elif isinstance(d, ast.Name):
                dims.append(d.id)
            else:
                raise ShorthandError(f"{_text(node)}: dimension {_text(d)} is not a size, a name or '?'")
        return {"kind": "tensor", "shape": dims, "dtype": dtype}

    def call(self, node: ast.Call) -> dict[str, Any]:
        dotted = _dotted(node.func)
        if dotted is None:
            raise ShorthandError(f"{_text(node)}: only a name or a dotted name can be called (Config(...))")
        if self.resolve is None:
            raise ShorthandError(f"{_text(node)}: a call needs the model's module to look {dotted} up in")
        target = self.resolve(dotted)
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise ShorthandError(f"{_text(node)}: *{_text(a.value)} cannot be unpacked here; write the arguments")
            args.append(self.value(a))
        kwargs: dict[str, Any] = {}
        for k in node.keywords:
            if k.arg is None:
                raise ShorthandError(f"{_text(node)}: **{_text(k.value)} cannot be unpacked here; write the arguments")
            kwargs[k.arg] = self.value(k.value)
        out: dict[str, Any] = {"kind": "call", "target": target}
        if args:
            out["args"] = args
        if kwargs:
            out["kwargs"] = kwargs
        return out


def _dotted(node: ast.expr) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _text(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # an unparsable node still deserves a message
        return type(node).__name__


def _tensor_text(text: str, m: re.Match) -> ValueDesc:
    """``DTYPE[DIMS]`` with ``?`` dimensions and an optional ``:GENERATOR``."""
    dtype = m.group("dtype")
    if dtype not in DTYPES:
        raise ShorthandError(f"unknown dtype {dtype!r} (expected one of {', '.join(DTYPES)})")
    dims: list[int | str | None] = []
    inner = m.group("dims").strip()
    for raw in inner.split(",") if inner else []:
        d = raw.strip()
        if re.fullmatch(r"\d+", d):
            dims.append(int(d))
        elif d == "?":
            dims.append(None)
        elif d.isidentifier():
            dims.append(d)
        else:
            raise ShorthandError(f"dimension {d!r} is not a size, a name or '?'")
    desc: dict = {"kind": "tensor", "shape": dims, "dtype": dtype}
    gen = m.group("gen")
    if gen is not None:
        g = _GEN.match(gen.strip())
        if not g or g.group("kind") not in _GEN_PARAMS:
            raise ShorthandError(
                f"unknown generator {gen!r} (expected zeros, ones, arange, full(V), normal(MEAN,STD), "
                "uniform(LOW,HIGH) or randint(LOW,HIGH))"
            )
        kind = g.group("kind")
        params = _GEN_PARAMS[kind]
        raw_args = [a.strip() for a in (g.group("args") or "").split(",") if a.strip()]
        if len(raw_args) != len(params):
            raise ShorthandError(f"{kind} takes {len(params)} argument(s): {', '.join(params) or 'none'}")
        gdesc: dict = {"kind": kind}
        for name, a in zip(params, raw_args):
            try:
                value = ast.literal_eval(a)
            except (ValueError, SyntaxError):
                value = {"true": True, "false": False}.get(a.lower(), a)
            gdesc[name] = value
        desc["generator"] = gdesc
    return _checked(desc)


# --------------------------------------------------------------------------- names


class Names:
    """How a called name becomes a ``call`` target (see the module docstring).

    ``workspace``: the workspace root; ``model_file``/``model_module``: the model's file
    and the module part of its recipe reference (dotted, or the path form);
    ``configs``: ``{class name: target}`` of the configuration classes discovery read
    for the model's parameters; ``installed``: the capture interpreter's package folders
    (``site-packages``), where an installed top-level package is looked for."""

    def __init__(
        self,
        workspace: Path,
        model_file: Path,
        model_module: str,
        *,
        configs: Mapping[str, str] | None = None,
        installed: Sequence[str] = (),
    ) -> None:
        self.workspace = workspace
        self.model_file = model_file
        self.model_module = model_module
        self.configs = dict(configs or {})
        self.installed = tuple(installed)
        self.bindings = _module_bindings(model_file, _package_of(workspace, model_file))
        self._config_module_bindings: list[tuple[str, dict[str, tuple[str, str]]]] | None = None

    def __call__(self, dotted: str) -> str:
        first, _, rest = dotted.partition(".")
        attrs = rest.split(".") if rest else []
        bound = self.bindings.get(first)
        if bound is not None:
            kind, value = bound
            if kind == "local":
                return f"{self.model_module}:{dotted}"
            if kind == "module":
                return self._in_module(value, attrs, dotted)
            module, _, name = value.partition(":")
            return self._in_module(module, [name, *attrs], dotted)
        if not attrs and first in self.configs:
            return self.configs[first]
        # A name the module of a config class binds (an enum beside it: Gemma's
        # AttentionType.GLOBAL in transformer_cfg.py, which transformer.py never imports).
        for module_ref, bindings in self._config_modules():
            bound = bindings.get(first)
            if bound is not None and bound[0] == "local":
                return f"{module_ref}:{dotted}"
        if not attrs and hasattr(builtins, first) and callable(getattr(builtins, first)):
            return f"builtins:{first}"
        if attrs:
            return self._in_module(first, attrs, dotted)
        known = sorted(set(self.bindings) | set(self.configs))
        raise ShorthandError(
            f"{first} is not defined or imported in {self.model_file.name}"
            + (f" (it has: {', '.join(n for n in known if n[:1].isupper()) or ', '.join(known[:12])})" if known else "")
            + "; name it by its module, e.g. configs.small.Config(...) or transformers.LlamaConfig(...)"
        )

    def _config_modules(self) -> list[tuple[str, dict[str, tuple[str, str]]]]:
        """``(module reference, its top-level bindings)`` of each workspace module that
        defines a config class discovery read for the model (read once)."""
        if self._config_module_bindings is None:
            found: dict[str, dict[str, tuple[str, str]]] = {}
            for ref in self.configs.values():
                module_ref = ref.partition(":")[0]
                if module_ref in found or module_ref == self.model_module:
                    continue
                file = self._workspace_module(module_ref) if not module_ref.endswith(".py") else \
                    (self.workspace / module_ref)
                if file is not None and file.is_file():
                    found[module_ref] = _module_bindings(file, _package_of(self.workspace, file))
            self._config_module_bindings = list(found.items())
        return self._config_module_bindings

    def _in_module(self, module: str, attrs: list[str], dotted: str) -> str:
        """``module`` (absolute, dotted) and an attribute path in it, as a target."""
        if not attrs:
            raise ShorthandError(f"{dotted} is a module; call a class or function in it ({dotted}.Name(...))")
        file = self._workspace_module(module)
        if file is not None:
            while len(attrs) > 1:
                deeper = self._workspace_module(f"{module}.{attrs[0]}")
                if deeper is None:
                    break
                module, file, attrs = f"{module}.{attrs[0]}", deeper, attrs[1:]
            ref = model_ref_for(self.workspace, file, ".".join(attrs))
            if ref is None:
                raise ShorthandError(f"{dotted}: {file} cannot be named from the workspace root {self.workspace}")
            return ref
        top = module.split(".")[0]
        # The standard library (types.SimpleNamespace, collections.OrderedDict) is always there.
        if self.installed and top not in sys.stdlib_module_names and not any(
                _provides(folder, top) for folder in self.installed):
            raise ShorthandError(
                f"{dotted}: {top} is neither a module of the workspace nor installed in the capture interpreter"
            )
        return f"{module}:{'.'.join(attrs)}"

    def _workspace_module(self, module: str) -> Path | None:
        # The model's own folder first, for a script beside its helpers (the path form).
        for root in (self.model_file.parent, self.workspace):
            try:
                file = module_file(root, module)
            except (OSError, ValueError):
                file = None
            if file is not None and (file.resolve() == self.workspace.resolve()
                                     or self.workspace.resolve() in file.resolve().parents):
                return file
        return None


def _provides(folder: str, top: str) -> bool:
    base = os.path.join(folder, top)
    return os.path.isdir(base) or os.path.isfile(base + ".py") or any(
        name.startswith(top + ".") and name.endswith((".so", ".pyd")) for name in _listing(folder)
    )


def _listing(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def _package_of(workspace: Path, file: Path) -> str | None:
    """The dotted package of ``file`` (for its relative imports), None outside one."""
    ref = model_ref_for(workspace, file, "_")
    if ref is None or ref.partition(":")[0].endswith(".py"):
        return None
    module = ref.partition(":")[0]
    return module if file.name == "__init__.py" else module.rpartition(".")[0]


def _module_bindings(file: Path, package: str | None) -> dict[str, tuple[str, str]]:
    """The names a module binds at its top level (``if``/``try`` blocks included):
    ``("local", name)`` for what it defines or assigns, ``("module", "pkg.mod")`` for
    ``import pkg.mod as m`` (``import pkg.mod`` binds ``pkg``), ``("from", "pkg.mod:Name")``
    for ``from pkg.mod import Name``."""
    try:
        tree = ast.parse(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    out: dict[str, tuple[str, str]] = {}
    _bind_block(tree.body, package, out)
    return out


def _bind_block(body: list[ast.stmt], package: str | None, out: dict[str, tuple[str, str]]) -> None:
    """Adds to ``out`` the names ``body``'s statements bind, in order (a later binding
    wins), going into ``if`` branches and ``try`` bodies, handlers and ``else`` blocks:
    what they bind is still the module's top level."""
    for node in body:
        if isinstance(node, ast.If):
            _bind_block(node.body, package, out)
            _bind_block(node.orelse, package, out)
        elif isinstance(node, ast.Try):
            for block in (node.body, *(handler.body for handler in node.handlers), node.orelse):
                _bind_block(block, package, out)
        else:
            out.update(_statement_bindings(node, package))


def _statement_bindings(node: ast.stmt, package: str | None) -> dict[str, tuple[str, str]]:
    """The names one top-level statement binds (see :func:`_module_bindings`), in order."""
    if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        return {node.name: ("local", node.name)}
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return {n.id: ("local", n.id) for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    if isinstance(node, ast.Import):
        return dict(_import_binding(alias) for alias in node.names)
    if isinstance(node, ast.ImportFrom):
        module = _absolute(node.module, node.level, package)
        if module is None:
            return {}
        return {alias.asname or alias.name: ("from", f"{module}:{alias.name}")
                for alias in node.names if alias.name != "*"}
    return {}


def _import_binding(alias: ast.alias) -> tuple[str, tuple[str, str]]:
    """``import pkg.mod as m`` binds ``m`` to ``pkg.mod``; ``import pkg.mod`` binds ``pkg``."""
    if alias.asname:
        return alias.asname, ("module", alias.name)
    top = alias.name.split(".")[0]
    return top, ("module", top)


def _absolute(module: str | None, level: int, package: str | None) -> str | None:
    if level == 0:
        return module
    if package is None:
        return None
    parts = package.split(".")
    if level - 1 > len(parts):
        return None
    base = parts[: len(parts) - (level - 1)]
    return ".".join(base + ([module] if module else [])) or None
