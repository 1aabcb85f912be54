import numpy as np
import pytest
import torch
import torch.nn.functional as F

from reprobook.learning.continual import ContinualConfig, split_by_class, train_continual
from reprobook.learning.saliency_modulation import (ModulatedLearner, SaliencyNet, StageNet, accuracy,
                                                    fgsm, saliency_kl, stack_inputs, train_saliency)

W = (4, 8, 8)


def batch(n=6, size=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    img = torch.rand(n, size, size, generator=g)
    m = torch.rand(n, size, size, generator=g)
    return stack_inputs(img, m / m.sum(dim=(1, 2), keepdim=True)), torch.arange(n) % 4


def test_classification_gradients_never_reach_the_saliency_net():
    torch.manual_seed(0)
    sal = SaliencyNet(W)
    model = ModulatedLearner(4, "saliency", sal, widths=W)
    x, y = batch()
    F.cross_entropy(model(x), y).backward()
    assert all(p.grad is None and not p.requires_grad for p in model.saliency.parameters())
    assert all(p.grad is not None for p in model.backbone.parameters())


def test_constant_modulation_is_the_plain_learner_and_saliency_changes_logits():
    x, _ = batch()
    torch.manual_seed(0)
    plain = ModulatedLearner(4, "none", widths=W)
    const = ModulatedLearner(4, "constant", widths=W)
    const.load_state_dict(plain.state_dict())
    torch.testing.assert_close(const(x), plain(x), rtol=0, atol=0)
    torch.manual_seed(1)
    ser = ModulatedLearner(4, "saliency", SaliencyNet(W), widths=W)
    ser.backbone.load_state_dict(plain.backbone.state_dict())
    ser.head.load_state_dict(plain.head.state_dict())
    assert (ser(x) - plain(x)).abs().max() > 1e-3


def test_oracle_reads_the_map_channel_and_nothing_else_does():
    torch.manual_seed(0)
    oracle = ModulatedLearner(4, "oracle", widths=W)
    plain = ModulatedLearner(4, "none", widths=W)
    x, _ = batch()
    moved = x.clone()
    moved[:, 1] = torch.roll(x[:, 1], shifts=5, dims=-1)
    assert (oracle(moved) - oracle(x)).abs().max() > 1e-4
    torch.testing.assert_close(plain(moved), plain(x), rtol=0, atol=0)


def test_kl_is_zero_on_a_perfect_prediction_and_training_lowers_it():
    t = torch.rand(3, 8, 8)
    t = t / t.sum(dim=(1, 2), keepdim=True)
    assert saliency_kl(torch.log(t), t).item() == pytest.approx(0.0, abs=1e-6)
    assert saliency_kl(torch.full_like(t, -np.log(64)), t).item() > 0
    g = torch.Generator().manual_seed(0)
    img = torch.zeros(32, 1, 12, 12)
    maps = torch.zeros(32, 12, 12)
    for i in range(32):
        r, c = torch.randint(0, 8, (2,), generator=g).tolist()
        img[i, 0, r:r + 4, c:c + 4] = 1.0
        maps[i, r:r + 4, c:c + 4] = 1.0 / 16
    torch.manual_seed(0)
    hist = train_saliency(SaliencyNet(W), img, maps, epochs=8, batch=8, lr=1e-2, seed=0)
    assert hist[-1] < 0.7 * hist[0]


def test_fgsm_stays_in_the_ball_and_raises_the_loss():
    torch.manual_seed(0)
    model = ModulatedLearner(4, "saliency", SaliencyNet(W), widths=W)
    x, y = batch(8)
    adv = fgsm(model, x, y, 0.05)
    assert (adv[:, 0] - x[:, 0]).abs().max() <= 0.05 + 1e-6
    assert adv.min() >= 0 and adv.max() <= 1
    torch.testing.assert_close(adv[:, 1], x[:, 1])
    with torch.no_grad():
        assert F.cross_entropy(model(adv), y) > F.cross_entropy(model(x), y)


def test_modulated_learner_learns_two_easy_tasks_with_adam():
    g = torch.Generator().manual_seed(0)
    n = 64
    y = torch.arange(n) % 4
    img = torch.rand(n, 8, 8, generator=g) * 0.2
    for i in range(n):                 # class k: a bright bar in row 2k
        img[i, 2 * int(y[i])] = 1.0
    x = stack_inputs(img, torch.ones(n, 8, 8) / 64)
    tasks = split_by_class(x, y, x, y, 2)
    torch.manual_seed(0)
    model = ModulatedLearner(4, "none", widths=W)
    res = train_continual(model, tasks, "er", ContinualConfig(epochs=6, batch=8, replay_batch=8,
                                                              buffer=32, lr=1e-2), seed=0, optimizer="adam")
    assert res.R[-1].mean() > 0.6
    assert accuracy(model, tasks[0].x_test, tasks[0].y_test, classes=(0, 1)) >= \
        accuracy(model, tasks[0].x_test, tasks[0].y_test)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="mode"):
        ModulatedLearner(4, "halo")
    with pytest.raises(ValueError, match="needs a saliency network"):
        ModulatedLearner(4, "saliency")
    with pytest.raises(ValueError, match="architecture"):
        ModulatedLearner(4, "saliency", SaliencyNet((4, 8, 16)), widths=W)
    with pytest.raises(ValueError, match="channel 1"):
        ModulatedLearner(4, "oracle", widths=W)(torch.zeros(2, 1, 8, 8))
    with pytest.raises(ValueError, match="images"):
        StageNet(1, W, (1, 2, 2)).features(torch.zeros(2, 3, 8, 8))
