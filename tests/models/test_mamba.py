"""Mamba-style model: causality, the three gate settings, and training reduces the loss."""

import pytest
import torch

from reprobook.data.formal_languages import flip_flop
from reprobook.models.mamba import MambaLM, MambaMixer
from reprobook.models.train_formal import evaluate_tagger, train_tagger


@pytest.mark.parametrize("kw", [{}, {"gate": "signed"}, {"selective": False}])
def test_causal_and_shapes(kw):
    torch.manual_seed(0)
    m = MambaLM(5, d_model=8, n_layers=2, d_state=4, **kw)
    x = torch.randint(0, 5, (2, 12))
    y = m(x)
    assert y.shape == (2, 12, 5)
    x2 = x.clone()
    x2[:, 7:] = (x2[:, 7:] + 1) % 5
    assert torch.allclose(m(x2)[:, :7], y[:, :7], atol=1e-6)      # the future does not leak


def test_chunked_equals_reference_impl():
    torch.manual_seed(1)
    a = MambaMixer(8, d_state=4, impl="chunked").double()
    b = MambaMixer(8, d_state=4, impl="reference").double()
    b.load_state_dict(a.state_dict())
    x = torch.randn(2, 19, 8, dtype=torch.float64)
    assert torch.allclose(a(x), b(x), atol=1e-12)
    for gate in ("signed",):
        a.gate = b.gate = gate
        assert torch.allclose(a(x), b(x), atol=1e-12)


def test_gates_in_range():
    torch.manual_seed(2)
    m = MambaMixer(8, d_state=4)
    A = -torch.exp(m.A_log)
    assert (A < 0).all()                       # exp(Delta A) in (0, 1): Mamba's non-negative gates
    with pytest.raises(ValueError, match="gate"):
        MambaMixer(8, gate="complex")
    with pytest.raises(ValueError, match="tokens"):
        MambaLM(4)(torch.zeros(3))


def test_training_learns_flip_flop_in_distribution():
    torch.manual_seed(0)
    m = MambaLM(4, d_model=16, n_layers=1, d_state=4)
    sample = lambda n, g: flip_flop(n, 8, p_write=0.4, p_read=0.4, generator=g)  # noqa: E731
    x, y = flip_flop(64, 8, p_write=0.4, p_read=0.4, generator=torch.Generator().manual_seed(9))
    before = evaluate_tagger(m, x, y)["token_acc"]
    losses = train_tagger(m, sample, steps=25, batch_size=16, lr=2e-2, seed=0)
    after = evaluate_tagger(m, x, y)
    assert losses[-1] < losses[0]
    assert after["token_acc"] > max(0.8, before)
    assert after["n_strings"] == 64
