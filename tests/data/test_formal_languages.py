"""Formal-language generators and reference recognisers."""

import pytest
import torch

from reprobook.data.formal_languages import (FF_I, FF_R, FF_W0, FF_W1, IGNORE, dyck_accepts,
                                             dyck_next_allowed, dyck_perturb, dyck_sample,
                                             dyck_test_set, flip_flop, flip_flop_answers, parity,
                                             parity_answers)


def gen(s=0):
    return torch.Generator().manual_seed(s)


def test_flip_flop_answers_hand_example():
    tok = torch.tensor([[FF_W1, FF_R, FF_I, FF_W0, FF_R, FF_R, FF_W1, FF_I, FF_R]])
    want = torch.tensor([[IGNORE, 1, IGNORE, IGNORE, 0, 0, IGNORE, IGNORE, 1]])
    assert torch.equal(flip_flop_answers(tok), want)
    assert flip_flop_answers(torch.tensor([[FF_R, FF_W0]]))[0, 0] == IGNORE  # nothing written yet


def test_flip_flop_generator():
    tok, tgt = flip_flop(50, 200, p_write=0.1, p_read=0.2, generator=gen())
    assert tok.shape == tgt.shape == (50, 200)
    assert (tok[:, 0] <= FF_W1).all()
    reads = tok == FF_R
    assert torch.equal(tgt != IGNORE, reads)
    assert 0.1 < reads.float().mean() < 0.3
    assert torch.equal(flip_flop(5, 9, generator=gen(3))[0], flip_flop(5, 9, generator=gen(3))[0])
    with pytest.raises(ValueError, match="p_write"):
        flip_flop(2, 5, p_write=0.7, p_read=0.6, generator=gen())
    with pytest.raises(ValueError, match="length"):
        flip_flop(2, 0, generator=gen())
    with pytest.raises(TypeError, match="generator"):
        flip_flop(2, 5, generator=0)


def test_parity():
    bits, tgt = parity(20, 33, generator=gen())
    assert torch.equal(tgt, bits.cumsum(-1) % 2)
    assert torch.equal(parity_answers(torch.tensor([[1, 1, 0, 1]])), torch.tensor([[1, 0, 0, 1]]))
    with pytest.raises(ValueError, match="bits"):
        parity_answers(torch.tensor([[0, 2]]))


def test_dyck_reference_hand_examples():
    # K = 2: ( = 0, ) = 1, [ = 2, ] = 3
    s = torch.tensor([[0, 2, 3, 1], [0, 2, 1, 3], [0, 0, 1, 1], [1, 0, 0, 1], [0, 1, 0, 0]])
    assert dyck_accepts(s, 2, 3).tolist() == [True, False, True, False, False]
    deep = torch.tensor([[0, 0, 0, 1, 1, 1]])
    assert dyck_accepts(deep, 2, 3).tolist() == [True]
    assert dyck_accepts(deep, 2, 2).tolist() == [False]          # depth 3 > h = 2
    assert dyck_accepts(torch.zeros(1, 0, dtype=torch.long), 2, 1).tolist() == [True]
    with pytest.raises(ValueError, match="tokens must lie"):
        dyck_accepts(torch.tensor([[0, 4]]), 2, 3)


@pytest.mark.parametrize("K,h,L", [(2, 3, 20), (3, 5, 40), (1, 1, 10)])
def test_dyck_sample_is_in_language_and_reaches_depth(K, h, L):
    x = dyck_sample(200, L, K, h, generator=gen())
    assert x.shape == (200, L)
    assert dyck_accepts(x, K, h).all()
    depth = (1 - 2 * (x % 2)).cumsum(-1)
    assert depth.max() == h and set(x.unique().tolist()) <= set(range(2 * K))
    with pytest.raises(ValueError, match="even"):
        dyck_sample(2, 7, K, h, generator=gen())


def test_dyck_perturb_and_test_set():
    x = dyck_sample(300, 30, 2, 3, generator=gen())
    y = dyck_perturb(x, 2, generator=gen(1))
    # a swap of two equal neighbours changes nothing; every other edit changes the string
    assert ((y != x).sum(-1) >= 1).float().mean() > 0.8
    assert dyck_accepts(y, 2, 3).float().mean() < 0.5
    s, lab = dyck_test_set(400, 30, 3, 4, generator=gen(2))
    assert torch.equal(lab, dyck_accepts(s, 3, 4))
    assert 0.2 < lab.float().mean() < 0.6


def test_dyck_next_allowed():
    s = torch.tensor([[0, 2, 3, 1]])                       # ( [ ] )
    a = dyck_next_allowed(s, 2, 2)
    # after "(": opens allowed (depth 1 < 2), close ")" allowed; after "([": no opens, "]" only
    assert a[0, 0].tolist() == [True, True, True, False, False]
    assert a[0, 1].tolist() == [False, False, False, True, False]
    assert a[0, 3].tolist() == [True, False, True, False, True]
    with pytest.raises(ValueError, match="not a valid Dyck prefix"):
        dyck_next_allowed(torch.tensor([[0, 3]]), 2, 2)
