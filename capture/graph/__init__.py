"""The canonical capture and what is computed from captures alone: the graph model
(:mod:`.model`), portable graph files (:mod:`.graphfile`), diffs between captures,
freshness against current sources, and collapsed failure frames."""
