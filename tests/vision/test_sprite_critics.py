import pytest
import torch

from reprobook.vision.sprite_critics import SmallCNN, train_critic


def test_critic_learns_a_separable_task():
    def batch(b, g):
        y = (torch.rand(b, generator=g) < 0.5).float()
        x = torch.randn(b, 3, 8, 8, generator=g) * 0.1 + (2 * y - 1)[:, None, None, None]
        return x, y[:, None]
    torch.manual_seed(0)
    torch.set_num_threads(1)
    net = SmallCNN(3, 1, 8)
    losses = train_critic(net, batch, steps=30, batch=16, lr=0.01, generator=torch.Generator().manual_seed(0))
    assert losses[-1] < 0.5 * losses[0]


def test_noise_conditioning_changes_the_output_and_is_checked():
    net = SmallCNN(3, 2, 8, noise_cond=True)
    x = torch.randn(4, 3, 8, 8)
    assert net(x, 0.1).shape == (4, 2)
    assert not torch.allclose(net(x, 0.1), net(x, 5.0))
    with pytest.raises(ValueError, match="pass sigma"):
        net(x)
    with pytest.raises(ValueError, match="not noise-conditioned"):
        SmallCNN(3, 1, 8)(x, 0.1)
    with pytest.raises(ValueError, match="shape"):
        net(torch.zeros(4, 1, 8, 8), 0.1)
    with pytest.raises(ValueError, match="unknown loss"):
        train_critic(net, None, steps=1, batch=1, lr=0.1, generator=torch.Generator(), loss="hinge")
