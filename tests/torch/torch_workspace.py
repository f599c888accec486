"""Helpers for Torch capture tests: a throwaway workspace of small models and an
in-process capture that follows the worker's order (probe the device, then capture,
then encode and decode the graph file the worker would send)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from capture.graph import graphfile
from capture.graph.model import Capture
from capture.worker.context import CaptureContext
from capture.worker.limits import Limits

from capture_workspace import forget_workspace_modules, profile_table, run_framework, tensor, write  # noqa: F401

MODELS = '''
import torch
from torch import nn
import torch.nn.functional as F


class SmallCNN(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Linear(16 * 4 * 4, classes)

    def forward(self, x):
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = self.pool(F.relu(self.conv2(x)))
        return self.head(torch.flatten(x, 1))


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / (d // self.heads) ** 0.5
        y = att.softmax(dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, dim=16, heads=2):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Twice(nn.Module):
    def __init__(self):
        super().__init__()
        self.shared = nn.Linear(4, 4)
        self.out = nn.Linear(4, 2)

    def forward(self, x):
        return self.out(self.shared(self.shared(x)))


class Aliasing(nn.Module):
    def forward(self, x):
        y = x * 2
        flat = y.view(-1)
        flat.add_(1.0)
        z = y.relu()
        return z, {"flat": flat}


class MakesNaN(nn.Module):
    def forward(self, x):
        bad = torch.log(x - 1.0)
        return bad * 2, torch.zeros_like(x) / torch.zeros_like(x)


class MLP(nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.fc1 = nn.Linear(4, width)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(width, 3)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Raises(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.helper(self.fc(x))

    def helper(self, h):
        raise ValueError("the model is broken on purpose")


class Swallows(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        for _ in range(50):
            try:
                x = self.fc(x)
            except Exception:
                pass
        return x


def plain_function(x, y, scale=2.0):
    return (x @ y).tanh() * scale


def cross_entropy(output, x, target=None):
    return F.cross_entropy(output, torch.zeros(output.shape[0], dtype=torch.long))


def make_sgd(params):
    return torch.optim.SGD(params, lr=0.1, momentum=0.9)


def pair_inputs():
    g = torch.Generator().manual_seed(3)
    return {"args": (torch.randn(2, 3, generator=g), torch.randn(3, 5, generator=g)), "kwargs": {"scale": 0.5}}
'''

FACTORY = '''
from pathlib import Path

import torch
from models import MLP


def load_mlp():
    model = MLP(width=8)
    model.load_state_dict(torch.load(Path(__file__).with_name("weights.pt")))
    return model
'''

# Importing this module leaves a marker file: proof that it was (or was not) imported.
MARKER_MODEL = '''
from pathlib import Path
Path(__file__).with_name("imported.marker").write_text("imported")

from torch import nn


class Marked(nn.Module):
    def forward(self, x):
        return x * 2
'''


def profile(model: str, **fields) -> dict[str, Any]:
    """A ``[profiles.p]`` table for the Torch capture (framework omitted: Torch)."""
    return profile_table(model, **fields)


def make_workspace(root: Path) -> Path:
    return write(root, {"models.py": MODELS, "factories.py": FACTORY, "marked.py": MARKER_MODEL})


def capture_in_process(root: Path, table: dict[str, Any], *, limits: Limits | None = None) -> tuple[Capture, CaptureContext]:
    """``(capture, ctx)`` for ``table`` run in this process; CaptureError propagates.
    The capture returned is the decoded graph file, as a client would read it."""
    from capture.torch import framework as fw

    cap, ctx = run_framework(fw, root, table, limits)
    cap.recipe = ctx.recipe.to_dict()
    return graphfile.decode(graphfile.encode(cap)), ctx
