r"""A small bidirectional vision Mamba classifier with a hook on the scan's input-dependent parameters.

Architecture (channels-first images ``[B, c, H, W]``)::

    x = Conv(patch x patch, stride patch)(img) + pos          # [B, d, H/p, W/p], L = HW/p^2 tokens
    for each block:  x = x + Mixer(LayerNorm(x))              # Mixer: SS2D, directions=2
    logits = Linear(LayerNorm(mean over tokens of x))

The mixer is :class:`reprobook.vision.cross_scan.SS2D` with ``directions=2``: the raster order and
its reverse (Vision Mamba's bidirectional scan), each a selective scan whose
:math:`\Delta = \mathrm{softplus}(W_\Delta W_r u + b)`, :math:`B = W_B u`, :math:`C = W_C u` are
projections of the tokens ``u``.  :class:`HookedSS2D` splits SS2D's forward at the point where the
tokens enter the scan: a ``hook(u, params) -> u~`` (see
:class:`reprobook.vision.style_perturb.StylePerturbation`), given the tokens and the clean
``Delta, B, C`` they produce, returns perturbed tokens, from which ``Delta, B, C`` are recomputed and
which the scan then carries.  A perturbed token thus changes the input-dependent matrices (START's
target) and its own contribution to the state alike, as in a Mamba layer, where one token sequence
feeds both.  The hook runs only in training and
only in block ``hook_block``.

:meth:`VisionMamba.scan_statistics` returns per-image token means of ``Delta, B, C`` (and the pooled
feature), from which domain gaps are measured. :func:`train_classifier` trains with Adam on
batches drawn from a seeded generator; :func:`accuracy` evaluates.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..kernels.selective_scan import selective_scan
from .cross_scan import SS2D, cross_merge, cross_scan

__all__ = ["HookedSS2D", "VisionMamba", "train_classifier", "accuracy"]


class HookedSS2D(SS2D):
    """SS2D whose ``Delta, B, C`` projections can read hook-perturbed tokens (module docstring)."""

    def project(self, seq: torch.Tensor) -> dict[str, torch.Tensor]:
        """``delta [B, K, D, L]`` (softplus, bias), ``B, C [B, K, N, L]`` and ``A [K, D, N]`` from
        tokens ``seq [B, K, D, L]``: the same maps as :meth:`SS2D.scan_parameters`."""
        proj = torch.einsum("bkdl,kcd->bkcl", seq, self.x_proj)
        dt, Bm, Cm = proj.split([self.dt_rank, self.d_state, self.d_state], dim=2)
        delta = torch.einsum("bkrl,kdr->bkdl", dt, self.dt_proj)
        delta = F.softplus(delta + self.dt_bias.view(1, self.K, -1, 1))
        A = -torch.exp(self.A_log).view(self.K, self.d_inner, self.d_state)
        return {"delta": delta, "B": Bm, "C": Cm, "A": A}

    def tokens(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The scan's tokens ``u [B, K, D, L]`` and the gate ``z [B, H, W, D]``."""
        self._check(x)
        u, z = self._inner(x)
        return cross_scan(u, self.K), z

    def forward(self, x: torch.Tensor, hook: Callable | None = None) -> torch.Tensor:
        Bsz, _, H, W = x.shape
        seq, z = self.tokens(x)
        p = self.project(seq)
        if hook is not None:
            seq = hook(seq, p)
            p = self.project(seq)
        K, D, L = self.K, self.d_inner, H * W
        y = selective_scan(seq.reshape(Bsz, K * D, L), p["delta"].reshape(Bsz, K * D, L),
                           p["A"].reshape(K * D, self.d_state), p["B"], p["C"], self.Ds,
                           impl=self.impl)
        y = cross_merge(y.view(Bsz, K, D, L), H, W).permute(0, 2, 3, 1)
        y = self.out_norm(y) * F.silu(z)
        return self.out_proj(y).permute(0, 3, 1, 2)


