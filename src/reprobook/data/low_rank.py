r"""Synthetic low-rank regression with outliers: the LoRA fine-tuning proxy of the SAM/BAR chapter.

A "pretrained" linear map :math:`W_0 \in \mathbb R^{d_{out}\times d_{in}}` (entries
:math:`N(0, 1/d_{in})`) must be fine-tuned to :math:`W_0 + \Delta W^\star`, where
:math:`\Delta W^\star = U\,\mathrm{diag}(s)\,V^\top` has rank ``len(s)`` (orthonormal :math:`U, V`).
Inputs are :math:`z \sim N(0, I)` and training targets

.. math:: t = (W_0 + \Delta W^\star) z + \sigma\,\epsilon,

except that a fraction ``outlier_frac`` of the training and validation rows are *outliers*: their
noise has standard deviation ``outlier_scale`` :math:`\times\,\sigma` (zero-mean, so the
least-squares target is unbiased; only its variance grows). The test targets are noiseless, so
the test error measures the distance to the truth. The LoRA factors start as in Hu et al. (2022):
the up-projection at zero and the down-projection uniform on :math:`\pm 1/\sqrt{d_{in}}`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

__all__ = ["LoRATask", "lora_task"]


@dataclass(frozen=True)
class LoRATask:
    """One draw of the task: arrays (float64) and the LoRA initialisation."""

    base: np.ndarray            # W_0 (d_out, d_in)
    delta: np.ndarray           # the true update (d_out, d_in)
    train_inputs: np.ndarray    # (n, d_in)
    train_targets: np.ndarray   # (n, d_out)
    train_outliers: np.ndarray  # (n,) bool
    val_inputs: np.ndarray
    val_targets: np.ndarray
    val_outliers: np.ndarray
    test_inputs: np.ndarray
    test_targets: np.ndarray    # noiseless
    up0: np.ndarray             # (d_out, rank), zeros
    down0: np.ndarray           # (d_in, rank): the down-projection, transposed (Y in X Y^T)
    outlier_scale: float

    def with_outlier_scale(self, scale: float) -> "LoRATask":
        """The same draw with the outlier rows' noise rescaled to ``scale`` times the base noise
        (``scale=1``: no outliers). Every other number is unchanged, so the two tasks are paired."""
        if not (scale >= 1 and math.isfinite(scale)):
            raise ValueError(f"scale must be >= 1, got {scale}")
        truth = self.base + self.delta

        def rescale(z, t, mask):
            clean = z @ truth.T
            factor = np.where(mask, scale / self.outlier_scale, 1.0)[:, None]
            return clean + factor * (t - clean)

        return replace(self, train_targets=rescale(self.train_inputs, self.train_targets,
                                                   self.train_outliers),
                       val_targets=rescale(self.val_inputs, self.val_targets, self.val_outliers),
                       outlier_scale=float(scale))


def _positive_int(name, v):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise ValueError(f"{name} must be a positive int, got {v!r}")
    return int(v)


def lora_task(rng: np.random.Generator, *, d_in: int = 32, d_out: int = 32,
              singular_values=(1.0, 0.7), rank: int = 4, n_train: int = 512, n_val: int = 512,
              n_test: int = 2000, noise: float = 0.1, outlier_frac: float = 0.05,
              outlier_scale: float = 10.0) -> LoRATask:
    """Draw one LoRA regression task (see the module docstring)."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy Generator (reprobook.rng(seed, stream))")
    d_in, d_out, rank = (_positive_int(k, v) for k, v in
                         (("d_in", d_in), ("d_out", d_out), ("rank", rank)))
    n_train, n_val, n_test = (_positive_int(k, v) for k, v in
                              (("n_train", n_train), ("n_val", n_val), ("n_test", n_test)))
    s = np.asarray(singular_values, dtype=float)
    if s.ndim != 1 or s.size < 1 or s.size > min(d_in, d_out) or (s <= 0).any():
        raise ValueError(f"singular_values must be 1 to min(d_in, d_out) positive numbers, got "
                         f"{singular_values!r}")
    if not (noise >= 0 and math.isfinite(noise)):
        raise ValueError(f"noise must be >= 0, got {noise}")
    if not 0 <= outlier_frac < 1:
        raise ValueError(f"outlier_frac must be in [0, 1), got {outlier_frac}")
    if not (outlier_scale >= 1 and math.isfinite(outlier_scale)):
        raise ValueError(f"outlier_scale must be >= 1 (a factor on the noise sd), got {outlier_scale}")
    base = rng.standard_normal((d_out, d_in)) / math.sqrt(d_in)
    u = np.linalg.qr(rng.standard_normal((d_out, s.size)))[0]
    v = np.linalg.qr(rng.standard_normal((d_in, s.size)))[0]
    delta = (u * s) @ v.T
    truth = base + delta

    def noisy(n):
        z = rng.standard_normal((n, d_in))
        out = np.zeros(n, dtype=bool)
        out[rng.choice(n, size=int(round(outlier_frac * n)), replace=False)] = True
        sd = np.where(out, outlier_scale * noise, noise)[:, None]
        return z, z @ truth.T + sd * rng.standard_normal((n, d_out)), out

    zt, tt, out = noisy(n_train)
    zv, tv, outv = noisy(n_val)
    zs = rng.standard_normal((n_test, d_in))
    down0 = rng.uniform(-1.0, 1.0, size=(d_in, rank)) / math.sqrt(d_in)
    return LoRATask(base, delta, zt, tt, out, zv, tv, outv, zs, zs @ truth.T,
                    np.zeros((d_out, rank)), down0, float(outlier_scale))
