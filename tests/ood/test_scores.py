import pytest
import torch

from reprobook.ood.scores import KNNScore, energy, max_logit, msp


def test_logit_scores_by_hand():
    logits = torch.tensor([[0.0, 0.0], [2.0, 0.0]], dtype=torch.float64)
    e2 = torch.tensor(2.0, dtype=torch.float64).exp()
    assert torch.allclose(msp(logits), torch.stack([torch.tensor(0.5, dtype=torch.float64),
                                                    e2 / (e2 + 1)]))
    assert torch.equal(max_logit(logits), torch.tensor([0.0, 2.0], dtype=torch.float64))
    assert torch.allclose(energy(logits), torch.log(torch.stack([torch.tensor(2.0).double(),
                                                                 e2 + 1])))
    # temperature T: T * logsumexp(f / T) -> max logit as T -> 0
    assert torch.allclose(energy(logits, 1e-3), max_logit(logits), atol=1e-2)


def test_logit_scores_reject_bad_input():
    with pytest.raises(ValueError, match="logits"):
        msp(torch.zeros(3))
    with pytest.raises(ValueError, match="logits"):
        energy(torch.zeros(3, 1))
    with pytest.raises(ValueError, match="temperature"):
        energy(torch.zeros(2, 2), 0.0)


def test_knn_brute_force():
    g = torch.Generator().manual_seed(0)
    bank, q = torch.randn(40, 6, generator=g), torch.randn(7, 6, generator=g)
    k = 3
    s = KNNScore(bank, k, block=2)(q)
    bn, qn = bank / bank.norm(dim=1, keepdim=True), q / q.norm(dim=1, keepdim=True)
    d = torch.cdist(qn, bn).sort(dim=1).values[:, k - 1]
    assert torch.allclose(s, -d, atol=1e-5)
    # a training point itself is at distance 0 from its first neighbour; scale does not matter
    assert torch.allclose(KNNScore(bank, 1)(3.0 * bank[:5]), torch.zeros(5), atol=1e-3)


def test_knn_rejects_bad_input():
    with pytest.raises(ValueError, match="k must"):
        KNNScore(torch.zeros(5, 2), 6)
    with pytest.raises(ValueError, match="features must"):
        KNNScore(torch.ones(5, 2), 1)(torch.ones(3, 4))
