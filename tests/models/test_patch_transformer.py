import pytest
import torch

from reprobook.models.patch_transformer import (PatchTransformer, accuracy, image_patches,
                                                random_shift, train_patch_classifier)


def test_patches_are_row_major_blocks():
    img = torch.arange(16.0).view(1, 4, 4)
    p = image_patches(img, 2)
    assert p.shape == (1, 4, 4)
    assert p[0, 0].tolist() == [0, 1, 4, 5] and p[0, 1].tolist() == [2, 3, 6, 7]
    assert p[0, 3].tolist() == [10, 11, 14, 15]


def test_shift_moves_content_and_keeps_mass_inside():
    img = torch.zeros(50, 6, 6)
    img[:, 2:4, 2:4] = 1.0
    out = random_shift(img, 1, torch.Generator().manual_seed(0))
    assert torch.allclose(out.sum(dim=(1, 2)), img.sum(dim=(1, 2)))
    assert not torch.equal(out, img)
    assert torch.equal(random_shift(img, 0, torch.Generator()), img)


def test_forward_hidden_states_and_gfsa_start_equal_to_vanilla():
    torch.manual_seed(0)
    van = PatchTransformer(image_size=4, patch=2, n_classes=3, d_model=8, n_layers=2, n_heads=2)
    torch.manual_seed(0)
    gf = PatchTransformer(image_size=4, patch=2, n_classes=3, d_model=8, n_layers=2, n_heads=2,
                          attention_options={"filter": "gfsa", "K": 3})
    x = torch.rand(5, 4, 4)
    logits, hidden = gf(x, return_hidden=True)
    assert logits.shape == (5, 3) and len(hidden) == 3 and hidden[-1].shape == (5, 5, 8)
    assert torch.allclose(logits, van(x), atol=1e-6)


def test_training_learns_a_simple_task():
    g = torch.Generator().manual_seed(1)
    y = torch.randint(0, 2, (64,), generator=g)
    x = torch.zeros(64, 4, 4)
    x[y == 0, :2] = 1.0          # class 0 lit at the top, class 1 at the bottom
    x[y == 1, 2:] = 1.0
    torch.manual_seed(0)
    m = PatchTransformer(image_size=4, patch=2, n_classes=2, d_model=16, n_layers=1, n_heads=2,
                         attention_options={"filter": "gfsa"})
    log = train_patch_classifier(m, x, y, epochs=20, generator=g, lr=1e-2, batch_size=64, shift=0)
    assert log.losses[-1] < 0.7 * log.losses[0] and len(log.step_times) == 20
    assert accuracy(m, x, y) > 0.95


def test_bad_input():
    with pytest.raises(ValueError, match="patch"):
        PatchTransformer(image_size=8, patch=3)
    with pytest.raises(ValueError, match="pos_std"):
        PatchTransformer(pos_std=-1.0)
    with pytest.raises(ValueError, match="attention_options"):
        PatchTransformer(n_layers=2, attention_options=[{}])
    m = PatchTransformer(image_size=4, patch=2, d_model=8, n_layers=1, n_heads=2)
    with pytest.raises(ValueError, match="images must"):
        m(torch.zeros(2, 8, 8))
    with pytest.raises(ValueError, match="epochs"):
        train_patch_classifier(m, torch.zeros(2, 4, 4), torch.zeros(2).long(), epochs=0,
                               generator=torch.Generator())
