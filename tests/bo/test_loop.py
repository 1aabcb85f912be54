"""One decision and a short BO loop run, are deterministic, and reject bad input."""
import pytest
import torch

from reprobook.bo.loop import one_step, run_bo, sobol_design
from reprobook.bo.test_functions import make_problem

FAST = dict(acq_kw=dict(n_raw=64, n_restarts=2, steps=5))


def test_one_step_fields_and_determinism():
    p = make_problem("branin")
    kw = dict(svgp_steps=20, variants={"eulbo": dict(epochs=4, steps_per_epoch=2),
                                       "x-only": dict(epochs=4, steps_per_epoch=2, optimise_model=False)},
              bound_points=1, **FAST)
    a = one_step(p, 20, 4, seed=3, **kw)
    b = one_step(p, 20, 4, seed=3, **kw)
    assert a["svgp"]["err"] == b["svgp"]["err"] and a["eulbo"]["err"] == b["eulbo"]["err"]
    for k in ("svgp", "eulbo", "exact", "x-only"):
        assert ((a[k]["x"] >= 0) & (a[k]["x"] <= 1)).all()
        assert 0 <= a[k]["ei"] <= a["ei_max"] + 1e-12
    assert a["exact"]["err"] == 0.0
    assert len(a["bound_gaps"]) == 3 * 5 and max(a["bound_gaps"]) <= 0
    assert list(a["bound_gaps_by"]) == ["svgp", "eulbo", "x-only"] and len(a["bound_xs"]) == 5
    assert sum(a["bound_gaps_by"].values(), []) == a["bound_gaps"]


@pytest.mark.parametrize("method", ["svgp", "eulbo", "exact"])
def test_run_bo_budget_and_monotone(method):
    p = make_problem("branin")
    out = run_bo(p, method, seed=0, n_init=6, n_iter=2, n_inducing=4, init_steps=10, model_steps=3,
                 eulbo_kw=dict(epochs=2, steps_per_epoch=2), **FAST)
    assert out["best"].shape == (8,) and (out["best"].diff() >= 0).all()
    assert ((out["X"] >= 0) & (out["X"] <= 1)).all()


def test_bad_input():
    p = make_problem("branin")
    with pytest.raises(ValueError, match="method"):
        run_bo(p, "random", seed=0)
    with pytest.raises(ValueError, match="n_inducing"):
        run_bo(p, "svgp", seed=0, n_init=4, n_inducing=8)
    with pytest.raises(ValueError, match="n_inducing"):
        one_step(p, 10, 20, seed=0)
    with pytest.raises(ValueError, match="n must be"):
        sobol_design(2, 0, 0)
    assert sobol_design(2, 4, 1).shape == (4, 2)
    assert torch.equal(sobol_design(2, 4, 1), sobol_design(2, 4, 1))
