import numpy as np
import pytest

from reprobook import rng
from reprobook.stats.bnp_dro import (augment, draw_mc, gaussian_base, lad_base, lad_lasso,
                                     mc_criterion, mc_losses, minimize_mc_squared,
                                     neutral_criterion_absolute, neutral_criterion_squared,
                                     neutral_minimizer_squared, phi, phi_inv, phi_prime, ridge,
                                     sgd_paper)


def problem(n=40, d=6, seed=0):
    g = rng(seed, 0)
    X = g.normal(size=(n, d))
    y = X[:, 0] - X[:, 1] + 0.5 * g.normal(size=n)
    return X, y


def test_phi_inverse_derivative_and_neutral_limit():
    t = np.linspace(-1, 3, 9)
    for beta in (0.5, 2.0, np.inf):
        np.testing.assert_allclose(phi_inv(phi(t, beta), beta), t, atol=1e-12)
    h = 1e-6
    np.testing.assert_allclose((phi(t + h, 0.7) - phi(t - h, 0.7)) / (2 * h), phi_prime(t, 0.7),
                               rtol=1e-6)
    np.testing.assert_allclose(phi(t, 1e9), t, atol=1e-8)
    with pytest.raises(ValueError, match="beta"):
        phi(t, 0.0)


def test_ridge_identity_via_sigma_points_and_sklearn():
    from sklearn.linear_model import Ridge

    X, y = problem()
    for alpha in (0.01, 1.0, 7.5):
        a = neutral_minimizer_squared(X, y, alpha)
        np.testing.assert_allclose(a, ridge(X, y, alpha), atol=1e-10)
        sk = Ridge(alpha=alpha, fit_intercept=False, solver="cholesky").fit(X, y).coef_
        np.testing.assert_allclose(a, sk, atol=1e-8)
        th = rng(1, 0).normal(size=X.shape[1])
        # closed form 1 + |theta|^2 for E_p0 of the squared loss
        n = len(y)
        assert neutral_criterion_squared(th, X, y, alpha) == pytest.approx(
            (alpha * (1 + th @ th) + np.sum((y - X @ th) ** 2)) / (alpha + n))


def test_lasso_identity_value():
    X, y = problem()
    d, n, alpha, c = X.shape[1], len(y), 3.0, 2.0
    for s in range(5):
        th = rng(2, s).normal(size=d)
        lhs = (alpha + n) * neutral_criterion_absolute(th, X, y, alpha, c)
        assert lhs == pytest.approx(lad_lasso(th, X, y, alpha * c / d), rel=1e-13)
    assert lad_base(3, 1.0).shape == (6, 4)


@pytest.mark.parametrize("kind", ["dirichlet_multinomial", "stick_breaking"])
def test_mc_weights_and_unbiasedness(kind):
    X, y = problem(n=30, d=4)
    n, alpha = len(y), 5.0
    s = draw_mc(n, alpha, 3000, 60, rng(3, 0), kind=kind)
    np.testing.assert_allclose(s.w.sum(1), 1.0, atol=1e-12)
    assert s.w.min() >= 0 and s.idx.max() == n + s.n_base - 1
    Z = augment(np.column_stack([y, X]), s, gaussian_base(s.n_base, 5, rng(3, 1)))
    th = np.array([0.5, -0.5, 0.2, 0.0])
    L = mc_losses(th, Z, s)
    exact = neutral_criterion_squared(th, X, y, alpha)
    assert abs(L.mean() - exact) < 4 * L.std(ddof=1) / np.sqrt(L.size)
    assert mc_criterion(th, Z, s, np.inf) == pytest.approx(L.mean())
    assert mc_criterion(th, Z, s, 0.5) > L.mean()           # aversion: certainty equivalent


def test_minimizer_and_sgd_agree_with_the_criterion():
    X, y = problem(n=50, d=5)
    s = draw_mc(50, 1.0, 200, 30, rng(4, 0))
    Z = augment(np.column_stack([y, X]), s, gaussian_base(s.n_base, 6, rng(4, 1)))
    neutral = minimize_mc_squared(Z, s, np.inf)
    averse = minimize_mc_squared(Z, s, 0.5)
    for th, beta in ((neutral, np.inf), (averse, 0.5)):      # each is a minimum of its own
        for e in np.eye(5):
            for sign in (1, -1):
                assert mc_criterion(th, Z, s, beta) <= mc_criterion(th + sign * 1e-3 * e, Z, s,
                                                                    beta) + 1e-12
    assert mc_criterion(averse, Z, s, 0.5) <= mc_criterion(neutral, Z, s, 0.5)
    # many small steps reach the neutral minimiser (the scale is 1, so no early stopping)
    th = sgd_paper([Z], [s], np.inf, n_steps=4000, step0=5.0, scale=1.0, rng=rng(4, 2))[0]
    assert np.max(np.abs(th - neutral)) < 0.05


