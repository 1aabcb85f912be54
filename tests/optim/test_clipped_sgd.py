"""Unit tests of reprobook.optim.clipped_sgd: the identities, and the radial reduction."""
import math

import numpy as np
import pytest
import torch
from scipy import stats

from reprobook.optim.clipped_sgd import (
    clip_by_norm, clip_level, radial_error_chain, running_mean, streaming_mean_errors,
)
from reprobook.stats.heavy_tails import NoiseModel


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def test_clip_by_norm_caps_the_norm_and_keeps_direction():
    g = torch.randn(100, 4, generator=gen(1), dtype=torch.float64) * 10
    c = clip_by_norm(g, 2.0)
    assert torch.linalg.vector_norm(c, dim=1).max() <= 2.0 + 1e-12
    cos = torch.nn.functional.cosine_similarity(c, g, dim=1)
    assert torch.allclose(cos, torch.ones(100, dtype=torch.float64))
    small = g / 1000
    assert torch.equal(clip_by_norm(small, 2.0), small)


@pytest.mark.parametrize("level", [math.inf, 1e300])
def test_infinite_or_huge_clip_is_the_identity_bit_for_bit(level):
    g = torch.randn(50, 3, generator=gen(2), dtype=torch.float64) * 1e6
    assert torch.equal(clip_by_norm(g, level), g)
    x = g.numpy()
    assert np.array_equal(clip_by_norm(x, level), x)


def test_zero_vector_stays_zero():
    z = torch.zeros(2, 3)
    assert torch.equal(clip_by_norm(z, 1.0), z)
    assert torch.equal(clip_by_norm(z, math.inf), z)
    assert np.array_equal(clip_by_norm(np.zeros((2, 3)), 1.0), np.zeros((2, 3)))


def test_clip_level_geometric_variant():
    assert clip_level(100.0, 2000, 1e-3, op_norm=1.0) == pytest.approx(
        clip_level(10.0, 2000, 1e-3))
    with pytest.raises(ValueError, match="op_norm"):
        clip_level(10.0, 100, 0.1, op_norm=11.0)


def test_clip_level_formula_and_errors():
    assert clip_level(100.0, 2000, 1e-3) == pytest.approx(math.sqrt(100 * 2000 / math.log(
        math.log(2000) / 1e-3)))
    assert clip_level(100.0, 2000, 1e-3, c=3) == pytest.approx(3 * clip_level(100.0, 2000, 1e-3))
    for bad in (dict(trace=0), dict(horizon=2), dict(delta=1.5), dict(c=0)):
        args = dict(trace=1.0, horizon=100, delta=0.1, c=1.0) | bad
        with pytest.raises(ValueError):
            clip_level(**args)


def _replay(noise, horizon, n, seed):
    """The same draws as streaming_mean_errors makes: the direction of mu*, then the samples."""
    g = gen(seed)
    direction = torch.randn(n, noise.dim, generator=g, dtype=torch.float64)
    mu = 2 * math.sqrt(noise.trace) * direction / torch.linalg.vector_norm(direction, dim=1,
                                                                          keepdim=True)
    xs = torch.stack([mu + noise.sample(n, g) for _ in range(horizon)], dim=1)   # (n, T, d)
    return mu.numpy(), xs.numpy()


def test_sgd_with_step_one_over_t_is_the_running_mean():
    noise = NoiseModel("radial-pareto", 4)
    res = streaming_mean_errors(noise, 40, {"sgd": math.inf}, 30, gen(3), checkpoints=[1, 7, 40])
    mu, xs = _replay(noise, 40, 30, 3)
    means = running_mean(xs)                                          # (n, T, d)
    for i, t in enumerate(res.checkpoints):
        direct = np.linalg.norm(means[:, t - 1] - mu, axis=1)
        assert np.max(np.abs(res.errors["sgd"][i] - direct)) <= 1e-10


