"""Import-free discovery (libcst) of what can be opened as a graph."""
