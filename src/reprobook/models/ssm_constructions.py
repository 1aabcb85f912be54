r"""Hand-built selective SSMs that recognise formal languages exactly (Sarrof, Veitsman & Hahn 2024).

Every recurrence here is a call of Mamba's selective scan
(:func:`reprobook.kernels.selective_scan.selective_scan`) with weights written by hand, so the gate
of each channel is Mamba's non-negative ``a_t = exp(Delta_t A)``; between layers sit position-wise
maps (what an SSM stack's MLPs and projections compute).  Two facts make the constructions exact in
floating point:

* a gate of exactly 1 is ``Delta_t = 0`` (or ``A = 0``): the state is kept bit for bit;
* a gate of exactly 0 is ``Delta_t A`` below about ``-745`` (float64) / ``-104`` (float32), where
  ``exp`` underflows to 0: the state is *overwritten*.  With ``Delta_t = 2^10``, ``A = -1`` and
  ``B = 2^{-10}`` the input ``Delta_t B u_t = u_t`` is written exactly (powers of two).

**Flip-flop** (one layer, one channel, one state): ``Delta = 2^10`` at writes and 0 elsewhere,
``u_t`` = the written bit, ``C = 1``; the output at a read is the stored bit.

**Dyck(K, h)** (no stack):

* layer 1, the depth ``d_t``: ``A = 0`` (gate 1), ``Delta B u = +1`` at an open, ``-1`` at a close;
* layer 2, the bracket type open at each depth: for every level ``l = 1..h`` and bit
  ``j < m = ceil(log2 K)`` one channel whose gate is 0 exactly when an open bracket brings the depth
  to ``l`` (it then stores bit ``j`` of the type) and 1 otherwise: ``h * m`` channels holding one
  bit each, whatever the length;
* read-out (position-wise): at a close the stored type at the closed level ``d_t + 1`` must equal
  the closing type, and ``0 <= d_t <= h``; the tokens allowed next follow from ``d_t`` and the type
  stored at level ``d_t`` (the paper's next-token view of recognition needs only these two layers);
* for membership of a whole string, layer 3 is a 1-bit latch (gate 0 and input 1 at a failed
  check, gate 1 otherwise); accept iff the latch is 0 and ``d_T = 0``.

**Signed-gate PARITY** (later work, not this paper): ``h_t = a_t h_{t-1}`` with ``a_t = -1`` on a
``1`` (:func:`reprobook.kernels.selective_scan.linear_scan`) gives ``h_t = (-1)^{\#1}``.
"""
from __future__ import annotations

import math

import torch

from ..data.formal_languages import FF_R, FF_VOCAB, FF_W0, FF_W1
from ..kernels.selective_scan import linear_scan, selective_scan

__all__ = ["BIG", "flip_flop_ssm", "DyckSSM", "dyck_ssm", "parity_signed_ssm", "state_bits"]

BIG = 2.0 ** 10  # Delta at an overwrite: exp(-BIG) == 0 in float32 and float64


def _tokens(tokens, lo, hi, what):
    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2 or tokens.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"{what} tokens must be an integer tensor [n, L], got "
                         f"{getattr(tokens, 'shape', type(tokens))}")
    if tokens.numel() and (tokens.min() < lo or tokens.max() >= hi):
        raise ValueError(f"{what} tokens must lie in [{lo}, {hi}), got {int(tokens.min())}..{int(tokens.max())}")
    return tokens


def _scan(u, delta, A, B, C, dtype, impl):
    """One layer: ``u, delta: [n, D, L]``, ``A, B, C: [D, 1]`` time-invariant (selectivity is all
    in ``delta`` and ``u``). Returns the per-channel outputs ``[n, D, L]``."""
    return selective_scan(u.to(dtype), delta.to(dtype), A.to(dtype), B.to(dtype), C.to(dtype), impl=impl)


