"""The shared analysis of a capture, stdlib only: the graph index, value names, layer
rollups and costs, activations and peak, memory fit, device profiles and the source-line
index. The command line, the language server and the viewer all read it."""
