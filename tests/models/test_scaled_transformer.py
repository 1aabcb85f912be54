"""The multi-head transformer with width, head and depth scalings."""
import math

import pytest
import torch

from reprobook.models.parametrization import Scaling, mup
from reprobook.models.scaled_transformer import (BLOCK_WEIGHTS, Architecture, forward,
                                                 init_transformer, learning_rates, make_optimizer,
                                                 mean_field, standard, teacher_targets,
                                                 train_on_teacher, width_parametrization)


def _net(n=4, heads=2, depth=2, members=2, seed=0):
    arch = Architecture(n, heads, depth)
    return arch, init_transformer(arch, members, torch.Generator().manual_seed(seed),
                                  dtype=torch.float64)


def _x(members=2, batch=3, seq=5, seed=1):
    return torch.randn(members, batch, seq, 16, generator=torch.Generator().manual_seed(seed),
                       dtype=torch.float64)


def _reference(p, x, arch, sc):
    # one member, one sequence at a time, loops over heads: the plainest reading of the model
    N, H, L, D = arch.n, arch.heads, arch.depth, arch.width
    h = x @ p["embed"].T / math.sqrt(16)                       # (S, D)
    As = []
    for l in range(L):
        q, k, v = (h @ p[w][l].T / math.sqrt(D) for w in ("wq", "wk", "wv"))
        heads = []
        for j in range(H):
            sl = slice(j * N, (j + 1) * N)
            A = q[:, sl] @ k[:, sl].T / N ** sc.alpha_a
            As.append(A)
            heads.append(torch.softmax(A, dim=-1) @ v[:, sl])
        b = sc.beta0 * L ** -sc.alpha_l
        h = h + b * torch.cat(heads, dim=1) @ p["wo"][l].T / math.sqrt(D)
        h = h + b * torch.relu(h @ p["w1"][l].T / math.sqrt(D)) @ p["w2"][l].T / math.sqrt(D)
    return h.mean(0) @ p["readout"] * sc.readout(D), As


@pytest.mark.parametrize("sc", [mean_field(1.0, 1.0, 4.0, 0.1), mean_field(0.5, 0.5, 1.0, 1.0),
                                standard(1.0, 1.0, 4)])
def test_batched_forward_matches_a_per_head_loop(sc):
    arch, p = _net(n=3, heads=4, depth=3)
    x = _x()
    f, keep = forward(p, x, arch, sc, keep=True)
    assert f.shape == (2, 3) and keep["A"].shape == (2, 3, 3, 4, 5, 5)
    for g in range(2):
        for b in range(3):
            ref, As = _reference({k: v[g] for k, v in p.items()}, x[g, b], arch, sc)
            assert torch.allclose(f[g, b], ref, atol=1e-10)
            for l in range(3):
                for j in range(4):
                    assert torch.allclose(keep["A"][g, l, b, j], As[l * 4 + j], atol=1e-10)


def test_members_are_independent():
    arch, p = _net(members=3)
    x = _x(members=3)
    f = forward(p, x, arch, mean_field())
    one = forward({k: v[1:2] for k, v in p.items()}, x[1:2], arch, mean_field())
    assert torch.allclose(f[1:2], one)


def test_width_roles_are_the_tensor_programs_tables_in_multiplier_form():
    mf_sgd, mf_adam = width_parametrization("mean-field", "sgd"), width_parametrization(
        "mean-field", "adam")
    sp_sgd, sp_adam = width_parametrization("standard", "sgd"), width_parametrization(
        "standard", "adam")
    roles = ("embedding", "hidden", "readout")
    assert [mf_sgd.scaling(r).a for r in roles] == [0.0, 0.5, 1.0]
    assert [mf_sgd.scaling(r).c for r in roles] == [-1.0, -1.0, -1.0]
    assert [mf_adam.scaling(r).c for r in roles] == [0.0, 0.5, 0.0]
    assert [sp_sgd.scaling(r).a for r in roles] == [0.0, 0.5, 0.5]
    assert [sp_sgd.scaling(r).c for r in roles] == [0.0, -1.0, -1.0]
    assert [sp_adam.scaling(r).c for r in roles] == [0.0, -0.5, -0.5]
    assert all(p.scaling(r).b == 0.0 for p in (mf_sgd, sp_adam) for r in roles)


