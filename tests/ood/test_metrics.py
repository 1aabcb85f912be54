import numpy as np
import pytest

from reprobook.ood.metrics import auroc, fpr_at_tpr


def test_auroc_by_pairs():
    rng = np.random.default_rng(0)
    a, b = rng.normal(1, 1, 30), rng.normal(0, 1, 40)
    pairs = (a[:, None] > b[None]).mean() + 0.5 * (a[:, None] == b[None]).mean()
    assert auroc(a, b) == pytest.approx(pairs)
    assert auroc([1, 2], [0]) == 1.0 and auroc([0], [1, 2]) == 0.0
    assert auroc([1.0], [1.0]) == 0.5


def test_matches_sklearn():
    from sklearn.metrics import roc_auc_score, roc_curve

    rng = np.random.default_rng(3)
    for n, m in ((50, 70), (7, 3), (100, 1)):
        a = np.round(rng.normal(0.5, 1, n), 1)          # rounding makes ties
        b = np.round(rng.normal(0, 1, m), 1)
        y, s = np.r_[np.ones(n), np.zeros(m)], np.r_[a, b]
        assert auroc(a, b) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
        fpr, tp, _ = roc_curve(y, s, drop_intermediate=False)
        for t in (0.5, 0.9, 0.95, 1.0):
            assert fpr_at_tpr(a, b, t) == pytest.approx(fpr[np.argmax(tp >= t - 1e-12)])


def test_fpr_at_95_by_hand():
    score_id = np.arange(100, dtype=float)          # ID scores 0..99
    score_ood = np.array([2.0, 4.5, 10.0, 50.0])
    # keeping 95 of the ID samples needs threshold 5 -> OOD scores >= 5 accepted: 10, 50
    assert fpr_at_tpr(score_id, score_ood) == pytest.approx(0.5)
    assert fpr_at_tpr(score_id, score_ood, tpr=1.0) == pytest.approx(1.0)
    assert fpr_at_tpr([5.0, 6.0], [1.0, 2.0]) == 0.0


def test_metrics_reject_bad_input():
    with pytest.raises(ValueError, match="need ID and OOD"):
        auroc([], [1.0])
    with pytest.raises(ValueError, match="finite"):
        auroc([np.nan], [1.0])
    with pytest.raises(ValueError, match="tpr"):
        fpr_at_tpr([1.0], [0.0], tpr=0.0)
