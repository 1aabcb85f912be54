import pytest
import torch

from reprobook.models.pose_conditioned import PoseConditionedUNet, predict, psnr, train_nvs


def _task(n, g):
    """Targets that depend on the pose: the source inverted (1 - x) when pose[0] > 0."""
    src = torch.rand(n, 3, 8, 8, generator=g)
    src = torch.nn.functional.avg_pool2d(src, 3, 1, 1)
    pose = torch.zeros(n, 6)
    pose[:, 0] = torch.randint(2, (n,), generator=g).float() * 2 - 1
    tgt = torch.where(pose[:, 0, None, None, None] > 0, 1 - src, src)
    return src, tgt, pose


def test_shapes_errors_and_zero_initialised_film():
    torch.manual_seed(0)
    m = PoseConditionedUNet(size=8, channels=(4, 8), cond=8, bottleneck=16)
    x = torch.rand(2, 3, 8, 8)
    y = m(x, torch.randn(2, 6))
    assert y.shape == (2, 3, 8, 8) and bool(((y > 0) & (y < 1)).all())
    # FiLM starts at zero and the bottleneck sees the pose only through a random projection of
    # the embedding: outputs still differ with the pose; the pose-blind model's do not
    blind = PoseConditionedUNet(size=8, channels=(4, 8), cond=8, bottleneck=16, use_pose=False)
    assert torch.equal(blind(x, torch.randn(2, 6)), blind(x, torch.randn(2, 6)))
    with pytest.raises(ValueError, match="src must be"):
        m(torch.rand(2, 3, 16, 16), torch.zeros(2, 6))
    with pytest.raises(ValueError, match="pose must be"):
        m(x, torch.zeros(2, 5))
    with pytest.raises(ValueError, match="divisible"):
        PoseConditionedUNet(size=10, channels=(4, 8, 16))


def test_training_learns_to_use_the_pose():
    g = torch.Generator().manual_seed(0)
    src, tgt, pose = _task(256, g)
    out = {}
    for use in (True, False):
        torch.manual_seed(0)
        m = PoseConditionedUNet(size=8, channels=(8, 16), cond=16, bottleneck=64, use_pose=use)
        losses = train_nvs(m, src, tgt, pose, steps=150, batch_size=32, lr=3e-3, seed=1)
        te_src, te_tgt, te_pose = _task(128, torch.Generator().manual_seed(9))
        out[use] = float(psnr(predict(m, te_src, te_pose), te_tgt).mean())
        assert losses[-1] < losses[0]
    assert out[True] > out[False] + 3.0, out


def test_psnr_and_train_errors():
    a = torch.zeros(2, 3, 4, 4)
    assert torch.allclose(psnr(a, a + 0.1), torch.full((2,), 20.0), atol=1e-4)
    with pytest.raises(ValueError, match="shapes differ"):
        psnr(a, torch.zeros(2, 3, 4, 5))
    m = PoseConditionedUNet(size=8, channels=(4, 8), cond=8, bottleneck=16)
    with pytest.raises(ValueError, match="same number"):
        train_nvs(m, torch.zeros(4, 3, 8, 8), torch.zeros(3, 3, 8, 8), torch.zeros(4, 6), steps=1)
