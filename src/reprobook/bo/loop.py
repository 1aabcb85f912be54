r"""One BO decision and whole BO loops with three surrogates under the same budget.

Methods (all maximise, on the unit cube, with standardised :math:`y` and incumbent
:math:`y^* = \max_i y_i`):

* ``"svgp"``: fit the SVGP by its ELBO, then maximise log-EI under :math:`q` (the standard pipeline);
* ``"eulbo"``: the same warm start, then joint EULBO ascent over the model and :math:`x`
  (:func:`reprobook.bo.eulbo.fit_eulbo`), started from the SVGP's EI maximiser;
* ``"exact"``: an exact GP (same prior) refitted by L-BFGS, then log-EI maximised: the reference.

:func:`one_step` measures a single decision on a fixed data set against the exact GP:
the local error :math:`|\mu_q(x) - \mu_{\text{exact}}(x)|/\sigma_{\text{exact}}(x)` at the method's own
query and the exact GP's EI there. :func:`run_bo` runs a loop and returns best-so-far values.
"""
from __future__ import annotations

import torch

from .acquisition import expected_improvement, log_expected_improvement, optimize_acquisition
from .eulbo import eulbo_bound_gap, fit_eulbo
from .exact_gp import exact_posterior, fit_exact_gp
from .svgp import DTYPE, fit_svgp, make_svgp
from .test_functions import UnitCubeProblem
from .trust_region import TrustRegion

__all__ = ["sobol_design", "standardize", "one_step", "run_bo", "METHODS"]

METHODS = ("svgp", "eulbo", "exact")


def sobol_design(dim: int, n: int, seed: int) -> torch.Tensor:
    """``n`` scrambled-Sobol points in :math:`[0,1]^{dim}` (seeded)."""
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    return torch.quasirandom.SobolEngine(dim, scramble=True, seed=seed).draw(n, dtype=DTYPE)


def standardize(y: torch.Tensor) -> torch.Tensor:
    s = y.std() if y.numel() > 1 else torch.ones((), dtype=y.dtype)
    return (y - y.mean()) / (s if s > 0 else 1.0)


def _log_ei_of(predict, best):
    def acq(Z):
        mu, var = predict(Z)
        return log_expected_improvement(mu, var.sqrt(), best)
    return acq


def one_step(problem: UnitCubeProblem, n: int, n_inducing: int, seed: int, *, svgp_steps: int = 300,
             lr: float = 0.01, variants: dict | None = None, acq_kw: dict | None = None,
             bound_points: int = 0) -> dict:
    """One decision on ``n`` Sobol points of ``problem`` by SVGP+EI, the exact GP+EI and, for each
    entry ``name: kwargs`` of ``variants``, a :func:`fit_eulbo` run warm-started from the same SVGP
    fit and its EI maximiser (default: ``{"eulbo": {}}``).

    Returns ``X, y, best``, ``models`` (name -> fitted model) and, per method
    (``"svgp"``, ``"exact"`` and each variant), a dict with the query ``x``, the model ``mean`` at it,
    the exact GP's ``mean_exact``/``sd_exact`` there, the local error ``err`` and ``ei`` (exact-GP
    EI at the query, standardised units); ``ei_max`` is the best exact-GP EI found. With
    ``bound_points > 0``, ``bound_gaps`` lists :func:`eulbo_bound_gap` at each method's query and
    at that many random points (``bound_xs``), for the fitted SVGP and every variant's model;
    ``bound_gaps_by`` holds the same values per model name.
    """
    if not isinstance(n_inducing, int) or not 1 <= n_inducing <= n:
        raise ValueError(f"n_inducing must be an int in [1, n={n}], got {n_inducing!r}")
    variants = {"eulbo": {}} if variants is None else dict(variants)
    acq_kw = dict(acq_kw or {})
    X = sobol_design(problem.dim, n, seed)
    y = standardize(problem(X))
    best = float(y.max())
    exact = fit_exact_gp(X, y)
    ex_pred = lambda Z: exact_posterior(exact, Z, grad=True)  # noqa: E731
    x_ex, _ = optimize_acquisition(_log_ei_of(ex_pred, best), problem.dim, seed=seed, **acq_kw)

    torch.manual_seed(seed)
    svgp = make_svgp(X, n_inducing, seed)
    fit_svgp(svgp, X, y, steps=svgp_steps, lr=lr)
    x_sv, _ = optimize_acquisition(_log_ei_of(svgp.predict, best), problem.dim, seed=seed, **acq_kw)
    state = {k: v.clone() for k, v in svgp.state_dict().items()}
    models = {"svgp": (svgp, x_sv), "exact": (exact, x_ex)}
    epochs = {}
    for name, kw in variants.items():
        m = make_svgp(X, n_inducing, seed)
        m.load_state_dict(state)
        kw = dict(kw)
        kw.setdefault("lr", lr)
        res = fit_eulbo(m, X, y, x_sv, best, **kw)
        models[name] = (m, res.x[0])
        epochs[name] = res.epochs
    out = dict(X=X, y=y, best=best, models={}, epochs=epochs)
    with torch.no_grad():
        for name, (m, x) in models.items():
            mu = m.predict(x[None])[0].item()
            me, ve = exact.predict(x[None])
            sd = ve.sqrt()
            out[name] = dict(x=x, mean=mu, mean_exact=me.item(), sd_exact=sd.item(),
                             err=abs(mu - me.item()) / sd.item(),
                             ei=expected_improvement(me, sd, best).item())
            out["models"][name] = m
    out["ei_max"] = max(out[k]["ei"] for k in models)
    if bound_points:
        g = torch.Generator().manual_seed(seed)
        pts = [x for _, x in models.values()] + list(torch.rand(bound_points, problem.dim, generator=g, dtype=DTYPE))
        out["bound_xs"] = pts
        out["bound_gaps_by"] = {name: [eulbo_bound_gap(m, X, y, x, best,
                                                       planted_bug=variants.get(name, {}).get("planted_bug"))
                                       for x in pts]
                                for name, (m, _) in models.items() if name != "exact"}
        out["bound_gaps"] = [g for gaps in out["bound_gaps_by"].values() for g in gaps]
    return out


