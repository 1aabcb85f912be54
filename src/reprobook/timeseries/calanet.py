r"""CALANet: cheap all-layer aggregation for sensor-based activity recognition (Park, Kim & Lee,
NeurIPS 2024), written from the paper's description and the official ``programs/models.py``.

A window ``x [B, C_in, T]`` goes through a stem (Conv1d, kernel 5, ``'same'``, to ``width``
channels, then max-pool 3 / stride 2, so the length becomes :math:`\lceil T/2\rceil`), then through
``depth`` = :math:`L` **CALA blocks**. Block :math:`l` (input :math:`c_{l-1}` channels, length
:math:`t_{l-1}`):

1. if it is a pooling block (the *scalable layer aggregation pool*, SLAP: :func:`pool_schedule`),
   adaptive max-pool to :math:`t_l=\lfloor t_{l-1}/2\rfloor` and double the channels,
   :math:`c_l=2c_{l-1}`; otherwise :math:`t_l=t_{l-1}`, :math:`c_l=c_{l-1}`;
2. a **grouped** convolution with :math:`g` groups (the paper: :math:`g=L`), kernel :math:`k`, no
   bias, then batch norm and ReLU; its output is channel-shuffled (ShuffleNet) and passed on;
3. a *learnable channel-wise transformation matrix* (LCTM): a Conv1d from :math:`c_l` to
   :math:`c_l/L` channels whose kernel spans the whole length :math:`t_l`, then ReLU. It maps the
   block's feature map to one vector :math:`g_l\in\mathbb R^{c_l/L}`.

The classifier is one linear layer on :math:`[g_1;\dots;g_L]`: it reads **every** layer.

**Cost** (multiply-adds counted twice, as ``torch.utils.flop_counter`` does; biases, norms and
activations not counted). Block :math:`l` costs

.. math:: F_l = \underbrace{2\,\frac{c_{l-1}'\,c_l\,k\,t_l}{g}}_{\text{grouped conv}}
          + \underbrace{2\,c_l\,\frac{c_l}{L}\,t_l}_{\text{LCTM}}

(:math:`c_{l-1}'` the conv's input channels, :func:`block_flops`). Without pooling
(:math:`c_l=c`, :math:`t_l=t`) and with :math:`g=L` the blocks together cost
:math:`L\,F = 2c^2t(k+1)`, **independent of** :math:`L`: the paper's claim that depth is free, and
:math:`(k+1)/k` times one ordinary convolution :math:`2c^2kt` at the same width. A pooling block
doubles :math:`c` and halves :math:`t`, so :math:`c\,t` (and the LCTM cost) stays put while the
convolution cost doubles.

**Readouts.** ``readout="all"`` is CALANet. ``readout="last"`` is the last-layer ablation: the same
backbone, but only the last block has an LCTM, of width :math:`\sum_l c_l/L` so that the classifier
sees a vector of the same size. Because :math:`c_l t_l` is the same for every block, the ablation's
single LCTM costs exactly what CALANet's :math:`L` LCTMs cost together (and holds as many weights):
the two differ only in *which* layers the classifier reads.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["pool_schedule", "channel_shuffle", "block_flops", "CALABlock", "CALANet", "READOUTS"]

READOUTS = ("all", "last")


def _pos_int(name, v):
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"{name} must be a positive int, got {v!r}")
    return v


def pool_schedule(length: int, depth: int) -> list[int]:
    """Indices of the blocks that halve the length (SLAP), as the official ``pool_per_T``.

    The number of pools grows with the *input* window length ``length``: 0 below 64 samples, then
    1, 2, 3, 4 from 64, 128, 256, 512; they are spread evenly over the ``depth`` blocks (the
    remainder of ``depth / (pools + 1)`` goes to the first stretches).
    """
    _pos_int("length", length)
    _pos_int("depth", depth)
    n_pools = sum(length >= t for t in (64, 128, 256, 512))
    if n_pools == 0:
        return []
    split = [depth // (n_pools + 1)] * (n_pools + 1)
    for i in range(depth - sum(split)):
        split[i] += 1
    idx, pos = [], -1
    for s in split[:-1]:
        pos += s
        idx.append(pos)
    return idx


def channel_shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    """ShuffleNet's channel shuffle of ``x [B, C, T]``: channel ``g * (C/groups) + j`` moves to
    ``j * groups + g``, so the next grouped convolution mixes every group."""
    if x.dim() != 3:
        raise ValueError(f"channel_shuffle needs x [B, C, T], got shape {tuple(x.shape)}")
    b, c, t = x.shape
    if c % groups:
        raise ValueError(f"{c} channels do not split into {groups} groups")
    return x.view(b, groups, c // groups, t).transpose(1, 2).reshape(b, c, t)


def block_flops(c_in: int, c_out: int, groups: int, length: int, kernel: int = 5,
                project: int | None = None) -> int:
    """Closed-form FLOPs of one CALA block per window (see the module): grouped conv
    ``2 c_in c_out k t / g`` plus the LCTM ``2 c_out p t`` with ``p`` output channels
    (``project``; ``None`` means ``c_out / groups``, 0 means no LCTM). ``length`` is the block's
    working length ``t`` (after its pool)."""
    for n, v in (("c_in", c_in), ("c_out", c_out), ("groups", groups), ("length", length),
                 ("kernel", kernel)):
        _pos_int(n, v)
    p = c_out // groups if project is None else project
    return 2 * c_in * c_out * kernel * length // groups + 2 * c_out * p * length


class CALABlock(nn.Module):
    """One CALA block (see the module). ``length`` is the block's working length (after its pool);
    ``project`` the LCTM's output channels (0: no LCTM, the block returns ``None`` for ``g``)."""

    def __init__(self, c_in: int, c_out: int, groups: int, length: int, pool: bool,
                 kernel: int = 5, project: int = 0):
        super().__init__()
        if c_in % groups or c_out % groups:
            raise ValueError(f"channels {c_in} -> {c_out} must both divide into {groups} groups")
        self.groups, self.pool, self.length = groups, bool(pool), length
        self.conv = nn.Conv1d(c_in, c_out, kernel, padding="same", bias=False, groups=groups)
        self.bn = nn.BatchNorm1d(c_out)
        self.lctm = nn.Conv1d(c_out, project, length) if project else None

    def forward(self, x: torch.Tensor):
        if self.pool:
            x = F.adaptive_max_pool1d(x, x.shape[-1] // 2)
        if x.shape[-1] != self.length:
            raise ValueError(f"block built for length {self.length}, got {x.shape[-1]}")
        h = channel_shuffle(F.relu(self.bn(self.conv(x))), self.groups)
        g = F.relu(self.lctm(h)).flatten(1) if self.lctm is not None else None
        return h, g


class CALANet(nn.Module):
    """CALANet for windows ``[B, n_channels, length]`` (see the module).

    ``depth`` blocks of grouped convolutions with ``groups`` groups (default ``depth``, as in the
    paper; ``groups=1`` gives ordinary convolutions, the un-cheap variant), stem width ``width``
    (the official code uses 64, 128 when the input has more than 64 channels), ``readout`` one of
    :data:`READOUTS`. ``forward`` returns logits ``[B, n_classes]``.
    """

    def __init__(self, n_channels: int, n_classes: int, length: int, depth: int = 8,
                 width: int = 64, kernel: int = 5, readout: str = "all", groups: int | None = None):
        super().__init__()
        for n, v in (("n_channels", n_channels), ("n_classes", n_classes), ("length", length),
                     ("depth", depth), ("width", width), ("kernel", kernel)):
            _pos_int(n, v)
        if readout not in READOUTS:
            raise ValueError(f"unknown readout {readout!r}; choose one of {READOUTS}")
        groups = depth if groups is None else _pos_int("groups", groups)
        if width % depth:
            raise ValueError(f"width {width} must be a multiple of depth {depth} (each LCTM has "
                             "width/depth outputs)")
        self.n_channels, self.length, self.depth, self.readout = n_channels, length, depth, readout
        self.stem = nn.Conv1d(n_channels, width, kernel, padding="same")
        pools = set(pool_schedule(length, depth))
        t, c = math.ceil(length / 2), width
        self.shapes = []                                     # (c_in, c_out, t) of every block
        for i in range(depth):
            c_in = c
            if i in pools:
                t, c = t // 2, 2 * c
            if t < 1:
                raise ValueError(f"window length {length} is too short for depth {depth}")
            self.shapes.append((c_in, c, t))
        self.feature_dim = sum(c // depth for _, c, _ in self.shapes)
        proj = [c // depth for _, c, _ in self.shapes] if readout == "all" else \
            [0] * (depth - 1) + [self.feature_dim]
        self.blocks = nn.ModuleList(CALABlock(ci, co, groups, tt, i in pools, kernel, p)
                                    for i, ((ci, co, tt), p) in enumerate(zip(self.shapes, proj)))
        self.fc = nn.Linear(self.feature_dim, n_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The classifier's input ``[B, feature_dim]``: every block's LCTM output, concatenated
        (``readout="all"``), or the last block's alone (``"last"``)."""
        if x.dim() != 3 or x.shape[1] != self.n_channels or x.shape[2] != self.length:
            raise ValueError(f"CALANet expects x [B, {self.n_channels}, {self.length}], "
                             f"got shape {tuple(x.shape)}")
        h = F.max_pool1d(self.stem(x), 3, 2, 1)
        out = []
        for block in self.blocks:
            h, g = block(h)
            if g is not None:
                out.append(g)
        return torch.cat(out, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x))