class VisionMamba(nn.Module):
    """Patch embedding, ``depth`` pre-norm residual bidirectional SS2D blocks, mean pool, linear head."""

    def __init__(self, image_size: int = 16, in_chans: int = 1, patch: int = 2, d_model: int = 16,
                 depth: int = 2, d_state: int = 8, expand: int = 2, dt_rank: int = 4,
                 n_classes: int = 10, directions: int = 2):
        super().__init__()
        for name, v in (("image_size", image_size), ("in_chans", in_chans), ("patch", patch),
                        ("depth", depth), ("n_classes", n_classes)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if image_size % patch:
            raise ValueError(f"patch ({patch}) must divide image_size ({image_size})")
        self.image_size, self.in_chans, self.grid = image_size, in_chans, image_size // patch
        self.embed = nn.Conv2d(in_chans, d_model, patch, stride=patch)
        self.pos = nn.Parameter(torch.randn(1, d_model, self.grid, self.grid) * 0.02)
        self.norms = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(depth))
        self.mixers = nn.ModuleList(HookedSS2D(d_model, d_state=d_state, expand=expand,
                                               directions=directions, dt_rank=dt_rank)
                                    for _ in range(depth))
        self.head_norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_classes)
        self.hook: Callable | None = None
        self.hook_block = 0

    def _check(self, img: torch.Tensor) -> None:
        want = (self.in_chans, self.image_size, self.image_size)
        if img.dim() != 4 or tuple(img.shape[1:]) != want:
            raise ValueError(f"VisionMamba expects images [B, {want[0]}, {want[1]}, {want[2]}], "
                             f"got shape {tuple(img.shape)}")

    def _norm(self, i: int, x: torch.Tensor) -> torch.Tensor:
        return self.norms[i](x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)

    def features(self, img: torch.Tensor) -> torch.Tensor:
        """Pooled features ``[B, d_model]`` (the hook acts only in training mode)."""
        self._check(img)
        x = self.embed(img) + self.pos
        for i, mixer in enumerate(self.mixers):
            hook = self.hook if (self.training and i == self.hook_block) else None
            x = x + mixer(self._norm(i, x), hook=hook)
        return self.head_norm(x.mean((2, 3)))

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(img))

    @torch.no_grad()
    def scan_statistics(self, img: torch.Tensor, block: int = 0,
                        batch_size: int = 256) -> dict[str, torch.Tensor]:
        """Per-image token means of block ``block``'s ``delta [n, K*D]``, ``B, C [n, K*N]``, and the
        pooled feature ``[n, d_model]``, in eval mode (no hook)."""
        if not 0 <= block < len(self.mixers):
            raise ValueError(f"block must lie in [0, {len(self.mixers)}), got {block!r}")
        was = self.training
        self.eval()
        out = {"delta": [], "B": [], "C": [], "feature": []}
        for s in range(0, len(img), batch_size):
            xb = img[s:s + batch_size]
            self._check(xb)
            x = self.embed(xb) + self.pos
            for i in range(block):
                x = x + self.mixers[i](self._norm(i, x))
            seq, _ = self.mixers[block].tokens(self._norm(block, x))
            p = self.mixers[block].project(seq)
            for k in ("delta", "B", "C"):
                out[k].append(p[k].mean(-1).flatten(1))
            out["feature"].append(self.features(xb))
        self.train(was)
        return {k: torch.cat(v) for k, v in out.items()}


def train_classifier(model: nn.Module, x: torch.Tensor, y: torch.Tensor, epochs: int,
                     batch_size: int = 64, lr: float = 2e-3, seed: int = 0) -> list[float]:
    """Adam on cross-entropy, ``epochs`` passes over ``(x, y)`` in an order drawn from
    ``torch.Generator(seed)``; returns the mean loss of each epoch."""
    if len(x) != len(y) or len(x) < 1:
        raise ValueError(f"x and y must hold the same, positive number of examples, got {len(x)} "
                         f"and {len(y)}")
    if epochs < 1 or batch_size < 1:
        raise ValueError(f"epochs and batch_size must be positive, got {epochs} and {batch_size}")
    gen = torch.Generator().manual_seed(int(seed))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    history = []
    for _ in range(int(epochs)):
        order = torch.randperm(len(x), generator=gen)
        losses = []
        for s in range(0, len(x), batch_size):
            idx = order[s:s + batch_size]
            loss = F.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        history.append(float(np.mean(losses)))
    model.eval()
    return history


@torch.no_grad()
def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int = 512) -> float:
    """Share of ``x`` classified as ``y`` (eval mode)."""
    model.eval()
    correct = 0
    for s in range(0, len(x), batch_size):
        correct += (model(x[s:s + batch_size]).argmax(-1) == y[s:s + batch_size]).sum().item()
    return correct / max(1, len(x))
