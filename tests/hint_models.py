"""Model sources shared by the tests (and benchmarks) of what a capture gives back to the
editor: line index, inlay hints, hovers, Show in Graph. Written the way public PyTorch code
writes them (a residual CNN; a GPT-style stack of identical blocks in a ``ModuleList``)."""

# A residual CNN: a stem, 3 identical blocks (their lines run 3 times), a head, a tuple line.
CNN = '''
import torch
from torch import nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.conv = nn.Conv2d(ch, ch, 3, padding=1)
        self.norm = nn.BatchNorm2d(ch)

    def forward(self, x):
        h = F.relu(self.norm(self.conv(x)))
        return x + h


class CNN(nn.Module):
    def __init__(self, blocks: int = 3):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.blocks = nn.Sequential(*[Block(8) for _ in range(blocks)])
        self.head = nn.Linear(8, 10)

    def forward(self, x):
        h = torch.relu(self.stem(x))
        h = self.blocks(h)
        pooled = h.mean(dim=(2, 3))
        a, b = pooled.chunk(2, dim=1)
        return self.head(pooled), a * b
'''

#: ``cnn.py``'s profile ``cnn``.
CNN_RECIPE = """\
version = 1

[profiles.cnn]
kind = "model"
model = "cnn:CNN"
mode = "eval"
device = "cpu"
grad_enabled = false
seed = 0
init = { args = [], kwargs = { blocks = 3 } }
inputs = { args = [{ kind = "tensor", shape = [2, 3, 8, 8], dtype = "float32", requires_grad = false, generator = { kind = "normal" } }], kwargs = {} }
"""

# A conv stem and 12 identical blocks, looped over: ``z = blk(z)`` runs 12 times.
STACK = '''
import torch
from torch import nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        h = F.gelu(self.fc(self.ln1(x)))
        x = x + h
        return x + self.mlp(x)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.blocks = nn.ModuleList([Block() for _ in range(12)])
        self.proj = nn.Linear(8 * 8 * 8, 16)

    def forward(self, x):
        h = torch.relu(self.conv(x))
        z = self.proj(torch.flatten(h, 1))
        for blk in self.blocks:
            z = blk(z)
        a, b = z.chunk(2, dim=-1)
        return a * b
'''
