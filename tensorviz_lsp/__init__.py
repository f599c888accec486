"""TensorViz language server, CLI and workspace state."""

# First, before anything else is imported: the folder this was started in stays off the
# module path (``python -m`` puts it there; a workspace's msgpack.py would run).
from .startup_path import keep_workspace_off_path as _keep_workspace_off_path

_keep_workspace_off_path()

__version__ = "0.1.0"


def _hand_discovery_the_frameworks() -> None:
    """Discovery imports nothing of ``capture``: it reads the frameworks' declarations
    from the registry handed in here, once, for the CLI and the language server."""
    from capture import frameworks

    from discovery.registry import use_frameworks

    use_frameworks(frameworks)


_hand_discovery_the_frameworks()
