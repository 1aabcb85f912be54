import numpy as np
import pytest
import torch

from reprobook.data.instruction_lang import InstructionLanguage
from reprobook.models.harmful_finetune import (StageConfig, align, build_model, finetune_data,
                                               generate, harmful_score, task_accuracy,
                                               user_finetune)

LANG = InstructionLanguage(max_digits=4)


def test_arms_of_one_seed_start_from_the_same_adapter():
    base = build_model(LANG, 8, 1, 2, seed=0)
    data = LANG.mixture({"refusal": 20, "copy": 20}, np.random.default_rng(0))
    cfg = StageConfig(3, 8, 1e-2, lora_rank=2)
    sft, _ = align(base, LANG, data, cfg, seed=1)
    rho0, _ = align(base, LANG, data, cfg, seed=1, rho=0.0, mode="adversarial")
    vac, _ = align(base, LANG, data, cfg, seed=1, rho=1.0, mode="adversarial")
    other, _ = align(base, LANG, data, cfg, seed=2)
    for a, b in zip(sft.parameters(), rho0.parameters()):
        assert torch.equal(a, b)          # Vaccine at rho = 0 is SFT, update for update
    assert any(not torch.equal(a, b) for a, b in zip(sft.parameters(), vac.parameters()))
    assert any(not torch.equal(a, b) for a, b in zip(sft.parameters(), other.parameters()))
    # the base model is untouched and the adapters are merged away
    assert not any("lora" in n for n, _ in sft.named_parameters())
    tuned, _ = user_finetune(sft, LANG, finetune_data(LANG, 20, 0.5, np.random.default_rng(1)),
                             cfg, seed=1)
    assert any(not torch.equal(a, b) for a, b in zip(sft.parameters(), tuned.parameters()))


def test_generation_and_scores_on_mixed_lengths():
    m = build_model(LANG, 8, 1, 2, seed=0)
    rng = np.random.default_rng(0)
    harm = LANG.sample("harmful", 12, rng, split="test")
    assert len({len(p) for p in harm.prompts}) > 1
    ans = generate(m, LANG, harm.prompts)
    assert len(ans) == 12 and all(len(a) <= LANG.max_len for a in ans)
    assert 0.0 <= harmful_score(m, LANG, harm) <= harmful_score(m, LANG, harm, how="not-refused") <= 1.0
    assert 0.0 <= task_accuracy(m, LANG, LANG.sample("add1", 5, rng)) <= 1.0
    with pytest.raises(ValueError, match="harmful prompts only"):
        harmful_score(m, LANG, LANG.sample("copy", 3, rng))


def test_finetune_data_share():
    d = finetune_data(LANG, 50, 0.2, np.random.default_rng(0))
    assert d.harmful.sum() == 10 and d.tasks.count("add1") == 40
    with pytest.raises(ValueError, match="harmful share"):
        finetune_data(LANG, 10, 1.5, np.random.default_rng(0))
