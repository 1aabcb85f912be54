r"""Formal languages for state-tracking experiments: flip-flop, PARITY and bounded Dyck.

Every generator takes a ``torch.Generator`` (reproducible draws) and returns int64 tensors; every
language has a *reference* recogniser written in the plainest way (a loop with a stack or a
"last write" register), which is what learned and hand-built recognisers are checked against.

**Flip-flop** (Liu et al. 2023, as used by Sarrof, Veitsman & Hahn 2024): tokens ``w0, w1``
(write 0 / write 1), ``r`` (read), ``i`` (ignore), ids :data:`FF_W0` ... :data:`FF_I`.  The answer
at a read is the bit of the most recent write; a string starts with a write so that every read has
an answer.  Elsewhere the target is :data:`IGNORE` (``-100``, PyTorch's ignore index).

**PARITY**: bits; the target at position ``t`` is the parity of the prefix ``x_1 ... x_t``.

**Dyck(K, h)**: well-nested strings over ``K`` bracket types whose nesting depth never exceeds
``h``.  Token ``2k`` opens type ``k``, token ``2k + 1`` closes it.  A string is in the language
iff every close matches the most recent unclosed open, the depth stays within ``[0, h]``, and the
final depth is 0 (the empty string is in the language).
"""
from __future__ import annotations

import numpy as np
import torch

__all__ = ["IGNORE", "FF_W0", "FF_W1", "FF_R", "FF_I", "FF_VOCAB", "flip_flop", "flip_flop_answers",
           "parity", "parity_answers", "dyck_sample", "dyck_perturb", "dyck_accepts",
           "dyck_next_allowed", "dyck_test_set"]

IGNORE = -100
FF_W0, FF_W1, FF_R, FF_I = 0, 1, 2, 3
FF_VOCAB = 4


def _check_gen(generator):
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")


def _check_pos_int(name, x, minimum=1):
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {x!r}")


