"""The toy director: rules decompose prompts, retrieval uses the encoder, natural videos obey the
rules (zero error and jitter), coarse guesses break them, and refinement with the exact ground
truth as a 'prior' repairs a coarse guess."""
import numpy as np
import pytest
import torch

from reprobook.models.diffusion.sds import gaussian_denoiser
from reprobook.vision import layout_director as L


def test_decompose_left_and_right():
    left, right, lm, rm = L.decompose("a shiny sphere rolling to the left of an old pine")
    assert (left, right, lm, rm) == ("shiny sphere rolling", "old pine", True, False)
    left, right, lm, rm = L.decompose("A big crate standing right of a small fir tree.")
    assert (left, right, lm, rm) == ("small fir tree", "big crate standing", False, False)
    with pytest.raises(ValueError, match="relation"):
        L.decompose("a ball above a tree")


def test_templated_prompts_parse_back_to_their_truth():
    for text, assets, moving in L.templated_prompts(30, np.random.default_rng(0)):
        left, right, lm, rm = L.decompose(text)
        assert [lm, rm] == moving
        for q, a in zip((left, right), assets):
            assert any(w in q for w in L.SYNONYMS[a])


def test_retrieve_with_an_oracle_encoder_and_the_lexical_baseline():
    def onehot(texts):          # an encoder that knows the words 'ball', 'box', 'tree'
        return torch.tensor([[float(k in t) for k in ("ball", "box", "tree")] for t in texts]) + 1e-3
    assert L.retrieve(["red ball rolling", "old tree", "box"], onehot) == ["ball", "tree", "box"]
    enc = L.tfidf_encoder(["a crate", "a ball", "a box", "a tree"])
    assert L.retrieve(["a big ball"], enc) == ["ball"]


def test_natural_layout_has_zero_error_and_jitter():
    w = L.World(12, 12)
    plan = L.Plan((L.Element("", "ball", True), L.Element("", "tree", False)))
    nat = L.natural_layout(plan, w, 6, np.random.default_rng(1))
    assert nat.shape == (6, 2, 7)
    err, gap, ratio = L.layout_error(nat, plan.assets, w, parts=True)
    assert float(gap) < 1e-12 and float(ratio) < 3 * w.size_sd * 2
    assert float(L.jitter(nat, w)) < 1e-12 and float(L.order_kept(nat)) == 1.0
    co = L.coarse_guess(nat, w, np.random.default_rng(2))
    assert float(L.layout_error(co, plan.assets, w)) > float(err)
    from reprobook.render.sprites import bottom
    assert (bottom(co) - w.ground >= 0.03 - 1e-12).all()


def test_prior_frames_follow_or_break_the_rules():
    w = L.World(8, 8)
    a = L.sample_natural_frames(16, w, np.random.default_rng(0))
    b = L.sample_natural_frames(16, w, np.random.default_rng(0), rules=False)
    assert a.shape == (16, 3, 8, 8) and a.min() >= -1 and a.max() <= 1
    assert not torch.allclose(a, b)


def test_refine_with_an_exact_image_prior_repairs_the_coarse_guess():
    """The 'prior' is a narrow Gaussian around the natural video's own frames, so SDS must pull
    the coarse parameters back toward the natural ones."""
    w = L.World(8, 8, softness=0.8)
    plan = L.Plan((L.Element("", "box", False), L.Element("", "tree", False)))
    rng = np.random.default_rng(3)
    nat = L.natural_layout(plan, w, 3, rng)
    co = L.coarse_guess(nat, w, rng)
    target = L.render_video(plan.shapes, nat, w).float()              # (F, 3, H, W)
    D = gaussian_denoiser(target, 0.05)
    cfg = L.RefineConfig(steps=100, lr=0.015, sigma_min=0.05, sigma_max=0.5, temporal_weight=10.0)
    ref = L.refine(D, plan.shapes, co[None], w, cfg, torch.Generator().manual_seed(0))[0]
    assert float(L.layout_error(ref, plan.assets, w)) < 0.5 * float(L.layout_error(co, plan.assets, w))


def test_temporal_penalty_and_bad_input():
    p = torch.zeros(4, 2, 7)
    assert float(L.temporal_penalty(p)) == 0.0
    p[2, 0, 2] = 1.0
    assert float(L.temporal_penalty(p)) > 0
    with pytest.raises(ValueError, match="F >= 3"):
        L.temporal_penalty(torch.zeros(2, 2, 7))
    with pytest.raises(ValueError, match="params"):
        L.refine(None, ["ball"], torch.zeros(3, 2, 7), L.World(), L.RefineConfig(), torch.Generator())
    with pytest.raises(ValueError, match="steps"):
        L.RefineConfig(steps=-1)
