"""CLI subcommands: one module each, exposing ``register(subparsers)``.

A module's ``register`` adds its subparser and sets ``func`` (returns the exit code).
"""
