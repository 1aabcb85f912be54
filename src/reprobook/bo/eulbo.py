r"""EULBO: the expected-utility lower bound of Maus et al. (2024), for the EI utility.

**Bound.** BO wants the decision :math:`x` that maximises the posterior expected utility
:math:`\int u(x, f)\,p(f\mid D)\,df`. For any distribution :math:`q(f)`, Jensen's inequality gives

.. math::
   \log \int u(x, f)\,p(f\mid D)\,df \;\ge\;
   \underbrace{\mathbb E_q[\log p(D\mid f)] - \mathrm{KL}(q\,\|\,p)}_{\text{ELBO}(q)}
   \;+\; \mathbb E_q[\log u(x, f)] \;-\; \log p(D),

with equality at :math:`q \propto u(x, f)\,p(f\mid D)` (Lacoste-Julien et al. 2011's
utility-calibrated VI). :math:`\log p(D)` depends on neither :math:`q` nor :math:`x`, so

.. math:: \mathrm{EULBO}(q, x) = \mathrm{ELBO}(q) + \mathbb E_{q(f(x))}[\log u(x, f)]

is maximised **jointly** over the variational parameters, the inducing inputs, the kernel
hyperparameters and the query :math:`x`. The standard pipeline instead maximises the ELBO alone
and then the acquisition under the fixed :math:`q`; EULBO lets the approximation spend its few
inducing points where the decision is made.

**EI utility.** :math:`u(x, f) = \operatorname{softplus}(f(x) - y^*)`; since :math:`q(f(x))` is a 1-D
Gaussian, :math:`\mathbb E_q[\log u]` is a Gauss-Hermite sum
(:func:`reprobook.bo.acquisition.expected_log_utility_ei`), differentiable in :math:`x` and :math:`q`.

**Weighting (kept from the authors' code).** gpytorch's ``VariationalELBO`` (and
:meth:`reprobook.bo.svgp.SVGP.elbo`) returns :math:`\mathrm{ELBO}/n`. The loss is :math:`-(\mathrm{ELBO}/n + w\,\mathbb E_q[\log u])` with
:math:`w = 1`, so relative to the summed ELBO the utility carries weight :math:`n`. :math:`w = 0`
recovers plain SVGP training (and freezes :math:`x`), which is the planted bug a chapter can use.

**Optimisation.** Adam on the model (lr ``lr``) and on :math:`x` (lr ``x_lr``), *alternating* epochs of
model steps and :math:`x` steps; gradient norms clipped at 2; :math:`x` clamped to the box after
every step; stop after ``patience`` epochs without a lower epoch loss or after ``epochs`` epochs.
The model and :math:`x` are warm-started from the standard SVGP fit and its EI maximiser.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .acquisition import expected_log_utility_ei
from .svgp import SVGP, check_data

__all__ = ["eulbo_terms", "eulbo_loss", "fit_eulbo", "EulboResult", "PLANTED_BUGS"]

#: Deliberate errors a chapter can switch on to check that its claims can fail:
#: ``"no_kl"`` drops the KL term from the ELBO (the bound then breaks).
PLANTED_BUGS = (None, "no_kl")

DTYPE = torch.float64


def _check_x(x: torch.Tensor, d: int) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"x must be a torch.Tensor of shape (q, {d}) or ({d},), got {type(x).__name__}")
    x2 = x[None] if x.dim() == 1 else x
    if x2.dim() != 2 or x2.shape[-1] != d:
        raise ValueError(f"x must have shape (q, {d}) or ({d},), got {tuple(x.shape)}")
    return x2


def eulbo_terms(model: SVGP, X: torch.Tensor, y: torch.Tensor, x: torch.Tensor, best_f,
                n_points: int = 20, planted_bug: str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    r"""``(ELBO/n, E_q[log softplus(f(x) - y*)])``, both differentiable; ``x`` (q, d) is averaged
    over its q rows (q = 1 for sequential EI)."""
    check_data(X, y)
    x2 = _check_x(x, X.shape[1])
    if planted_bug not in PLANTED_BUGS:
        raise ValueError(f"planted_bug must be one of {PLANTED_BUGS}, got {planted_bug!r}")
    # one predictive pass for data and query: a single Cholesky of K_ZZ per step
    mu, var = model.predict(torch.cat([X, x2.to(X.dtype)]))
    n = X.shape[0]
    e = model.elbo(X, y, pred=(mu[:n], var[:n]))
    if planted_bug == "no_kl":
        e = e + model.kl() / X.shape[0]
    u = expected_log_utility_ei(mu[n:], var[n:], best_f, n_points=n_points).mean()
    return e, u


def eulbo_loss(model: SVGP, X, y, x, best_f, utility_weight: float = 1.0, n_points: int = 20,
               planted_bug: str | None = None):
    r""":math:`-(\mathrm{ELBO}/n + w\,\mathbb E_q[\log u(x, f)])` (to minimise)."""
    if not utility_weight >= 0:
        raise ValueError(f"utility_weight must be >= 0, got {utility_weight!r}")
    e, u = eulbo_terms(model, X, y, x, best_f, n_points, planted_bug)
    return -(e + utility_weight * u)


@dataclass
class EulboResult:
    x: torch.Tensor                       # (q, d) the query EULBO chose
    losses: list = field(default_factory=list)   # loss per epoch
    epochs: int = 0


def fit_eulbo(model: SVGP, X: torch.Tensor, y: torch.Tensor, x0: torch.Tensor, best_f, *,
              lower: torch.Tensor | None = None, upper: torch.Tensor | None = None,
              epochs: int = 30, steps_per_epoch: int = 5, lr: float = 0.01, x_lr: float = 0.01,
              grad_clip: float | None = 2.0, utility_weight: float = 1.0, optimise_x: bool = True,
              optimise_model: bool = True, alternate: bool = True, patience: int = 10,
              n_points: int = 20, planted_bug: str | None = None) -> EulboResult:
    r"""Jointly maximise EULBO over ``model`` (in place, warm start) and the query, starting at ``x0``.

    An *epoch* is ``steps_per_epoch`` full-batch Adam steps; with ``alternate`` the epochs take
    turns updating the model and ``x`` (model first), otherwise every step updates both.
    ``optimise_x=False`` keeps ``x`` at ``x0`` (an ablation: the model adapts, the decision does not);
    ``optimise_model=False`` freezes the model, so only ``x`` climbs :math:`\mathbb E_q[\log u]`
    under the plain SVGP (an ablation that separates the acquisition from the joint fit).
    """
    if not (optimise_x or optimise_model):
        raise ValueError("optimise_x and optimise_model cannot both be False")
    check_data(X, y)
    d = X.shape[1]
    x = _check_x(x0, d).detach().clone().to(DTYPE)
    lo = torch.zeros(d, dtype=DTYPE) if lower is None else torch.as_tensor(lower, dtype=DTYPE)
    hi = torch.ones(d, dtype=DTYPE) if upper is None else torch.as_tensor(upper, dtype=DTYPE)
    if lo.shape != (d,) or hi.shape != (d,) or (hi < lo).any():
        raise ValueError(f"lower and upper must have shape ({d},) with lower <= upper")
    for name, v in (("epochs", epochs), ("steps_per_epoch", steps_per_epoch), ("patience", patience)):
        if not isinstance(v, int) or v < 0:
            raise ValueError(f"{name} must be an int >= 0, got {v!r}")
    if not utility_weight >= 0:
        raise ValueError(f"utility_weight must be >= 0, got {utility_weight!r}")
    x = torch.maximum(torch.minimum(x, hi), lo).requires_grad_(True)
    params = list(model.parameters())
    opt_model = torch.optim.Adam(params, lr=lr)
    opt_x = torch.optim.Adam([x], lr=x_lr)
    best, fails, losses = float("inf"), 0, []
    for ep in range(epochs):
        model_turn = (ep % 2 == 0) or not optimise_x   # frozen model: its turns are idle (same x steps)
        total = 0.0
        for _ in range(steps_per_epoch):
            opt_model.zero_grad()
            opt_x.zero_grad()
            loss = eulbo_loss(model, X, y, x, best_f, utility_weight, n_points, planted_bug)
            loss.backward()
            if grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(params, grad_clip)
                torch.nn.utils.clip_grad_norm_([x], grad_clip)
            if not alternate:
                if optimise_model:
                    opt_model.step()
                if optimise_x:
                    opt_x.step()
            elif model_turn:
                if optimise_model:
                    opt_model.step()
            else:
                opt_x.step()
            with torch.no_grad():
                x.copy_(torch.maximum(torch.minimum(x, hi), lo))
            total += loss.item()
        losses.append(total / max(steps_per_epoch, 1))
        if total < best:
            best, fails = total, 0
        else:
            fails += 1
            if fails >= patience:
                break
    return EulboResult(x=x.detach().clone(), losses=losses, epochs=len(losses))


def eulbo_bound_gap(model: SVGP, X: torch.Tensor, y: torch.Tensor, x: torch.Tensor, best_f,
                    n_points: int = 64, planted_bug: str | None = None) -> float:
    r""":math:`\big[\mathrm{EULBO}(q, x) - \log p(D) - \log\mathbb E_{p(f\mid D)}[u(x, f)]\big]/n`
    at the model's own hyperparameters, with the *summed* ELBO (utility weight 1, as in the bound).

    The right-hand side is exact: the exact GP with the SVGP's prior gives :math:`\log p(D)` and the
    Gaussian :math:`p(f(x)\mid D)`, and :math:`\log\mathbb E[\operatorname{softplus}(f - y^*)]` is a
    Gauss-Hermite sum. Jensen's inequality says the value is :math:`\le 0` for every ``q`` and ``x``.
    """
    from .acquisition import gauss_hermite_expectation
    from .exact_gp import ExactGP

    check_data(X, y)
    x2 = _check_x(x, X.shape[1])
    if x2.shape[0] != 1:
        raise ValueError(f"x must be a single point for the bound, got {x2.shape[0]} rows")
    n = X.shape[0]
    with torch.no_grad():
        e, u = eulbo_terms(model, X, y, x2, best_f, n_points, planted_bug)
        ex = ExactGP(X, y)
        ex.prior.load_state_dict(model.prior.state_dict())
        mu, var = ex.predict(x2)
        log_eu = torch.log(gauss_hermite_expectation(
            lambda f: torch.nn.functional.softplus(f - best_f), mu, var, n_points))
        rhs = n * ex.log_marginal() + log_eu.sum()
        return float((n * e + u - rhs) / n)
