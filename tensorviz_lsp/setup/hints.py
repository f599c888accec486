"""What a failed capture's message says to do (issue 49): library state the model reads
but does not set up itself (model-parallel groups, a default process group: ``--before``),
and known build mismatches between installed libraries (a torchvision built for another
Torch: ``operator torchvision::nms does not exist``). The command line prints the hint
under the failure."""

from __future__ import annotations

import re
import shlex

INIT_PROCESS_GROUP = ('torch.distributed.init_process_group("gloo", init_method="tcp://127.0.0.1:29512", '
                      'rank=0, world_size=1)')
MODEL_PARALLEL = "fairscale.nn.model_parallel.initialize.initialize_model_parallel(1)"

# (what the message says, the --before calls that set the state up, why)
_BEFORE: tuple[tuple[re.Pattern[str], tuple[str, ...], str], ...] = (
    (re.compile(r"model parallel group is not initialized|model_parallel_group is None|"
                r"tensor model parallel group is not initialized", re.I),
     (INIT_PROCESS_GROUP, MODEL_PARALLEL),
     "the model's layers read model-parallel groups that are set up outside the model"),
    (re.compile(r"Default process group has not been initialized|init_process_group", re.I),
     (INIT_PROCESS_GROUP,),
     "the model reads torch.distributed's default process group, which is set up outside the model"),
)


# Libraries a model's file imports whose state is set up outside the model
# (discovery.candidates.STATEFUL_LIBRARIES): the --before calls a first setup makes.
LIBRARY_BEFORE: dict[str, tuple[str, tuple[str, ...]]] = {
    "fairscale.nn.model_parallel": ("its layers read fairscale's model-parallel groups, which are set up outside "
                                    "the model", (INIT_PROCESS_GROUP, MODEL_PARALLEL)),
}


def library_before(libraries: list[str] | tuple[str, ...]) -> list[tuple[str, str]]:
    """``(why, call)`` for each ``--before`` call the libraries a model reads state from need,
    in order, each once."""
    out: list[tuple[str, str]] = []
    for lib in libraries:
        why, calls = LIBRARY_BEFORE.get(lib, ("", ()))
        out += [(f"{lib}: {why}", c) for c in calls if all(c != have for _, have in out)]
    return out


def before_hint(message: str) -> tuple[str, tuple[str, ...]] | None:
    """``(why, the --before calls to add)`` for a failure ``message`` that says library
    state is missing, else None."""
    for rx, calls, why in _BEFORE:
        if rx.search(message or ""):
            return why, calls
    return None


def before_hint_text(message: str, flag: str = "--before") -> str | None:
    """The hint as one line for a terminal: ``… capture again with --before '…'``."""
    found = before_hint(message)
    if found is None:
        return None
    why, calls = found
    given = " ".join(f"{flag} {shlex.quote(c)}" for c in calls)
    return f"{why}: capture again with {given} (or the setup form's Before construction box)"


# A compiled extension built against another Torch registers none of its operators.
_MISSING_OPERATOR = re.compile(r"operator (\w+)::(\w+) does not exist")


_TORCH_VERSION = re.compile(r"^2\.(\d+)\.(\d+)(\+(\w+))?")


def _paired_release(lib: str, torch_version: str | None) -> tuple[str, str]:
    """``(the release to install, the index option)`` of ``lib`` for the installed torch:
    torchvision 0.(N+15).P pairs with torch 2.N.P (0.28.0 with 2.13.0); a CPU-only torch
    (``+cpu``) takes the CPU build from PyTorch's own index (PyPI's Linux wheels are CUDA
    builds, whose compiled operators a CPU-only torch cannot load)."""
    m = _TORCH_VERSION.match(torch_version or "")
    release = f"{lib}==0.{int(m.group(1)) + 15}.{m.group(2)}" if m and lib == "torchvision" else \
        f"{lib}==<the release paired with your torch>"
    index = " --index-url https://download.pytorch.org/whl/cpu" if m and m.group(4) == "cpu" else ""
    return release, index


def build_mismatch_hint(message: str, torch_version: str | None = None) -> str | None:
    """The hint for a library whose compiled operators are missing because it was built
    for another Torch than the one installed (torchvision's ``nms``), else None.
    ``torch_version``: the installed torch's (``2.13.0+cpu``), when known."""
    m = _MISSING_OPERATOR.search(message or "")
    if m is None:
        return None
    lib, op = m.group(1), m.group(2)
    release, index = _paired_release(lib, torch_version)
    build = (f" (a CUDA build beside the CPU-only torch {torch_version})" if index else "")
    return (f"{lib} was built for another Torch than the installed one{build} (its compiled operator {lib}::{op} is "
            f"missing): install the {lib} release made for the installed torch, python -m pip install "
            f"--force-reinstall --no-deps '{release}'{index} (the pairs: "
            "https://pytorch.org/get-started/previous-versions/); where the model imports it only if it can, "
            f"python -m pip uninstall {lib} also does")


def failure_hint(message: str, torch_version: str | None = None) -> str | None:
    """The one hint for a failure's message, or None."""
    return build_mismatch_hint(message, torch_version) or before_hint_text(message)
