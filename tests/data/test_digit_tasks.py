import numpy as np
import pytest

from reprobook import rng
from reprobook.data.digit_tasks import (BUCKET_EDGES, TASKS, TOKEN, VOCAB, digit_task_data,
                                        make_examples, patch_intensity)


def _images():
    g = np.random.default_rng(0)
    return g.integers(0, 17, (20, 64)).astype(float), g.integers(0, 10, 20)


def test_patch_intensity_raster_order():
    img = np.zeros((1, 64))
    img[0, 2 * 8 + 6] = 16.0          # row 2, column 6: patch row 1, patch column 3 -> patch 7
    p = patch_intensity(img)
    assert p.shape == (1, 16) and p[0, 7] == 4.0 and p.sum() == 4.0


def test_answers_are_the_defined_functions():
    px, lab = _images()
    tasks = np.arange(20) % len(TASKS)
    b = make_examples(px, lab, tasks, rng(0, 0))
    inten = patch_intensity(px)
    inv = {i: w for w, i in TOKEN.items()}
    for i in range(20):
        t, d, a = TASKS[tasks[i]], lab[i], [inv[int(x)] for x in b.targets[i]]
        if t == "cls":
            assert a[0] == f"D{d}" and not b.mask[i, 1]
        elif t == "vqa":
            q = inv[int(b.tokens[i, 5])]
            assert a[0] == ("yes" if (d > 4 if q == "big?" else d % 2 == 0) else "no")
        elif t == "refer":
            assert a[0] == f"P{int(np.argmax(inten[i]))}"
        elif t == "identify":
            k = int(inv[int(b.tokens[i, 5])][1:])
            assert a[0] == f"B{int(np.searchsorted(BUCKET_EDGES, inten[i, k], side='right'))}"
        else:
            assert a == [f"D{d}", "even" if d % 2 == 0 else "odd"] and b.mask[i, 1]
    # layout: [task][img x 4][q1][q2][a1]; the last input token is the first answer
    assert b.tokens.shape == (20, 8)
    assert (b.tokens[:, 1:5] == TOKEN["<img>"]).all()
    assert (b.tokens[:, -1] == b.targets[:, 0]).all()
    assert b.tokens.max() < len(VOCAB)


def test_split_is_disjoint_and_crossed_with_tasks():
    d = digit_task_data(rng(1, 0), n_images=60)
    assert d.n_train_images + d.n_test_images == 60
    assert not set(d.train.image) & set(d.test.image)
    assert len(d.test) == 5 * d.n_test_images
    assert (np.bincount(d.train.task) == d.n_train_images).all()
    d2 = digit_task_data(rng(1, 0), n_images=60)
    assert (d.train.tokens == d2.train.tokens).all()


def test_bad_input():
    px, lab = _images()
    with pytest.raises(ValueError, match="shape"):
        make_examples(px[:, :10], lab, np.zeros(20, int), rng(0))
    with pytest.raises(ValueError, match="task indices"):
        make_examples(px, lab, np.full(20, 7), rng(0))
    with pytest.raises(ValueError, match="test_fraction"):
        digit_task_data(rng(0), test_fraction=1.5)
