r"""Small image-restoration baselines (a CNN U-Net and a Restormer) and the loop that trains any
restorer ``[B, 3, H, W] -> [B, 3, H, W]`` on (degraded, clean) pairs.

**U-Net** (Ronneberger et al. 2015), two scales, the input added back at the end (global residual,
as every modern restorer does)::

    f1 = Conv-LReLU-Conv-LReLU(Conv(x))             width C, full resolution
    f2 = Conv-LReLU-Conv-LReLU(StridedConv(f1))     width 2C, half resolution
    g  = Conv-LReLU-Conv-LReLU(cat(Up(f2), f1))     width C
    out = x + Conv(g)

**Restormer** (Zamir et al., CVPR 2022), the same two-scale layout with transformer blocks::

    x = x + MDTA(LN(x));  x = x + GDFN(LN(x))

* MDTA (multi-Dconv-head transposed attention): ``q, k, v = DWConv3x3(Conv1x1(x))``; per head,
  attention is taken across *channels*, :math:`\mathrm{softmax}(\tau\, \hat q \hat k^\top) v`
  with :math:`\hat q, \hat k` L2-normalised over pixels and a learned temperature :math:`\tau`,
  so its cost is linear in the number of pixels and each output pixel sees the whole image.
* GDFN (gated-Dconv feed-forward): ``Conv1x1(GELU(a) * b)`` with
  ``(a, b) = DWConv3x3(Conv1x1(x))``.
* LN is a LayerNorm over the channels at each pixel; down- and up-sampling are pixel-(un)shuffles
  as in Restormer.

:func:`train_restorer` minimises the L1 loss with Adam and cosine decay on mini-batches drawn with
a seeded generator; :func:`restore` applies a model in batches without gradients.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["UNet", "Restormer", "ChannelLayerNorm", "GDFN", "count_parameters", "train_restorer",
           "restore", "check_image_batch"]


def check_image_batch(x: torch.Tensor, name: str = "input", multiple: int = 1) -> None:
    """Raise a clear error unless ``x`` is an RGB batch ``[B, 3, H, W]`` with H, W divisible by
    ``multiple``."""
    if not isinstance(x, torch.Tensor) or x.dim() != 4 or x.shape[1] != 3:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"{name} must be an RGB batch [B, 3, H, W], got {shape}")
    if x.shape[2] % multiple or x.shape[3] % multiple:
        raise ValueError(f"{name} height and width must be multiples of {multiple}, got {tuple(x.shape[2:])}")


def _positive_int(name, v):
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"{name} must be a positive int, got {v!r}")


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def _double_conv(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.LeakyReLU(0.2),
                         nn.Conv2d(cout, cout, 3, padding=1), nn.LeakyReLU(0.2))


class UNet(nn.Module):
    """Two-scale CNN U-Net of width ``width`` (module docstring)."""

    def __init__(self, width: int = 16):
        super().__init__()
        _positive_int("width", width)
        C = width
        self.embed = nn.Conv2d(3, C, 3, padding=1)
        self.enc = _double_conv(C, C)
        self.down = nn.Conv2d(C, 2 * C, 4, stride=2, padding=1)
        self.mid = _double_conv(2 * C, 2 * C)
        self.up = nn.ConvTranspose2d(2 * C, C, 2, stride=2)
        self.dec = _double_conv(2 * C, C)
        self.out = nn.Conv2d(C, 3, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_image_batch(x, multiple=2)
        f1 = self.enc(self.embed(x))
        f2 = self.mid(F.leaky_relu(self.down(f1), 0.2))
        g = self.dec(torch.cat([self.up(f2), f1], 1))
        return x + self.out(g)


class ChannelLayerNorm(nn.Module):
    """LayerNorm over the channels of a ``[B, C, H, W]`` map, at every pixel."""

    def __init__(self, channels: int):
        super().__init__()
        self.norm = nn.LayerNorm(channels)

    def forward(self, x):
        return self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class MDTA(nn.Module):
    """Multi-Dconv-head transposed (channel) attention (module docstring)."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim {dim} must be divisible by heads {heads}")
        self.heads = heads
        self.temperature = nn.Parameter(torch.ones(heads, 1, 1))
        self.qkv = nn.Conv2d(dim, 3 * dim, 1, bias=False)
        self.dw = nn.Conv2d(3 * dim, 3 * dim, 3, padding=1, groups=3 * dim, bias=False)
        self.proj = nn.Conv2d(dim, dim, 1, bias=False)

    def forward(self, x):
        B, C, H, W = x.shape
        q, k, v = self.dw(self.qkv(x)).chunk(3, dim=1)
        q, k, v = (t.reshape(B, self.heads, C // self.heads, H * W) for t in (q, k, v))
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
        attn = torch.softmax(q @ k.transpose(-2, -1) * self.temperature, dim=-1)
        return self.proj((attn @ v).reshape(B, C, H, W))


class GDFN(nn.Module):
    """Gated-Dconv feed-forward network with hidden width ``round(dim * expansion)``."""

    def __init__(self, dim: int, expansion: float = 2.0):
        super().__init__()
        hidden = max(1, int(round(dim * expansion)))
        self.project_in = nn.Conv2d(dim, 2 * hidden, 1, bias=False)
        self.dw = nn.Conv2d(2 * hidden, 2 * hidden, 3, padding=1, groups=2 * hidden, bias=False)
        self.project_out = nn.Conv2d(hidden, dim, 1, bias=False)

    def forward(self, x, *_):
        a, b = self.dw(self.project_in(x)).chunk(2, dim=1)
        return self.project_out(F.gelu(a) * b)


class RestormerBlock(nn.Module):
    def __init__(self, dim, heads, expansion):
        super().__init__()
        self.n1, self.attn = ChannelLayerNorm(dim), MDTA(dim, heads)
        self.n2, self.ffn = ChannelLayerNorm(dim), GDFN(dim, expansion)

    def forward(self, x):
        x = x + self.attn(self.n1(x))
        return x + self.ffn(self.n2(x))


class Restormer(nn.Module):
    """Two-scale Restormer of width ``width`` (module docstring); ``blocks`` transformer blocks
    per stage (encoder, bottleneck, decoder)."""

    def __init__(self, width: int = 16, heads: int = 2, blocks: tuple[int, int, int] = (1, 1, 1),
                 expansion: float = 2.0):
        super().__init__()
        _positive_int("width", width)
        _positive_int("heads", heads)
        if len(blocks) != 3 or any(int(b) != b or b < 1 for b in blocks):
            raise ValueError(f"blocks must be three positive ints, got {blocks!r}")
        if width % 2 or width % heads:
            raise ValueError(f"width must be even and divisible by heads, got width={width}, heads={heads}")
        C, C2 = width, 2 * width
        self.embed = nn.Conv2d(3, C, 3, padding=1, bias=False)
        self.enc = nn.Sequential(*[RestormerBlock(C, heads, expansion) for _ in range(blocks[0])])
        self.down = nn.Sequential(nn.Conv2d(C, C // 2, 3, padding=1, bias=False), nn.PixelUnshuffle(2))
        self.mid = nn.Sequential(*[RestormerBlock(C2, heads, expansion) for _ in range(blocks[1])])
        self.up = nn.Sequential(nn.Conv2d(C2, 4 * C, 3, padding=1, bias=False), nn.PixelShuffle(2))
        self.reduce = nn.Conv2d(2 * C, C, 1, bias=False)
        self.dec = nn.Sequential(*[RestormerBlock(C, heads, expansion) for _ in range(blocks[2])])
        self.out = nn.Conv2d(C, 3, 3, padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_image_batch(x, multiple=2)
        f1 = self.enc(self.embed(x))
        f2 = self.mid(self.down(f1))
        g = self.dec(self.reduce(torch.cat([self.up(f2), f1], 1)))
        return x + self.out(g)


def train_restorer(model: nn.Module, low: torch.Tensor, clean: torch.Tensor, steps: int,
                   batch_size: int = 16, lr: float = 2e-3, generator: torch.Generator | None = None,
                   log_every: int = 0) -> list[float]:
    """Train ``model`` for ``steps`` Adam steps (cosine-decayed learning rate) on the L1 loss between
    ``model(low[idx])`` and ``clean[idx]``, ``idx`` a seeded random mini-batch of the pool.
    Returns the loss of every step."""
    check_image_batch(low, "low")
    if low.shape != clean.shape:
        raise ValueError(f"low and clean differ in shape: {tuple(low.shape)} vs {tuple(clean.shape)}")
    _positive_int("steps", steps)
    _positive_int("batch_size", batch_size)
    dev = next(model.parameters()).device
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps, eta_min=lr * 0.01)
    model.train()
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, low.shape[0], (batch_size,), generator=generator)
        x, y = low[idx].to(dev), clean[idx].to(dev)
        loss = (model(x) - y).abs().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    model.eval()
    return losses


@torch.no_grad()
def restore(model: nn.Module, low: torch.Tensor, batch_size: int = 32) -> torch.Tensor:
    """``model`` applied to ``low`` in batches, without gradients, clipped to [0, 1], on the CPU."""
    check_image_batch(low, "low")
    dev = next(model.parameters()).device
    model.eval()
    outs = [model(low[i:i + batch_size].to(dev)).clamp(0, 1).cpu() for i in range(0, low.shape[0], batch_size)]
    return torch.cat(outs)
