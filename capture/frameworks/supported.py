"""The framework versions TensorViz supports: the tested floors, which each framework's
declaration holds.

``pyproject.toml``'s extras name the same floors (``torch>=2.13``); CI installs the exact
versions it tests with from ``.ci/constraints.txt``. The worker checks the selected
interpreter's Torch against its floor at run time
(:func:`capture.torch.version_check.check_torch`), because the
worker runs the person's own interpreter, whatever Torch it holds: an older one is a
``dependencies`` failure naming the version found and the one needed, never a capture
that breaks halfway through with an obscure error.
"""

from __future__ import annotations

import re

from . import FRAMEWORK_NAMES, capabilities

# The lowest versions the test suite has been run against (CI: .ci/constraints.txt), as
# each framework declares them (``Capabilities.min_versions``).
MIN_VERSIONS: dict[str, str] = {package: floor for name in FRAMEWORK_NAMES
                                for package, floor in capabilities(name).min_versions.items()}


def version_tuple(text: str) -> tuple[int, ...] | None:
    """The leading release numbers of a version string (``"2.13.0+cpu"`` → (2, 13, 0),
    ``"2.14.0.dev20260101"`` → (2, 14, 0)); None when it starts with no number."""
    m = re.match(r"\s*v?(\d+(?:\.\d+)*)", str(text))
    return tuple(int(p) for p in m.group(1).split(".")) if m else None


def is_supported(package: str, found: str) -> bool:
    need, have = version_tuple(MIN_VERSIONS[package]), version_tuple(found)
    if have is None or need is None:
        return False
    width = max(len(need), len(have))
    return have + (0,) * (width - len(have)) >= need + (0,) * (width - len(need))
