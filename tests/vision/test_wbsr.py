import pytest
import torch

torch.set_num_threads(1)   # tiny convolutions: threads only add contention on a shared machine

from reprobook.bench.flops import count_flops
from reprobook.vision.wbsr import (BalancedDiversityLoss, BalancedSampler, L1Loss, SlimSR, UniformSampler,
                                   categorize, category_edges, category_psnr, category_widths, image_psnr,
                                   predict, project_thresholds, route, routed_flops, sr_flops, train_sr)


def _standalone(model, w):
    """A SlimSR of full width w holding the first-w slice of model's weights."""
    m = SlimSR((w,), model.n_blocks)
    with torch.no_grad():
        m.head.weight.copy_(model.head.weight[:w]); m.head.bias.copy_(model.head.bias[:w])
        for (a1, a2), (b1, b2) in zip(m.blocks, model.blocks):
            a1.weight.copy_(b1.weight[:w, :w]); a1.bias.copy_(b1.bias[:w])
            a2.weight.copy_(b2.weight[:w, :w]); a2.bias.copy_(b2.bias[:w])
        m.tail.weight.copy_(model.tail.weight[:, :w]); m.tail.bias.copy_(model.tail.bias)
    return m


def test_width_slice_equals_standalone_network():
    torch.manual_seed(0)
    model = SlimSR((4, 8, 16), n_blocks=2)
    with torch.no_grad():
        model.tail.weight.normal_()        # a trained-like tail, so the slice is really tested
    x = torch.rand(3, 1, 6, 7)
    for w in model.widths:
        assert (model(x, w) - _standalone(model, w)(x)).abs().max() < 1e-6
    assert model(x).shape == (3, 1, 12, 14)


def test_zero_tail_is_bicubic_and_bad_width():
    model = SlimSR((4, 8), n_blocks=1)     # a fresh network starts at bicubic (zero-initialised tail)
    x = torch.rand(1, 1, 5, 5)
    up = torch.nn.functional.interpolate(x, scale_factor=2, mode="bicubic", align_corners=False)
    assert torch.allclose(model(x, 4), up)
    with pytest.raises(ValueError, match="not one of"):
        model(x, 6)
    with pytest.raises(ValueError, match="increasing"):
        SlimSR((8, 4))


def test_analytic_flops_match_pytorch_counter():
    model = SlimSR((4, 8, 16), n_blocks=3)
    x = torch.rand(2, 1, 6, 5)
    for w in model.widths:
        assert count_flops(model, x, w) == 2 * sr_flops(w, 3, 6, 5)
    routes = torch.tensor([4, 16, 16, 8])
    assert routed_flops(routes, 3, 6, 5) == sum(sr_flops(int(w), 3, 6, 5) for w in routes)


def test_categories_equal_width_and_imbalanced():
    s = torch.tensor([0.0, 0.1, 0.2, 0.3, 0.35, 0.9, 1.0])
    e = category_edges(s, k=4, upper_quantile=1.0)
    assert torch.allclose(e, torch.tensor([0.25, 0.5, 0.75]))
    assert categorize(s, e).tolist() == [0, 0, 0, 1, 1, 3, 3]
    assert category_widths(5, 3) == [0, 0, 1, 1, 2]
    with pytest.raises(ValueError, match="flat"):
        category_edges(torch.zeros(5))
    with pytest.raises(ValueError, match="increasing"):
        categorize(s, torch.tensor([0.5, 0.2]))


def test_balanced_sampler_equalises_categories_uniform_does_not():
    cats = torch.tensor([0] * 90 + [1] * 9 + [2] * 1)
    g = torch.Generator().manual_seed(0)
    hes = torch.bincount(cats[BalancedSampler(cats, 3, g).sample(6000)], minlength=3).float() / 6000
    uni = torch.bincount(cats[UniformSampler(100, g).sample(6000)], minlength=3).float() / 6000
    assert (hes - 1 / 3).abs().max() < 0.03
    assert abs(uni[0] - 0.9) < 0.03
    with pytest.raises(ValueError, match="lie in"):
        BalancedSampler(cats, 2, g)


def test_bdloss_weights_home_categories_and_high_error():
    loss = BalancedDiversityLoss(k=2, widths=(4, 8), gamma=0.0, off_weight=0.0)
    cats = torch.tensor([0, 0, 1, 1])
    err_small = torch.tensor([1.0, 1.0, 5.0, 5.0])
    err_full = torch.tensor([7.0, 7.0, 2.0, 2.0])
    # off_weight 0, gamma 0: width 4 sees only category 0, width 8 only category 1
    assert float(loss({4: err_small, 8: err_full}, cats)) == pytest.approx(1.0 + 2.0)
    loss = BalancedDiversityLoss(k=2, widths=(4, 8), gamma=1.0, off_weight=1.0)
    e = torch.tensor([1.0, 1.0, 3.0, 3.0])
    # category weights ∝ running error (1 and 3): (1*1 + 3*3) / (1 + 3) per width
    assert float(loss({4: e, 8: e}, cats)) == pytest.approx(2 * 10 / 4)
    assert float(L1Loss()({8: e}, cats)) == pytest.approx(2.0)


def test_router_is_monotone_and_projection_matches_quantiles():
    g = torch.Generator().manual_seed(1)
    s_hr = torch.rand(1000, generator=g)
    s_lr = 0.5 * s_hr ** 2                          # any increasing map: projection recovers it
    edges = torch.tensor([0.2, 0.4, 0.6, 0.8])
    t = project_thresholds(s_hr, s_lr, edges)
    assert torch.allclose(t, 0.5 * edges ** 2, atol=2e-3)
    scores = torch.sort(torch.rand(200, generator=g)).values * 0.5
    r = route(scores, t, (4, 8, 16), 5)
    assert bool((r[1:] >= r[:-1]).all()) and set(r.tolist()) == {4, 8, 16}


def test_training_lowers_loss_and_metrics():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    hr = torch.rand(64, 1, 8, 8)
    hr = torch.nn.functional.avg_pool2d(torch.nn.functional.pad(hr, (1, 1, 1, 1), mode="replicate"), 3, 1)
    lr = torch.nn.functional.avg_pool2d(hr, 2)
    cats = torch.arange(64) % 2
    model = SlimSR((4, 8), 1)
    hist = train_sr(model, lr, hr, cats, sampler=BalancedSampler(cats, 2, g),
                    loss=BalancedDiversityLoss(2, (4, 8)), steps=30, batch_size=8, lr=1e-2)
    assert sum(hist[-5:]) < sum(hist[:5])
    sr = predict(model, lr, torch.tensor([4, 8] * 32))
    assert sr.shape == hr.shape and float(sr.min()) >= 0
    p = category_psnr(sr, hr, cats, 3)
    assert torch.isnan(p[2]) and torch.isfinite(p[:2]).all()
    assert image_psnr(hr, hr + 0.1, torch.zeros(64, dtype=torch.long)).item() == pytest.approx(20.0, abs=1e-4)
