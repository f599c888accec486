"""Recipes, the canonical capture model, portable graph files and the isolated worker.

Importable with the standard library and msgpack alone: the worker imports this
package inside the user's selected interpreter. Frameworks (jax, flax, torch) are
imported lazily, only by the worker's framework modules.
"""