def run_bo(problem: UnitCubeProblem, method: str, seed: int, *, n_init: int = 10, n_iter: int = 20,
           n_inducing: int = 16, init_steps: int = 200, model_steps: int = 30, lr: float = 0.01,
           eulbo_kw: dict | None = None, acq_kw: dict | None = None,
           trust_region: bool = True) -> dict:
    """A sequential (q = 1) BO loop; returns ``best`` (best raw value after each evaluation,
    length ``n_init + n_iter``) and the evaluated points.

    The SVGP (and the EULBO model) are warm-started across iterations: ``init_steps`` ELBO steps
    on the initial design, then ``model_steps`` per iteration; EULBO adds its joint phase on top.
    With ``trust_region`` every method proposes inside a TuRBO box around its incumbent.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    for name, v in (("n_init", n_init), ("n_iter", n_iter)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if not isinstance(n_inducing, int) or not 1 <= n_inducing <= n_init:
        raise ValueError(f"n_inducing must be an int in [1, n_init={n_init}], got {n_inducing!r}")
    eulbo_kw, acq_kw = dict(eulbo_kw or {}), dict(acq_kw or {})
    d = problem.dim
    X = sobol_design(d, n_init, seed)
    Y = problem(X)
    tr = TrustRegion(d) if trust_region else None
    if tr is not None:
        tr.best_value = float(Y.max())
    torch.manual_seed(seed)
    model = make_svgp(X, n_inducing, seed) if method != "exact" else None
    first = True
    for it in range(n_iter):
        y = standardize(Y)
        best = float(y.max())
        lo = hi = None
        if tr is not None:
            lo, hi = tr.bounds(X[Y.argmax()])
        a_seed = seed * 1000 + it
        if method == "exact":
            gp = fit_exact_gp(X, y)
            pred = lambda Z, gp=gp: exact_posterior(gp, Z, grad=True)  # noqa: E731
            x, _ = optimize_acquisition(_log_ei_of(pred, best), d, lower=lo, upper=hi, seed=a_seed,
                                        **acq_kw)
        else:
            fit_svgp(model, X, y, steps=init_steps if first else model_steps, lr=lr)
            x, _ = optimize_acquisition(_log_ei_of(model.predict, best), d, lower=lo, upper=hi,
                                        seed=a_seed, **acq_kw)
            if method == "eulbo":
                x = fit_eulbo(model, X, y, x, best, lower=lo, upper=hi, lr=lr, **eulbo_kw).x[0]
        first = False
        x = x.clamp(0.0, 1.0)
        yx = problem(x[None])
        X, Y = torch.cat([X, x[None]]), torch.cat([Y, yx])
        if tr is not None:
            tr.update(yx)
    best_trace = torch.cummax(Y, 0).values
    return dict(best=best_trace, X=X, Y=Y, restarts=tr.restarts if tr else 0)
