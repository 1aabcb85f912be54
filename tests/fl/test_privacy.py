import math

import pytest
import torch

from reprobook.fl import privacy as P


@pytest.mark.parametrize("z,rounds,delta", [(0.5, 1, 1e-5), (2.0, 10, 1e-5), (5.0, 50, 1e-6)])
def test_closed_form_matches_numeric(z, rounds, delta):
    eps = P.epsilon(z, rounds, delta)
    num = P.epsilon_numeric(noise_std=z * 2.0, sensitivity=2.0, rounds=rounds, delta=delta)
    assert abs(eps - num) / eps < 1e-9


def test_closed_form_identities():
    rho = P.zcdp_rho(3.0, 7)
    assert rho == 7 / 18
    L = math.log(1e5)
    alpha = 1 + math.sqrt(L / rho)                       # the optimal Renyi order
    assert abs(alpha * rho + L / (alpha - 1) - P.zcdp_to_epsilon(rho, 1e-5)) < 1e-12
    for eps in (0.5, 8.0, 50.0):
        z = P.noise_for_epsilon(eps, 12, 1e-5)
        assert abs(P.epsilon(z, 12, 1e-5) - eps) < 1e-10 * eps
    zs = [0.5, 1, 2, 4]
    e = [P.epsilon(z, 5, 1e-5) for z in zs]
    assert all(a > b for a, b in zip(e, e[1:]))


def test_renyi_quadrature():
    assert abs(P.renyi_gaussian_numeric(3.0, 1.0, 2.0) - 3.0 / 8.0) < 1e-12


def test_mechanism_noise_scale_and_clipping():
    m = P.GaussianMechanism(clip=0.5, noise_multiplier=3.0)
    assert m.sensitivity == 1.0 and m.noise_std == 3.0
    assert abs(P.probe_noise_std(m) - 3.0) < 1e-12
    x = torch.ones(100, dtype=torch.float64)
    assert abs(float(P.clip_l2(x, 0.5).norm()) - 0.5) < 1e-12
    assert torch.equal(P.clip_l2(x * 1e-3, 0.5), x * 1e-3)


def test_errors():
    with pytest.raises(ValueError, match="noise_multiplier"):
        P.GaussianMechanism(1.0, 0.0)
    with pytest.raises(ValueError, match="delta"):
        P.zcdp_to_epsilon(1.0, 1.5)
    with pytest.raises(ValueError, match="rounds"):
        P.zcdp_rho(1.0, 0)
    with pytest.raises(ValueError, match="clip"):
        P.clip_l2(torch.ones(3), -1)


def test_row_clipping_and_its_sensitivity():
    m = P.RowClippedGaussianMechanism(clip=1.0, noise_multiplier=2.0, n_rows=9)
    assert m.sensitivity == 6.0 and m.noise_std == 12.0
    assert abs(P.probe_noise_std(m, shape=(9, 4)) - 12.0) < 1e-12
    x = torch.tensor([[3.0, 4.0], [0.3, 0.4]] * 4 + [[0.0, 0.0]], dtype=torch.float64)
    c = m.clip_message(x)
    assert torch.allclose(c.norm(dim=-1)[:8], torch.tensor([1.0, 0.5] * 4, dtype=torch.float64))
    assert torch.equal(c[8], x[8])
    # the bound holds for any two messages: rows at opposite ends of their balls reach it
    a, b = torch.zeros(9, 2, dtype=torch.float64), torch.zeros(9, 2, dtype=torch.float64)
    a[:, 0], b[:, 0] = 5.0, -5.0
    assert abs(float((m.clip_message(a) - m.clip_message(b)).norm()) - m.sensitivity) < 1e-12
    with pytest.raises(ValueError, match="shape"):
        m.clip_message(torch.ones(3, 2))
    with pytest.raises(ValueError, match="n_rows"):
        P.RowClippedGaussianMechanism(1.0, 1.0, 0)
    with pytest.raises(ValueError, match="dimensions"):
        P.clip_rows(torch.ones(3), 1.0)
