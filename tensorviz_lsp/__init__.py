"""TensorViz language server, CLI and workspace state."""

__version__ = "0.1.0"