# ----------------------------------------------------------------------------------------------
# flip-flop
# ----------------------------------------------------------------------------------------------
def flip_flop(n: int, length: int, p_write: float = 0.1, p_read: float = 0.1, *,
              generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` flip-flop strings of ``length`` tokens: ``(tokens [n, L], targets [n, L])``.

    Position 0 is a write; later positions are a write with probability ``p_write``, a read with
    ``p_read``, otherwise an ignore; written bits are fair coin flips.  Targets are the answers at
    reads (:func:`flip_flop_answers`), :data:`IGNORE` elsewhere.
    """
    _check_pos_int("n", n)
    _check_pos_int("length", length)
    _check_gen(generator)
    if not (0 < p_write <= 1 and 0 <= p_read and p_write + p_read <= 1):
        raise ValueError(f"need 0 < p_write, 0 <= p_read, p_write + p_read <= 1; got "
                         f"p_write={p_write}, p_read={p_read}")
    kind = torch.rand(n, length, generator=generator)
    bits = torch.randint(0, 2, (n, length), generator=generator)
    tok = torch.full((n, length), FF_I, dtype=torch.int64)
    write = kind < p_write
    write[:, 0] = True
    read = (~write) & (kind < p_write + p_read)
    tok[write] = bits[write]
    tok[read] = FF_R
    return tok, flip_flop_answers(tok)


def flip_flop_answers(tokens: torch.Tensor) -> torch.Tensor:
    """Reference: at every read, the bit of the latest earlier write (a register updated at
    writes); :data:`IGNORE` at other positions and at reads before any write."""
    if tokens.dim() != 2:
        raise ValueError(f"tokens must be [n, L], got shape {tuple(tokens.shape)}")
    t = tokens.numpy() if isinstance(tokens, torch.Tensor) else np.asarray(tokens)
    if t.size and (t.min() < 0 or t.max() >= FF_VOCAB):
        raise ValueError(f"flip-flop tokens must lie in [0, {FF_VOCAB}), got {t.min()}..{t.max()}")
    out = np.full(t.shape, IGNORE, dtype=np.int64)
    reg = np.full(t.shape[0], -1, dtype=np.int64)            # -1: nothing written yet
    for j in range(t.shape[1]):
        col = t[:, j]
        w = col <= FF_W1
        reg = np.where(w, col, reg)
        out[:, j] = np.where((col == FF_R) & (reg >= 0), reg, IGNORE)
    return torch.from_numpy(out)


# ----------------------------------------------------------------------------------------------
# parity
# ----------------------------------------------------------------------------------------------
def parity(n: int, length: int, *, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` uniform bit strings of ``length``: ``(bits [n, L], prefix parities [n, L])``."""
    _check_pos_int("n", n)
    _check_pos_int("length", length)
    _check_gen(generator)
    bits = torch.randint(0, 2, (n, length), generator=generator)
    return bits, parity_answers(bits)


def parity_answers(bits: torch.Tensor) -> torch.Tensor:
    """Reference: the parity of every prefix, by a running XOR."""
    if bits.dim() != 2:
        raise ValueError(f"bits must be [n, L], got shape {tuple(bits.shape)}")
    if bits.numel() and (bits.min() < 0 or bits.max() > 1):
        raise ValueError("parity inputs must be bits (0 or 1)")
    out = torch.empty_like(bits)
    acc = torch.zeros(bits.shape[0], dtype=bits.dtype)
    for j in range(bits.shape[1]):
        acc = acc ^ bits[:, j]
        out[:, j] = acc
    return out


# ----------------------------------------------------------------------------------------------
# bounded Dyck
# ----------------------------------------------------------------------------------------------
def _check_kh(K, h):
    _check_pos_int("K", K)
    _check_pos_int("h", h)


def dyck_sample(n: int, length: int, K: int, h: int, *, generator: torch.Generator) -> torch.Tensor:
    """``n`` strings of Dyck(K, h) with exactly ``length`` (even) tokens, ``[n, length]``.

    A random walk on the depth: it opens (uniform type) or closes (the matching type) with equal
    probability where both keep the string completable within ``length`` and depth ``h``.
    """
    _check_pos_int("n", n)
    _check_kh(K, h)
    _check_gen(generator)
    if isinstance(length, bool) or not isinstance(length, int) or length < 0 or length % 2:
        raise ValueError(f"length must be an even int >= 0, got {length!r}")
    coin = torch.rand(n, max(length, 1), generator=generator).numpy()
    types = torch.randint(0, K, (n, max(length, 1)), generator=generator).numpy()
    out = np.empty((n, length), dtype=np.int64)
    for s in range(n):
        stack = []
        for j in range(length):
            remaining = length - j
            d = len(stack)
            must_close = d == remaining or d == h
            must_open = d == 0
            if must_open or (not must_close and coin[s, j] < 0.5):
                k = int(types[s, j])
                stack.append(k)
                out[s, j] = 2 * k
            else:
                out[s, j] = 2 * stack.pop() + 1
    return torch.from_numpy(out)


def dyck_perturb(strings: torch.Tensor, K: int, *, generator: torch.Generator) -> torch.Tensor:
    """One random edit per string: replace one token by a random other token, or swap two
    adjacent tokens (each with probability 1/2; swapping two equal tokens leaves the string as it
    was).  The result may or may not be in the language; label it with :func:`dyck_accepts`."""
    _check_pos_int("K", K)
    _check_gen(generator)
    x = strings.clone()
    n, L = x.shape
    if L < 2:
        raise ValueError("dyck_perturb needs strings of length >= 2")
    kind = torch.rand(n, generator=generator)
    pos = torch.randint(0, L - 1, (n,), generator=generator)
    new = torch.randint(0, 2 * K - 1, (n,), generator=generator)
    rows = torch.arange(n)
    sub = kind < 0.5
    old = x[rows, pos]
    x[rows[sub], pos[sub]] = torch.where(new[sub] >= old[sub], new[sub] + 1, new[sub])  # != old
    sw = ~sub
    a, b = x[rows[sw], pos[sw]].clone(), x[rows[sw], pos[sw] + 1].clone()
    x[rows[sw], pos[sw]], x[rows[sw], pos[sw] + 1] = b, a
    return x


def dyck_accepts(strings: torch.Tensor, K: int, h: int) -> torch.Tensor:
    """Reference recogniser with an explicit stack: ``bool [n]``, True iff the string is in
    Dyck(K, h)."""
    _check_kh(K, h)
    if strings.dim() != 2:
        raise ValueError(f"strings must be [n, L], got shape {tuple(strings.shape)}")
    s = strings.numpy()
    if s.size and (s.min() < 0 or s.max() >= 2 * K):
        raise ValueError(f"Dyck({K}, h) tokens must lie in [0, {2 * K}), got {s.min()}..{s.max()}")
    out = np.zeros(s.shape[0], dtype=bool)
    for i, row in enumerate(s):
        stack, ok = [], True
        for tok in row:
            k, closing = divmod(int(tok), 2)
            if not closing:
                stack.append(k)
                if len(stack) > h:
                    ok = False
                    break
            elif not stack or stack.pop() != k:
                ok = False
                break
        out[i] = ok and not stack
    return torch.from_numpy(out)


def dyck_next_allowed(strings: torch.Tensor, K: int, h: int) -> torch.Tensor:
    """Reference for the next-token view of recognition, on strings of Dyck(K, h) (or valid
    prefixes): ``bool [n, L, 2K + 1]``, the tokens allowed after each prefix ``x_1..x_t`` (any open
    while the depth is below ``h``; the close of the top type; end-of-string, index ``2K``, at
    depth 0)."""
    _check_kh(K, h)
    n, L = strings.shape
    out = np.zeros((n, L, 2 * K + 1), dtype=bool)
    for i, row in enumerate(strings.numpy()):
        stack = []
        for j, tok in enumerate(row):
            k, closing = divmod(int(tok), 2)
            if closing:
                if not stack or stack[-1] != k:
                    raise ValueError(f"string {i} is not a valid Dyck prefix at position {j}")
                stack.pop()
            else:
                stack.append(k)
            if len(stack) < h:
                out[i, j, 0:2 * K:2] = True
            if stack:
                out[i, j, 2 * stack[-1] + 1] = True
            else:
                out[i, j, 2 * K] = True
    return torch.from_numpy(out)


def dyck_test_set(n: int, length: int, K: int, h: int, *, generator: torch.Generator):
    """A balanced test set of ``n`` strings of ``length`` tokens: a quarter valid, a quarter valid
    at depth up to ``h + 1`` (mostly outside the language), half single-edit perturbations of valid
    strings.  Returns ``(strings [n, length], in_language bool [n])`` labelled by the reference."""
    _check_pos_int("n", n, minimum=4)
    q = n // 4
    valid = dyck_sample(q, length, K, h, generator=generator)
    deep = dyck_sample(q, length, K, h + 1, generator=generator)
    pert = dyck_perturb(dyck_sample(n - 2 * q, length, K, h, generator=generator), K,
                        generator=generator)
    x = torch.cat([valid, deep, pert])
    return x, dyck_accepts(x, K, h)
