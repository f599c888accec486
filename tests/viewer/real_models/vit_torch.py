"""A vision transformer written the way vit-pytorch writes its ``ViT``.

The layout is what a capture of that code shows: a patch embedding (a rearrange into
patches, LayerNorm, Linear, LayerNorm), a class token and position embedding, then a
``Transformer`` that keeps its blocks as ``(Attention, FeedForward)`` pairs in a
``ModuleList`` and runs ``x = attn(x) + x; x = ff(x) + x`` over them (the residual adds
sit between the blocks, in the transformer itself), a final LayerNorm and a linear
head on the class token. Plain PyTorch (no einops); narrow widths keep the capture
small, the depth (12 pairs) is ViT-B's.
"""

import torch
from torch import nn


class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm = nn.LayerNorm(dim)
        self.to_qkv = nn.Linear(dim, dim * 3, bias=False)
        self.to_out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.to_qkv(self.norm(x)).chunk(3, dim=-1)
        q, k, v = (t.reshape(b, n, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        attn = (q @ k.transpose(-1, -2) * (d // self.heads) ** -0.5).softmax(dim=-1)
        return self.to_out((attn @ v).transpose(1, 2).reshape(b, n, d))


class Transformer(nn.Module):
    def __init__(self, dim: int, depth: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.layers = nn.ModuleList([nn.ModuleList([Attention(dim, heads), FeedForward(dim, hidden)])
                                     for _ in range(depth)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for attn, ff in self.layers:
            x = attn(x) + x
            x = ff(x) + x
        return self.norm(x)


class ViT(nn.Module):
    def __init__(self, image: int = 32, patch: int = 8, classes: int = 10, dim: int = 32, depth: int = 12,
                 heads: int = 4, hidden: int = 64) -> None:
        super().__init__()
        self.patch = patch
        patch_dim = 3 * patch * patch
        self.to_patch_embedding = nn.Sequential(nn.LayerNorm(patch_dim), nn.Linear(patch_dim, dim), nn.LayerNorm(dim))
        self.pos_embedding = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, dim))
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim))
        self.dropout = nn.Dropout(0.1)
        self.transformer = Transformer(dim, depth, heads, hidden)
        self.mlp_head = nn.Linear(dim, classes)

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        b, c, h, w = img.shape
        p = self.patch
        patches = img.reshape(b, c, h // p, p, w // p, p).permute(0, 2, 4, 3, 5, 1).reshape(b, -1, p * p * c)
        x = self.to_patch_embedding(patches)
        x = torch.cat([self.cls_token.expand(b, -1, -1), x], dim=1) + self.pos_embedding
        x = self.transformer(self.dropout(x))
        return self.mlp_head(x[:, 0])


def build() -> ViT:
    """The init factory: a freshly initialised 12-pair ViT (seeded by the profile)."""
    return ViT()
