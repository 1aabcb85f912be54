import numpy as np
import pytest
import torch

from reprobook import rng
from reprobook.models.con4m import con4m, iid_classifier
from reprobook.timeseries.segment_train import SegFitConfig, fit_segments, predict_segments
from reprobook.timeseries.segments import make_groups, mvd_series


def _groups(k=0, G=6):
    s = mvd_series(G * 10 * 16, duration_range=(64, 320), crossfade=8, rng=rng(0))
    return make_groups(s, 16, 10, k=k, rng=rng(1))


def _model(make=con4m):
    torch.manual_seed(0)
    return make(3, 16, 10, 4, d=8, window_layer=False)


def test_eta_schedule_and_config_errors():
    c = SegFitConfig(epochs=10, warmup=2, ramp=4)
    assert [c.eta(e) for e in range(8)] == [0, 0, 0.25, 0.5, 0.75, 1, 1, 1]
    with pytest.raises(ValueError, match="invalid SegFitConfig"):
        SegFitConfig(epochs=0)


def test_training_lowers_the_loss_and_is_deterministic():
    g = _groups(G=4)
    cfg = SegFitConfig(epochs=4, lr=1e-2, batch_size=2, warmup=10)
    r1 = fit_segments(_model(iid_classifier), g, cfg, seed=3)
    r2 = fit_segments(_model(iid_classifier), g, cfg, seed=3)
    assert r1.loss[-1] < r1.loss[0]
    assert r1.loss == r2.loss
    assert r1.changed == [0] * 4 and np.array_equal(r1.labels, g.y)


def test_harmonisation_changes_labels_only_after_warmup():
    g = _groups(k=2, G=4)
    cfg = SegFitConfig(epochs=8, lr=1e-2, batch_size=4, warmup=2, ramp=1)
    r = fit_segments(_model(), g, cfg, seed=0, harmonise="con4m")
    assert r.changed[:2] == [0, 0]
    # at eta = 1, once the history holds only predictions, the labels follow the (barely
    # trained) model: some must change
    assert sum(r.changed) > 0 and not np.array_equal(r.labels, g.y)
    assert r.label_error[0] == pytest.approx(float((g.y != g.clean).mean()))
    # random mode makes changes too, and needs its generator
    with pytest.raises(ValueError, match="rng"):
        fit_segments(_model(), g, cfg, seed=0, harmonise="random")
    with pytest.raises(ValueError, match="pair head"):
        fit_segments(_model(iid_classifier), g, cfg, seed=0, harmonise="con4m")
    with pytest.raises(ValueError, match="unknown harmonise"):
        fit_segments(_model(), g, cfg, seed=0, harmonise="oracle")


def test_predict_segments_shapes_and_consistency_switch():
    g = _groups()
    m = _model()
    a = predict_segments(m, g)
    b = predict_segments(m, g, consistency=False)
    assert a.shape == b.shape == g.y.shape
    assert a.min() >= 0 and a.max() < 4
    m.eval()
    logits, _ = m(torch.as_tensor(g.x))
    assert np.array_equal(b, logits.argmax(-1).numpy())
