"""``torch_mlp.py`` after an edit that inserts one op: a ``relu`` after ``fc2``."""

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, width: int = 32) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, width)
        self.fc2 = nn.Linear(width, width)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))  # the edit: one op inserted
        x = self.norm(x)
        return self.head(x).softmax(-1)
