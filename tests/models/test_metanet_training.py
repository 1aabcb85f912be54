"""Training metanetwork regressors: they learn, are deterministic, follow torch's AdamW exactly
member by member, augmentation, bad input."""
import math

import pytest
import torch

from reprobook.data.sine_mlps import make_sine_mlp_zoo
from reprobook.models.graph_metanet import GMN, ScaleGMN
from reprobook.models.metanet_training import (FitConfig, _lr_factor, fit_ensemble, fit_regressor,
                                               predict)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def zoo():
    return make_sine_mlp_zoo(60, hidden=(4, 4), steps=60, generator=torch.Generator().manual_seed(0))


def _fit(model, zoo, **kw):
    torch.manual_seed(0)
    cfg = FitConfig(**{"epochs": 6, "batch_size": 16, "lr": 3e-3, **kw})
    return fit_regressor(model, zoo.weights, zoo.biases, zoo.omega, cfg,
                         generator=torch.Generator().manual_seed(1))


def test_training_lowers_the_loss_and_predicts_in_target_units(zoo):
    torch.manual_seed(0)
    fit = _fit(ScaleGMN(zoo.layout, d=8, n_layers=2), zoo, epochs=10)
    assert len(fit.history) == 10 and fit.history[-1] < fit.history[0]
    pred = fit.predict(zoo.weights, zoo.biases)
    assert pred.shape == (60,)
    assert abs(float(pred.mean()) - float(zoo.omega.mean())) < 0.5      # de-standardised
    assert not fit.model.training


def test_same_generator_same_model(zoo):
    torch.manual_seed(0)
    a = _fit(GMN(zoo.layout, d=8, n_layers=2), zoo, augment=True)
    torch.manual_seed(0)
    b = _fit(GMN(zoo.layout, d=8, n_layers=2), zoo, augment=True)
    assert a.history == b.history
    torch.testing.assert_close(a.predict(zoo.weights, zoo.biases), b.predict(zoo.weights, zoo.biases),
                               rtol=0, atol=0)


def test_augmentation_changes_training_but_not_the_invariant_model(zoo):
    # in the first epoch (same batches: the order is drawn before the augmentations) a ScaleGMN
    # sees the same functions either way, so augmenting it changes nothing but round-off; a GMN
    # sees different inputs, so its training differs
    torch.manual_seed(0)
    s0 = _fit(ScaleGMN(zoo.layout, d=8, n_layers=2), zoo)
    torch.manual_seed(0)
    s1 = _fit(ScaleGMN(zoo.layout, d=8, n_layers=2), zoo, augment=True)
    assert abs(s0.history[0] - s1.history[0]) < 1e-4
    torch.manual_seed(0)
    g0 = _fit(GMN(zoo.layout, d=8, n_layers=2), zoo)
    torch.manual_seed(0)
    g1 = _fit(GMN(zoo.layout, d=8, n_layers=2), zoo, augment=True)
    assert abs(g0.history[0] - g1.history[0]) > 1e-3


def test_input_scales_come_from_the_training_set(zoo):
    torch.manual_seed(0)
    fit = _fit(GMN(zoo.layout, d=8, n_layers=1), zoo, epochs=1)
    torch.testing.assert_close(fit.model.w_scale[1], zoo.weights[1].pow(2).mean().sqrt())


def test_predict_batches_agree(zoo):
    m = GMN(zoo.layout, d=8, n_layers=1).eval()
    torch.testing.assert_close(predict(m, zoo.weights, zoo.biases, batch_size=7),
                               predict(m, zoo.weights, zoo.biases, batch_size=100))


def test_bad_input_is_named(zoo):
    m = GMN(zoo.layout, d=8, n_layers=1)
    g = torch.Generator()
    with pytest.raises(ValueError, match="one target per MLP"):
        fit_regressor(m, zoo.weights, zoo.biases, zoo.omega[:5], generator=g)
    with pytest.raises(TypeError, match="generator"):
        fit_regressor(m, zoo.weights, zoo.biases, zoo.omega, generator=0)
    with pytest.raises(ValueError, match="epochs"):
        FitConfig(epochs=0)
    with pytest.raises(ValueError, match="lr"):
        FitConfig(lr=0.0)


