r"""Pairwise preference losses and the Bradley–Terry model.

**Bradley–Terry.** A reward :math:`r` prefers :math:`y_a` to :math:`y_b` with probability
:math:`\sigma(r(y_a) - r(y_b))`. :func:`bt_pairs` draws labelled pairs this way from a true reward;
:func:`pair_accuracy` scores how often another reward ranks the winner first (a tie counts half).

**Self-play / implicit-reward loss** (SPIN, Chen et al. 2024; the implicit-reward fine-tuning IRFT of
Li et al. 2024 takes this form). With a demonstration :math:`y` and a response :math:`y'` sampled
from the *opponent* :math:`\pi_k` (an earlier copy of the model),

.. math::

    \ell = -\log\sigma\Big(\beta\big[\log\tfrac{\pi_\theta(y\mid x)}{\pi_k(y\mid x)}
           - \log\tfrac{\pi_\theta(y'\mid x)}{\pi_k(y'\mid x)}\big]\Big),

the DPO loss with the demonstration as the preferred and the model's own sample as the rejected
response: the implicit reward :math:`\beta\log\pi_\theta/\pi_k` is pushed up on demonstrations and
down on what the model itself writes.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

__all__ = ["spin_loss", "bt_pairs", "pair_accuracy"]


def spin_loss(logp_w: torch.Tensor, logp_l: torch.Tensor, opp_logp_w: torch.Tensor,
              opp_logp_l: torch.Tensor, beta: float) -> torch.Tensor:
    """Mean of :math:`-\\log\\sigma(\\beta[(\\log\\pi_w - \\log\\pi_{k,w}) - (\\log\\pi_l -
    \\log\\pi_{k,l})])` over the batch (``w``: demonstrations, ``l``: opponent samples)."""
    shapes = {t.shape for t in (logp_w, logp_l, opp_logp_w, opp_logp_l)}
    if len(shapes) != 1:
        raise ValueError(f"the four log-probability tensors must share one shape, got {shapes}")
    if not beta > 0:
        raise ValueError(f"beta must be > 0, got {beta!r}")
    margin = (logp_w - opp_logp_w) - (logp_l - opp_logp_l)
    return F.softplus(-beta * margin).mean()


def bt_pairs(reward: torch.Tensor, n: int, rng: np.random.Generator,
             proposal: torch.Tensor | None = None, labels: str = "bt") -> np.ndarray:
    """``n`` labelled pairs under ``reward: [X, R]``: rows ``(x, winner, loser)``.

    Prompts are uniform; the two responses are drawn independently from ``proposal`` (``[X, R]``
    log-probabilities; uniform when ``None``), distinct. With ``labels="bt"`` the winner is chosen
    with probability :math:`\\sigma(r(x, y_a) - r(x, y_b))` (Bradley–Terry); with ``"sign"`` it is
    the response of higher reward (noise-free; a pair of equal rewards is redrawn)."""
    if reward.ndim != 2:
        raise ValueError(f"reward must be [X, R], got {tuple(reward.shape)}")
    if labels not in ("bt", "sign"):
        raise ValueError(f"labels must be 'bt' or 'sign', got {labels!r}")
    X, R = reward.shape
    p = np.full((X, R), 1.0 / R) if proposal is None else proposal.detach().exp().double().numpy()
    p = p / p.sum(1, keepdims=True)
    out = np.zeros((n, 3), dtype=np.int64)
    r = reward.detach().double().numpy()
    i = 0
    while i < n:
        x = rng.integers(X)
        a, b = rng.choice(R, size=2, replace=False, p=p[x]) if (p[x] > 0).sum() >= 2 else (0, 1)
        if labels == "sign":
            if r[x, a] == r[x, b]:
                continue
            win = r[x, a] > r[x, b]
        else:
            win = rng.random() < 1.0 / (1.0 + np.exp(-(r[x, a] - r[x, b])))
        out[i] = (x, a, b) if win else (x, b, a)
        i += 1
    return out


def pair_accuracy(score: torch.Tensor, pairs: np.ndarray) -> float:
    """Share of ``pairs`` (rows ``(x, winner, loser)``) where ``score: [X, R]`` ranks the winner
    higher; exact ties count one half."""
    s = score.detach()
    x, w, l = (torch.as_tensor(pairs[:, i]) for i in range(3))
    d = s[x, w] - s[x, l]
    return float(((d > 0).double() + 0.5 * (d == 0).double()).mean())
