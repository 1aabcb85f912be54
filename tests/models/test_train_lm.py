"""The char-LM training loop: seeded data order, a loss that falls, evaluation."""
import pytest
import torch
import torch.nn.functional as F

from reprobook.data.char_corpus import CharCorpus
from reprobook.models.tiny_transformer import TinyTransformer
from reprobook.models.train_lm import LMTrainConfig, build_seeded, evaluate_lm, lm_loss, train_lm

CORPUS = CharCorpus.from_text("abcdefgh" * 400)
SPLITS = CORPUS.split({"train": 0.75, "val": 0.25}, block_chars=200, seed=0)


def make(seed=0, **kw):
    return build_seeded(lambda: TinyTransformer(CORPUS.vocab_size, d_model=16, n_layers=1,
                                                n_heads=2, max_len=16, **kw), seed)


def test_same_seed_same_run_and_build_seeded_restores_the_rng():
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a, b = make(), make()
    assert torch.rand(1) == before                      # build_seeded left the global rng alone
    cfg = LMTrainConfig(steps=5, batch_size=4, seq_len=8, lr=1e-2, warmup=1)
    ra, rb = train_lm(a, SPLITS["train"], cfg, seed=7), train_lm(b, SPLITS["train"], cfg, seed=7)
    assert [r["loss"] for r in ra.history] == [r["loss"] for r in rb.history]
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)


def test_batches_depend_only_on_the_seed():
    seen = {}

    def recorder(name):
        def step_loss(m, x, y):
            seen.setdefault(name, []).append(x.clone())
            return lm_loss(m, x, y)
        return step_loss

    cfg = LMTrainConfig(steps=3, batch_size=2, seq_len=8, warmup=0)
    train_lm(make(), SPLITS["train"], cfg, seed=1, step_loss=recorder("mlp"))
    train_lm(make(ffn="moe", ffn_options={"n_experts": 2}), SPLITS["train"], cfg, seed=1,
             step_loss=recorder("moe"))
    assert all(torch.equal(a, b) for a, b in zip(seen["mlp"], seen["moe"]))


def test_loss_falls_on_a_periodic_text():
    model = make()
    vx, vy = SPLITS["val"].windows(8)
    before = evaluate_lm(model, vx, vy)
    res = train_lm(model, SPLITS["train"], LMTrainConfig(steps=60, batch_size=8, seq_len=8, lr=1e-2,
                                                         warmup=5), seed=0)
    after = evaluate_lm(model, vx, vy)
    assert after < 0.3 < before and res.final_train_loss < 0.5


def test_evaluate_lm_is_the_mean_cross_entropy():
    model = make()
    x, y = SPLITS["val"].windows(8, max_windows=5)
    with torch.no_grad():
        want = F.cross_entropy(model(x).flatten(0, 1), y.flatten()).item()
    assert evaluate_lm(model, x, y, batch_size=2) == pytest.approx(want, rel=1e-5)


def test_aux_weight_adds_the_balance_loss():
    model = make(ffn="moe", ffn_options={"n_experts": 3})
    x, y = SPLITS["train"].sample(2, 8, torch.Generator().manual_seed(0))
    base, logs = lm_loss(model, x, y, 0.0)
    with_aux, logs2 = lm_loss(model, x, y, 0.5)
    assert with_aux.item() == pytest.approx(base.item() + 0.5 * logs2["aux"], rel=1e-6)


def test_bad_config_and_inputs():
    with pytest.raises(ValueError):
        LMTrainConfig(steps=0)
    with pytest.raises(ValueError):
        LMTrainConfig(lr=0)
    with pytest.raises(TypeError):
        train_lm(make(), "text", LMTrainConfig(), seed=0)
    with pytest.raises(ValueError):
        evaluate_lm(make(), torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 4, dtype=torch.long))
