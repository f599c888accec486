"""The JAX and Flax capture, run inside the worker: the framework plug-in
(:mod:`.framework`), Flax module interception and RNG streams, and the conversion of a
traced jaxpr (bodies, module groups) into a canonical capture. The only place besides
:mod:`capture.torch` that imports a framework, always lazily."""
