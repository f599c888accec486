"""From a canonical capture to what the browser draws (:mod:`.projection`): the index,
names, search, bodies, value names and the source-line index. Reads captures only."""
