import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from reprobook.data.forgery_families import real_crops
from reprobook.vision.forgery_detector import ForgeryCNN, detection_auroc, scores, train_detector


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def data():
    real = real_crops(64, np.random.default_rng(0), rows=(0.0, 0.6))
    checker = 0.06 * (-1.0) ** np.add.outer(np.arange(32), np.arange(32))
    return real, np.clip(real + checker, 0, 1).astype(np.float32)


def test_shapes_and_errors():
    net = ForgeryCNN(4)
    assert net(torch.rand(5, 1, 32, 32)).shape == (5,)
    with pytest.raises(ValueError, match="shape"):
        net(torch.rand(5, 3, 32, 32))
    with pytest.raises(ValueError, match="width"):
        ForgeryCNN(0)
    with pytest.raises(ValueError, match="same image shape"):
        train_detector(np.zeros((4, 1, 32, 32)), np.zeros((4, 1, 16, 16)), steps=1, generator=torch.Generator())


def test_learns_an_easy_trace_and_auroc_matches_sklearn(data):
    real, fake = data
    net, losses = train_detector(real, fake, steps=40, generator=torch.Generator().manual_seed(0))
    assert np.mean(losses[-10:]) < np.mean(losses[:10])
    a = detection_auroc(net, real, fake)
    s = np.r_[scores(net, fake), scores(net, real)]
    y = np.r_[np.ones(len(fake)), np.zeros(len(real))]
    assert abs(a - roc_auc_score(y, s)) < 1e-12
    assert a > 0.8


def test_same_generator_same_detector(data):
    real, fake = data
    a, _ = train_detector(real, fake, steps=3, generator=torch.Generator().manual_seed(5))
    b, _ = train_detector(real, fake, steps=3, generator=torch.Generator().manual_seed(5))
    np.testing.assert_array_equal(scores(a, real), scores(b, real))
