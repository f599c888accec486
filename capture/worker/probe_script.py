"""The interpreter/dependency probe, run as ``python -c <this file's text> JSON``.

Standard library only and imports nothing heavy: each requirement is looked up with
``importlib.util.find_spec`` (which does not import a top-level package), and its
version read from the name of its ``*.dist-info`` folder beside it (cheaper than
``importlib.metadata``). Prints one JSON line, including ``sys.path`` so that the parent
can tell when an install changed what the probe saw.

When Torch is present and something asked for is missing (so that an install command
will be offered), ``torch_build`` lists ``[name, version]`` of the installed Torch and of
every installed distribution its build could share with what gets installed: every
``nvidia-*`` distribution, ``triton`` (and its ``pytorch-triton*`` builds), and any
``cuda-*`` distribution Torch requires. The install command pins all of them, so pip
refuses an install that would replace them instead of replacing the selected
Torch/CUDA build. Read with ``importlib.metadata`` (stdlib), only in that case.
"""

if __name__ == "__main__":
    import importlib.util
    import json
    import os
    import re
    import sys
    from typing import Any

    wanted = json.loads(sys.argv[1]) if len(sys.argv) > 1 else []

    def version_of(name: str, location: str) -> str | None:
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

    def canonical(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    def shared_with_torch(name: str) -> bool:
        return name.startswith(("nvidia-", "cuda-")) or name == "triton" or name.startswith("pytorch-triton")

    def torch_build() -> list[list[str]] | None:
        """``[[name, version], …]``: torch first, then what its build could share."""
        from importlib import metadata

        installed: dict[str, tuple[str, Any]] = {}  # canonical name -> (version, distribution); first on sys.path wins
        for dist in metadata.distributions():
            try:
                name = dist.metadata["Name"]
                version = dist.version
            except Exception:
                continue
            if name and version and canonical(name) not in installed:
                installed[canonical(name)] = (version, dist)
        if "torch" not in installed:
            return None
        version, dist = installed["torch"]
        try:
            requires = dist.requires or []
        except Exception:
            requires = []
        shared = {n for n in installed if n.startswith("nvidia-") or n == "triton"}
        for requirement in requires:
            m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
            if m and canonical(m.group(1)) in installed and shared_with_torch(canonical(m.group(1))):
                shared.add(canonical(m.group(1)))
        shared.discard("torch")
        return [["torch", version]] + [[n, installed[n][0]] for n in sorted(shared)]

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
    build = None
    if found.get("torch", {}).get("found") and any(not found[n]["found"] for n in wanted):
        try:
            build = torch_build()
        except Exception:
            build = None
    print(json.dumps({
        "version": list(sys.version_info[:3]),
        "executable": sys.executable,
        "prefix": sys.prefix,
        "path": [p for p in sys.path if p],
        "modules": found,
        "torch_build": build,
    }))
