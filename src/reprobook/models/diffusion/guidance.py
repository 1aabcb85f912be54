r"""Classifier-free guidance (Ho & Salimans 2022) as a noise predictor for :func:`.ddim.ddim_sample`.

One network trained with its condition dropped at random predicts both the conditional noise
:math:`\hat\varepsilon(x_t,t,c)` and the unconditional one :math:`\hat\varepsilon(x_t,t,\varnothing)`.
Guidance at scale :math:`w` extrapolates from the second towards the first,

.. math:: \tilde\varepsilon=\hat\varepsilon(x_t,t,\varnothing)+w\,\big(\hat\varepsilon(x_t,t,c)-\hat\varepsilon(x_t,t,\varnothing)\big).

Since :math:`\hat\varepsilon=-\sqrt{1-\bar\alpha_t}\,\nabla_{x_t}\log p_t`, this is the noise of the
tilted density :math:`p_t(x)^{1-w}\,p_t(x\mid c)^{w}`, i.e. of :math:`p_t(x\mid c)\,p_t(c\mid x)^{w-1}`
(Bayes): :math:`w=1` is plain conditional sampling, :math:`w=0` unconditional, :math:`w>1` sharpens
towards what the implicit classifier :math:`p(c\mid x)` is sure of. For two Gaussians of equal
covariance and means :math:`m_\varnothing, m_c` the tilted density is again that Gaussian with mean
:math:`m_\varnothing+w(m_c-m_\varnothing)` (the unit tests sample it).
"""
from __future__ import annotations

from typing import Callable

import torch

__all__ = ["classifier_free"]

# eps_fn(x_t, t) -> predicted noise, shaped like x_t (the convention of .ddim)
EpsFn = Callable[[torch.Tensor, int], torch.Tensor]


def classifier_free(eps_cond: EpsFn, eps_uncond: EpsFn, scale: float) -> EpsFn:
    """The guided noise predictor ``x_t, t -> eps_u + scale * (eps_c - eps_u)`` (module docstring).

    ``eps_cond`` and ``eps_uncond`` are the same network asked with and without its condition,
    e.g. ``lambda x, t: net(x, t, label)`` and ``lambda x, t: net(x, t, null_label)``.
    """
    if not (callable(eps_cond) and callable(eps_uncond)):
        raise TypeError("eps_cond and eps_uncond must be callables (x_t, t) -> eps")
    scale = float(scale)
    if not torch.isfinite(torch.tensor(scale)):
        raise ValueError(f"the guidance scale must be finite, got {scale}")

    def guided(x: torch.Tensor, t: int) -> torch.Tensor:
        e_u = eps_uncond(x, t)
        if scale == 0.0:
            return e_u
        e_c = eps_cond(x, t)
        if e_c.shape != e_u.shape or e_c.shape != x.shape:
            raise ValueError(f"conditional and unconditional predictions must be shaped like x_t "
                             f"{tuple(x.shape)}, got {tuple(e_c.shape)} and {tuple(e_u.shape)}")
        return e_u + scale * (e_c - e_u)

    return guided
