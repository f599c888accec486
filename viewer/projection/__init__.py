"""From a canonical capture to what the browser draws (:mod:`.projection`): pages of
children, presentation, search and the trunk, over the shared analysis in
:mod:`capture.analysis` (index, names, costs, lines). Reads captures only."""
