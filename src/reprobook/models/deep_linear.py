r"""Deep linear networks, plain or residual, with Kaiming-normal initialisation.

A :class:`DeepLinear` network maps :math:`x\in\mathbb R^d` to :math:`A_L\cdots A_1x\in\mathbb R^K`.
Layer :math:`l` holds a parameter matrix :math:`W_l` (:math:`m_l\times m_{l-1}`) and acts as

* :math:`A_l = W_l` in a **plain** layer, or
* :math:`A_l = I + \beta W_l` in a **residual** layer (a skip connection around a linear branch
  scaled by :math:`\beta`; the layer must be square). :math:`I+\beta W = \beta(W + \beta^{-1} I)`,
  so this is the form :math:`W + \beta' I` up to a global factor that leaves every condition
  number unchanged.

:func:`kaiming_normal` draws :math:`W_{ij}\sim N(0, g^2/m_{l-1})` with gain :math:`g=\sqrt2`,
the default of ``torch.nn.init.kaiming_normal_``. The weights live as float64 NumPy arrays (drawn
from a seeded NumPy generator, so runs are reproducible); :meth:`DeepLinear.params` and
:meth:`DeepLinear.forward` give the torch view that :mod:`reprobook.optim.gauss_newton`
differentiates, and :meth:`DeepLinear.effective` the matrices :math:`A_l` that
:mod:`reprobook.optim.linear_gn` takes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["DeepLinear", "kaiming_normal", "deep_linear", "residual_linear", "train_deep_linear"]


def kaiming_normal(rows: int, cols: int, rng: np.random.Generator,
                   gain: float = math.sqrt(2.0)) -> np.ndarray:
    """A (rows, cols) matrix with i.i.d. :math:`N(0, \\text{gain}^2/\\text{cols})` entries (fan-in)."""
    for name, v in (("rows", rows), ("cols", cols)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator (reprobook.rng(seed, ...)), got {type(rng).__name__}")
    return rng.normal(0.0, gain / math.sqrt(cols), size=(int(rows), int(cols)))


@dataclass
class DeepLinear:
    """Weights :math:`W_1,\\dots,W_L` (input first), which layers are residual, and :math:`\\beta`."""

    weights: list
    residual: tuple
    beta: float = 1.0

    def __post_init__(self):
        self.weights = [np.asarray(w, dtype=np.float64) for w in self.weights]
        if not self.weights:
            raise ValueError("a DeepLinear network needs at least one layer")
        for i, w in enumerate(self.weights):
            if w.ndim != 2:
                raise ValueError(f"W_{i + 1} must be 2-d, got shape {w.shape}")
            if i and w.shape[1] != self.weights[i - 1].shape[0]:
                raise ValueError(f"W_{i + 1} has {w.shape[1]} columns but W_{i} has "
                                 f"{self.weights[i - 1].shape[0]} rows")
        self.residual = tuple(bool(r) for r in self.residual)
        if len(self.residual) != len(self.weights):
            raise ValueError(f"residual needs one flag per layer ({len(self.weights)}), got "
                             f"{len(self.residual)}")
        for i, (w, r) in enumerate(zip(self.weights, self.residual)):
            if r and w.shape[0] != w.shape[1]:
                raise ValueError(f"residual layer {i + 1} must be square, got shape {w.shape}")
        if not math.isfinite(self.beta) or self.beta <= 0:
            raise ValueError(f"beta must be a positive finite number, got {self.beta!r}")

    @property
    def depth(self) -> int:
        return len(self.weights)

    @property
    def dims(self) -> list[int]:
        """:math:`[d, m_1, \\dots, m_{L-1}, K]`."""
        return [self.weights[0].shape[1]] + [w.shape[0] for w in self.weights]

    @property
    def n_params(self) -> int:
        return int(sum(w.size for w in self.weights))

    def effective(self) -> list[np.ndarray]:
        """The matrices :math:`A_l` the layers apply (:math:`W_l` or :math:`I+\\beta W_l`)."""
        return [np.eye(w.shape[0]) + self.beta * w if r else w
                for w, r in zip(self.weights, self.residual)]

    def scales(self) -> np.ndarray:
        """:math:`c_l = \\partial A_l/\\partial W_l`: 1 for a plain layer, :math:`\\beta` for a residual one."""
        return np.array([self.beta if r else 1.0 for r in self.residual])

    def end_to_end(self) -> np.ndarray:
        """:math:`A_L\\cdots A_1` (K × d)."""
        out = np.eye(self.dims[0])
        for a in self.effective():
            out = a @ out
        return out

    def params(self, device=None, dtype=None) -> dict:
        """The weights as torch tensors ``{"W1": ..., "WL": ...}`` (float64 by default)."""
        import torch

        dtype = torch.float64 if dtype is None else dtype
        return {f"W{i + 1}": torch.tensor(w, dtype=dtype, device=device)
                for i, w in enumerate(self.weights)}

    def forward(self, params: dict, x):
        """:math:`f(x)` for one input (d,) or a batch (n, d), as a pure function of ``params``."""
        h = x
        for i, r in enumerate(self.residual):
            branch = h @ params[f"W{i + 1}"].T
            h = h + self.beta * branch if r else branch
        return h

    def with_weights(self, weights) -> "DeepLinear":
        return DeepLinear([np.asarray(w) for w in weights], self.residual, self.beta)


def deep_linear(dims, rng: np.random.Generator, *, gain: float = math.sqrt(2.0)) -> DeepLinear:
    """A plain network with layer sizes ``dims = [d, m_1, ..., m_{L-1}, K]``, Kaiming-normal."""
    dims = [int(v) for v in dims]
    if len(dims) < 2:
        raise ValueError(f"dims must list at least the input and output sizes, got {dims}")
    weights = [kaiming_normal(dims[i + 1], dims[i], rng, gain) for i in range(len(dims) - 1)]
    return DeepLinear(weights, (False,) * len(weights))


def residual_linear(width: int, depth: int, rng: np.random.Generator, *, beta: float,
                    gain: float = math.sqrt(2.0)) -> DeepLinear:
    """``depth`` square residual layers :math:`I+\\beta W_l` of size ``width`` (d = m = K)."""
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 1:
        raise ValueError(f"depth must be a positive int, got {depth!r}")
    weights = [kaiming_normal(width, width, rng, gain) for _ in range(int(depth))]
    return DeepLinear(weights, (True,) * int(depth), float(beta))


def train_deep_linear(net: DeepLinear, x: np.ndarray, y: np.ndarray, *, lr: float, steps: int,
                      record_every: int = 1) -> tuple[list[DeepLinear], np.ndarray]:
    """Full-batch gradient descent on the squared error :math:`\\frac1{2n}\\lVert f(X)-Y\\rVert^2`.

    Returns the networks at steps ``0, record_every, 2 record_every, ...`` (and the last step) and
    the loss at every step (``steps + 1`` values). Plain float64 torch autograd on the CPU.
    """
    import torch

    if not (isinstance(steps, int) and steps >= 0 and isinstance(record_every, int) and record_every >= 1):
        raise ValueError(f"steps must be an int >= 0 and record_every an int >= 1, got {steps!r}, "
                         f"{record_every!r}")
    if not lr > 0:
        raise ValueError(f"lr must be positive, got {lr!r}")
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != net.dims[0] or y.shape != (x.shape[0], net.dims[-1]):
        raise ValueError(f"x must be (n, {net.dims[0]}) and y (n, {net.dims[-1]}); got {x.shape}, "
                         f"{y.shape}")
    params = {k: v.requires_grad_(True) for k, v in net.params().items()}
    xt, yt = torch.tensor(x), torch.tensor(y)
    snaps, losses = [net.with_weights([p.detach().numpy().copy() for p in params.values()])], []
    for step in range(steps + 1):
        loss = 0.5 * ((net.forward(params, xt) - yt) ** 2).sum() / len(x)
        losses.append(float(loss.detach()))
        if step == steps:
            break
        grads = torch.autograd.grad(loss, list(params.values()))
        with torch.no_grad():
            for p, g in zip(params.values(), grads):
                p -= lr * g
        if (step + 1) % record_every == 0 or step + 1 == steps:
            snaps.append(net.with_weights([p.detach().numpy().copy() for p in params.values()]))
    return snaps, np.array(losses)