def test_bad_arguments():
    with pytest.raises(ValueError, match="alpha"):
        draw_mc(10, 0.0, 5, 5, rng(0))
    with pytest.raises(ValueError, match="kind"):
        draw_mc(10, 1.0, 5, 5, rng(0), kind="polya")
    with pytest.raises(TypeError, match="Generator"):
        draw_mc(10, 1.0, 5, 5, 0)
    s = draw_mc(10, 1.0, 5, 5, rng(0))
    with pytest.raises(ValueError, match="rows"):
        augment(np.zeros((9, 3)), s, np.zeros((s.n_base, 3)))


def test_lasso_minimizer_matches_sklearn_quantile_regressor():
    from sklearn.linear_model import QuantileRegressor

    from reprobook.stats.bnp_dro import minimize_neutral_absolute

    X, y = problem(n=40, d=5)
    n, d, alpha, c = 40, 5, 20.0, 1.0
    ours = minimize_neutral_absolute(X, y, alpha, c)
    lam = alpha * c / d                      # LAD-LASSO penalty; sklearn's objective is half LAD / n
    sk = QuantileRegressor(quantile=0.5, alpha=lam / (2 * n), fit_intercept=False,
                           solver="highs").fit(X, y).coef_
    assert lad_lasso(ours, X, y, lam) == pytest.approx(lad_lasso(sk, X, y, lam), rel=1e-8)


def test_sparse_regression_shapes():
    from reprobook.stats.bnp_dro import sparse_regression

    Xtr, ytr, Xte, yte, th = sparse_regression(20, 30, 6, 2, 0.3, 0.5, rng(0, 0))
    assert Xtr.shape == (20, 6) and Xte.shape == (30, 6) and th.sum() == 2
    with pytest.raises(ValueError, match="rho"):
        sparse_regression(20, 30, 6, 2, 1.0, 0.5, rng(0, 0))


def test_sigma_points_match_the_gaussian_moments_to_order_three():
    from reprobook.stats.bnp_dro import sigma_points

    P = sigma_points(5)
    assert P.shape == (10, 5)
    np.testing.assert_allclose(P.mean(0), 0.0, atol=1e-15)
    np.testing.assert_allclose(P.T @ P / len(P), np.eye(5), atol=1e-14)
    np.testing.assert_allclose(np.einsum("ni,nj,nk->ijk", P, P, P), 0.0, atol=1e-12)
    # a different radius scales the covariance by radius^2 / dim
    np.testing.assert_allclose(sigma_points(5, 1.0).T @ sigma_points(5, 1.0) / 10, np.eye(5) / 5)
    with pytest.raises(ValueError, match="dim"):
        sigma_points(0)


def test_weighted_lstsq_solves_the_weighted_normal_equations():
    from reprobook.stats.bnp_dro import weighted_lstsq

    g = rng(5, 0)
    Z = g.normal(size=(30, 4))
    w = g.uniform(0.1, 3.0, 30)
    X, y = Z[:, 1:], Z[:, 0]
    np.testing.assert_allclose(weighted_lstsq(Z, w),
                               np.linalg.solve(X.T @ (w[:, None] * X), X.T @ (w * y)), atol=1e-12)
    # squaring the weights (rows scaled by w, not sqrt(w)) gives another answer
    assert np.max(np.abs(weighted_lstsq(Z, w**2) - weighted_lstsq(Z, w))) > 1e-3
    with pytest.raises(ValueError, match="weights"):
        weighted_lstsq(Z, w[:-1])


