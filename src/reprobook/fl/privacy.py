r"""The Gaussian mechanism on clipped client messages, and its zCDP accounting.

A client's message $m$ (its predictive probabilities on the public set, flattened) is clipped to
L2 norm $C$, $\bar m = m \min(1, C / \|m\|_2)$, and released as $\bar m + N(0, \sigma^2 I)$ with
$\sigma = z\,\Delta_2$, where $z$ is the *noise multiplier*. Replacing one client's data may move the
message anywhere in the ball, so the L2 sensitivity is $\Delta_2 = 2C$.

**Accounting.** The Gaussian mechanism is $\rho$-zCDP with $\rho = \Delta_2^2 / (2\sigma^2) = 1/(2z^2)$
(its Rényi divergence of order $\alpha$ is $D_\alpha = \alpha\rho$ for every $\alpha > 1$).
$R$ rounds compose additively, $\rho_R = R\rho$, and $\rho_R$-zCDP implies $(\varepsilon, \delta)$-DP with

$$\varepsilon(\delta) = \min_{\alpha > 1}\Big[\alpha\rho_R + \frac{\log(1/\delta)}{\alpha - 1}\Big]
= \rho_R + 2\sqrt{\rho_R \log(1/\delta)},$$

the minimum being at $\alpha^\star = 1 + \sqrt{\log(1/\delta)/\rho_R}$. :func:`epsilon_numeric` computes
the same quantity the long way (quadrature of the Rényi divergence of the mechanism's actual output
laws, summed over rounds, then a numeric minimisation over $\alpha$), so the closed form can be checked.
Everything after the noise (clamping to $[0, 1]$, renormalising) is post-processing and costs nothing.

**Per-row clipping** (:class:`RowClippedGaussianMechanism`). Clipping the whole $|A|\times K$ table
to norm $C = 1$ shrinks every row by about $\sqrt{|A|}$, so the noise swamps it. Clipping each
row (one public point's predictive vector) to norm $C$ keeps the rows at full scale; replacing a
client's data may then move every row anywhere in its ball, so $\Delta_2 = 2C\sqrt{|A|}$.
(For probability rows $C = 1$ clips nothing, and the tighter bound $\sqrt{2|A|}$ would hold; we
keep the general one, which holds for any input.)
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import torch
from scipy import integrate, optimize


def _positive(name: str, x: float) -> float:
    x = float(x)
    if not (x > 0 and math.isfinite(x)):
        raise ValueError(f"{name} must be a finite number > 0, got {x}")
    return x


def clip_l2(m: torch.Tensor, clip: float) -> torch.Tensor:
    """Scale ``m`` (any shape, treated as one vector) down to L2 norm at most ``clip``."""
    clip = _positive("clip", clip)
    norm = m.norm()
    return m * min(1.0, clip / float(norm)) if norm > 0 else m


class GaussianMechanism:
    """Clip to ``clip`` in L2, then add N(0, (noise_multiplier * 2 clip)^2) to every entry."""

    def __init__(self, clip: float, noise_multiplier: float):
        self.clip = _positive("clip", clip)
        self.noise_multiplier = _positive("noise_multiplier", noise_multiplier)

    @property
    def sensitivity(self) -> float:
        return 2.0 * self.clip

    @property
    def noise_std(self) -> float:
        return self.noise_multiplier * self.sensitivity

    def clip_message(self, m: torch.Tensor) -> torch.Tensor:
        """The message after clipping, before noise: what the sensitivity bounds."""
        return clip_l2(m, self.clip)

    def __call__(self, m: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        noise = torch.randn(m.shape, generator=generator, dtype=m.dtype)
        return self.clip_message(m) + self.noise_std * noise


def clip_rows(m: torch.Tensor, clip: float) -> torch.Tensor:
    """Scale every row of ``m`` (its last axis) down to L2 norm at most ``clip``."""
    clip = _positive("clip", clip)
    if m.ndim < 2:
        raise ValueError(f"m must have at least 2 dimensions (rows, entries), got {tuple(m.shape)}")
    norm = m.norm(dim=-1, keepdim=True)
    return m * torch.clamp(clip / norm.clamp_min(1e-300), max=1.0)


class RowClippedGaussianMechanism(GaussianMechanism):
    """Clip every row of an ``(n_rows, K)`` message to ``clip`` in L2, then add
    N(0, (noise_multiplier * 2 clip sqrt(n_rows))^2) to every entry."""

    def __init__(self, clip: float, noise_multiplier: float, n_rows: int):
        super().__init__(clip, noise_multiplier)
        if not isinstance(n_rows, (int, np.integer)) or n_rows < 1:
            raise ValueError(f"n_rows must be a positive int, got {n_rows!r}")
        self.n_rows = int(n_rows)

    @property
    def sensitivity(self) -> float:
        return 2.0 * self.clip * math.sqrt(self.n_rows)

    def clip_message(self, m: torch.Tensor) -> torch.Tensor:
        if m.ndim != 2 or m.shape[0] != self.n_rows:
            raise ValueError(f"message must have shape ({self.n_rows}, K), got {tuple(m.shape)}")
        return clip_rows(m, self.clip)


def probe_noise_std(mechanism, shape=(64,), seed: int = 0) -> float:
    """The noise scale a mechanism *actually* adds, measured exactly.

    Run it on a zero message (clipping leaves zero alone) and divide by the standard-normal draw that
    the same generator state produces: the ratio is the realised std, to machine precision.
    """
    out = mechanism(torch.zeros(shape, dtype=torch.float64), torch.Generator().manual_seed(seed))
    z = torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return float((out / z).mean())


def zcdp_rho(noise_multiplier: float, rounds: int = 1) -> float:
    """rho of R rounds of the Gaussian mechanism: R / (2 z^2)."""
    z = _positive("noise_multiplier", noise_multiplier)
    if not isinstance(rounds, (int, np.integer)) or rounds < 1:
        raise ValueError(f"rounds must be a positive int, got {rounds!r}")
    return rounds / (2.0 * z * z)


def zcdp_to_epsilon(rho: float, delta: float) -> float:
    """Closed-form epsilon(delta) = rho + 2 sqrt(rho log(1/delta)) of rho-zCDP."""
    rho = _positive("rho", rho)
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def epsilon(noise_multiplier: float, rounds: int, delta: float) -> float:
    """The accountant: epsilon of ``rounds`` releases with noise multiplier z at ``delta``."""
    return zcdp_to_epsilon(zcdp_rho(noise_multiplier, rounds), delta)


def noise_for_epsilon(eps: float, rounds: int, delta: float) -> float:
    """Inverse of :func:`epsilon`: the noise multiplier z that spends exactly ``eps`` in ``rounds``."""
    eps = _positive("eps", eps)
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    L = math.log(1.0 / delta)
    rho = (math.sqrt(L + eps) - math.sqrt(L)) ** 2      # root of rho + 2 sqrt(rho L) = eps
    return math.sqrt(rounds / (2.0 * rho))


def renyi_gaussian_numeric(alpha: float, shift: float, std: float) -> float:
    """D_alpha(N(shift, std^2) || N(0, std^2)) by quadrature of  int p^alpha q^(1-alpha)."""
    # integrate in the standardised variable u = x / std, centred where the integrand peaks
    a, d = float(alpha), shift / std
    log_f = lambda u: a * (-0.5 * (u - d) ** 2) + (1 - a) * (-0.5 * u ** 2) - 0.5 * math.log(2 * math.pi)
    c = a * d                                            # the integrand is a Gaussian bump at a d
    peak = log_f(c)
    with warnings.catch_warnings():
        # quad may warn that 1e-12 is near round-off; the tests check the result to 1e-9
        warnings.simplefilter("ignore", integrate.IntegrationWarning)
        val, _ = integrate.quad(lambda u: math.exp(log_f(u) - peak), c - 40, c + 40,
                                epsabs=0, epsrel=1e-12, limit=200)
    return (peak + math.log(val)) / (a - 1)


def epsilon_numeric(noise_std: float, sensitivity: float, rounds: int, delta: float) -> float:
    """epsilon(delta) the long way: quadrature Renyi divergences, composed, minimised over alpha."""
    L = math.log(1.0 / delta)
    total = lambda a: rounds * renyi_gaussian_numeric(a, sensitivity, noise_std)
    obj = lambda la: total(1 + math.exp(la)) + L / math.exp(la)   # alpha = 1 + e^la > 1
    res = optimize.minimize_scalar(obj, bounds=(-12, 12), method="bounded",
                                   options={"xatol": 1e-10})
    return float(res.fun)
