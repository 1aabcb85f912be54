r"""A 3-D Vision Transformer over brain volumes (ViT3D).

A volume :math:`x\in\mathbb R^{G\times G\times G}` is cut into non-overlapping cubes of side
:math:`p` (:math:`N = (G/p)^3` tokens). Each cube is flattened to :math:`p^3` values and embedded
by one shared linear map, :math:`h^0_i = E\,\mathrm{vec}(x_{\text{cube } i}) + e_i` with a learned
position embedding :math:`e_i` per cube, so that the token of a cube says *what* the local pattern
is and *where* it lies. A pre-norm transformer encoder mixes the tokens (multi-head self-attention
and a GELU MLP per block), and the output is the mean of the final tokens (after a LayerNorm):

.. math:: z = \mathrm{LN}\Big(\tfrac1N \sum_i h^L_i\Big) \in \mathbb R^{d}.

The shared cube embedding is what uses the 3-D structure: the same local detector is applied at
every place, so a pattern that a subject carries a voxel or two away from another subject's is still
read by the same weights (a flattened MLP has one weight per voxel and no such sharing).
``forward_tokens`` returns the per-cube tokens as well (for attention maps and saliency).
"""
from __future__ import annotations

import torch
import torch.nn as nn

__all__ = ["ViT3D", "patchify3d"]


def patchify3d(x: torch.Tensor, patch: int) -> torch.Tensor:
    """``[B, G, G, G]`` (or ``[B, D, H, W]``) -> ``[B, N, patch**3]``, cubes in C order of their
    (d, h, w) grid position, each cube flattened in C order."""
    if x.ndim != 4:
        raise ValueError(f"volumes must be [B, D, H, W], got shape {tuple(x.shape)}")
    B, D, H, W = x.shape
    if D % patch or H % patch or W % patch:
        raise ValueError(f"volume sides {(D, H, W)} must be multiples of patch = {patch}")
    p = patch
    x = x.reshape(B, D // p, p, H // p, p, W // p, p)
    return x.permute(0, 1, 3, 5, 2, 4, 6).reshape(B, (D // p) * (H // p) * (W // p), p ** 3)


class ViT3D(nn.Module):
    """``[B, G, G, G]`` -> ``[B, dim]``: cube embedding + positions, pre-norm transformer, mean."""

    def __init__(self, grid: int = 16, patch: int = 4, dim: int = 64, depth: int = 2, heads: int = 4,
                 mlp_ratio: float = 2.0, dropout: float = 0.0):
        super().__init__()
        if grid % patch:
            raise ValueError(f"grid {grid} must be a multiple of patch {patch}")
        if dim % heads:
            raise ValueError(f"dim {dim} must be divisible by heads {heads}")
        self.grid, self.patch, self.dim = grid, patch, dim
        self.n_tokens = (grid // patch) ** 3
        self.embed = nn.Linear(patch ** 3, dim)
        self.pos = nn.Parameter(torch.zeros(1, self.n_tokens, dim))
        nn.init.normal_(self.pos, std=0.02)
        layer = nn.TransformerEncoderLayer(dim, heads, int(mlp_ratio * dim), dropout=dropout,
                                           activation="gelu", batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)

    def forward_tokens(self, x: torch.Tensor) -> torch.Tensor:
        """The final tokens ``[B, N, dim]``."""
        if x.ndim != 4 or tuple(x.shape[1:]) != (self.grid,) * 3:
            raise ValueError(f"volumes must be [B, {self.grid}, {self.grid}, {self.grid}], got "
                             f"{tuple(x.shape)}")
        h = self.embed(patchify3d(x, self.patch)) + self.pos
        return self.encoder(h)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.forward_tokens(x).mean(dim=1))
