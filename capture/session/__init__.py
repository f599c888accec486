"""The parent side of a capture: checks, the isolated worker (one-shot or warm), and
what a capture leaves behind. Used by the CLI and the language server alike."""
