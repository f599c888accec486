"""What a failed capture's message says to do, when it is library state the model reads
but does not set up itself (issue 49): model-parallel groups (fairscale, Megatron), a
default process group. The command line prints the hint under the failure; the language
server shows it with the failure."""

from __future__ import annotations

import re

INIT_PROCESS_GROUP = ("torch.distributed.init_process_group('gloo', init_method='tcp://127.0.0.1:29512', "
                      "rank=0, world_size=1)")
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
    given = " ".join(f"{flag} \"{c}\"" for c in calls)
    return f"{why}: capture again with {given} (or the setup form's Before construction box)"