def test_weighted_lad_matches_sklearn_with_sample_weights():
    from sklearn.linear_model import QuantileRegressor

    from reprobook.stats.bnp_dro import weighted_lad

    g = rng(6, 0)
    X = g.normal(size=(40, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + g.standard_t(2, 40)
    w = g.uniform(0.2, 2.0, 40)
    ours = weighted_lad(np.column_stack([y, X]), w)
    sk = QuantileRegressor(quantile=0.5, alpha=0.0, fit_intercept=False,
                           solver="highs").fit(X, y, sample_weight=w).coef_
    obj = lambda th: np.sum(w * np.abs(y - X @ th))
    assert obj(ours) == pytest.approx(obj(sk), rel=1e-9)
    with pytest.raises(ValueError, match="weights"):
        weighted_lad(np.column_stack([y, X]), -w)


def test_weighted_risks_and_the_dp_variance_identity():
    from reprobook.stats.bnp_dro import (dp_risk_variance, gaussian_base_squared_losses,
                                         truncation_variance_factor, weighted_risks)
    X, y = problem(n=30, d=4)
    n, alpha = len(y), 5.0
    th = rng(3, 0).normal(size=4)
    h = (y - X @ th) ** 2
    for kind, T in (("stick_breaking", 400), ("dirichlet_multinomial", 10)):
        s = draw_mc(n, alpha, 20000, T, rng(3, 1), kind=kind)
        hb, m1, m2 = gaussian_base_squared_losses(th, s.n_base, rng(3, 2))
        L = weighted_risks(h, s, hb)
        mean = (alpha * m1 + h.sum()) / (alpha + n)
        assert L.mean() == pytest.approx(mean, rel=0.02)
        ratio = np.mean((L - mean) ** 2) / dp_risk_variance(h, m1, m2, alpha)
        assert ratio == pytest.approx(truncation_variance_factor(alpha, n, T, kind), rel=0.06)
    assert truncation_variance_factor(alpha, n, 10, "dirichlet_multinomial") == pytest.approx(
        1 + 35 / 11)
    assert truncation_variance_factor(alpha, n, 2000, "stick_breaking") == pytest.approx(1.0)
    with pytest.raises(ValueError, match="losses at the data"):
        weighted_risks(h[:-1], s, hb)
    with pytest.raises(ValueError, match="kind"):
        truncation_variance_factor(alpha, n, 10, "polya")


def test_gd_least_squares_is_the_expected_sgd_step():
    from reprobook.stats.bnp_dro import gd_least_squares
    X, y = problem(n=40, d=6)
    X2, y2 = problem(n=25, d=6, seed=1)
    fin, snaps = gd_least_squares([X, X2], [y, y2], n_steps=50, step0=50.0, scale=1e-2,
                                  snapshots=[1, 50])
    th = np.zeros(6)
    for t in range(1, 51):
        th = th + 50.0 / (100 + np.sqrt(t)) * 1e-2 * 2 / 25 * X2.T @ (y2 - X2 @ th)
        if t == 1:
            np.testing.assert_allclose(snaps[1][1], th)
    np.testing.assert_allclose(fin[1], th, atol=1e-12)
    np.testing.assert_allclose(snaps[50], fin)
    # many steps reach least squares
    long = gd_least_squares([X], [y], n_steps=20000, step0=50.0, scale=1.0)
    np.testing.assert_allclose(long[0], np.linalg.lstsq(X, y, rcond=None)[0], atol=1e-6)
    with pytest.raises(ValueError, match="problem 1"):
        gd_least_squares([X, X2[:, :3]], [y, y2], n_steps=5, step0=1.0)


def test_sgd_per_problem_streams_do_not_depend_on_the_batch():
    X, y = problem(n=30, d=4)
    X2, y2 = problem(n=30, d=4, seed=1)
    probs = []
    for i, (Xi, yi) in enumerate(((X, y), (X2, y2))):
        s = draw_mc(30, 1.0, 20, 5, rng(5, i))
        probs.append((augment(np.column_stack([yi, Xi]), s, gaussian_base(s.n_base, 5, rng(6, i))), s))
    both = sgd_paper([p[0] for p in probs], [p[1] for p in probs], 1.0, n_steps=100, step0=5.0,
                     rng=[rng(7, 0), rng(7, 1)])
    alone = sgd_paper([probs[0][0]], [probs[0][1]], 1.0, n_steps=100, step0=5.0, rng=[rng(7, 0)])
    np.testing.assert_array_equal(both[0], alone[0])
    with pytest.raises(ValueError, match="one per problem"):
        sgd_paper([probs[0][0]], [probs[0][1]], 1.0, n_steps=10, step0=5.0, rng=[rng(7, 0)] * 2)


def test_gd_least_squares_series_path_matches_the_loop():
    from reprobook.stats.bnp_dro import gd_least_squares
    X, y = problem(n=40, d=6)
    fin = gd_least_squares([X], [y], n_steps=300, step0=50.0, scale=1e-3)   # small steps: series
    th = np.zeros(6)
    for t in range(1, 301):
        th = th + 50.0 / (100 + np.sqrt(t)) * 1e-3 * 2 / 40 * X.T @ (y - X @ th)
    np.testing.assert_allclose(fin[0], th, rtol=1e-10, atol=1e-13)
