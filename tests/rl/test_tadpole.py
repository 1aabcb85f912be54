import math

import pytest
import torch

from reprobook.rl.outcome_model import cosine_alpha_bar
from reprobook.rl.point_blob import region_of, render_blobs
from reprobook.rl.tadpole import (noise_steps, pretraining_set, symlog, tadpole_terms,
                                  train_frame_prior)


def test_symlog_is_odd_and_logarithmic():
    x = torch.tensor([-9.0, -1.0, 0.0, 1.0, 9.0])
    assert torch.allclose(symlog(x), torch.tensor([-math.log(10), -math.log(2), 0, math.log(2),
                                                   math.log(10)]))


class _Stub:
    """An eps-model that knows the clean frame x0: prompt 0 predicts the true noise exactly,
    the null prompt predicts zeros, any other prompt predicts minus the true noise."""

    def __init__(self, x0, n_prompts=2, n_steps=100):
        self.x0, self.n_states, self.n_steps, self.dim = x0, n_prompts + 1, n_steps, x0.shape[1]
        self.alpha_bar = cosine_alpha_bar(n_steps).to(torch.float32)

    def eps(self, x, k, s):
        ab = self.alpha_bar[k][:, None]
        x0 = torch.cat([self.x0, self.x0])
        true = (x - ab.sqrt() * x0) / (1 - ab).sqrt()
        sign = torch.where(s == 0, 1.0, torch.where(s == self.n_states - 1, 0.0, -1.0))
        return sign[:, None] * true


def test_terms_on_a_known_model():
    g = torch.Generator().manual_seed(0)
    x0 = torch.rand(6, 16, generator=g) * 2 - 1
    noise = torch.randn(6, 16, generator=g)
    k = torch.full((6,), 40)
    m = _Stub(x0)
    right = tadpole_terms(m, x0, torch.zeros(6, dtype=torch.long), k, noise)
    wrong = tadpole_terms(m, x0, torch.ones(6, dtype=torch.long), k, noise)
    n2 = (noise ** 2).mean(1)
    # right prompt: A = |eps|^2, R = |eps|^2 - 0; wrong prompt: A = |eps|^2, R = |eps|^2 - 4|eps|^2
    assert torch.allclose(right["A"], n2, atol=1e-5) and torch.allclose(right["R"], n2, atol=1e-5)
    assert torch.allclose(wrong["A"], n2, atol=1e-5)
    assert torch.allclose(wrong["R"], -3 * n2, atol=1e-5)
    assert torch.allclose(right["reward"], symlog(2000 * n2) + symlog(200 * n2), atol=1e-4)
    assert torch.all(right["reward"] > wrong["reward"])
    assert torch.allclose(right["alignment"], wrong["alignment"])   # A alone cannot tell them apart


def test_a_model_that_ignores_the_prompt_gives_zero_reward():
    class Blind(_Stub):
        def eps(self, x, k, s):
            return x * 0.3
    g = torch.Generator().manual_seed(1)
    x0 = torch.randn(4, 9, generator=g)
    out = tadpole_terms(Blind(x0), x0, torch.tensor([0, 1, 0, 1]), torch.full((4,), 10),
                        torch.randn(4, 9, generator=g))
    assert torch.all(out["reward"] == 0)


def test_reward_is_invariant_to_batching(one_torch_thread):
    g = torch.Generator().manual_seed(2)
    X, y = pretraining_set(64, 4, g)
    m, _ = train_frame_prior(X, y, 4, steps=2, batch=8, lr=1e-3, generator=g, hidden=16,
                             layers=1, emb=8, n_steps=50)
    k = noise_steps((64,), 10, 40, g)
    noise = torch.randn(X.shape, generator=g)
    full = tadpole_terms(m, X, y, k, noise)["reward"]
    parts = torch.cat([tadpole_terms(m, X[i:i + 5], y[i:i + 5], k[i:i + 5], noise[i:i + 5])["reward"]
                       for i in range(0, 64, 5)])
    assert torch.allclose(full, parts, atol=1e-5)


