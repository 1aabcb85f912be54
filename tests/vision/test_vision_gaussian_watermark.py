"""Uncertainty-aware watermarking tools: the Rademacher Fisher diagonal against the exact one,
masks, clones, decoders, distortions and the embedding loop."""
import numpy as np
import pytest
import torch

from reprobook.render.gaussian_splat import orbit_views, textured_sphere
from reprobook.vision.gaussian_watermark import (KEYS, PointDecoder, PooledFeatureDecoder, activate,
                                                 bit_accuracy, clone_gaussians, distort_gaussians,
                                                 distort_image, embed, fisher_diagonal,
                                                 gaussian_uncertainty, perturbation_sensitivity, psnr,
                                                 render_raw, select, spearman, to_raw)
from reprobook.render.gaussian_splat import render


def _scene(n=12, seed=0):
    photo = np.random.default_rng(seed).random((16, 24, 3))
    sc = textured_sphere(n, 3, photo, generator=torch.Generator().manual_seed(seed))
    return to_raw(sc), sc


def test_raw_round_trip():
    raw, sc = _scene()
    m, s, q, c, o = activate(raw)
    torch.testing.assert_close(s, sc["scales"])
    torch.testing.assert_close(c, sc["colours"].clamp(1e-4, 1 - 1e-4))


def test_rademacher_fisher_matches_exact_diagonal():
    raw, _ = _scene(6)
    views = orbit_views([0, 120], [10, -10])
    means, scales, quats, colours, opac = (t.detach() for t in activate(raw))

    def f(m, c):
        return render(m, scales, quats, c, opac, views, 6, 1.3).reshape(-1)
    jm, jc = torch.autograd.functional.jacobian(f, (means, colours))
    exact_m, exact_c = (jm ** 2).sum(0), (jc ** 2).sum(0)
    hm, hc = fisher_diagonal(raw, views, 6, 1.3, 300, torch.Generator().manual_seed(0))
    rel = lambda a, b: float((a - b).abs().sum() / b.abs().sum())  # noqa: E731
    assert rel(hm, exact_m) < 0.1 and rel(hc, exact_c) < 0.1
    u = gaussian_uncertainty(hm, hc)
    assert u.shape == (9,) and torch.isfinite(u).all()
    with pytest.raises(ValueError, match="Fisher"):
        gaussian_uncertainty(hm, hc[:3])


def test_select_and_clone():
    u = torch.tensor([0.0, 5.0, 1.0, 3.0, 2.0])
    assert select(u, 0.4, "high").nonzero().flatten().tolist() == [1, 3]
    assert select(u, 0.4, "low").nonzero().flatten().tolist() == [0, 2]
    assert int(select(u, 0.4, "random", torch.Generator().manual_seed(0)).sum()) == 2
    with pytest.raises(ValueError, match="selection"):
        select(u, 0.4, "median")
    raw, _ = _scene()
    mask = select(torch.arange(15.0), 0.2, "high")
    cl = clone_gaussians(raw, mask, torch.Generator().manual_seed(0))
    assert cl["means"].shape == (3, 3)
    torch.testing.assert_close(cl["colour_logits"], raw["colour_logits"][mask])
    assert float((cl["means"] - raw["means"][mask]).norm()) > 0


def test_decoders_distortions_and_metrics():
    raw, _ = _scene()
    views = orbit_views([0, 90, 180], [0, 0, 0]).float()
    rawf = {k: v.float() for k, v in raw.items()}
    img = render_raw(rawf, views, 16, 1.3)
    g = torch.Generator().manual_seed(0)
    d2 = PooledFeatureDecoder(8, img, g)
    assert d2(img).shape == (3, 8)
    d3 = PointDecoder(8, rawf, g)
    torch.testing.assert_close(d3(rawf).float(), d3.b0.float(), atol=1e-5, rtol=0)   # original: the random bias
    for k in ("none", "noise", "blur", "jpeg", "brightness"):
        assert distort_image(img, k, g).shape == img.shape
    with pytest.raises(ValueError, match="distortion"):
        distort_image(img, "rotate")
    with pytest.raises(ValueError, match="multiples of 16"):
        distort_image(img[..., :12, :12], "jpeg")
    assert distort_gaussians(rawf, "prune", g)["means"].shape[0] == 15 - 2
    assert psnr(img, img) > 150 and abs(psnr(img * 0 + 0.5, img * 0 + 0.6) - 20.0) < 1e-4
    assert bit_accuracy(torch.tensor([[1.0, -1.0]]), torch.tensor([1, 1])) == 0.5
    assert abs(spearman([1, 2, 3, 4], [4, 3, 2, 1]) + 1) < 1e-12


def test_embed_clone_keeps_the_original_and_learns_the_message():
    raw, _ = _scene(20)
    rawf = {k: v.float() for k, v in raw.items()}
    views = orbit_views([0, 90, 180, 270], [10, -10, 10, -10]).float()
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        tgt = render_raw(rawf, views, 16, 1.3)
    d2, d3 = PooledFeatureDecoder(4, tgt, g), PointDecoder(4, rawf, g)
    msg = (d3.b0 < 0).long()                     # the opposite of what the original decodes to
    mask = select(torch.arange(23.0), 0.2, "high")
    wm = embed(rawf, views, 16, 1.3, msg, d2, d3, mode="clone", mask=mask, weight=3.0, steps=15,
               lr=5e-2, generator=g, targets=tgt)
    assert wm["means"].shape[0] == 23 + int(mask.sum())
    for k in KEYS:
        torch.testing.assert_close(wm[k][:23], rawf[k])          # the original Gaussians are frozen
    assert bit_accuracy(d3(wm), msg) > bit_accuracy(d3(rawf), msg)
    with pytest.raises(ValueError, match="mask"):
        embed(rawf, views, 16, 1.3, msg, d2, d3, mode="clone", mask=None, weight=1.0, steps=1,
              lr=1e-2, generator=g)
    s = perturbation_sensitivity(rawf, torch.tensor([0, 1]), views, 16, 1.3, 0.05, g)
    assert s.shape == (2,) and bool((s >= 0).all())
