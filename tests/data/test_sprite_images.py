import numpy as np
import pytest
import torch

from reprobook.data.sprite_images import (ARTEFACTS, INTENTIONS, SpriteParams, intention_outcome, is_valid,
                                          keypoints, plant_artefacts, random_sprites, render, sample_drags,
                                          silhouette)


def test_render_puts_the_head_colour_at_the_head_and_background_far_away():
    p = random_sprites(20, 16, np.random.default_rng(0))
    img = render(p, 16)
    assert img.shape == (20, 3, 16, 16) and img.min() >= -1 and img.max() <= 1
    hx, hy = np.round(keypoints(p)[:, 0]).astype(int).T
    head = img[np.arange(20), :, hy, hx]
    assert (head[:, 0] > 0.6).all() and (head[:, 2] < 0.2).all()        # yellow
    assert is_valid(p, 16).all()


def test_every_intention_lands_the_head_on_the_target_and_they_differ():
    src, g = sample_drags(30, 16, np.random.default_rng(1))
    d = np.linalg.norm(g - keypoints(src)[:, 0], axis=1)
    assert (d >= 0.15 * 16 - 1e-9).all() and (d <= 0.3 * 16 + 1e-9).all()
    outs = [intention_outcome(src, g, k) for k in INTENTIONS]
    for o in outs:
        assert np.allclose(keypoints(o)[:, 0], g) and is_valid(o, 16).all()
    tr, pv, sp = outs
    assert np.allclose(keypoints(pv)[:, 2], keypoints(src)[:, 2])       # pivot keeps the tail
    assert np.allclose(keypoints(sp)[:, 1], keypoints(src)[:, 1])       # spin keeps the centre
    assert np.allclose(tr.theta, src.theta) and np.allclose(tr.a, src.a)  # translate keeps the shape
    # the drag is ill-posed: the three outcomes are different images
    imgs = [render(o, 16) for o in outs]
    for i in range(3):
        for j in range(i):
            assert ((imgs[i] - imgs[j]).abs().mean((1, 2, 3)) > 0.01).all()


def test_artefacts_change_the_image_and_silhouette_is_a_mask():
    p = random_sprites(25, 16, np.random.default_rng(2))
    img = render(p, 16)
    bad, which = plant_artefacts(img, p, np.random.default_rng(3))
    assert set(which) <= set(range(len(ARTEFACTS)))
    assert ((bad - img).abs().amax((1, 2, 3)) > 0.1).all()
    m = silhouette(p, 16)
    assert m.shape == (25, 16, 16) and m.min() >= 0 and m.max() <= 1 and (m.sum((1, 2)) > 5).all()


def test_bad_inputs():
    p = random_sprites(2, 16, np.random.default_rng(0))
    with pytest.raises(ValueError, match="unknown intention"):
        intention_outcome(p, np.zeros((2, 2)), "shrink")
    with pytest.raises(ValueError, match="target must have shape"):
        intention_outcome(p, np.zeros((3, 2)), "pivot")
    with pytest.raises(ValueError, match="size"):
        render(p, 4)
    with pytest.raises(ValueError, match="colour"):
        SpriteParams(*(np.zeros(2) for _ in range(5)), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="unknown artefact"):
        plant_artefacts(render(p, 16), p, np.random.default_rng(0), ("scratch",))
