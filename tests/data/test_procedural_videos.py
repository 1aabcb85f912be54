import numpy as np
import pytest

from reprobook.data.procedural_videos import (CONFUSABLE, PARAPHRASES, STEP_NAMES, TEMPLATES,
                                              corrupt, make_videos, make_world, noisy_pool)


def _set(n=30, seed=0):
    r = np.random.default_rng(seed)
    w = make_world(r)
    pool = noisy_pool(5, r)
    return w, pool, make_videos(w, n, r, pool)


def test_shapes_and_ground_truth_are_consistent():
    w, pool, vs = _set()
    N, T, F = vs.x.shape
    assert F == 48 and vs.mask.shape == (N, T) and vs.labels.shape == (N, T)
    for i in range(N):
        L = vs.lengths[i]
        m = vs.n_steps_per_video[i]
        assert vs.mask[i, :L].all() and not vs.mask[i, L:].any()
        steps = vs.steps[i, :m]
        # clips run through the step list in order, each step 3..8 clips long
        assert (steps[vs.seg[i, :L]] == vs.labels[i, :L]).all()
        durs = np.bincount(vs.seg[i, :L], minlength=m)
        assert durs.min() >= 3 and durs.max() <= 8
        # the steps follow the template's order (optional steps may be missing)
        tpl = [s if s >= 0 else -s - 1 for s in TEMPLATES[vs.template[i]]]
        assert [s for s in tpl if s in set(steps)] == list(steps)
        # narration describes a step at most 2 clips away, and comes from that step's pool
        for t in range(L):
            near = vs.labels[i, max(0, t - 2):t + 3]
            assert vs.narrated_step[i, t] in near
            assert vs.narration[i, t] // 5 == vs.narrated_step[i, t]


def test_features_carry_the_step_prototype():
    w, _, vs = _set(60)
    X = vs.x[vs.mask] @ np.linalg.pinv(w.mixing).T            # back to the latent space
    y = vs.labels[vs.mask]
    pred = (X @ w.prototypes.T).argmax(1)
    assert (pred == y).mean() > 0.4                           # far above chance (0.1)
    # the confusable pairs really are closer than other pairs
    C = w.prototypes @ w.prototypes.T
    for a, b in CONFUSABLE:
        assert C[a, b] > 0.6


def test_corruption_is_noisy_but_keeps_words():
    r = np.random.default_rng(1)
    clean = PARAPHRASES[3][0]
    out = [corrupt(clean, r) for _ in range(50)]
    assert all(o != clean for o in out)
    assert all(set(o.split()) & set(clean.split()) for o in out)
    assert len(STEP_NAMES) == len(PARAPHRASES) == 10


def test_bad_input():
    r = np.random.default_rng(0)
    w = make_world(r)
    with pytest.raises(ValueError, match="n_videos"):
        make_videos(w, 0, r, noisy_pool(2, r))
    with pytest.raises(ValueError, match="pool"):
        make_videos(w, 3, r, noisy_pool(2, r)[:3])
    with pytest.raises(ValueError, match="n_noisy"):
        noisy_pool(0, r)
