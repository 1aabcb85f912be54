import pytest
import torch

from reprobook.vision.boxes import box_iou, cxcywh_to_xyxy, hungarian
from reprobook.vision.simvg import (FusionEncoder, SimVG, TokenBranch, decoder_loss, distill_token_loss,
                                    evaluate, giou, mask_words, match_single, pretrain_fusion, sincos_2d,
                                    soft_targets, time_branches, token_loss, train_grounding)


def _batch(B=5, Q=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    dl = torch.randn(B, Q, 2, generator=g)
    db = torch.rand(B, Q, 4, generator=g) * 0.4 + 0.3
    c = torch.rand(B, 2, generator=g) * 0.5 + 0.25
    wh = torch.rand(B, 2, generator=g) * 0.2 + 0.1
    gt = torch.cat([c - wh / 2, c + wh / 2], 1)
    tl = torch.randn(B, 2, generator=g, requires_grad=True)
    tb = torch.rand(B, 4, generator=g) * 0.4 + 0.3
    return dl, db, gt, tl, tb


def test_giou_known_values():
    a = torch.tensor([[0.0, 0, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1]])
    b = torch.tensor([[1.0, 1, 3, 3], [0, 0, 1, 1], [2, 0, 3, 1]])
    # IoU 1/7, hull 9, union 7 -> 1/7 - 2/9; identical -> 1; disjoint: 0 - (3-2)/3
    assert torch.allclose(giou(a, b), torch.tensor([1 / 7 - 2 / 9, 1.0, -1 / 3]))
    assert torch.allclose(torch.diag(box_iou(a, b)), torch.tensor([1 / 7, 1.0, 0.0]))


def test_single_target_matching_is_hungarian():
    dl, db, gt, _, _ = _batch(B=6, Q=8)
    idx = match_single(dl, db, gt)
    for b in range(6):
        p = dl[b].softmax(-1)[:, 0]
        pb = cxcywh_to_xyxy(db[b])
        t = gt[b].expand_as(pb)
        tc = torch.stack([(t[:, 0] + t[:, 2]) / 2, (t[:, 1] + t[:, 3]) / 2, t[:, 2] - t[:, 0], t[:, 3] - t[:, 1]], -1)
        cost = -p + 5 * (db[b] - tc).abs().sum(-1) - 2 * giou(pb, t)
        rows, cols = hungarian(cost[:, None])
        assert rows[0] == int(idx[b]) and cols[0] == 0


def test_dwbd_weight_and_decomposition():
    """P1: w = mean_b(score_b * IoU_b) of the matched decoder predictions, and the loss is
    (1 - w) L_gt + w L_distill with the class term of L_distill weighted by score * IoU."""
    dl, db, gt, tl, tb = _batch()
    idx = match_single(dl, db, gt)
    r = torch.arange(len(idx))
    teacher = cxcywh_to_xyxy(db[r, idx])
    c = dl.softmax(-1)[r, idx, 0] * torch.diag(box_iou(teacher, gt))
    loss, w = distill_token_loss(tl, tb, gt, dl, db, mode="dynamic", lam_token=1.0, lam_distill=1.0)
    assert abs(w - float(c.mean())) < 1e-6
    t2, c2 = soft_targets(dl, db, gt)
    assert torch.allclose(t2, teacher) and torch.allclose(c2, c)
    expect = (1 - c.mean()) * token_loss(tl, tb, gt) + c.mean() * token_loss(tl, tb, teacher, class_weight=c)
    assert torch.allclose(loss, expect)
    # the weight is a constant for the gradient (the teacher is detached)
    dl.requires_grad_(True)
    loss, _ = distill_token_loss(tl, tb, gt, dl, db, mode="dynamic")
    loss.backward()
    assert dl.grad is None and tl.grad is not None
    # variants
    _, wf = distill_token_loss(tl, tb, gt, dl, db, mode="fixed", fixed_weight=0.3)
    _, wr = distill_token_loss(tl, tb, gt, dl, db, mode="reversed")
    lt, w0 = distill_token_loss(tl, tb, gt, None, None, mode="token")
    assert abs(wf - 0.3) < 1e-7 and abs(wr - (1 - w)) < 1e-6 and w0 == 0.0
    assert torch.allclose(lt, token_loss(tl, tb, gt))


def test_perfect_teacher_gives_full_weight():
    _, _, gt, tl, tb = _batch()
    B, Q = gt.shape[0], 3
    c = torch.stack([(gt[:, 0] + gt[:, 2]) / 2, (gt[:, 1] + gt[:, 3]) / 2, gt[:, 2] - gt[:, 0], gt[:, 3] - gt[:, 1]], -1)
    db = c[:, None].expand(B, Q, 4).clone()
    dl = torch.tensor([30.0, -30.0]).expand(B, Q, 2).clone()
    _, w = distill_token_loss(tl, tb, gt, dl, db, mode="dynamic")
    assert w > 0.999


def test_decoder_loss_and_bad_mode():
    dl, db, gt, tl, tb = _batch()
    assert float(decoder_loss(dl, db, gt)) > 0
    with pytest.raises(ValueError, match="mode"):
        distill_token_loss(tl, tb, gt, dl, db, mode="soft")
    with pytest.raises(ValueError, match="giou"):
        giou(torch.zeros(2, 4), torch.zeros(3, 4))


def test_mask_words():
    ids = torch.tensor([[3, 4, 5, 0], [6, 0, 0, 0]])
    m, lab = mask_words(ids, 99, torch.Generator().manual_seed(0), rate=0.0)
    assert ((m == 99).sum(1) == 1).all()                # at least one word a caption
    assert (lab[m == 99] == ids[m == 99]).all() and (lab[m != 99] == -100).all()
    assert (m[ids == 0] == 0).all()                     # padding is never masked


def test_model_shapes_training_and_timing(one_thread):
    torch.manual_seed(0)
    enc = FusionEncoder(vocab_size=12, size=16, patch=8, dim=16, layers=1, heads=2, max_len=6)
    g = torch.Generator().manual_seed(0)
    x = torch.rand(16, 3, 16, 16, generator=g)
    ids = torch.randint(1, 12, (16, 5), generator=g)
    boxes = torch.tensor([[0.2, 0.2, 0.5, 0.6]]).repeat(16, 1)
    obj, vis, words = enc(x, ids)
    assert obj.shape == (16, 16) and vis.shape == (16, 4, 16) and words.shape == (16, 5, 16)
    losses = pretrain_fusion(enc, x, ids, steps=3, batch_size=8, lr=1e-3, generator=g)
    assert len(losses) == 3
    m = SimVG(enc, queries=3, decoder_layers=1, heads=2)
    frozen = [p.clone() for p in m.decoder.parameters()]
    h = train_grounding(m, x, ids, boxes, mode="dynamic", steps=30, batch_size=8, lr=1e-2,
                        generator=g, freeze_decoder=True)
    assert all(torch.equal(a, b) for a, b in zip(frozen, m.decoder.parameters()))
    assert len(h["w"]) == 30 and all(0 <= w <= 1 for w in h["w"])
    ev = evaluate(m, x, ids, boxes)
    assert ev["token"].mean() > 0.5         # one fixed box is easy to learn
    t = time_branches(m, x, ids, repeats=2)
    assert set(t) == {"token", "decoder"} and all(v > 0 for v in t.values())
    with pytest.raises(ValueError, match="images must be"):
        enc(torch.zeros(2, 3, 8, 8), ids[:2])
    with pytest.raises(ValueError, match="lacks"):
        train_grounding(SimVG(enc, decoder=False), x, ids, boxes, mode="fixed", steps=1,
                        batch_size=4, lr=1e-3, generator=g)


def test_sincos_positions_and_token_branch_options():
    p = sincos_2d(3, 16)
    assert p.shape == (9, 16)
    assert torch.allclose(p.norm(dim=1), torch.full((9,), 8 ** 0.5))     # sin^2 + cos^2 per pair
    d = torch.cdist(p, p)
    assert (d + torch.eye(9) * 1e3).min() > 0.1                         # every patch its own code
    assert d[0, 1] < d[0, 2] and d[0, 3] < d[0, 6]                       # nearer patches, nearer codes
    enc = FusionEncoder(vocab_size=5, size=16, patch=8, dim=16, layers=1, heads=2, positions="sincos")
    assert "patch_pos" not in dict(enc.named_parameters())               # fixed, not trained
    assert torch.equal(enc.patch_pos, sincos_2d(2, 16))
    with pytest.raises(ValueError, match="positions must be"):
        FusionEncoder(vocab_size=5, size=16, patch=8, dim=16, positions="rope")
    with pytest.raises(ValueError, match="divisible by 4"):
        FusionEncoder(vocab_size=5, size=16, patch=8, dim=18, heads=2, positions="sincos")
    assert len(TokenBranch(16).mlp) == 0 and len(TokenBranch(16, hidden_layers=2).mlp) == 4
    with pytest.raises(ValueError, match="hidden_layers"):
        TokenBranch(16, hidden_layers=-1)


def test_token_branch_learns_to_point_at_the_named_patch(one_thread):
    """A 2 x 2 patch grid, the four patches in four colours in a random order; the one word names a
    colour and the target is that patch's box. With fixed positions the token branch alone must learn
    which patch the word picks and where it lies; without the word it could be right on a quarter."""
    g = torch.Generator().manual_seed(0)
    n = 256
    rgb = torch.tensor([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0], [1.0, 1.0, 0]])
    order = torch.stack([torch.randperm(4, generator=g) for _ in range(n)])      # colour of each patch
    named = torch.randint(0, 4, (n,), generator=g)
    x = torch.zeros(n, 3, 16, 16)
    for k in range(4):
        r, q = divmod(k, 2)
        x[:, :, 8 * r:8 * r + 8, 8 * q:8 * q + 8] = rgb[order[:, k]][:, :, None, None]
    ids = (named + 1)[:, None]
    where = (order == named[:, None]).float().argmax(1)
    col, row = (where % 2).float(), (where // 2).float()
    boxes = torch.stack([col / 2, row / 2, col / 2 + 0.5, row / 2 + 0.5], 1)
    torch.manual_seed(0)
    enc = FusionEncoder(vocab_size=5, size=16, patch=8, dim=64, layers=2, heads=4, max_len=1, positions="sincos")
    m = SimVG(enc, decoder=False)
    train_grounding(m, x, ids, boxes, mode="token", steps=600, batch_size=32, lr=1e-3, generator=g)
    acc = (evaluate(m, x, ids, boxes)["token"] >= 0.5).mean()
    assert acc > 0.8, acc
    shuffled = (evaluate(m, x, ids[torch.randperm(n, generator=g)], boxes)["token"] >= 0.5).mean()
    assert shuffled < 0.45, shuffled     # it reads the word: with another image's word it is near chance
