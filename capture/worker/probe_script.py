"""The interpreter/dependency probe, run as ``python -c <this file's text> JSON``.

Standard library only and imports nothing heavy: each requirement is looked up with
``importlib.util.find_spec`` (which does not import a top-level package) and its
version read from its distribution metadata. Prints one JSON line.
"""

if __name__ == "__main__":
    import importlib.util
    import json
    import sys

    wanted = json.loads(sys.argv[1]) if len(sys.argv) > 1 else []
    found = {}
    for name in wanted + ["pip"]:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        version = None
        if spec is not None:
            try:
                from importlib.metadata import PackageNotFoundError, version as dist_version

                try:
                    version = dist_version(name)
                except PackageNotFoundError:
                    version = None
            except ImportError:
                version = None
        found[name] = {"found": spec is not None, "version": version}
    print(json.dumps({
        "version": list(sys.version_info[:3]),
        "executable": sys.executable,
        "prefix": sys.prefix,
        "modules": found,
    }))
