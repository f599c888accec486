"""The isolated capture worker and the contract framework captures plug into.

The worker runs as its own process (``python -m capture.worker``, or the launcher
script the parent writes) in the user's selected interpreter, with only the ``capture``
package added to its path. :mod:`capture.session.runner` starts it and reads its messages
(:mod:`capture.worker.protocol`); :mod:`capture.worker.main` is the worker's entry and
:mod:`capture.worker.request` runs one request (also in each warm-worker child,
:mod:`capture.worker.zygote`).
Framework plug-ins implement :class:`capture.worker.plugin.FrameworkPlugin` (the typed
contract; registered in :mod:`capture.frameworks`) and receive a
:class:`~capture.worker.context.CaptureContext`.

Keep imports here light: this package is imported before anything else in the worker.
"""

from .errors import CaptureError, LimitExceeded
from .limits import Limits

__all__ = ["CaptureError", "LimitExceeded", "Limits"]
