"""Preference and reward learning for language models, on toy models small enough to enumerate:
an exactly enumerable autoregressive LM with a known reward (:mod:`.toy_lm`), the contrastive
preference losses (:mod:`.losses`) and reward-learning fine-tuning from demonstrations
(:mod:`.reward_sft`)."""
