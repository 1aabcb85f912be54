import numpy as np
import pytest
import torch
import torch.nn.functional as F

torch.set_num_threads(1)

from reprobook.data.sr_patches import (TEST_IMAGES, TEXTURES, TRAIN_IMAGES, degrade_x2,
                                       gradient_score, hr_image, make_patches)


def test_split_is_by_image_and_holds_photos_and_textures():
    assert not set(TRAIN_IMAGES) & set(TEST_IMAGES)
    for split in (TRAIN_IMAGES, TEST_IMAGES):
        assert set(split) & set(TEXTURES) and set(split) - set(TEXTURES)


def test_hr_image_range_and_unknown():
    img = hr_image("brick")
    assert img.ndim == 2 and 0.0 <= img.min() and img.max() <= 1.0
    with pytest.raises(ValueError, match="unknown image"):
        hr_image("lena")


def test_degrade_x2_is_bicubic_antialiased_and_checks_shape():
    x = torch.rand(2, 1, 8, 6)
    ref = F.interpolate(x, size=(4, 3), mode="bicubic", antialias=True, align_corners=False).clamp(0, 1)
    assert torch.allclose(degrade_x2(x), ref)
    const = torch.full((1, 1, 8, 8), 0.3)
    assert torch.allclose(degrade_x2(const), torch.full((1, 1, 4, 4), 0.3), atol=1e-6)
    with pytest.raises(ValueError, match="even"):
        degrade_x2(torch.rand(1, 1, 7, 8))
    with pytest.raises(ValueError, match="B, C, H, W"):
        degrade_x2(torch.rand(7, 8))


def test_gradient_score_orders_flat_ramp_and_texture():
    flat = torch.full((1, 1, 16, 16), 0.5)
    ramp = torch.linspace(0, 1, 16).repeat(16, 1)[None, None]
    noise = torch.rand(1, 1, 16, 16, generator=torch.Generator().manual_seed(0))
    s = gradient_score(torch.cat([flat, ramp, noise]))
    assert s[0] == 0 and 0 < s[1] < s[2]
    with pytest.raises(ValueError, match="grey patches"):
        gradient_score(torch.rand(2, 3, 8, 8))


def test_make_patches_aligned_with_whole_image_degradation():
    p = make_patches(("camera",), patch=16, stride=8, max_side=64)
    assert p.hr.shape[1:] == (1, 16, 16) and p.lr.shape[1:] == (1, 8, 8)
    assert len(p) == 7 * 7                     # (64 - 16) / 8 + 1 positions per side
    img = torch.tensor(np.array(hr_image("camera")[224:288, 224:288], dtype=np.float32))[None, None]
    lr = degrade_x2(img)
    k = 10
    i, j = p.pos[k].tolist()
    assert torch.equal(p.hr[k, 0], img[0, 0, i:i + 16, j:j + 16])
    assert torch.allclose(p.lr[k, 0], lr[0, 0, i // 2:i // 2 + 8, j // 2:j // 2 + 8])
    assert torch.allclose(p.score_hr, gradient_score(p.hr))
    sub = p.subset([0, 3])
    assert len(sub) == 2 and torch.equal(sub.hr[1], p.hr[3])


def test_make_patches_bad_arguments():
    with pytest.raises(ValueError, match="patch"):
        make_patches(("camera",), patch=15)
    with pytest.raises(ValueError, match="empty"):
        make_patches(())
