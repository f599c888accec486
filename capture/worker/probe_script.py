"""The interpreter/dependency probe, run as ``python -c <this file's text> JSON``.

Standard library only and imports nothing heavy: each requirement is looked up with
``importlib.util.find_spec`` (which does not import a top-level package), and its
version read from the name of its ``*.dist-info`` folder beside it (cheaper than
``importlib.metadata``). Prints one JSON line, including ``sys.path`` so that the parent
can tell when an install changed what the probe saw.
"""

if __name__ == "__main__":
    import importlib.util
    import json
    import os
    import re
    import sys

    wanted = json.loads(sys.argv[1]) if len(sys.argv) > 1 else []

    def version_of(name, location):
        folder = os.path.dirname(location)
        pattern = re.compile(r"^" + re.escape(name).replace("_", "[-_.]") + r"-([^-]+)\.(dist|egg)-info$", re.I)
        try:
            entries = os.listdir(folder)
        except OSError:
            return None
        for entry in entries:
            m = pattern.match(entry)
            if m:
                return m.group(1)
        return None

    found = {}
    for name in wanted + ["pip"]:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        location = None
        if spec is not None:
            location = spec.origin if spec.has_location else None
            if spec.submodule_search_locations:
                location = list(spec.submodule_search_locations)[0]
        found[name] = {
            "found": spec is not None,
            "version": version_of(name, location) if location else None,
        }
    print(json.dumps({
        "version": list(sys.version_info[:3]),
        "executable": sys.executable,
        "prefix": sys.prefix,
        "path": [p for p in sys.path if p],
        "modules": found,
    }))