def test_learning_rates_follow_width_and_depth_rules():
    sc = mean_field(1.0, 1.0, 1.0, 0.5)
    a = Architecture(8, 4, 3)                                   # D = 32, L = 3
    sgd = learning_rates(sc, a, "sgd", 0.1)
    assert sgd["embed"] == pytest.approx(0.1 * 0.25 * 32)
    assert sgd["wq"] == pytest.approx(0.1 * 0.25 * 32 * 3)   # L^(2 alpha_L - 1) = L
    adam = learning_rates(sc, a, "adam", 0.1)
    assert adam["readout"] == pytest.approx(0.05)
    assert adam["w1"] == pytest.approx(0.05 / math.sqrt(32))  # L^(alpha_L - 1) = 1
    half = learning_rates(mean_field(1.0, 0.5, 1.0, 0.5), a, "adam", 0.1)
    assert half["wk"] == pytest.approx(0.05 / math.sqrt(32) / math.sqrt(3))
    # the mean-field form does not depend on the base width; SP equals it there
    base = 32
    sp = standard(1.0, 0.5, base_width=base)
    mf = learning_rates(mean_field(1.0, 0.0, 1.0, 0.5), Architecture(8, 4, 1), "sgd", 0.1)
    assert learning_rates(sp, Architecture(8, 4, 1), "sgd", 0.1) == pytest.approx(mf)
    assert sp.readout(base) == pytest.approx(mean_field(gamma0=0.5).readout(base))
    big = learning_rates(sp, Architecture(32, 4, 1), "sgd", 0.1)
    assert big["embed"] == pytest.approx(mf["embed"])         # SP: constant embedding rate
    assert big["wv"] == pytest.approx(4 * mf["wv"])            # constant rate on 1/D weights


def test_shifted_keeps_adam_steps_equivalent():
    # W = m^-a w, Adam (sign-like) step on w with rate eta m^-c moves W by eta m^-(a+c)
    s = Scaling(a=0.0, b=0.5, c=1.0)
    s2 = s.shifted(0.5, "adam")
    m = 16.0
    assert m ** -(s.a + s.c) == pytest.approx(m ** -(s2.a + s2.c))     # the step on W
    assert m ** -(s.a + s.b) == pytest.approx(m ** -(s2.a + s2.b))     # the initial W
    assert (s2.a, s2.b, s2.c) == (0.5, 0.0, 0.5)
    assert mup("adam").scaling("hidden").c == 1.0
    with pytest.raises(ValueError, match="optimizer"):
        s.shifted(0.5, "rmsprop")


def test_attention_variance_scales_as_n_to_1_minus_2_alpha():
    # at init Var A = Var(q.k) / N^(2 alpha_A) with Var(q.k) ~ N: ratio between N = 64 and 16
    for alpha, expect in ((1.0, 0.25), (0.5, 1.0)):
        v = []
        for n in (16, 64):
            arch = Architecture(n, 8, 1)
            p = init_transformer(arch, 4, torch.Generator().manual_seed(n))
            _, k = forward(p, _x(4, 4, 8, 2).float(), arch, mean_field(alpha, 1.0, 1.0, 1.0),
                           keep=True)
            v.append(k["A"].var().item())
        assert v[1] / v[0] == pytest.approx(expect, rel=0.3)


def test_training_lowers_the_teacher_loss_and_checks_arguments():
    arch, tarch = Architecture(4, 2, 2), Architecture(4, 2, 1)
    p = init_transformer(arch, 2, torch.Generator().manual_seed(0))
    teacher = init_transformer(tarch, 1, torch.Generator().manual_seed(1))
    sc = mean_field(1.0, 1.0, 1.0, 1.0)
    x = torch.randn(2, 64, 4, 16, generator=torch.Generator().manual_seed(5))
    y = teacher_targets(teacher, x, tarch)
    before = (forward(p, x, arch, sc) - y).pow(2).mean().item()
    train_on_teacher(p, arch, sc, learning_rates(sc, arch, "sgd", 0.05), "sgd", 60, 16, 4,
                     torch.Generator().manual_seed(2), teacher, tarch)
    after = (forward(p, x, arch, sc) - y).pow(2).mean().item()
    assert after < before
    assert not any(v.requires_grad for v in p.values())
    with pytest.raises(ValueError, match="optimizer"):
        make_optimizer(p, learning_rates(sc, arch, "sgd", 0.1), "lbfgs")
    with pytest.raises(ValueError, match="lrs"):
        make_optimizer(p, {"embed": 0.1}, "sgd")
    with pytest.raises(ValueError, match="x must be"):
        forward(p, x[0], arch, sc)
    with pytest.raises(ValueError, match="architecture says"):
        forward(p, x, Architecture(4, 2, 3), sc)
    with pytest.raises(ValueError, match="positive int"):
        Architecture(0, 2, 2)
    with pytest.raises(ValueError, match="width form"):
        mean_field().__class__("x", "ntk")
    with pytest.raises(ValueError, match="eta0"):
        learning_rates(sc, arch, "sgd", -1.0)
    assert set(BLOCK_WEIGHTS) < set(p)