def flip_flop_ssm(tokens: torch.Tensor, leak: float = 0.0, dtype=torch.float64,
                  impl: str = "chunked") -> torch.Tensor:
    """Stored bit after each token, ``[n, L]`` (the answer at reads is ``> 0.5``).

    ``leak > 0`` is a control: reads and ignores get ``Delta = leak`` instead of 0, so their gate is
    ``exp(-leak) < 1`` and the stored bit fades over long gaps.
    """
    tokens = _tokens(tokens, 0, FF_VOCAB, "flip-flop")
    write = (tokens == FF_W0) | (tokens == FF_W1)
    bit = (tokens == FF_W1).to(dtype)
    delta = torch.where(write, torch.tensor(BIG, dtype=dtype), torch.tensor(float(leak), dtype=dtype))
    one = torch.ones(1, 1)
    y = _scan(bit[:, None], delta[:, None], -one, one / BIG, one, dtype, impl)
    return y[:, 0]


class DyckSSM:
    """The Dyck(K, h) construction (module docstring), with its per-layer states kept for
    inspection.  ``bits_per_level`` and ``levels`` can be set below ``ceil(log2 K)`` and ``h`` (a
    recogniser with less memory, a control); ``encoding="one-hot"`` stores each type in ``K``
    one-bit channels instead of ``ceil(log2 K)`` (the same function with more memory).
    """

    def __init__(self, K: int, h: int, bits_per_level: int | None = None, levels: int | None = None,
                 encoding: str = "binary", dtype=torch.float64, impl: str = "chunked"):
        if isinstance(K, bool) or not isinstance(K, int) or K < 1:
            raise ValueError(f"K must be a positive int, got {K!r}")
        if isinstance(h, bool) or not isinstance(h, int) or h < 1:
            raise ValueError(f"h must be a positive int, got {h!r}")
        if encoding not in ("binary", "one-hot"):
            raise ValueError(f"encoding must be 'binary' or 'one-hot', got {encoding!r}")
        self.K, self.h, self.encoding, self.dtype, self.impl = K, h, encoding, dtype, impl
        full = max(1, math.ceil(math.log2(K))) if encoding == "binary" else K
        self.m = full if bits_per_level is None else int(bits_per_level)
        self.levels = h if levels is None else int(levels)
        if not (0 <= self.m <= full and 0 <= self.levels <= h):
            raise ValueError(f"bits_per_level must be in [0, {full}] and levels in [0, {h}]")

    @property
    def storage_channels(self) -> int:
        """Channels of layer 2 (one bit each): ``levels * m``."""
        return self.levels * self.m

    def _code(self, k: torch.Tensor) -> torch.Tensor:
        """The stored code of bracket type ``k``: ``[..., m]`` bits (binary or one-hot)."""
        if self.m == 0:
            return torch.zeros(*k.shape, 0, dtype=torch.long)
        if self.encoding == "binary":
            return torch.stack([(k >> j) & 1 for j in range(self.m)], -1)
        return torch.stack([(k == j).long() for j in range(self.m)], -1)

    def run(self, tokens: torch.Tensor) -> dict:
        """All layers on ``tokens [n, L]``. Returns a dict with ``depth [n, L]``, ``storage
        [n, levels, m, L]``, ``ok [n, L]`` (each token's check), ``latch [n, L]``, ``accept [n]``
        and ``next_allowed [n, L, 2K + 1]`` (meaningful on valid prefixes)."""
        K, h, m, lv, dt = self.K, self.h, self.m, self.levels, self.dtype
        tokens = _tokens(tokens, 0, 2 * K, f"Dyck({K}, {h})")
        n, L = tokens.shape
        k, closing = tokens // 2, (tokens % 2).bool()
        one = torch.ones(1, 1)
        # layer 1: depth counter, gate 1 (A = 0), input +-1
        sign = torch.where(closing, -1.0, 1.0).to(dt)
        depth = _scan(sign[:, None], torch.ones(n, 1, L, dtype=dt), 0 * one, one, one, dt, self.impl)[:, 0]
        d = depth.round().long()
        # layer 2: per (level, bit) channel, overwrite when an open reaches that level
        if lv * m:
            lvl = torch.arange(1, lv + 1)[:, None].expand(lv, m).reshape(-1)          # [lv*m]
            opens_here = (~closing)[:, None, :] & (d[:, None, :] == lvl[None, :, None])
            code = self._code(k).permute(0, 2, 1).repeat(1, lv, 1).to(dt)          # [n, lv*m, L]
            delta = opens_here.to(dt) * BIG
            Dc = lv * m
            ones = torch.ones(Dc, 1)
            store = _scan(code, delta, -ones, ones / BIG, ones, dt, self.impl)
            storage = store.reshape(n, lv, m, L)
        else:
            storage = torch.zeros(n, lv, m, L, dtype=dt)
        # position-wise read-out: the code stored at level l, as integers
        stored = storage.round().long()                                            # [n, lv, m, L]
        codes = self._code(torch.arange(K))                                        # [K, m]

        def type_at(level):  # [n, L] -> stored code at that level, compared with every type
            idx = (level - 1).clamp(0, max(lv - 1, 0))
            if lv == 0:
                return torch.zeros(n, L, m, dtype=torch.long), torch.zeros(n, L, dtype=torch.bool)
            s = stored.gather(1, idx[:, None, None, :].expand(n, 1, m, L))[:, 0].permute(0, 2, 1)
            return s, (level >= 1) & (level <= lv)

        closed_code, closed_known = type_at(d + 1)
        match = (closed_code == self._code(k)).all(-1)
        # a close needs its level stored (levels < h cannot check deeper closes: they pass blindly)
        type_ok = ~closing | match | ~closed_known
        ok = type_ok & (d >= 0) & (d <= h)
        # layer 3: 1-bit latch, set for good at the first failed check
        fail = (~ok).to(dt)[:, None]
        latch = _scan(torch.ones_like(fail), fail * BIG, -one, one / BIG, one, dt, self.impl)[:, 0]
        accept = (latch[:, -1] < 0.5) & (d[:, -1] == 0) if L else torch.ones(n, dtype=torch.bool)
        # next-token view: any open below depth h, the close of the type at the top, or the end
        top_code, top_known = type_at(d)
        top_type = (top_code[..., None, :] == codes[None, None]).all(-1)           # [n, L, K]
        allowed = torch.zeros(n, L, 2 * K + 1, dtype=torch.bool)
        allowed[..., 0:2 * K:2] = (d < h)[..., None]
        allowed[..., 1:2 * K:2] = top_type & (d >= 1)[..., None] & top_known[..., None]
        allowed[..., 2 * K] = d == 0
        return dict(depth=depth, storage=storage, ok=ok, latch=latch, accept=accept,
                    next_allowed=allowed)


