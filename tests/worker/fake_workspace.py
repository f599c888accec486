"""A workspace of small fake-framework models, and recipe helpers (fake framework)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from capture.recipe import Recipe

MODELS = {
    "helpers.py": """
        def block(x, w):
            return (x @ w).relu()
    """,
    "models.py": """
        import os
        from helpers import block

        MARKER = os.environ.get("TV_IMPORT_MARKER")
        if MARKER:
            open(MARKER, "w").close()

        def net(x, w, scale=2.0):
            h = block(x, w)
            return h * scale, {"sum": h.sum()}

        def chain(x, n=10):
            for _ in range(n):
                x = x + 1
            return x

        def nested(x, depth=5):
            if depth == 0:
                return x + 1
            return nested(x, depth - 1)

        def wide(x, n=10):
            return [x + i for i in range(n)]

        def nothing(x):
            return x

        class Scaled:
            def __init__(self, factor):
                self.factor = factor

            def __call__(self, x):
                return x * self.factor
    """,
    "crashy.py": """
        import ctypes
        import os
        import signal
        import subprocess
        import sys
        import time

        def helper(x):
            raise ValueError("bad shape in helper")

        def raises(x):
            y = x + 1
            return helper(y)

        def segfault(x):
            y = x + 1
            ctypes.string_at(0)

        def kill_self(x):
            os.kill(os.getpid(), signal.SIGSEGV)

        def hard_exit(x):
            os._exit(7)

        def exits(x):
            sys.exit(3)

        def out_of_memory(x):
            raise MemoryError("simulated")

        def real_out_of_memory(x):
            hold = []
            while True:
                hold.append(bytearray(1 << 26))

        def hang(x):
            if os.environ.get("TV_WORKER_PID"):
                with open(os.environ["TV_WORKER_PID"], "w") as fh:
                    fh.write(str(os.getpid()))
            print("hang: stuck in user code", flush=True)
            while True:
                time.sleep(0.05)

        def hang_with_child(x):
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
            with open(os.environ["TV_CHILD_PID"], "w") as fh:
                fh.write(str(child.pid))
            while True:
                time.sleep(0.05)

        def chatty(x):
            print("hello from user code")
            sys.stdout.write("\\x00\\x00\\x00\\x10garbage that looks like a frame\\n")
            return x.relu()
    """,
    "factories.py": """
        import fake_framework as fake
        from models import Scaled

        def make_model():
            return Scaled(3)

        def make_inputs():
            return {"args": (fake.array([2, 3]),), "kwargs": {}}

        def named_inputs():
            return {"x": fake.array([4])}

        def bad_inputs():
            return [1, 2]
    """,
    "pkg/__init__.py": "",
    "pkg/deep.py": """
        def f(x):
            return -x
    """,
}


def make_workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    for name, text in MODELS.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return root


def tensor(*shape, dtype="float32"):
    return {"kind": "tensor", "shape": list(shape), "dtype": dtype}


def fake_recipe(model: str, *args, name: str = "p", init=None, device: str = "cpu", **kwargs) -> Recipe:
    data = {
        "name": name,
        "framework": "fake",
        "model": model,
        "device": device,
        "inputs": {"args": list(args), "kwargs": kwargs},
    }
    if init is not None:
        data["init"] = init
    return Recipe.from_dict(data)
