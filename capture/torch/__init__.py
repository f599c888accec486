"""The PyTorch capture, run inside the worker: the framework plug-in
(:mod:`.framework`), the trace (:mod:`.trace`) and the helpers it is composed of (its
statistics :mod:`.stats`, backward mirror :mod:`.backward`, function groups
:mod:`.functions`, tensor walking :mod:`.tensors`), abstract evidence on fake tensors
(:mod:`.abstract`), the memory check before an eager build (:mod:`.memory`), and saved
checkpoints and fixtures (:mod:`.saved`). The only place besides :mod:`capture.jax` that
imports a framework, always lazily."""