def dyck_ssm(tokens: torch.Tensor, K: int, h: int, **options) -> torch.Tensor:
    """Membership in Dyck(K, h) by the hand-built SSM: ``bool [n]``."""
    return DyckSSM(K, h, **options).run(tokens)["accept"]


def parity_signed_ssm(bits: torch.Tensor, impl: str = "chunked") -> torch.Tensor:
    """Prefix parities from one signed-gate channel (``a = -1`` on a 1, ``+1`` on a 0, ``h_0 = 1``):
    ``[n, L]`` of 0/1.  Not expressible with Mamba's gates ``exp(Delta A) >= 0``."""
    bits = _tokens(bits, 0, 2, "parity")
    gate = 1.0 - 2.0 * bits.double()
    h = linear_scan(gate, torch.zeros_like(gate), torch.ones(bits.shape[0], dtype=torch.float64), impl=impl)
    return (h < 0).long()


def state_bits(values: torch.Tensor, channel_dims: int = 1) -> float:
    """Bits needed to write down a set of channels exactly: the sum over channels of
    ``log2(number of distinct values the channel took)``.  ``values``: ``[n, *channels, L]`` with
    ``channel_dims`` channel dimensions after the first."""
    if values.dim() < 2 + channel_dims - 1:
        raise ValueError(f"values must be [n, channels..., L], got shape {tuple(values.shape)}")
    v = values.movedim(0, -1).flatten(channel_dims)           # [*channels, n*L]
    v = v.reshape(-1, v.shape[-1])
    return float(sum(math.log2(max(1, torch.unique(row).numel())) for row in v))
