"""The Torch floor check, run in the worker once Torch is imported: the person's own
Torch, refused clearly when older than the tested floor
(:data:`capture.frameworks.supported.MIN_VERSIONS`)."""

from __future__ import annotations

import sys

from ..frameworks.supported import MIN_VERSIONS, is_supported
from ..worker.errors import CaptureError
from ..worker.protocol import UnsupportedVersionDetails


def check_torch(version: str) -> None:
    """Raise a ``dependencies`` :class:`~capture.worker.errors.CaptureError` when the
    imported Torch's ``version`` (its ``__version__``) is older than the supported floor."""
    found = version or "unknown"
    if is_supported("torch", found):
        return
    need = MIN_VERSIONS["torch"]
    raise CaptureError(
        "dependencies",
        f"PyTorch {found} in {sys.executable} is not supported: TensorViz needs torch>={need}. "
        f"Upgrade it in the selected interpreter (e.g. {sys.executable} -m pip install 'torch>={need}') "
        "or select an interpreter with a supported Torch.",
        UnsupportedVersionDetails(package="torch", found=found, needed=f">={need}", python=sys.executable),
        error_type="UnsupportedVersion",
    )