def _reference_adamw(zoo, cfg, init_seed, generator):
    """The plain loop: torch.optim.AdamW, clip_grad_norm_, the warm-up/cosine schedule."""
    torch.manual_seed(init_seed)
    model = ScaleGMN(zoo.layout, d=8, n_layers=2).double()
    model.set_input_scales(zoo.weights, zoo.biases)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    y = (zoo.omega - zoo.omega.mean()) / zoo.omega.std()
    n = len(zoo)
    spe = math.ceil(n / cfg.batch_size)
    total = cfg.epochs * spe
    warmup = max(1, round(cfg.warmup_fraction * total))
    step = 0
    for _ in range(cfg.epochs):
        order = torch.randperm(n, generator=generator)
        for s in range(spe):
            idx = order[s * cfg.batch_size:(s + 1) * cfg.batch_size]
            for group in opt.param_groups:
                group["lr"] = cfg.lr * _lr_factor(step, total, warmup)
            loss = ((model([w[idx] for w in zoo.weights], [b[idx] for b in zoo.biases])
                     - y[idx]) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            step += 1
    return model


def test_ensemble_members_follow_torch_adamw_exactly():
    zoo = make_sine_mlp_zoo(30, hidden=(4, 4), steps=20, generator=torch.Generator().manual_seed(0),
                            dtype=torch.float64)
    cfg = FitConfig(epochs=3, batch_size=12, lr=3e-3)
    fits = fit_ensemble(lambda: ScaleGMN(zoo.layout, d=8, n_layers=2), zoo.weights, zoo.biases,
                        zoo.omega, cfg, init_seeds=[5, 7],
                        generators=[torch.Generator().manual_seed(1),
                                    torch.Generator().manual_seed(2)])
    for fit, (init, gen) in zip(fits, ((5, 1), (7, 2))):
        ref = _reference_adamw(zoo, cfg, init, torch.Generator().manual_seed(gen))
        for p, q in zip(ref.parameters(), fit.model.parameters()):
            torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-9, atol=1e-12)


def test_members_with_own_learning_rates_and_augmentation(zoo):
    cfg = FitConfig(epochs=2, batch_size=16)
    gens = lambda: [torch.Generator().manual_seed(3), torch.Generator().manual_seed(4)]  # noqa: E731
    both = fit_ensemble(lambda: GMN(zoo.layout, d=8, n_layers=1), zoo.weights, zoo.biases,
                        zoo.omega, cfg, init_seeds=[0, 1], generators=gens(), lrs=[1e-3, 1e-2],
                        augment=[False, True])
    alone = fit_ensemble(lambda: GMN(zoo.layout, d=8, n_layers=1), zoo.weights, zoo.biases,
                         zoo.omega, FitConfig(epochs=2, batch_size=16, lr=1e-2, augment=True),
                         init_seeds=[1], generators=gens()[1:])
    assert [f.lr for f in both] == [1e-3, 1e-2]
    torch.testing.assert_close(both[1].predict(zoo.weights, zoo.biases),
                               alone[0].predict(zoo.weights, zoo.biases), rtol=1e-4, atol=1e-5)


def test_unused_parameters_are_left_alone(zoo):
    # a ScaleGMN with no rounds never uses its edge embedding: no gradient, no update, no decay
    torch.manual_seed(0)
    m = ScaleGMN(zoo.layout, d=8, n_layers=0)
    before = m.embed_e.weight.detach().clone()
    fit = fit_regressor(m, zoo.weights, zoo.biases, zoo.omega, FitConfig(epochs=2),
                        generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(fit.model.embed_e.weight, before, rtol=0, atol=0)


def test_ensemble_arguments_are_checked(zoo):
    make = lambda: GMN(zoo.layout, d=8, n_layers=1)  # noqa: E731
    with pytest.raises(ValueError, match="one init seed and one generator"):
        fit_ensemble(make, zoo.weights, zoo.biases, zoo.omega, init_seeds=[0, 1],
                     generators=[torch.Generator()])
    with pytest.raises(ValueError, match="positive learning rates"):
        fit_ensemble(make, zoo.weights, zoo.biases, zoo.omega, init_seeds=[0],
                     generators=[torch.Generator()], lrs=[0.0])
    with pytest.raises(ValueError, match="init_seed"):
        fit_regressor(make, zoo.weights, zoo.biases, zoo.omega, generator=torch.Generator())
