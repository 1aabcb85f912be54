r"""Supervised fine-tuning of a causal LM on (prompt, answer) pairs: answer-only losses, KL to a
frozen reference, sequence log-probabilities.

A pair is packed into one sequence ``prompt ‖ answer ‖ eos`` and the model predicts each next
token. Fine-tuning for instructions trains on the **answer only**: with inputs
:math:`x_{1..T-1}`, targets :math:`x_{2..T}` and a mask :math:`m_t = 1` where the target is an
answer (or end) token,

.. math::

    \mathcal{L}_\mathrm{SFT} = \frac{\sum_t m_t\,[-\log p_\theta(x_{t+1}\mid x_{\le t})]}{\sum_t m_t}.

Alignment methods keep the tuned model near a frozen copy of where it started (a *reference*
:math:`p_0`) with the per-token KL on the same positions,

.. math::

    \mathrm{KL}_t = \sum_v p_\theta(v\mid x_{\le t})\,[\log p_\theta(v\mid x_{\le t}) -
    \log p_0(v\mid x_{\le t})],

averaged over masked positions (:func:`kl_to_reference`). :func:`sequence_logprob` sums
:math:`\log p_\theta` of the answer tokens per sequence: the quantity that reward and preference
objectives (DPO, SPIN, inverse RL with an implicit reward) compare between models.

Padding: pairs of different lengths are right-padded with ``pad_id`` and their padded targets
masked out, so a shorter pair never trains on padding.
"""
from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["PackedPairs", "pack_pairs", "answer_loss", "kl_to_reference", "sequence_logprob",
           "frozen_copy", "greedy_answers"]


@dataclass(frozen=True)
class PackedPairs:
    """Model inputs ``[N, T]``, next-token targets ``[N, T]`` and the answer mask ``[N, T]`` (1.0
    where the target is an answer or end token), plus each pair's prompt length."""

    inputs: torch.Tensor
    targets: torch.Tensor
    mask: torch.Tensor
    prompt_lengths: torch.Tensor

    def __len__(self) -> int:
        return self.inputs.shape[0]

    def subset(self, idx) -> PackedPairs:
        """The pairs at ``idx`` (a tensor or list of row indices)."""
        idx = torch.as_tensor(idx, dtype=torch.long)
        return PackedPairs(self.inputs[idx], self.targets[idx], self.mask[idx],
                           self.prompt_lengths[idx])


def _ids(name: str, seq, i: int) -> list[int]:
    seq = seq.tolist() if isinstance(seq, torch.Tensor) else list(seq)
    if not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in seq):
        raise ValueError(f"{name}[{i}] must be a sequence of non-negative int token ids, got {seq!r}")
    return seq


def pack_pairs(prompts: Sequence[Sequence[int]], answers: Sequence[Sequence[int]], *,
               eos_id: int, pad_id: int) -> PackedPairs:
    """Pack (prompt, answer) token lists into right-padded next-token training tensors.

    Each sequence is ``prompt + answer + [eos_id]``; the loss mask covers the targets from the
    answer's first token through ``eos_id``. Prompts must be non-empty (the first answer token is
    predicted from the prompt); an answer may be empty (then only ``eos_id`` is trained)."""
    if len(prompts) != len(answers):
        raise ValueError(f"{len(prompts)} prompts but {len(answers)} answers")
    if not len(prompts):
        raise ValueError("no pairs to pack")
    seqs, plens = [], []
    for i, (p, a) in enumerate(zip(prompts, answers)):
        p, a = _ids("prompts", p, i), _ids("answers", a, i)
        if not p:
            raise ValueError(f"prompts[{i}] is empty: the first answer token needs a prompt")
        seqs.append(p + a + [eos_id])
        plens.append(len(p))
    T = max(len(s) for s in seqs) - 1
    inputs = torch.full((len(seqs), T), pad_id, dtype=torch.long)
    targets = torch.full((len(seqs), T), pad_id, dtype=torch.long)
    mask = torch.zeros(len(seqs), T)
    for i, (s, pl) in enumerate(zip(seqs, plens)):
        n = len(s) - 1
        inputs[i, :n] = torch.tensor(s[:-1])
        targets[i, :n] = torch.tensor(s[1:])
        mask[i, pl - 1:n] = 1.0   # target at position t is token t+1: answers start at pl
    return PackedPairs(inputs, targets, mask, torch.tensor(plens))


def _check(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> None:
    if logits.ndim != 3:
        raise ValueError(f"logits must be [N, T, vocab], got shape {tuple(logits.shape)}")
    if targets.shape != logits.shape[:2] or mask.shape != logits.shape[:2]:
        raise ValueError(f"targets {tuple(targets.shape)} and mask {tuple(mask.shape)} must both "
                         f"be [N, T] = {tuple(logits.shape[:2])}")


def answer_loss(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over the masked (answer) positions."""
    _check(logits, targets, mask)
    nll = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none")
    m = mask.flatten().to(nll.dtype)
    return (nll * m).sum() / m.sum().clamp_min(1.0)


def kl_to_reference(logits: torch.Tensor, ref_logits: torch.Tensor,
                    mask: torch.Tensor) -> torch.Tensor:
    """Mean per-token :math:`\\mathrm{KL}(p_\\theta \\| p_0)` over masked positions (exact, from the
    full next-token distributions, not a sampled estimate)."""
    if ref_logits.shape != logits.shape:
        raise ValueError(f"reference logits {tuple(ref_logits.shape)} must match logits "
                         f"{tuple(logits.shape)}")
    if logits.ndim != 3 or mask.shape != logits.shape[:2]:
        raise ValueError(f"logits must be [N, T, vocab] and mask [N, T]; got {tuple(logits.shape)} "
                         f"and {tuple(mask.shape)}")
    logp, logq = F.log_softmax(logits, -1), F.log_softmax(ref_logits, -1)
    kl = (logp.exp() * (logp - logq)).sum(-1)
    m = mask.to(kl.dtype)
    return (kl * m).sum() / m.sum().clamp_min(1.0)


def sequence_logprob(logits: torch.Tensor, targets: torch.Tensor,
                     mask: torch.Tensor) -> torch.Tensor:
    """Per sequence, :math:`\\sum_t m_t \\log p(x_{t+1}\\mid x_{\\le t})`: ``[N]``."""
    _check(logits, targets, mask)
    lp = torch.gather(F.log_softmax(logits, -1), -1, targets.unsqueeze(-1)).squeeze(-1)
    return (lp * mask.to(lp.dtype)).sum(-1)


def frozen_copy(model: nn.Module) -> nn.Module:
    """A deep copy in eval mode with every parameter frozen: the reference of a KL penalty."""
    ref = copy.deepcopy(model).eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


@torch.no_grad()
def greedy_answers(model: nn.Module, prompts: torch.Tensor, max_new: int, eos_id: int) -> list[list[int]]:
    """Greedy answers to equal-length prompts ``[N, P]``: the generated tokens up to (not
    including) ``eos_id``, at most ``max_new`` each."""
    from .decoding import greedy_decode

    if not isinstance(prompts, torch.Tensor) or prompts.ndim != 2:
        raise ValueError("prompts must be an [N, P] tensor of equal-length prompts (pack prompts "
                         "of different lengths into groups of equal length)")
    out = greedy_decode(model, prompts, max_new)[:, prompts.shape[1]:].tolist()
    return [row[:row.index(eos_id)] if eos_id in row else row for row in out]
