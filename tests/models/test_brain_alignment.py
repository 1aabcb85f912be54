"""Tests of the alignment losses, training, baselines and retrieval metrics."""
import numpy as np
import pytest
import torch

from reprobook.models.brain_alignment import (AlignConfig, BrainAligner, FlatMLP, alignment_loss,
                                              auc, caption_accuracy, concept_saliency,
                                              fit_linear_map, fit_ridge, predict, ridge_predict,
                                              retrieval_topk, train_aligner)
from reprobook.models.vit3d import ViT3D

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_retrieval_perfect_chance_and_constant():
    rng = np.random.default_rng(0)
    t = rng.standard_normal((200, 8))
    assert retrieval_topk(t, t, rng, k=5, n_candidates=100).all()
    hits = retrieval_topk(rng.standard_normal((200, 8)), t, rng, k=5, n_candidates=100)
    assert 0.0 <= hits.mean() <= 0.15                       # chance is 5%
    # a zero prediction ties with every candidate: ties count against the query
    assert not retrieval_topk(np.zeros((200, 8)), t, rng, k=5, n_candidates=100).any()
    # two levels: a perfect level plus a random one still retrieves well
    both = retrieval_topk([t, rng.standard_normal((200, 8))], [t, t], rng)
    assert both.mean() > 0.5


def test_retrieval_bad_input():
    t = np.zeros((10, 3))
    with pytest.raises(ValueError, match="n_candidates"):
        retrieval_topk(t, t, np.random.default_rng(0), k=5, n_candidates=100)
    with pytest.raises(ValueError, match="match"):
        retrieval_topk(t, np.zeros((10, 4)), np.random.default_rng(0), k=1, n_candidates=5)


def test_auc_matches_definition():
    s = np.array([0.1, 0.4, 0.35, 0.8])
    y = np.array([0, 0, 1, 1], bool)
    assert auc(s, y) == pytest.approx(0.75)
    assert auc(np.arange(6.0), np.arange(6) >= 3) == 1.0
    assert auc(np.ones(4), y) == 0.5
    with pytest.raises(ValueError, match="positive"):
        auc(s, np.zeros(4, bool))


def test_alignment_loss_terms():
    torch.manual_seed(0)
    t_h, t_l = torch.randn(16, 6), torch.randn(16, 4)
    exact = alignment_loss(10 * t_h, t_l, t_h, t_l, tau=0.05)
    wrong = alignment_loss(torch.randn(16, 6), t_l, t_h, t_l, tau=0.05)
    assert exact < wrong
    single = alignment_loss(t_h, torch.zeros(16, 4), t_h, t_l, low_weight=0.0)
    multi = alignment_loss(t_h, torch.zeros(16, 4), t_h, t_l, low_weight=1.0)
    assert multi - single == pytest.approx(float((t_l ** 2).mean()), rel=1e-5)
    with pytest.raises(ValueError, match="match"):
        alignment_loss(t_h, t_l, t_l, t_l)


def test_training_aligns_a_learnable_map():
    """On volumes that linearly encode the targets, training drives retrieval far above chance."""
    g = torch.Generator().manual_seed(0)
    n, G = 256, 8
    t_h = torch.randn(n, 6, generator=g)
    t_l = torch.randn(n, 4, generator=g)
    A = torch.randn(10, G ** 3, generator=g)
    x = (torch.cat([t_h, t_l], 1) @ A + 0.3 * torch.randn(n, G ** 3, generator=g)).reshape(n, G, G, G)
    torch.manual_seed(0)
    m = BrainAligner(FlatMLP(G, dim=16, hidden=32), 16, 6, 4)
    before = retrieval_topk(predict(m, x)[0], t_h.numpy(), np.random.default_rng(0), k=1, n_candidates=20)
    losses = train_aligner(m, x, t_h, t_l, AlignConfig(epochs=15, batch_size=64, lr=3e-3), g)
    ph, pl = predict(m, x)
    after = retrieval_topk(ph, t_h.numpy(), np.random.default_rng(0), k=1, n_candidates=20)
    assert losses[-1] < losses[0]
    assert after.mean() > 0.5 > before.mean()
    assert ph.shape == (n, 6) and pl.shape == (n, 4)


def test_ridge_recovers_a_linear_decoder():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((300, 2, 2, 5))
    B = rng.standard_normal((20, 3))
    y = x.reshape(300, -1) @ B
    r = fit_ridge(x, y, alphas=[1e-6, 1e-3])
    np.testing.assert_allclose(ridge_predict(r, x), y, atol=1e-3)
    with pytest.raises(ValueError, match="targets"):
        fit_ridge(x, y[:10])


def test_saliency_finds_the_informative_voxels():
    """A linear ``backbone`` reading one cube: the saliency is zero elsewhere."""
    torch.manual_seed(0)
    G = 8
    m = BrainAligner(ViT3D(G, patch=4, dim=8, depth=1, heads=2), 8, 3, 2)
    with torch.no_grad():
        m.backbone.embed.weight.zero_()
    sal = concept_saliency(m, torch.randn(5, G, G, G), torch.randn(3))
    assert sal.shape == (G, G, G) and np.abs(sal).max() == 0     # embedding zeroed: no input enters
    m2 = BrainAligner(FlatMLP(G, dim=8, hidden=8), 8, 3, 2)
    with torch.no_grad():
        m2.backbone.net[2].weight[:, G ** 3 // 2:] = 0           # the second half of voxels unused
    sal2 = concept_saliency(m2, torch.randn(5, G, G, G), torch.randn(3)).reshape(-1)
    assert np.abs(sal2[G ** 3 // 2:]).max() == 0 and np.abs(sal2[:G ** 3 // 2]).max() > 0


def test_linear_map_and_caption_accuracy():
    rng = np.random.default_rng(2)
    caps = rng.standard_normal((5, 12))
    true = np.arange(100) % 5
    x = caps[true] @ rng.standard_normal((12, 7)) + 0.01 * rng.standard_normal((100, 7))
    W = fit_linear_map(x, caps[true], alpha=1e-6)
    assert caption_accuracy(x, W, caps, true).mean() == 1.0
    with pytest.raises(ValueError, match="columns"):
        caption_accuracy(x[:, :3], W, caps, true)


def test_config_bad_input():
    with pytest.raises(ValueError, match="epochs"):
        AlignConfig(epochs=0)
    with pytest.raises(ValueError, match="volumes"):
        FlatMLP(8)(torch.zeros(2, 4, 4, 4))


def test_minilm_embeddings_bad_input_and_cache_read(tmp_path, monkeypatch):
    from reprobook.models import brain_alignment as BA
    with pytest.raises(ValueError, match="texts"):
        BA.minilm_embeddings([], cache_dir=tmp_path)
    with pytest.raises(ValueError, match="texts"):
        BA.minilm_embeddings(["a", ""], cache_dir=tmp_path)
    # a cached file is read back without loading the encoder
    import reprobook.models.minilm as M
    calls = []
    monkeypatch.setattr(M, "load_minilm", lambda *a, **k: calls.append(1) or object())
    monkeypatch.setattr(M, "encode", lambda mini, texts: torch.ones(len(texts), 384))
    first = BA.minilm_embeddings(["a seven", "a two"], cache_dir=tmp_path)
    second = BA.minilm_embeddings(["a seven", "a two"], cache_dir=tmp_path)
    assert first.shape == (2, 384) and np.array_equal(first, second) and len(calls) == 1
