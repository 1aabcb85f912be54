"""A small CNN forgery detector, trained on real images against pseudo-fakes and scored by AUROC.

The detector stands in for the paper's EfficientNet-B4: the centred image and its fixed 3x3
high-pass residual (image minus its 3x3 box mean, x10) as two input channels, four 3x3 convolutions (the middle two
with stride 2, so that it can see the 2-pixel periodicities of upsampling traces), ReLU, global
average pooling and a linear logit (> 0: fake). Every pseudo-fake generator is given the same
detector, the same real images, the same number of Adam steps and the same batches of real
images; only the fakes differ. Training minimises the binary cross-entropy on balanced batches
(half real, half pseudo-fake).

AUROC is :func:`reprobook.ood.metrics.auroc` with the fakes as the positive class: the
probability that a random fake scores above a random real image.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from reprobook.ood.metrics import auroc


class ForgeryCNN(nn.Module):
    """4 conv layers + global average pooling + linear logit, for (n, 1, N, N) images."""

    def __init__(self, width: int = 8):
        super().__init__()
        if int(width) != width or width < 1:
            raise ValueError(f"width must be a positive integer, got {width!r}")
        w = int(width)
        self.body = nn.Sequential(
            nn.Conv2d(2, w, 3, padding=1), nn.ReLU(),
            nn.Conv2d(w, 2 * w, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(2 * w, 2 * w, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(2 * w, 2 * w, 3, padding=1), nn.ReLU())
        self.head = nn.Linear(2 * w, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 4 or x.shape[1] != 1:
            raise ValueError(f"images must have shape (n, 1, H, W), got {tuple(x.shape)}")
        # centre each image (the traces are in the texture, not the mean grey level) and give the
        # net a fixed high-pass residual beside it, as forensic detectors do (SRM / Bayar filters):
        # the traces are a few percent of the signal and would otherwise take long to find
        x = x - x.mean((2, 3), keepdim=True)
        low = F.avg_pool2d(F.pad(x, (1, 1, 1, 1), mode="reflect"), 3, stride=1)
        x = torch.cat([x, 10.0 * (x - low)], 1)
        return self.head(self.body(x).mean((2, 3))).squeeze(1)


def train_detector(real, fake, *, steps: int, generator: torch.Generator, batch_size: int = 32,
                   lr: float = 2e-3, width: int = 8) -> tuple[ForgeryCNN, list[float]]:
    """Train a :class:`ForgeryCNN` on ``real`` against ``fake`` (both (n, 1, N, N)); the init and
    the batches come from ``generator``. Returns the net and the per-step losses."""
    real = torch.as_tensor(np.asarray(real), dtype=torch.float32)
    fake = torch.as_tensor(np.asarray(fake), dtype=torch.float32)
    if real.ndim != 4 or fake.ndim != 4 or real.shape[1:] != fake.shape[1:]:
        raise ValueError(f"real and fake must be (n, 1, N, N) with the same image shape, got "
                         f"{tuple(real.shape)} and {tuple(fake.shape)}")
    if int(steps) != steps or steps < 0:
        raise ValueError(f"steps must be a non-negative integer, got {steps!r}")
    if batch_size < 2:
        raise ValueError(f"batch_size must be >= 2, got {batch_size}")
    torch.manual_seed(int(torch.randint(2 ** 31, (1,), generator=generator)))   # the init
    net = ForgeryCNN(width)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    half = batch_size // 2
    y = torch.cat([torch.zeros(half), torch.ones(half)])
    losses = []
    for _ in range(int(steps)):
        i = torch.randint(len(real), (half,), generator=generator)
        j = torch.randint(len(fake), (half,), generator=generator)
        loss = F.binary_cross_entropy_with_logits(net(torch.cat([real[i], fake[j]])), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return net.eval(), losses


@torch.no_grad()
def scores(net: nn.Module, images, batch_size: int = 1024) -> np.ndarray:
    """The detector's logits (higher: more fake) for (n, 1, N, N) images."""
    x = torch.as_tensor(np.asarray(images), dtype=torch.float32)
    return torch.cat([net(x[i:i + batch_size]) for i in range(0, len(x), batch_size)]).double().numpy()


def detection_auroc(net: nn.Module, real, fake) -> float:
    """AUROC of telling ``fake`` (positive) from ``real`` by the detector's logit."""
    return auroc(scores(net, fake), scores(net, real))
