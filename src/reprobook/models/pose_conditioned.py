"""A small pose-conditioned novel-view model in plain torch: given a source view and the target
camera's pose relative to it, predict the target view.

Architecture (a U-Net-lite): a convolutional encoder halves the resolution ``depth`` times
(``S -> S / 2^depth``); a fully connected bottleneck mixes every spatial position of the coarsest
map (a camera turn moves content across the whole image, which local convolutions alone cannot
do); a decoder upsamples back with skip connections from the encoder. Every block is modulated by
FiLM on the pose code ``p`` (``(sin dyaw, cos dyaw, dpitch, t_x, t_y, t_z)``, see
:func:`reprobook.vision.equirect.relative_pose`):

    h <- h * (1 + gamma_l(p)) + beta_l(p),   (gamma_l, beta_l) = linear_l(MLP(p)),

with ``linear_l`` initialised at zero, so an untrained model ignores the pose. The output is a
sigmoid image. Training is deterministic L1 regression (the paper's ODIN is a diffusion model; a
regressor is its cheapest stand-in, and it is judged the same way for every training set).
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class _Block(nn.Module):
    def __init__(self, cin, cout, cond):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.c2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.film = nn.Linear(cond, 2 * cout)
        nn.init.zeros_(self.film.weight)
        nn.init.zeros_(self.film.bias)

    def forward(self, x, c):
        h = F.silu(self.c1(x))
        g, b = self.film(c)[:, :, None, None].chunk(2, dim=1)
        h = h * (1 + g) + b
        return F.silu(self.c2(h))


class PoseConditionedUNet(nn.Module):
    """Predict a ``(3, S, S)`` target view from a source view and a relative pose code.

    ``channels``: widths of the encoder levels (``len(channels) - 1`` halvings); ``pose_dim``: size
    of the pose code; ``use_pose=False`` zeroes the pose code (the pose-blind ablation)."""

    def __init__(self, size: int = 32, channels=(16, 32, 64), pose_dim: int = 6, cond: int = 64,
                 bottleneck: int = 256, use_pose: bool = True):
        super().__init__()
        n_down = len(channels) - 1
        if size % (2 ** n_down):
            raise ValueError(f"size {size} is not divisible by 2^{n_down} (one halving a level)")
        self.size, self.pose_dim, self.use_pose = size, pose_dim, use_pose
        self.embed = nn.Sequential(nn.Linear(pose_dim, cond), nn.SiLU(), nn.Linear(cond, cond), nn.SiLU())
        self.enc = nn.ModuleList()
        cin = 3
        for c in channels:
            self.enc.append(_Block(cin, c, cond))
            cin = c
        s = size // 2 ** n_down
        flat = channels[-1] * s * s
        self.mix_in = nn.Linear(flat + cond, bottleneck)
        self.mix_out = nn.Linear(bottleneck, flat)
        self.dec = nn.ModuleList()
        for c_skip, c in zip(reversed(channels[:-1]), reversed(channels[:-1])):
            self.dec.append(_Block(cin + c_skip, c, cond))
            cin = c
        self.head = nn.Conv2d(cin, 3, 1)

    def forward(self, src: torch.Tensor, pose: torch.Tensor) -> torch.Tensor:
        if src.dim() != 4 or src.shape[1:] != (3, self.size, self.size):
            raise ValueError(f"src must be (B, 3, {self.size}, {self.size}), got {tuple(src.shape)}")
        if pose.shape != (src.shape[0], self.pose_dim):
            raise ValueError(f"pose must be (B, {self.pose_dim}), got {tuple(pose.shape)}")
        if not self.use_pose:
            pose = torch.zeros_like(pose)
        c = self.embed(pose)
        h, skips = src, []
        for i, blk in enumerate(self.enc):
            if i:
                h = F.avg_pool2d(h, 2)
            h = blk(h, c)
            skips.append(h)
        shape = h.shape
        z = F.silu(self.mix_in(torch.cat([h.flatten(1), c], 1)))
        h = h + self.mix_out(z).view(shape)
        for blk, skip in zip(self.dec, reversed(skips[:-1])):
            h = F.interpolate(h, scale_factor=2, mode="nearest")
            h = blk(torch.cat([h, skip], 1), c)
        return torch.sigmoid(self.head(h))


def train_nvs(model: PoseConditionedUNet, src, tgt, pose, steps: int, batch_size: int = 32,
              lr: float = 2e-3, seed: int = 0) -> list[float]:
    """L1 regression of the target views, AdamW with a cosine learning-rate decay; minibatches
    drawn with replacement from a generator seeded by ``seed``. Returns the loss per step."""
    n = src.shape[0]
    if not (tgt.shape[0] == n == pose.shape[0]):
        raise ValueError(f"src, tgt and pose must hold the same number of pairs, got "
                         f"{n}, {tgt.shape[0]}, {pose.shape[0]}")
    if steps < 1 or batch_size < 1:
        raise ValueError("steps and batch_size must be positive")
    g = torch.Generator().manual_seed(int(seed))
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * s / steps)))
    losses = []
    model.train()
    for _ in range(steps):
        idx = torch.randint(n, (batch_size,), generator=g)
        loss = (model(src[idx], pose[idx]) - tgt[idx]).abs().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    model.eval()
    return losses


def psnr(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Peak signal-to-noise ratio (dB, peak 1) of each image pair along the first axis."""
    if pred.shape != target.shape:
        raise ValueError(f"shapes differ: {tuple(pred.shape)} and {tuple(target.shape)}")
    mse = ((pred - target) ** 2).flatten(1).mean(1)
    return 10 * torch.log10(1.0 / mse.clamp_min(1e-10))


@torch.no_grad()
def predict(model: PoseConditionedUNet, src, pose, batch_size: int = 256) -> torch.Tensor:
    """The model's target views for every pair, in batches, without gradients."""
    model.eval()
    return torch.cat([model(src[i:i + batch_size], pose[i:i + batch_size])
                      for i in range(0, src.shape[0], batch_size)])
