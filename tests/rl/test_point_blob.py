import pytest
import torch

from reprobook.rl.point_blob import PROMPTS, REGIONS, PointBlob, region_of, render_blobs


def test_blob_peaks_at_its_position_and_spans_minus_one_to_one():
    p = torch.tensor([[0.5625, -0.3125]])          # a pixel centre of a 16x16 frame
    f = render_blobs(p, torch.zeros(1), 16, sigma=0.2)[0]
    assert f.shape == (16, 16)
    r, c = divmod(int(f.argmax()), 16)
    # columns run left to right from x = -1, rows top to bottom from y = +1
    assert (c, r) == (12, 10)
    assert f.max() == pytest.approx(1.0) and f.min() > -1.0 - 1e-6 and f.min() < -0.99


def test_elongation_stretches_one_axis_and_keeps_the_area():
    p = torch.zeros(3, 2)
    f = render_blobs(p, torch.tensor([0.0, 1.0, -1.0]), 32, sigma=0.2)
    w = (f + 1) / 2
    assert torch.allclose(w[0], w[0].T, atol=1e-6)             # round
    c = torch.linspace(-1, 1, 32) ** 2
    var_x, var_y = (w[1] * c[None, :]).sum() / w[1].sum(), (w[1] * c[:, None]).sum() / w[1].sum()
    assert var_x / var_y == pytest.approx(float(torch.e) ** 2, rel=0.05)   # ratio exp(2e)
    assert torch.allclose(w[1], w[2].T, atol=1e-6)             # e -> -e swaps the axes
    assert w[1].sum() == pytest.approx(float(w[0].sum()), rel=1e-2)


def test_regions_follow_the_prompts():
    assert len(REGIONS) == len(PROMPTS) == 4
    centres = torch.tensor([[0.5 * sx, 0.5 * sy] for sx, sy in REGIONS])
    assert region_of(centres).tolist() == [0, 1, 2, 3]
    assert "top-left" in PROMPTS[0] and "bottom-right" in PROMPTS[3]


def test_step_clips_actions_and_states():
    env = PointBlob(horizon=5, step_size=0.5)
    p, e = env.step(torch.tensor([[0.9, -0.9]]), torch.tensor([0.8]), torch.tensor([[3.0, -3.0, 1.0]]))
    assert p.tolist() == [[1.0, -1.0]] and e.tolist() == [1.0]
    p, e = env.step(torch.zeros(1, 2), torch.zeros(1), torch.tensor([[2.0, 0.2, -0.4]]))
    assert torch.allclose(p, torch.tensor([[0.5, 0.1]])) and torch.allclose(e, torch.tensor([-0.2]))


def test_reset_is_seeded_and_inside_the_start_square():
    env = PointBlob(start_spread=0.2)
    a = env.reset((3, 4), torch.Generator().manual_seed(1))
    b = env.reset((3, 4), torch.Generator().manual_seed(1))
    assert torch.equal(a[0], b[0]) and a[0].shape == (3, 4, 2) and a[1].shape == (3, 4)
    assert a[0].abs().max() <= 0.2 and torch.all(a[1] == 0)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="last axis of 2"):
        region_of(torch.zeros(3))
    with pytest.raises(ValueError, match="p must have shape"):
        render_blobs(torch.zeros(2, 2), torch.zeros(3), 8)
    with pytest.raises(ValueError, match="size"):
        render_blobs(torch.zeros(1, 2), torch.zeros(1), 1)
    with pytest.raises(ValueError, match="horizon"):
        PointBlob(horizon=0)
    with pytest.raises(ValueError, match="a \\(..., 3\\)"):
        PointBlob().step(torch.zeros(1, 2), torch.zeros(1), torch.zeros(1, 2))
