"""``python -m capture.worker --fd N``: the worker entry (see :mod:`capture.worker.main`)."""

import sys

from .main import main

sys.exit(main())