def test_pretraining_set_labels_are_the_blob_quadrants():
    g = torch.Generator().manual_seed(3)
    X, y = pretraining_set(200, 8, g, e_std=0.1, sigma=0.3)
    assert X.shape == (200, 64) and X.min() >= -1 and X.max() <= 1
    img = X.reshape(200, 8, 8)
    # the brighter half of the frame is on the blob's side
    right = img[:, :, 4:].sum((1, 2)) > img[:, :, :4].sum((1, 2))
    top = img[:, :4].sum((1, 2)) > img[:, 4:].sum((1, 2))
    assert torch.equal(right, y % 2 == 1) and torch.equal(top, y < 2)


def test_the_prior_learns_and_is_frozen(one_torch_thread):
    g = torch.Generator().manual_seed(4)
    X, y = pretraining_set(2000, 4, g, sigma=0.5)
    m, losses = train_frame_prior(X, y, 4, steps=300, batch=64, lr=3e-3, generator=g, hidden=64,
                                  layers=2, emb=16, n_steps=100)
    assert sum(losses[-30:]) / 30 < 0.8 * sum(losses[:30]) / 30
    assert not any(q.requires_grad for q in m.parameters()) and not m.training
    assert m.n_states == 5                       # 4 prompts + the null prompt


def test_bad_input_is_named():
    g = torch.Generator().manual_seed(5)
    X, y = pretraining_set(16, 4, g)
    with pytest.raises(ValueError, match="labels must lie"):
        train_frame_prior(X, y + 4, 4, steps=1, batch=2, lr=1e-3, generator=g)
    with pytest.raises(ValueError, match="p_uncond"):
        train_frame_prior(X, y, 4, steps=1, batch=2, lr=1e-3, generator=g, p_uncond=1.0)
    m, _ = train_frame_prior(X, y, 4, steps=0, batch=2, lr=1e-3, generator=g, hidden=8,
                             layers=1, emb=4, n_steps=50)
    k, n = torch.full((16,), 10), torch.zeros(16, 16)
    with pytest.raises(ValueError, match="null prompt"):
        tadpole_terms(m, X, torch.full((16,), 4), k, n)
    with pytest.raises(ValueError, match="noise steps"):
        tadpole_terms(m, X, y, torch.full((16,), 51), n)
    with pytest.raises(ValueError, match="frames must have shape"):
        tadpole_terms(m, X[:, :8], y, k, n)
    with pytest.raises(ValueError, match="low < high"):
        noise_steps((3,), 5, 5, g)


def test_episode_rewards_and_region_reward():
    from reprobook.rl.tadpole import episode_rewards, region_reward
    g = torch.Generator().manual_seed(6)
    X, y = pretraining_set(32, 8, g)
    m, _ = train_frame_prior(X, y, 4, steps=0, batch=2, lr=1e-3, generator=g, hidden=8,
                             layers=1, emb=4, n_steps=100)
    p = torch.rand(2, 3, 4, 2, generator=g) * 2 - 1
    e = torch.zeros(2, 3, 4)
    prompts = torch.tensor([0, 3])
    kw = dict(size=8, sigma=0.3, low=40, high=50)
    r = episode_rewards(m, p, e, prompts, torch.Generator().manual_seed(7), **kw)
    a = episode_rewards(m, p, e, prompts, torch.Generator().manual_seed(7), term="alignment", **kw)
    c = episode_rewards(m, p, e, prompts, torch.Generator().manual_seed(7), term="reconstruction",
                        **kw)
    assert r.shape == (2, 3, 4) and torch.allclose(r, a + c)
    with pytest.raises(ValueError, match="unknown term"):
        episode_rewards(m, p, e, prompts, g, term="recon", **kw)
    gt = region_reward(torch.tensor([[[-0.5, 0.5], [0.5, 0.5]], [[0.5, -0.5], [0.5, 0.5]]]),
                       torch.tensor([0, 3]))
    assert gt.tolist() == [[1.0, 0.0], [1.0, 0.0]]
