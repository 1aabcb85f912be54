r"""Con4m (Chen et al., NeurIPS 2024): context-aware classification of consecutive segments, and
the two baselines it is compared with here.

Every model reads a group ``x [B, n, C, w]`` of ``n`` consecutive windows and returns per-window
class logits ``[B, n, K]`` (and, for Con4m, pair logits ``[B, n, n, 2]``).

**Window encoder** (shared by all models, :class:`WindowEncoder`): strided ``Conv1d`` layers, each
followed by a norm over the feature axis at every time step (the official code's "channel norm")
and a ReLU, then a learned position embedding, one Transformer layer over the resulting tokens and
a mean over them: one vector :math:`h_i \in \mathbb R^d` per window.

**Gaussian-kernel attention** (:func:`gaussian_kernel_attention`). Each token :math:`i` and head
predicts a bandwidth :math:`\log\sigma_i = W_\sigma h_i` and attends to its neighbours with weights

.. math:: w_{ij} = \frac{\exp(-(i-j)^2 / 2\sigma_i^2 - \log\sigma_i)}
                       {\sum_{j'} \exp(-(i-j')^2 / 2\sigma_i^2 - \log\sigma_i)},

a smooth, local average whose width the model chooses per window (the official code builds the
same matrix with a relative-shift trick; here the distance matrix is written out).

**Con-Transformer layer** (:class:`ContextLayer` with ``gaussian=True``): vanilla multi-head
self-attention :math:`t_i` and Gaussian-kernel attention :math:`s_i` (separate value maps) are
fused per token by a learned gate
:math:`(\alpha_t,\alpha_s) = \mathrm{softmax}(q\cdot\tanh(W t_i),\ q\cdot\tanh(W s_i))`,
output :math:`\alpha_t t_i + \alpha_s s_i`, then a BERT-style (post-norm) residual block.

**Predictor** (:class:`Con4m`). A class head gives :math:`\hat p_i = \mathrm{softmax}(f(h_i))`;
a pair head gives :math:`\hat q_{ij} = P(\text{same class} \mid h_i, h_j)` from
:math:`[h_i; h_j]`. Both are trained with cross-entropy (class labels, and "same label" of every
pair). The **contextual prediction** is :math:`\tilde p_i \propto \sum_j \hat q_{ij}\hat p_j`.

**Label-consistency fitting** (:func:`tanh_fit`, :func:`consistent_probs`). Within a group the
labels are expected to change at most once, smoothly. For each class :math:`c` the sequence
:math:`2\tilde p_{\cdot c} - 1` over the ``n`` windows is fitted by
:math:`a\tanh(b(x + c_0)) + d` (:math:`x = i - \lfloor n/2 \rfloor`; Adam, learning rate 0.1, at
most 100 steps, stopping when the loss changes by less than 1e-6; :math:`b, c_0` initialised from
the largest jump). The fitted curves, mapped back to [0, 1] and normalised over classes, are
``con_p``; the prediction is :math:`\arg\max(\tfrac12\hat p + \tfrac12\,\mathrm{con\_p})`.

**Label harmonisation** (:class:`LabelHarmoniser`): see its docstring.

**Baselines.** :func:`iid_classifier` classifies every window alone (encoder + the same class
head); :func:`context_classifier` adds a vanilla Transformer layer across the ``n`` windows.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["ChannelNorm", "WindowEncoder", "gaussian_kernel_attention", "ContextLayer",
           "SegmentClassifier", "Con4m", "iid_classifier", "context_classifier", "con4m",
           "contextual_prediction", "tanh_fit", "consistent_probs", "LabelHarmoniser"]


class ChannelNorm(nn.Module):
    """Normalise ``x [B, D, L]`` over the feature axis ``D`` at every time step, then a learned
    per-feature affine map."""

    def __init__(self, d: int, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(1, d, 1))
        self.bias = nn.Parameter(torch.zeros(1, d, 1))
        self.eps = eps

    def forward(self, x):
        x = (x - x.mean(1, keepdim=True)) * torch.rsqrt(x.var(1, keepdim=True) + self.eps)
        return x * self.weight + self.bias


class WindowEncoder(nn.Module):
    """``x [N, C, w] -> [N, d]``: conv stack, position embedding, one Transformer layer, mean."""

    def __init__(self, n_channels: int, window: int, d: int, n_heads: int = 4, n_conv: int = 2,
                 dropout: float = 0.1, window_layer: bool = True):
        super().__init__()
        layers, c_in, L = [], n_channels, window
        for _ in range(n_conv):
            layers += [nn.Conv1d(c_in, d, kernel_size=4, stride=2, padding=1), ChannelNorm(d),
                       nn.ReLU()]
            c_in, L = d, L // 2
        if L < 1:
            raise ValueError(f"window {window} is too short for {n_conv} stride-2 convolutions")
        self.conv = nn.Sequential(*layers)
        self.pos = nn.Parameter(torch.zeros(1, L, d))
        nn.init.normal_(self.pos, std=0.02)
        self.norm = nn.LayerNorm(d)
        self.drop = nn.Dropout(dropout)
        # the official encoder runs one Transformer layer over the conv tokens; window_layer=False
        # leaves it out (conv stack and mean only), a cheaper encoder for CPU budgets
        self.layer = (nn.TransformerEncoderLayer(d, n_heads, 2 * d, dropout, activation="gelu",
                                                 batch_first=True) if window_layer else None)
        self.n_channels, self.window = n_channels, window

    def forward(self, x):
        if x.ndim != 3 or x.shape[1] != self.n_channels or x.shape[2] != self.window:
            raise ValueError(f"WindowEncoder expects [N, {self.n_channels}, {self.window}], "
                             f"got {tuple(x.shape)}")
        z = self.conv(x).transpose(1, 2)                     # [N, L, d]
        if self.layer is None:
            return z.mean(1)
        z = self.drop(self.norm(z + self.pos))
        return self.layer(z).mean(1)


def gaussian_kernel_attention(log_sigma: torch.Tensor, v: torch.Tensor):
    """Gaussian-kernel attention (module docstring). ``log_sigma [B, H, L]``, ``v [B, H, L, dh]``;
    returns ``(out [B, H, L, dh], weights [B, H, L, L])``, every row of ``weights`` summing to 1."""
    if log_sigma.ndim != 3 or v.ndim != 4 or v.shape[:3] != log_sigma.shape:
        raise ValueError(f"log_sigma must be [B, H, L] and v [B, H, L, dh] with the same B, H, L; "
                         f"got {tuple(log_sigma.shape)} and {tuple(v.shape)}")
    L = log_sigma.shape[-1]
    pos = torch.arange(L, device=v.device, dtype=v.dtype)
    d2 = (pos[:, None] - pos[None, :]) ** 2                   # [L, L]
    ls = log_sigma[..., None]                                 # [B, H, L, 1]
    # the -log(sigma) term is constant in j and cancels in the normalisation; kept as in the paper
    logits = -d2 / (2 * torch.exp(2 * ls) + 1e-12) - ls
    w = torch.softmax(logits, dim=-1)
    return w @ v, w


class ContextLayer(nn.Module):
    """One post-norm Transformer layer across the ``n`` windows of a group. ``gaussian=True`` is
    Con4m's Con-Transformer (vanilla and Gaussian-kernel attention fused by a gate); ``False`` is
    a plain Transformer layer (the ``ctx`` baseline)."""

    def __init__(self, d: int, n: int, n_heads: int = 4, gaussian: bool = True, dropout: float = 0.1):
        super().__init__()
        if d % n_heads:
            raise ValueError(f"d = {d} is not divisible by n_heads = {n_heads}")
        self.h, self.dh, self.gaussian = n_heads, d // n_heads, gaussian
        self.pos = nn.Parameter(torch.zeros(1, n, d))
        nn.init.normal_(self.pos, std=0.02)
        self.norm0 = nn.LayerNorm(d)
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        if gaussian:
            self.sigma = nn.Linear(d, n_heads)
            self.s_value = nn.Linear(d, d)
            self.gate_map = nn.Sequential(nn.Linear(d, d), nn.Tanh())
            self.gate_q = nn.Parameter(torch.empty(1, 1, d))
            nn.init.xavier_uniform_(self.gate_q)
        self.drop = nn.Dropout(dropout)
        self.out = nn.Linear(d, d)
        self.norm1 = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        self.norm2 = nn.LayerNorm(d)
        self.n = n
        self.last_gate = None                                  # [B, n, 2] of the last call

    def _heads(self, x):
        B, L, _ = x.shape
        return x.view(B, L, self.h, self.dh).transpose(1, 2)

    def _merge(self, x):
        B, _, L, _ = x.shape
        return x.transpose(1, 2).reshape(B, L, self.h * self.dh)

    def forward(self, x):
        if x.ndim != 3 or x.shape[1] != self.n:
            raise ValueError(f"ContextLayer expects [B, {self.n}, d], got {tuple(x.shape)}")
        x = self.drop(self.norm0(x + self.pos))
        q, k, v = self._heads(self.q(x)), self._heads(self.k(x)), self._heads(self.v(x))
        a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.dh), dim=-1)
        t = self._merge(self.drop(a) @ v)
        if self.gaussian:
            s, _ = gaussian_kernel_attention(self.sigma(x).transpose(1, 2),
                                             self._heads(self.s_value(x)))
            s = self._merge(s)
            g = torch.stack([(self.gate_q * self.gate_map(t)).sum(-1),
                             (self.gate_q * self.gate_map(s)).sum(-1)], -1).softmax(-1)
            self.last_gate = g.detach()
            t = g[..., :1] * t + g[..., 1:] * s
        x = self.norm1(x + self.drop(self.out(t)))
        return self.norm2(x + self.drop(self.ff(x)))


def _head(d_in: int, d: int, k: int, dropout: float) -> nn.Sequential:
    return nn.Sequential(nn.Linear(d_in, d), nn.ReLU(), nn.Dropout(dropout),
                         nn.Linear(d, d // 2), nn.ReLU(), nn.Dropout(dropout), nn.Linear(d // 2, k))


class SegmentClassifier(nn.Module):
    """Encoder, an optional context layer and a class head: ``x [B, n, C, w] -> logits [B, n, K]``
    (the ``iid`` and ``ctx`` baselines). ``forward`` returns ``(logits, None)``."""

    uses_pairs = False

    def __init__(self, n_channels, window, n, n_classes, d=32, n_heads=4, context=None,
                 dropout=0.1, window_layer=True):
        super().__init__()
        self.encoder = WindowEncoder(n_channels, window, d, n_heads, dropout=dropout,
                                     window_layer=window_layer)
        self.context = (ContextLayer(d, n, n_heads, gaussian=context == "con", dropout=dropout)
                        if context else None)
        self.classifier = _head(d, 2 * d, n_classes, dropout)
        self.n, self.n_classes = n, n_classes

    def represent(self, x):
        if x.ndim != 4 or x.shape[1] != self.n:
            raise ValueError(f"expected a group batch [B, {self.n}, C, w], got {tuple(x.shape)}")
        B = x.shape[0]
        h = self.encoder(x.reshape(B * self.n, *x.shape[2:])).view(B, self.n, -1)
        return self.context(h) if self.context is not None else h

    def forward(self, x):
        return self.classifier(self.represent(x)), None


class Con4m(SegmentClassifier):
    """Con4m's network: encoder, Con-Transformer, class head and pair ("same class") head.
    ``forward`` returns ``(class logits [B, n, K], pair logits [B, n, n, 2])``."""

    uses_pairs = True

    def __init__(self, n_channels, window, n, n_classes, d=32, n_heads=4, dropout=0.1,
                 window_layer=True):
        super().__init__(n_channels, window, n, n_classes, d, n_heads, context="con",
                         dropout=dropout, window_layer=window_layer)
        self.pair = _head(2 * d, 2 * d, 2, dropout)

    def forward(self, x):
        h = self.represent(x)
        hi, hj = torch.broadcast_tensors(h[:, :, None], h[:, None, :])
        return self.classifier(h), self.pair(torch.cat([hi, hj], -1))


def iid_classifier(n_channels, window, n, n_classes, d=32, **kw) -> SegmentClassifier:
    return SegmentClassifier(n_channels, window, n, n_classes, d, context=None, **kw)


def context_classifier(n_channels, window, n, n_classes, d=32, **kw) -> SegmentClassifier:
    return SegmentClassifier(n_channels, window, n, n_classes, d, context="vanilla", **kw)


def con4m(n_channels, window, n, n_classes, d=32, **kw) -> Con4m:
    return Con4m(n_channels, window, n, n_classes, d, **kw)


def contextual_prediction(p_hat: torch.Tensor, q_same: torch.Tensor) -> torch.Tensor:
    """:math:`\\tilde p_i \\propto \\sum_j q_{ij} \\hat p_j`: ``p_hat [B, n, K]``, ``q_same [B, n, n]``
    (probability that windows i and j share a class) -> ``[B, n, K]``, rows summing to 1."""
    if p_hat.ndim != 3 or q_same.shape != p_hat.shape[:2] + (p_hat.shape[1],):
        raise ValueError(f"p_hat must be [B, n, K] and q_same [B, n, n]; got {tuple(p_hat.shape)} "
                         f"and {tuple(q_same.shape)}")
    t = q_same @ p_hat
    return t / t.sum(-1, keepdim=True).clamp_min(1e-12)


def tanh_fit(y, *, iters: int = 100, lr: float = 0.1, tol: float = 1e-6):
    """Least-squares fit of :math:`a\\tanh(b(x+c)) + d` to every row of ``y [N, n]`` with
    :math:`x = i - \\lfloor n/2 \\rfloor` (module docstring), by Adam (betas 0.9, 0.999) on the
    summed squared error with analytic gradients, in float64. All rows are fitted at once (they are
    independent problems and Adam's updates are per parameter); the loop stops when the summed loss
    changes by less than ``tol``. ``y`` may be a tensor or an array. Returns
    ``(fit [N, n], params [N, 4] = (a, b, c, d))`` as float64 arrays."""
    y = y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
    y = y.astype(np.float64)
    if y.ndim != 2 or y.shape[1] < 2:
        raise ValueError(f"tanh_fit expects [N, n] with n >= 2, got {y.shape}")
    if not np.isfinite(y).all():
        raise ValueError("tanh_fit got non-finite values")
    N, n = y.shape
    x = np.arange(n, dtype=np.float64) - n // 2
    diff = np.diff(y, axis=1)
    at = np.abs(diff).argmax(1)
    jump = diff[np.arange(N), at]
    # initialise at the largest jump: steepness = its size (with its sign), centre between the two
    a, b = np.ones(N), np.where(jump != 0, jump, 1.0)
    c, d = -(at + 0.5 - n // 2), np.zeros(N)
    P = np.stack([a, b, c, d], 1)
    m, v = np.zeros_like(P), np.zeros_like(P)
    b1, b2, eps = 0.9, 0.999, 1e-8
    last = None
    for t in range(1, iters + 1):
        a, b, c, d = P.T[:, :, None]
        u = x + c                                         # [N, n]
        th = np.tanh(b * u)
        r = a * th + d - y
        loss = float((r * r).sum())
        sech2 = 1 - th * th
        g = 2 * np.stack([(r * th).sum(1), (r * a * sech2 * u).sum(1),
                          (r * a * sech2 * b).sum(1), r.sum(1)], 1)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        P = P - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
        if last is not None and abs(last - loss) < tol:
            break
        last = loss
    a, b, c, d = P.T[:, :, None]
    return a * np.tanh(b * (x + c)) + d, P


def consistent_probs(p_tilde: torch.Tensor, **kw) -> torch.Tensor:
    """``con_p``: the tanh fit of :math:`2\\tilde p_{\\cdot c} - 1` for every group and class, mapped
    back to [0, 1] and normalised over classes. ``p_tilde [B, n, K] -> [B, n, K]`` (float32).

    A fitted curve may overshoot [-1, 1]; values are clipped at a small positive floor before the
    normalisation so that no class gets a negative share."""
    if p_tilde.ndim != 3:
        raise ValueError(f"p_tilde must be [B, n, K], got {tuple(p_tilde.shape)}")
    B, n, K = p_tilde.shape
    fit, _ = tanh_fit((2 * p_tilde - 1).transpose(1, 2).reshape(B * K, n), **kw)
    p = np.maximum((fit + 1) / 2, 1e-6).reshape(B, K, n).transpose(0, 2, 1)
    p = torch.as_tensor(p / p.sum(-1, keepdims=True), dtype=p_tilde.dtype, device=p_tilde.device)
    return p


class LabelHarmoniser:
    """Progressive label harmonisation for ``G`` training groups of ``n`` windows and ``K`` classes.

    For every window it keeps the original one-hot label, the current label and the last
    ``history`` epochs of :math:`\\hat p` and ``con_p`` (initialised with the original one-hot).
    :meth:`propose` for a batch of groups with the current epoch's predictions computes

    .. math:: \\text{mix} = (1-\\eta)\\,y_{orig} + \\eta\\big((1-\\tfrac\\eta2)\\,\\bar p
              + \\tfrac\\eta2\\,\\overline{con}\\big),

    where the bars are averages over the current and the stored epochs with weights
    :math:`\\propto e^{-e/2}` (``e = 0`` the current epoch), and the new label is
    :math:`\\arg\\max` mix. ``mode="random"`` is a broken control: it makes as many label changes
    as the harmoniser would, but at random windows and to random other classes.
    :meth:`commit` makes the proposals the training labels of the next epoch."""

    def __init__(self, labels: np.ndarray, n_classes: int, history: int = 4, mode: str = "con4m",
                 rng: np.random.Generator | None = None):
        y = np.asarray(labels)
        if y.ndim != 2 or not np.issubdtype(y.dtype, np.integer):
            raise ValueError(f"labels must be an integer array [G, n], got shape {y.shape}")
        if mode not in ("con4m", "random"):
            raise ValueError(f"unknown harmonisation mode {mode!r}; use 'con4m' or 'random'")
        if mode == "random" and rng is None:
            raise ValueError("mode='random' needs rng")
        self.K, self.mode, self.rng = int(n_classes), mode, rng
        self.orig = torch.as_tensor(y, dtype=torch.long)
        self.current = self.orig.clone()
        self.proposed = self.orig.clone()
        one = F.one_hot(self.orig, self.K).double()
        self.hist_p = one[..., None].repeat(1, 1, 1, history)
        self.hist_con = self.hist_p.clone()
        w = torch.exp(-torch.arange(history + 1, dtype=torch.float64) / 2)
        self.w = w / w.sum()

    def propose(self, idx, p_hat: torch.Tensor, con_p: torch.Tensor, eta: float) -> None:
        if not 0 <= eta <= 1:
            raise ValueError(f"eta must be in [0, 1], got {eta}")
        idx = torch.as_tensor(idx, dtype=torch.long)
        p_hat, con_p = p_hat.detach().double().cpu(), con_p.detach().double().cpu()
        hp = torch.cat([p_hat[..., None], self.hist_p[idx]], -1)
        hc = torch.cat([con_p[..., None], self.hist_con[idx]], -1)
        self.hist_p[idx], self.hist_con[idx] = hp[..., :-1], hc[..., :-1]
        bar_p, bar_c = hp @ self.w, hc @ self.w
        mix = (1 - eta) * F.one_hot(self.orig[idx], self.K) + eta * (
            (1 - eta / 2) * bar_p + (eta / 2) * bar_c)
        new = mix.argmax(-1)
        if self.mode == "random":
            cur = self.current[idx]
            m = int((new != cur).sum())
            new = cur.clone().view(-1)
            if m:
                at = torch.as_tensor(self.rng.choice(new.numel(), m, replace=False))
                shift = torch.as_tensor(self.rng.integers(1, self.K, m))
                new[at] = (new[at] + shift) % self.K
            new = new.view(cur.shape)
        self.proposed[idx] = new

    def commit(self) -> int:
        """Adopt the proposed labels; returns how many labels changed."""
        changed = int((self.proposed != self.current).sum())
        self.current = self.proposed.clone()
        return changed