def test_clipping_to_infinity_equals_sgd_exactly():
    noise = NoiseModel("radial-pareto", 3)
    res = streaming_mean_errors(noise, 60, {"sgd": math.inf, "huge": 1e300, "clipped": 1.0}, 20,
                                gen(4))
    assert np.array_equal(res.final("sgd"), res.final("huge"))
    assert not np.array_equal(res.final("sgd"), res.final("clipped"))


def test_clipped_update_matches_a_plain_loop():
    noise = NoiseModel("gaussian", 2)
    level = 0.7
    res = streaming_mean_errors(noise, 25, {"c": level}, 5, gen(5))
    mu, xs = _replay(noise, 25, 5, 5)
    for s in range(5):
        x = np.zeros(2)
        for t in range(1, 26):
            g = x - xs[s, t - 1]
            x = x - min(1.0, level / np.linalg.norm(g)) * g / t
        assert np.linalg.norm(x - mu[s]) == pytest.approx(res.final("c")[s], abs=1e-12)


@pytest.mark.parametrize("kind, d", [("radial-pareto", 1), ("radial-pareto", 5), ("gaussian", 4)])
def test_radial_chain_has_the_law_of_the_direct_simulation(kind, d):
    noise = NoiseModel(kind, d, alpha=2.5)
    levels = {"sgd": math.inf, "clipped": 2.0 * math.sqrt(d)}
    direct = streaming_mean_errors(noise, 30, levels, 3000, gen(6), checkpoints=[5, 30])
    chain = radial_error_chain(noise, 30, levels, 3000, np.random.default_rng(7),
                               checkpoints=[5, 30])
    for name in levels:
        for i in range(2):
            p = stats.ks_2samp(direct.errors[name][i], chain.errors[name][i]).pvalue
            assert p > 1e-3, (name, i, p)


def test_radial_chain_matches_a_plain_loop_given_the_same_scalars():
    # one stream, d = 3: replay the chain's (R, u) draws through the vector recursion in the
    # plane spanned by e and xi
    rng_a, rng_b = np.random.default_rng(8), np.random.default_rng(8)
    chain = radial_error_chain(NoiseModel("radial-pareto", 3), 12, {"c": 1.5}, 1, rng_a,
                               initial_error=4.0)
    from reprobook.stats.heavy_tails import (pareto_scale, sample_pareto_radius,
                                             sample_sphere_coordinate)
    e = np.array([4.0, 0.0])
    for t in range(1, 13):
        big_r = sample_pareto_radius(1, 2.2, pareto_scale(2.2, 3.0), rng_b)[0]
        u = sample_sphere_coordinate(1, 3, rng_b)[0]
        unit = e / np.linalg.norm(e)
        perp = np.array([-unit[1], unit[0]])
        xi = big_r * (u * unit + math.sqrt(1 - u * u) * perp)
        g = e - xi
        e = e - min(1.0, 1.5 / np.linalg.norm(g)) * g / t
    assert chain.final("c")[0] == pytest.approx(np.linalg.norm(e), rel=1e-10)


def test_bad_arguments_are_named():
    noise = NoiseModel("gaussian", 2)
    with pytest.raises(ValueError, match="clip_levels"):
        streaming_mean_errors(noise, 5, {}, 3, gen())
    with pytest.raises(ValueError, match="positive"):
        streaming_mean_errors(noise, 5, {"a": -1.0}, 3, gen())
    with pytest.raises(ValueError, match="checkpoints"):
        streaming_mean_errors(noise, 5, {"a": 1.0}, 3, gen(), checkpoints=[6])
    with pytest.raises(TypeError, match="torch.Generator"):
        streaming_mean_errors(noise, 5, {"a": 1.0}, 3, np.random.default_rng(0))
    with pytest.raises(TypeError, match="numpy Generator"):
        radial_error_chain(NoiseModel("radial-pareto", 2), 5, {"a": 1.0}, 3, gen())
    with pytest.raises(ValueError, match="isotropic"):
        radial_error_chain(NoiseModel("radial-pareto", 2, scales=(1.0, 2.0)), 5, {"a": 1.0}, 3,
                           np.random.default_rng(0))
    with pytest.raises(ValueError, match="T, d"):
        running_mean(np.zeros(3))
