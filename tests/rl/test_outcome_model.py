import pytest
import torch

from reprobook.rl.outcome_model import OutcomeDDPM, cosine_alpha_bar, timestep_embedding
from reprobook.threads import single_threaded_torch


def test_cosine_schedule_is_a_valid_decreasing_schedule():
    ab = cosine_alpha_bar(20)
    assert ab.shape == (21,) and ab[0] == 1.0
    assert torch.all(ab[1:] < ab[:-1]) and ab[-1] > 0
    beta = 1 - ab[1:] / ab[:-1]
    assert beta.max() <= 0.999 + 1e-12
    with pytest.raises(ValueError, match="n_steps"):
        cosine_alpha_bar(0)


def test_timestep_embedding_shape_and_odd_dim():
    e = timestep_embedding(torch.tensor([1, 5, 20]), 8, 20)
    assert e.shape == (3, 8) and torch.allclose(e[:, :4] ** 2 + e[:, 4:] ** 2, torch.ones(3, 4))
    with pytest.raises(ValueError, match="even"):
        timestep_embedding(torch.tensor([1]), 7, 20)


def test_bad_inputs_are_named():
    m = OutcomeDDPM(3, 2, hidden=8, layers=1, emb=4, n_steps=5)
    g = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="states must lie"):
        m.loss(torch.zeros(2, 3), torch.tensor([0, 2]), g)
    with pytest.raises(ValueError, match="outcomes must have shape"):
        m.loss(torch.zeros(2, 4), torch.tensor([0, 1]), g)
    with pytest.raises(ValueError, match="n_sample_steps"):
        m.sample(torch.tensor([0]), g, 6)
    with pytest.raises(ValueError, match="hidden"):
        OutcomeDDPM(3, 2, hidden=0)


class _Oracle(OutcomeDDPM):
    """The exact noise predictor for a point mass at target[s]: DDIM must land on it."""

    def __init__(self, target):
        super().__init__(target.shape[1], target.shape[0], hidden=4, layers=1, emb=4, n_steps=20)
        self.target = target

    def eps(self, x, k, s):
        ab = self.alpha_bar[k][:, None]
        return (x - ab.sqrt() * self.target[s]) / (1 - ab).sqrt()


@pytest.mark.parametrize("steps", [1, 4, 20])
def test_ddim_with_the_exact_noise_predictor_returns_the_point_mass(steps):
    target = torch.tensor([[1.0, -2.0, 0.5], [3.0, 0.0, -1.0]])
    m = _Oracle(target)
    s = torch.tensor([0, 1, 1, 0])
    x = m.sample(s, torch.Generator().manual_seed(1), steps)
    assert torch.allclose(x, target[s], atol=1e-4)


def test_clipping_keeps_samples_in_the_box_and_sampling_is_seeded():
    m = OutcomeDDPM(3, 2, hidden=8, layers=1, emb=4, n_steps=10,
                    generator=torch.Generator().manual_seed(0))
    s = torch.tensor([0, 1] * 50)
    lo, hi = -torch.ones(3) * 0.5, torch.ones(3) * 0.25
    x = m.sample(s, torch.Generator().manual_seed(3), 5, lo, hi)
    assert torch.all(x >= lo) and torch.all(x <= hi)
    y = m.sample(s, torch.Generator().manual_seed(3), 5, lo, hi)
    assert torch.equal(x, y)


@single_threaded_torch()
def test_learns_a_state_conditional_bimodal_distribution():
    # state 0: outcomes +-1 in the first coordinate; state 1: a point at (0, 2)
    g = torch.Generator().manual_seed(0)
    m = OutcomeDDPM(2, 2, hidden=64, layers=2, emb=8, n_steps=20, generator=g)
    opt = torch.optim.Adam(m.parameters(), lr=3e-3)
    for _ in range(400):
        s = torch.randint(0, 2, (128,), generator=g)
        sign = torch.randint(0, 2, (128,), generator=g) * 2.0 - 1.0
        x0 = torch.where(s[:, None] == 0, torch.stack([sign, torch.zeros(128)], 1),
                         torch.tensor([[0.0, 2.0]]).expand(128, 2))
        loss = m.loss(x0, s, g)
        opt.zero_grad()
        loss.backward()
        opt.step()
    x = m.sample(torch.tensor([0] * 400 + [1] * 400), g, 10)
    a, b = x[:400], x[400:]
    # both modes of state 0, not their mean; state 1's point
    assert (a[:, 0] > 0.5).float().mean() > 0.3 and (a[:, 0] < -0.5).float().mean() > 0.3
    assert torch.allclose(b.mean(0), torch.tensor([0.0, 2.0]), atol=0.25)
