"""OPDF pieces: the MPO layer contracts back to the same network, KD loss, tensor constraint, training."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from reprobook.models.mpo_distill import (MPOLinear, TrainConfig, accuracy, contract, freeze_auxiliary,
                                          hinton_kd_loss, linear_layers, logits, mlp, num_params,
                                          overparameterise, teacher_targets, tensor_constraint_loss,
                                          train_classifier)

FACT = (4, 1, 4)


def data(n=60, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, generator=g)
    y = (x[:, 0] > 0).long() + 2 * (x[:, 1] > 0).long()
    return x, y


def test_mlp_init_is_a_function_of_the_generator():
    a, b = mlp([16, 16, 4], torch.Generator().manual_seed(1)), mlp([16, 16, 4], torch.Generator().manual_seed(1))
    c = mlp([16, 16, 4], torch.Generator().manual_seed(2))
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not torch.equal(a[0].weight, c[0].weight)
    assert float(a[0].weight.detach().abs().max()) <= 1 / 16 ** 0.5


def test_overparameterise_keeps_the_function_and_contracts_to_the_same_size():
    base = mlp([16, 16, 16, 4], torch.Generator().manual_seed(0))
    over = overparameterise(base, [0, 1], FACT, FACT)
    x, _ = data()
    assert torch.allclose(logits(over, x), logits(base, x), atol=1e-5)
    assert num_params(over) > num_params(base)
    back = contract(over)
    assert [type(m) for m in back] == [type(m) for m in base]
    assert num_params(back) == num_params(base)
    assert torch.allclose(logits(back, x), logits(over, x), atol=1e-6)
    assert isinstance(base[0], nn.Linear)          # the input model is not modified


def test_frozen_auxiliary_tensors_do_not_move():
    base = mlp([16, 16, 16, 4], torch.Generator().manual_seed(0))
    over = freeze_auxiliary(overparameterise(base, [0], FACT, FACT))
    layer = linear_layers(over)[0]
    before = [c.detach().clone() for c in layer.cores]
    x, y = data()
    train_classifier(over, x, y, TrainConfig(epochs=2, batch_size=20), seed=0)
    for k, (b, c) in enumerate(zip(before, layer.cores)):
        assert torch.equal(b, c) == (k != layer.center)
    assert num_params(over, trainable_only=True) == num_params(base)     # central tensor = 16 x 16


def test_hinton_kd_loss_matches_its_formula():
    g = torch.Generator().manual_seed(3)
    zs, zt = torch.randn(8, 5, generator=g), torch.randn(8, 5, generator=g)
    y = torch.randint(0, 5, (8,), generator=g)
    T, a = 3.0, 0.3
    pt = F.softmax(zt / T, -1)
    kl = (pt * (pt.log() - F.log_softmax(zs / T, -1))).sum(-1).mean()
    want = a * T * T * kl + (1 - a) * F.cross_entropy(zs, y)
    assert torch.allclose(hinton_kd_loss(zs, zt, y, T, a), want, atol=1e-6)
    assert float(hinton_kd_loss(zt, zt, y, T, 1.0)) == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(ValueError, match="shape"):
        hinton_kd_loss(zs, zt[:, :4], y)


def test_tensor_constraint_zero_on_itself_and_pulls_towards_the_target():
    teacher = mlp([16, 16, 16, 4], torch.Generator().manual_seed(5))
    student = overparameterise(mlp([16, 16, 16, 4], torch.Generator().manual_seed(6)), [0, 1], FACT, FACT)
    same = teacher_targets(overparameterise(teacher, [], FACT, FACT), {0: 0}, FACT, FACT)
    assert float(tensor_constraint_loss(overparameterise(teacher, [0], FACT, FACT), same).detach()) < 1e-10
    targets = teacher_targets(teacher, {0: 0, 1: 1}, FACT, FACT)
    start = float(tensor_constraint_loss(student, targets).detach())
    x, y = data()
    train_classifier(student, x, y, TrainConfig(epochs=20, batch_size=20, lr=1e-2, constraint_weight=10.0), seed=0,
                     targets=targets)
    assert float(tensor_constraint_loss(student, targets).detach()) < 0.5 * start
    with pytest.raises(ValueError, match="not an MPOLinear"):
        tensor_constraint_loss(teacher, targets)
    # with the central tensor included the loss also sees the centre, and is larger
    assert float(tensor_constraint_loss(student, targets, include_center=True).detach()) > 0


def test_training_is_paired_by_seed_and_learns():
    x, y = data(120)
    runs = []
    for _ in range(2):
        m = mlp([16, 16, 16, 4], torch.Generator().manual_seed(0))
        h = train_classifier(m, x, y, TrainConfig(epochs=15, batch_size=20, lr=1e-2), seed=4)
        runs.append((h.loss, accuracy(m, x, y)))
    assert runs[0] == runs[1]
    assert runs[0][0][-1] < runs[0][0][0] and runs[0][1] > 0.8
    teacher_logits = logits(mlp([16, 16, 4], torch.Generator().manual_seed(9)), x)
    m = mlp([16, 16, 16, 4], torch.Generator().manual_seed(0))
    h = train_classifier(m, x, y, TrainConfig(epochs=2, batch_size=20), seed=4, teacher_logits=teacher_logits)
    assert len(h.loss) == 2


def test_bad_input():
    x, y = data()
    m = mlp([16, 16, 4], torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="needs targets"):
        train_classifier(m, x, y, TrainConfig(epochs=1, constraint_weight=1.0), seed=0)
    with pytest.raises(ValueError, match="rows"):
        train_classifier(m, x, y, TrainConfig(epochs=1), seed=0, teacher_logits=torch.zeros(3, 4))
    with pytest.raises(ValueError, match="does not exist"):
        overparameterise(m, [5], FACT, FACT)
    with pytest.raises(ValueError, match="multiplies"):
        overparameterise(m, [0], (4, 2), (4, 4))
    with pytest.raises(ValueError, match="epochs"):
        TrainConfig(epochs=0)
    with pytest.raises(TypeError, match="nn.Linear"):
        MPOLinear.from_linear(nn.ReLU(), FACT, FACT)
