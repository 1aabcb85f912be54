"""Unit tests of reprobook.models.tiny_clip: shapes, the loss's values, training that learns."""
import math

import pytest
import torch

from reprobook.models.tiny_clip import TinyCLIP, WordTokenizer, clip_loss, train_clip


def test_tokenizer():
    tok = WordTokenizer.from_texts(["a red square", "a blue circle is above"])
    ids = tok(["a red square", "a blue circle is above"])
    assert ids.shape == (2, 5) and ids[0, 3:].tolist() == [0, 0] and (ids[1] > 0).all()
    assert tok(["a red square"], max_len=8).shape == (1, 8)
    with pytest.raises(ValueError, match="not in the tokenizer"):
        tok(["a green square"])
    with pytest.raises(ValueError, match="max_len"):
        tok(["a blue circle is above"], max_len=3)
    with pytest.raises(TypeError, match="not one string"):
        tok("a red square")


def test_towers_shapes_and_unit_norm():
    torch.manual_seed(0)
    m = TinyCLIP(vocab_size=12, size=24, dim=32, channels=8, layers=1, heads=4, max_len=8)
    u = m.encode_image(torch.rand(5, 3, 24, 24))
    v = m.encode_text(torch.randint(1, 12, (5, 6)))
    assert u.shape == v.shape == (5, 32)
    assert torch.allclose(u.norm(dim=1), torch.ones(5)) and torch.allclose(v.norm(dim=1), torch.ones(5))
    # padding does not change a caption's embedding
    ids = torch.tensor([[3, 4, 5]])
    assert torch.allclose(m.encode_text(ids), m.encode_text(torch.tensor([[3, 4, 5, 0, 0]])),
                          atol=1e-5)
    # word order matters to the text tower (positions)
    assert not torch.allclose(m.encode_text(ids), m.encode_text(torch.tensor([[5, 4, 3]])))
    with pytest.raises(ValueError, match="images must be"):
        m.encode_image(torch.rand(2, 3, 16, 16))
    with pytest.raises(ValueError, match="exceed max_len"):
        m.encode_text(torch.ones(1, 9, dtype=torch.long))


def test_clip_loss_values():
    B, d = 4, 8
    u = torch.nn.functional.normalize(torch.ones(B, d), dim=1)
    # all pairs equally similar: each softmax is uniform over B (or 2B with hard negatives)
    assert float(clip_loss(u, u, torch.tensor(5.0))) == pytest.approx(math.log(B), rel=1e-5)
    got = float(clip_loss(u, u, torch.tensor(5.0), v_hard=u))
    assert got == pytest.approx(0.5 * (math.log(2 * B) + math.log(B)), rel=1e-5)
    e = torch.eye(B, d)
    assert float(clip_loss(e, e, torch.tensor(100.0))) < 1e-10
    with pytest.raises(ValueError, match="matching"):
        clip_loss(u, u[:3], torch.tensor(1.0))


def test_training_learns_a_toy_matching():
    torch.set_num_threads(1)                 # a toy: threads only add overhead
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    imgs = torch.zeros(8, 3, 12, 12)
    for i in range(8):                       # image i: channel i % 3 lit in quadrant i // 3
        r, c = divmod(i // 3, 2)
        imgs[i, i % 3, 6 * r:6 * r + 6, 6 * c:6 * c + 6] = 1.0
    tok = WordTokenizer([f"w{i}" for i in range(8)])
    caps = tok([f"w{i}" for i in range(8)])
    m = TinyCLIP(len(tok), size=12, dim=16, channels=4, layers=1, heads=2, max_len=4)
    losses = train_clip(m, imgs, caps, steps=40, batch_size=8, lr=0.01, generator=g)
    assert losses[-1] < 0.3 * losses[0]
    with torch.no_grad():
        sims = m.encode_image(imgs) @ m.encode_text(caps).T
    assert (sims.argmax(1) == torch.arange(8)).float().mean() >= 0.75
    with pytest.raises(ValueError, match="batch_size"):
        train_clip(m, imgs, caps, steps=1, batch_size=9, generator=g)
