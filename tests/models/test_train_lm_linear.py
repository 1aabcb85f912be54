"""train_lm (shared with the chapters that train character LMs) on the book's LinearLM."""
import torch

import reprobook.models.slot_mixers  # noqa: F401  (registers gla, gsa, abc)
from reprobook.data.char_corpus import CharCorpus
from reprobook.models.linear_lm import LinearLM
from reprobook.models.train_lm import LMTrainConfig, build_seeded, evaluate_lm, train_lm


def corpus_split():
    text = "the quick brown fox jumps over the lazy dog. " * 60
    return CharCorpus.from_text(text).split({"train": 0.75, "val": 0.25}, block_chars=200, seed=0)


def test_linear_lm_learns_and_same_seed_same_run():
    splits = corpus_split()
    vocab = int(splits["train"].blocks.max()) + 1
    x, y = splits["val"].windows(32)
    losses = []
    for _ in range(2):
        model = build_seeded(lambda: LinearLM(vocab, d_model=16, n_layers=1, mixer="gsa", mlp_ratio=0.0,
                                              mixer_options={"n_slots": 4}), seed=0)
        before = evaluate_lm(model, x, y)
        train_lm(model, splits["train"], LMTrainConfig(steps=30, seq_len=32, batch_size=8, lr=1e-2, warmup=3), seed=1)
        losses.append(evaluate_lm(model, x, y))
    assert losses[0] == losses[1]
    assert losses[0] < before - 0.5
