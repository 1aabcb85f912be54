"""Training a metanetwork regressor: it learns, it is deterministic, augmentation, bad input."""
import pytest
import torch

from reprobook.data.sine_mlps import make_sine_mlp_zoo
from reprobook.models.graph_metanet import GMN, ScaleGMN
from reprobook.models.metanet_training import FitConfig, fit_regressor, predict


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


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
