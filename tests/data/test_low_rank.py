"""The LoRA regression task with outliers."""
import numpy as np
import pytest

from reprobook import rng
from reprobook.data.low_rank import lora_task


def test_shapes_truth_and_outliers():
    t = lora_task(rng(0), d_in=8, d_out=6, singular_values=(2.0,), rank=3, n_train=200, n_val=50,
                  n_test=30, noise=0.1, outlier_frac=0.1, outlier_scale=20.0)
    assert t.train_inputs.shape == (200, 8) and t.train_targets.shape == (200, 6)
    assert t.up0.shape == (6, 3) and not t.up0.any() and t.down0.shape == (8, 3)
    assert np.abs(t.down0).max() <= 1 / np.sqrt(8)
    assert np.allclose(np.linalg.svd(t.delta, compute_uv=False)[:2], [2.0, 0.0], atol=1e-12)
    assert t.train_outliers.sum() == 20 and t.val_outliers.sum() == 5
    assert np.allclose(t.test_targets, t.test_inputs @ (t.base + t.delta).T)
    resid = t.train_targets - t.train_inputs @ (t.base + t.delta).T
    assert resid[t.train_outliers].std() > 10 * resid[~t.train_outliers].std()


def test_without_outliers_is_the_same_draw():
    t = lora_task(rng(1), n_train=300, n_val=40, n_test=20, outlier_scale=10.0)
    clean = t.with_outlier_scale(1.0)
    keep = ~t.train_outliers
    assert np.array_equal(clean.train_targets[keep], t.train_targets[keep])
    truth = t.base + t.delta
    r0 = t.train_targets - t.train_inputs @ truth.T
    r1 = clean.train_targets - clean.train_inputs @ truth.T
    assert np.allclose(r1[t.train_outliers], r0[t.train_outliers] / 10)
    assert np.allclose(clean.with_outlier_scale(10.0).train_targets, t.train_targets)


@pytest.mark.parametrize("kw, match", [
    ({"d_in": 0}, "d_in"), ({"singular_values": (1.0, -1.0)}, "singular_values"),
    ({"outlier_frac": 1.0}, "outlier_frac"), ({"outlier_scale": 0.5}, "outlier_scale"),
    ({"noise": -1.0}, "noise"),
])
def test_bad_arguments_are_named(kw, match):
    with pytest.raises(ValueError, match=match):
        lora_task(rng(0), **kw)
    with pytest.raises(TypeError, match="Generator"):
        lora_task(np.random.RandomState(0))
