import math

import pytest
import torch

from reprobook.vision.image_attacks import MANIPULATIONS, _apply, manipulate, pgd_l2, random_augment


def _imgs(n=4, size=32, seed=0):
    return torch.rand(n, 3, size, size, generator=torch.Generator().manual_seed(seed)) * 0.8 + 0.1


@pytest.mark.parametrize("kind", MANIPULATIONS)
def test_manipulations_keep_shape_and_range(kind):
    x = _imgs()
    y = manipulate(x, kind, torch.Generator().manual_seed(1))
    assert y.shape == x.shape
    if kind != "noise":
        assert float(y.min()) >= 0 and float(y.max()) <= 1
    assert float((y - x).abs().max()) > 1e-3          # it does something


def test_none_and_exact_cases():
    x = _imgs()
    assert manipulate(x, "none") is x
    assert torch.allclose(manipulate(x, "brightness"), (0.8 * x).clamp(0, 1))
    ones = torch.ones(x.shape[0])
    assert torch.allclose(_apply(x, "rotate", 0 * ones, None), x, atol=1e-5)
    assert torch.allclose(_apply(x, "crop", ones, None), x, atol=1e-5)
    # JPEG at quality 50 changes a textured image but keeps it close
    y = manipulate(x, "jpeg")
    assert 1e-3 < float((y - x).pow(2).mean()) < 0.05


def test_noise_level():
    x = torch.full((8, 3, 32, 32), 0.5)
    y = manipulate(x, "noise", torch.Generator().manual_seed(0))
    assert abs(float((y - x).std()) - 0.05) < 0.003


def test_errors():
    x = _imgs()
    with pytest.raises(ValueError, match="unknown manipulation"):
        manipulate(x, "sharpen")
    with pytest.raises(ValueError, match="generator"):
        manipulate(x, "noise")
    with pytest.raises(ValueError, match="multiples of 16"):
        manipulate(_imgs(size=24), "jpeg")
    with pytest.raises(ValueError, match=r"\(B, C, H, W\)"):
        manipulate(x[0], "blur")
    with pytest.raises(ValueError, match="unknown manipulations"):
        random_augment(x, torch.Generator(), kinds=("jpeg", "warp"))


def test_random_augment_deterministic_and_identity():
    x = _imgs(16)
    a = random_augment(x, torch.Generator().manual_seed(3))
    b = random_augment(x, torch.Generator().manual_seed(3))
    assert torch.equal(a, b)
    assert not torch.allclose(a, x)
    assert torch.equal(random_augment(x, torch.Generator().manual_seed(3), p_none=1.0), x)


def test_pgd_matches_the_optimum_of_a_linear_score():
    # for s(x) = <w, x> with the box inactive, the best l2 removal of radius r lowers s by r ||w||
    torch.manual_seed(0)
    x = torch.full((3, 3, 16, 16), 0.5)
    w = torch.randn(3, 16, 16)
    score = lambda z: (z * w).flatten(1).sum(1)  # noqa: E731
    r = 0.3
    adv = pgd_l2(score, x, r, steps=10)
    d = (adv - x).flatten(1).norm(dim=1)
    assert torch.all(d <= r * (1 + 1e-5))
    drop = score(x) - score(adv)
    assert torch.allclose(drop, torch.full_like(drop, r * float(w.norm())), rtol=1e-3)
    up = pgd_l2(score, x, r, steps=10, direction=1)
    assert torch.all(score(up) > score(x))


def test_pgd_box_and_trivial_cases():
    x = _imgs(2)
    score = lambda z: z.flatten(1).sum(1)  # noqa: E731
    adv = pgd_l2(score, x, 5.0, steps=20)
    assert float(adv.min()) >= 0 and float(adv.max()) <= 1
    assert torch.all((adv - x).flatten(1).norm(dim=1) <= 5.0 * (1 + 1e-5))
    assert torch.equal(pgd_l2(score, x, 0.0, steps=5), x)
    with pytest.raises(ValueError, match="direction"):
        pgd_l2(score, x, 0.1, 2, direction=0)
    with pytest.raises(ValueError, match="radius"):
        pgd_l2(score, x, -1, 2)
    assert math.isfinite(float(score(adv).sum()))
