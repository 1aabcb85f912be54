import pytest
import torch

from reprobook.models.feature_classifier import FeatureClassifier, train_classifier


def test_features_and_logits_compose():
    m = FeatureClassifier(6, [8, 5], 3, generator=torch.Generator().manual_seed(0))
    x = torch.randn(4, 6)
    z = m.features(x)
    assert z.shape == (4, 5) and (z >= 0).all()
    assert torch.allclose(m(x), z @ m.fc.weight.T + m.fc.bias)
    same = FeatureClassifier(6, [8, 5], 3, generator=torch.Generator().manual_seed(0))
    assert torch.equal(same(x), m(x))


def test_training_fits_a_separable_task():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(120, 4, generator=g)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
    m = FeatureClassifier(4, [32], 3, generator=g)
    hist = train_classifier(m, x, y, epochs=40, generator=g, lr=1e-2, batch_size=32)
    assert hist[-1] < 0.5 * hist[0]
    assert (m(x).argmax(1) == y).float().mean() > 0.9


def test_bad_input():
    with pytest.raises(ValueError, match="classes"):
        FeatureClassifier(4, [8], 1)
    m = FeatureClassifier(4, [8], 2)
    with pytest.raises(ValueError, match="x must"):
        m.features(torch.zeros(2, 5))
    with pytest.raises(ValueError, match="epochs"):
        train_classifier(m, torch.zeros(2, 4), torch.zeros(2).long(), epochs=0,
                         generator=torch.Generator())
