"""The digits feature classifier learns the digits; pixel scaling checks its input."""
import numpy as np
import pytest
import torch

from reprobook.data.digits import load_digits_arrays
from reprobook.models.digit_features import scale_pixels, train_digit_classifier


def test_classifier_learns_digits_and_gives_features():
    pixels, labels = load_digits_arrays()
    x = scale_pixels(pixels)
    model = train_digit_classifier(x[:1400], labels[:1400], torch.Generator().manual_seed(0), steps=150,
                                   width=32)
    with torch.no_grad():
        acc = (model(torch.as_tensor(x[1400:], dtype=torch.float32)).argmax(1).numpy()
               == labels[1400:]).mean()
        f = model.features(torch.as_tensor(x[:5], dtype=torch.float32))
    assert acc > 0.85 and f.shape == (5, 32) and (f >= 0).all()


def test_scale_pixels():
    assert np.allclose(scale_pixels(np.array([[0.0] * 63 + [16.0]]))[0, [0, 63]], [-1, 1])
    with pytest.raises(ValueError, match="64"):
        scale_pixels(np.zeros((2, 8)))
