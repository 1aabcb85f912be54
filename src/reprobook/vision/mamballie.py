r"""MambaLLIE (Weng et al., NeurIPS 2024): a global-then-local state-space low-light enhancer.

Written from the paper and the official ``basicsr/archs/MambaLLIE_arch.py``, at a small size.

**Illumination prior.** From the dark input :math:`x` the network forms the 5-channel map
:math:`p = [x,\ \max_c x,\ \operatorname{mean}_c x]` (the max over colour channels is the classic
Retinex estimate of illumination), average-pooled to every scale; a 3x3 convolution turns it into
*illumination features* :math:`g` of width :math:`D = \text{expand}\cdot C` for each stage, and every
block refines them, :math:`g \leftarrow \mathrm{GELU}(\mathrm{GConv}_{3\times3}(g))`.

**GLSSB** (global-then-local state-space block), on features :math:`f` of width :math:`C`::

    f = f + LESSM(LN(f), g)
    f = f + IRSK(LN(f), g)

**LESSM** (local-enhanced state-space module): VMamba's SS2D (:class:`reprobook.vision.cross_scan.SS2D`:
``(u, z) = W_in f``, ``u = SiLU(DWConv(u))``, four directional selective scans, merged) with an
*augmented local bias* added to the merged global scan output before the gated output projection:

.. math:: y = \sum_{k=1}^{4} \mathrm{scan}_k(u) + \mathrm{SiLU}(\mathrm{DWConv}_{3\times3}(g)),\qquad
          \mathrm{out} = W_{out}\,(\mathrm{LN}(y) \odot \mathrm{SiLU}(z))

The scans carry global context (every pixel reaches every other through one of four orders); the
bias re-injects a 2-D local, illumination-conditioned term that a 1-D unrolled scan loses.

**IRSK** (implicit Retinex-aware selective kernel) feed-forward, hidden width :math:`D`::

    h = W_in f;  a1 = DWConv3x3(h);  a2 = DWConv5x5(a1)        # two receptive fields
    (s1, s2) = Conv3x3(g) -> 2 maps                            # illumination-driven selection
    h = h + (a1 * sigmoid(s1) + a2 * sigmoid(s2)) * h
    out = W_out GELU(DWConv3x3(h))

The per-pixel sigmoid maps choose between the small and the large kernel according to the local
illumination (a dark region asks for more smoothing), the spatially varying selection the paper
calls implicitly Retinex-aware.

**Network** (two scales here; the paper uses three): stage 1 at full resolution, a strided 4x4
convolution to width :math:`2C` at half resolution (stage 2), a transposed convolution back,
concatenated with stage 1 and fused by a 3x3 convolution (stage 3), then ``out = Conv(f) + x``.

**Ablation switches** (:class:`MambaLLIE` arguments):

* ``local_bias=False``: LESSM without the local term (plain SS2D);
* ``prior="rgb"``: the illumination features are computed from the RGB input alone, without the
  max/mean illumination prior channels;
* ``ffn="gdfn"``: IRSK replaced by Restormer's gated-Dconv FFN
  (:class:`reprobook.vision.restorers.GDFN`), which uses no illumination features.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..kernels.selective_scan import selective_scan
from .cross_scan import SS2D, cross_merge
from .restorers import GDFN, ChannelLayerNorm, check_image_batch

__all__ = ["illumination_prior", "LESSM", "IRSK", "GLSSB", "MambaLLIE", "PRIORS", "FFNS"]

PRIORS = ("max-mean", "rgb")
FFNS = ("irsk", "gdfn")


def illumination_prior(x: torch.Tensor, prior: str = "max-mean") -> torch.Tensor:
    """``[x, max_c x, mean_c x]`` (5 channels) for ``prior="max-mean"``, ``x`` itself for ``"rgb"``."""
    check_image_batch(x)
    if prior == "max-mean":
        return torch.cat([x, x.amax(1, keepdim=True), x.mean(1, keepdim=True)], 1)
    if prior == "rgb":
        return x
    raise ValueError(f"prior must be one of {PRIORS}, got {prior!r}")


class LESSM(nn.Module):
    """SS2D with the illumination-guided local bias (module docstring); ``local_bias=False`` is SS2D."""

    def __init__(self, dim: int, d_state: int = 8, expand: int = 2, local_bias: bool = True,
                 impl: str = "chunked"):
        super().__init__()
        self.ss2d = SS2D(dim, d_state=d_state, expand=expand, directions=4, impl=impl)
        self.d_inner = self.ss2d.d_inner
        self.local = (nn.Conv2d(self.d_inner, self.d_inner, 3, padding=1, groups=self.d_inner)
                      if local_bias else None)

    def global_scan(self, f: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The merged four-direction scan ``y [B, D, H, W]`` and the gate ``z [B, H, W, D]``."""
        s = self.ss2d
        Bsz, _, H, W = f.shape
        p = s.scan_parameters(f)
        K, D, L = s.K, s.d_inner, H * W
        y = selective_scan(p["u"].reshape(Bsz, K * D, L), p["delta"].reshape(Bsz, K * D, L),
                           p["A"].reshape(K * D, s.d_state), p["B"], p["C"], s.Ds, impl=s.impl)
        return cross_merge(y.view(Bsz, K, D, L), H, W), p["z"]

    def forward(self, f: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        y, z = self.global_scan(f)
        if self.local is not None:
            if g.shape != y.shape:
                raise ValueError(f"illumination features must be {tuple(y.shape)}, got {tuple(g.shape)}")
            y = y + F.silu(self.local(g))
        y = self.ss2d.out_norm(y.permute(0, 2, 3, 1)) * F.silu(z)
        return self.ss2d.out_proj(y).permute(0, 3, 1, 2)


class IRSK(nn.Module):
    """Implicit Retinex-aware selective-kernel feed-forward (module docstring)."""

    def __init__(self, dim: int, expand: int = 2):
        super().__init__()
        D = dim * expand
        self.project_in = nn.Conv2d(dim, D, 1)
        self.dw3 = nn.Conv2d(D, D, 3, padding=1, groups=D)
        self.dw5 = nn.Conv2d(D, D, 5, padding=2, groups=D)
        self.select = nn.Conv2d(D, 2, 3, padding=1)
        self.dw_out = nn.Conv2d(D, D, 3, padding=1, groups=D)
        self.project_out = nn.Conv2d(D, dim, 1)

    def forward(self, f: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        h = self.project_in(f)
        a1 = self.dw3(h)
        a2 = self.dw5(a1)
        s1, s2 = self.select(g).chunk(2, dim=1)
        h = h + (a1 * torch.sigmoid(s1) + a2 * torch.sigmoid(s2)) * h
        return self.project_out(F.gelu(self.dw_out(h)))


class GLSSB(nn.Module):
    """Global-then-local state-space block: LN, LESSM, LN, IRSK (or GDFN), both residual."""

    def __init__(self, dim: int, d_state: int = 8, expand: int = 2, local_bias: bool = True,
                 ffn: str = "irsk", impl: str = "chunked"):
        super().__init__()
        if ffn not in FFNS:
            raise ValueError(f"ffn must be one of {FFNS}, got {ffn!r}")
        D = dim * expand
        self.refine = nn.Conv2d(D, D, 3, padding=1, groups=dim, bias=False)
        self.n1, self.lessm = ChannelLayerNorm(dim), LESSM(dim, d_state, expand, local_bias, impl)
        self.n2 = ChannelLayerNorm(dim)
        self.ffn = IRSK(dim, expand) if ffn == "irsk" else GDFN(dim, float(expand))

    def forward(self, f: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        g = F.gelu(self.refine(g))
        f = f + self.lessm(self.n1(f), g)
        f = f + self.ffn(self.n2(f), g)
        return f, g


class MambaLLIE(nn.Module):
    """Two-scale MambaLLIE (module docstring) of width ``width``; ``depths`` blocks per stage."""

    def __init__(self, width: int = 16, depths: tuple[int, int, int] = (1, 1, 1), d_state: int = 8,
                 expand: int = 2, local_bias: bool = True, prior: str = "max-mean", ffn: str = "irsk",
                 impl: str = "chunked"):
        super().__init__()
        if isinstance(width, bool) or not isinstance(width, int) or width < 1:
            raise ValueError(f"width must be a positive int, got {width!r}")
        if len(depths) != 3 or any(int(d) != d or d < 1 for d in depths):
            raise ValueError(f"depths must be three positive ints, got {depths!r}")
        if prior not in PRIORS:
            raise ValueError(f"prior must be one of {PRIORS}, got {prior!r}")
        self.prior = prior
        P = 5 if prior == "max-mean" else 3
        C, E = width, expand
        kw = dict(d_state=d_state, expand=expand, local_bias=local_bias, ffn=ffn, impl=impl)
        self.embed = nn.Conv2d(3, C, 3, padding=1, bias=False)
        self.illum1 = nn.Conv2d(P, E * C, 3, padding=1)
        self.stage1 = nn.ModuleList([GLSSB(C, **kw) for _ in range(depths[0])])
        self.down = nn.Conv2d(C, 2 * C, 4, stride=2, padding=1, bias=False)
        self.illum2 = nn.Conv2d(P, E * 2 * C, 3, padding=1)
        self.stage2 = nn.ModuleList([GLSSB(2 * C, **kw) for _ in range(depths[1])])
        self.up = nn.ConvTranspose2d(2 * C, C, 2, stride=2)
        self.fuse = nn.Conv2d(2 * C, C, 3, padding=1, bias=False)
        self.illum3 = nn.Conv2d(P, E * C, 3, padding=1)
        self.stage3 = nn.ModuleList([GLSSB(C, **kw) for _ in range(depths[2])])
        self.out = nn.Conv2d(C, 3, 3, padding=1)

    @staticmethod
    def _run(blocks, f, g):
        for b in blocks:
            f, g = b(f, g)
        return f

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_image_batch(x, multiple=2)
        p = illumination_prior(x, self.prior)
        p2 = F.avg_pool2d(p, 2)
        f1 = self._run(self.stage1, self.embed(x), self.illum1(p))
        f2 = self._run(self.stage2, self.down(f1), self.illum2(p2))
        f3 = self.fuse(torch.cat([self.up(f2), f1], 1))
        f3 = self._run(self.stage3, f3, self.illum3(p))
        return self.out(f3) + x
