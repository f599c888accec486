"""The PyTorch capture, run inside the worker: the framework plug-in
(:mod:`.framework`), the eager trace and its statistics and backward mirror, and saved
checkpoints and fixtures. The only place besides :mod:`capture.jax` that imports a
framework, always lazily."""
