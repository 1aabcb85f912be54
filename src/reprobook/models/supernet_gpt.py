r"""A GPT-2-style weight-sharing supernet: every sub-network is a slice of the largest one.

The search space (a miniature of HW-GPT-Bench's GPT-2 spaces) is described by :class:`GPTSpace`:

* embedding width :math:`e` (one for the whole network),
* number of layers :math:`l` (the first :math:`l` blocks are kept),
* per layer, the number of attention heads :math:`h_i` (head dimension ``head_dim`` is fixed, so a
  layer's attention works in :math:`h_i d_h` dimensions) and the MLP ratio :math:`r_i` (hidden width
  :math:`r_i e`).

An architecture is an :class:`Arch` ``(e, heads, ratios)`` with ``len(heads) == len(ratios) == l``.

**Slicing.** The supernet holds the weights of the largest choice of every dimension. A
sub-network uses the *first* rows/columns of each matrix (the convention of once-for-all style
supernets and of HW-GPT-Bench's GPT-2 supernet): token and position embeddings keep their first
:math:`e` columns; in layer :math:`i` the query/key/value projections keep the first :math:`h_i`
heads (rows) and :math:`e` input columns, the output projection the corresponding columns and
first :math:`e` rows; the MLP keeps its first :math:`r_i e` hidden units; layer norms their first
:math:`e` scales and shifts; the LM head its first :math:`e` columns. Pre-norm blocks::

    x <- x + W_o Attn(LN_1(x) W_{qkv});   x <- x + W_2 GELU(W_1 LN_2(x))

:func:`gpt_forward` is the one forward pass, used by the supernet (on views of its weights) and by
:class:`SubGPT` (a standalone copy of one sub-network's contiguous weights, for timing and
deployment): the two give identical outputs, checked in the unit tests.

**Training with the sandwich rule** (:meth:`SuperGPT.sandwich_loss`): each step averages the
losses of the largest, the smallest and ``n_random`` random sub-networks on the same batch, so that
the shared weights serve the whole space and not only the full network.

:meth:`GPTSpace.params` and :meth:`GPTSpace.flops` give the analytic parameter count and forward
multiply-accumulate count (times two) of a sub-network, used as surrogate features.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["Arch", "GPTSpace", "SuperGPT", "SubGPT", "gpt_forward"]


@dataclass(frozen=True)
class Arch:
    """A sub-network: embedding width ``e``, and per layer its heads and MLP ratio."""

    e: int
    heads: tuple[int, ...]
    ratios: tuple[int, ...]

    def __post_init__(self):
        if len(self.heads) != len(self.ratios) or not self.heads:
            raise ValueError(f"heads {self.heads} and ratios {self.ratios} must be non-empty and "
                             "of the same length (one entry per layer)")

    @property
    def layers(self) -> int:
        return len(self.heads)

    def __str__(self) -> str:
        return f"e{self.e}-l{self.layers}-h{''.join(map(str, self.heads))}-r{''.join(map(str, self.ratios))}"


def _choices(name, xs):
    xs = tuple(int(x) for x in xs)
    if not xs or any(x < 1 for x in xs) or len(set(xs)) != len(xs):
        raise ValueError(f"{name} must be distinct positive ints, got {xs!r}")
    return tuple(sorted(xs))


@dataclass(frozen=True)
class GPTSpace:
    """The choices of every dimension, and the fixed sizes (vocabulary, context, head dim)."""

    embed: tuple[int, ...] = (32, 48, 64)
    layers: tuple[int, ...] = (2, 3, 4)
    heads: tuple[int, ...] = (2, 4, 8)
    ratios: tuple[int, ...] = (2, 3, 4)
    head_dim: int = 8
    vocab_size: int = 64
    seq_len: int = 32

    def __post_init__(self):
        for name in ("embed", "layers", "heads", "ratios"):
            object.__setattr__(self, name, _choices(name, getattr(self, name)))
        for name in ("head_dim", "vocab_size", "seq_len"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")

    # -- the extreme and random members -------------------------------------------------------
    def largest(self) -> Arch:
        L = self.layers[-1]
        return Arch(self.embed[-1], (self.heads[-1],) * L, (self.ratios[-1],) * L)

    def smallest(self) -> Arch:
        L = self.layers[0]
        return Arch(self.embed[0], (self.heads[0],) * L, (self.ratios[0],) * L)

    def sample(self, rng: np.random.Generator) -> Arch:
        """A uniformly random architecture (every choice drawn independently)."""
        L = int(rng.choice(self.layers))
        return Arch(int(rng.choice(self.embed)), tuple(int(h) for h in rng.choice(self.heads, L)),
                    tuple(int(r) for r in rng.choice(self.ratios, L)))

    def check(self, arch: Arch) -> Arch:
        if not isinstance(arch, Arch):
            raise TypeError(f"expected an Arch, got {type(arch).__name__}")
        bad = [(n, v) for n, v, ok in (("e", arch.e, self.embed), ("layers", arch.layers, self.layers))
               if v not in ok]
        bad += [("heads", h) for h in arch.heads if h not in self.heads]
        bad += [("ratio", r) for r in arch.ratios if r not in self.ratios]
        if bad:
            raise ValueError(f"{arch} is not in the space: {bad[0][0]}={bad[0][1]} is not a choice")
        return arch

    # -- integer genome (for evolutionary search) ---------------------------------------------
    @property
    def genome_size(self) -> int:
        return 2 + 2 * self.layers[-1]

    def genome_bounds(self) -> np.ndarray:
        """Upper bounds (inclusive) of every gene; lower bounds are 0."""
        L = self.layers[-1]
        return np.array([len(self.embed) - 1, len(self.layers) - 1]
                        + [len(self.heads) - 1] * L + [len(self.ratios) - 1] * L)

    def decode(self, genome) -> Arch:
        """Architecture of an integer genome ``[e, l, h_1..h_L, r_1..r_L]`` of choice indices;
        genes of layers beyond ``l`` are ignored."""
        g = np.asarray(genome)
        if g.shape != (self.genome_size,):
            raise ValueError(f"a genome has {self.genome_size} genes, got shape {g.shape}")
        g = np.clip(np.rint(g).astype(int), 0, self.genome_bounds())
        L, Lmax = self.layers[g[1]], self.layers[-1]
        return Arch(self.embed[g[0]], tuple(self.heads[i] for i in g[2:2 + L]),
                    tuple(self.ratios[i] for i in g[2 + Lmax:2 + Lmax + L]))

    # -- analytic size ------------------------------------------------------------------------
    def params(self, arch: Arch) -> int:
        """Parameters of the sub-network (embeddings, blocks, final norm, LM head)."""
        e, dh, V, T = arch.e, self.head_dim, self.vocab_size, self.seq_len
        n = V * e + T * e + 2 * e + V * e                      # tokens, positions, final LN, head
        for h, r in zip(arch.heads, arch.ratios):
            a = h * dh
            n += 4 * e                                         # two layer norms
            n += 3 * a * e + a * e                             # qkv and output projection
            n += 2 * r * e * e + r * e + e                     # MLP with biases
        return int(n)

    def flops(self, arch: Arch) -> int:
        """Forward FLOPs (2 x multiply-adds) for one sequence of ``seq_len`` tokens."""
        e, dh, V, T = arch.e, self.head_dim, self.vocab_size, self.seq_len
        macs = T * V * e                                       # LM head
        for h, r in zip(arch.heads, arch.ratios):
            a = h * dh
            macs += T * 4 * a * e                              # projections
            macs += T * T * a                                  # scores and weighted values (causal: ~half of 2 T^2 a)
            macs += T * 2 * r * e * e                          # MLP
        return int(2 * macs)

    def features(self, archs) -> np.ndarray:
        """Surrogate inputs, one row per architecture: e, l, heads and ratios per layer (0 beyond
        l), number of parameters and FLOPs."""
        Lmax = self.layers[-1]
        rows = []
        for a in archs:
            pad = (0,) * (Lmax - a.layers)
            rows.append([a.e, a.layers, *a.heads, *pad, *a.ratios, *pad, self.params(a), self.flops(a)])
        return np.asarray(rows, dtype=float)


def gpt_forward(p: dict, arch: Arch, tokens: torch.Tensor, head_dim: int) -> torch.Tensor:
    """Logits ``[B, T, V]`` of the sub-network ``arch`` whose weights are ``p`` (already sliced:
    see :meth:`SuperGPT.sliced`)."""
    B, T = tokens.shape
    e = arch.e
    x = F.embedding(tokens, p["tok"]) + p["pos"][:T]
    for i, h in enumerate(arch.heads):
        y = F.layer_norm(x, (e,), p[f"{i}.ln1.w"], p[f"{i}.ln1.b"])
        q, k, v = (F.linear(y, p[f"{i}.{n}"]).view(B, T, h, head_dim).transpose(1, 2) for n in "qkv")
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + F.linear(o.transpose(1, 2).reshape(B, T, h * head_dim), p[f"{i}.o"])
        y = F.layer_norm(x, (e,), p[f"{i}.ln2.w"], p[f"{i}.ln2.b"])
        y = F.gelu(F.linear(y, p[f"{i}.fc1.w"], p[f"{i}.fc1.b"]))
        x = x + F.linear(y, p[f"{i}.fc2.w"], p[f"{i}.fc2.b"])
    x = F.layer_norm(x, (e,), p["lnf.w"], p["lnf.b"])
    return F.linear(x, p["head"])


class SuperGPT(nn.Module):
    """The weight-sharing supernet of a :class:`GPTSpace` (see the module docstring)."""

    def __init__(self, space: GPTSpace, init_std: float = 0.02):
        super().__init__()
        if not isinstance(space, GPTSpace):
            raise TypeError(f"space must be a GPTSpace, got {type(space).__name__}")
        self.space = space
        E, L, V, T = space.embed[-1], space.layers[-1], space.vocab_size, space.seq_len
        A, H = space.heads[-1] * space.head_dim, space.ratios[-1] * space.embed[-1]
        P = nn.Parameter

        def normal(*shape):
            return P(torch.randn(*shape) * init_std)

        self.tok, self.pos, self.head = normal(V, E), normal(T, E), normal(V, E)
        self.lnf_w, self.lnf_b = P(torch.ones(E)), P(torch.zeros(E))
        self.blocks = nn.ModuleList()
        for _ in range(L):
            b = nn.Module()
            b.ln1_w, b.ln1_b, b.ln2_w, b.ln2_b = (P(torch.ones(E)), P(torch.zeros(E)),
                                                  P(torch.ones(E)), P(torch.zeros(E)))
            b.q, b.k, b.v = normal(A, E), normal(A, E), normal(A, E)
            # GPT-2's scaled init of the residual projections
            b.o = P(torch.randn(E, A) * init_std / math.sqrt(2 * L))
            b.fc1_w, b.fc1_b = normal(H, E), P(torch.zeros(H))
            b.fc2_w, b.fc2_b = P(torch.randn(E, H) * init_std / math.sqrt(2 * L)), P(torch.zeros(E))
            self.blocks.append(b)

    def sliced(self, arch: Arch) -> dict:
        """The sub-network's weights as views of the supernet's (gradients flow into them)."""
        self.space.check(arch)
        e, dh = arch.e, self.space.head_dim
        p = {"tok": self.tok[:, :e], "pos": self.pos[:, :e], "head": self.head[:, :e],
             "lnf.w": self.lnf_w[:e], "lnf.b": self.lnf_b[:e]}
        for i, (h, r) in enumerate(zip(arch.heads, arch.ratios)):
            b, a, hid = self.blocks[i], h * dh, r * e
            p.update({f"{i}.ln1.w": b.ln1_w[:e], f"{i}.ln1.b": b.ln1_b[:e],
                      f"{i}.ln2.w": b.ln2_w[:e], f"{i}.ln2.b": b.ln2_b[:e],
                      f"{i}.q": b.q[:a, :e], f"{i}.k": b.k[:a, :e], f"{i}.v": b.v[:a, :e],
                      f"{i}.o": b.o[:e, :a], f"{i}.fc1.w": b.fc1_w[:hid, :e],
                      f"{i}.fc1.b": b.fc1_b[:hid], f"{i}.fc2.w": b.fc2_w[:e, :hid],
                      f"{i}.fc2.b": b.fc2_b[:e]})
        return p

    def forward(self, tokens: torch.Tensor, arch: Arch | None = None) -> torch.Tensor:
        """Logits of sub-network ``arch`` (default: the largest)."""
        if tokens.ndim != 2 or tokens.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"tokens must be a [B, T] integer tensor, got {tuple(tokens.shape)} "
                             f"{tokens.dtype}")
        if tokens.shape[1] > self.space.seq_len:
            raise ValueError(f"sequence length {tokens.shape[1]} exceeds seq_len={self.space.seq_len}")
        arch = self.space.largest() if arch is None else arch
        return gpt_forward(self.sliced(arch), arch, tokens, self.space.head_dim)

    def extract(self, arch: Arch) -> "SubGPT":
        """A standalone copy of sub-network ``arch`` (contiguous weights, no supernet)."""
        with torch.no_grad():
            return SubGPT(arch, {k: v.detach().clone().contiguous() for k, v in self.sliced(arch).items()},
                          self.space.head_dim)

    def sandwich_loss(self, x: torch.Tensor, y: torch.Tensor, rng: np.random.Generator,
                      n_random: int = 2):
        """The sandwich rule: mean cross-entropy of the largest, the smallest and ``n_random``
        random sub-networks on one batch. Returns ``(loss, logs)`` (``train_lm``'s step_loss)."""
        archs = [self.space.largest(), self.space.smallest()] + [self.space.sample(rng)
                                                                 for _ in range(n_random)]
        losses = [F.cross_entropy(self(x, a).flatten(0, 1), y.flatten()) for a in archs]
        return torch.stack(losses).mean(), {"ce_largest": float(losses[0].detach()),
                                            "ce_smallest": float(losses[1].detach())}

    def single_loss(self, arch: Arch):
        """A step loss that trains one sub-network only (standalone training inside a fresh
        supernet: the weights outside the slice get no gradient and play no part)."""
        self.space.check(arch)

        def loss(model, x, y):
            ce = F.cross_entropy(model(x, arch).flatten(0, 1), y.flatten())
            return ce, {"ce": float(ce.detach())}
        return loss


class SubGPT(nn.Module):
    """One sub-network as a standalone module (see :meth:`SuperGPT.extract`)."""

    def __init__(self, arch: Arch, weights: dict, head_dim: int):
        super().__init__()
        self.arch, self.head_dim = arch, int(head_dim)
        self.names = list(weights)
        self.weights = nn.ParameterList(nn.Parameter(w) for w in weights.values())

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        p = dict(zip(self.names, self.weights))
        return gpt_forward(p, self.arch, tokens, self.head_dim)
