r"""Greedy decoding and greedy speculative decoding, with the acceptance statistics.

**Speculative decoding** (Leviathan et al. 2023; Chen et al. 2023): a cheap *draft* model proposes
``k`` tokens one at a time; the expensive *target* model scores all of them in one forward pass and
keeps the longest prefix it agrees with, then adds one token of its own (the correction at the
first disagreement, or a bonus token when all ``k`` were accepted). With greedy decoding on both
sides the output is *exactly* the target's greedy output, whatever the draft; the draft only
changes how many target calls it takes. :func:`speculative_greedy` implements it literally.

Because the accepted drafts always continue the target's own greedy text, the number accepted in
a round that starts at position ``t`` is the length of the run of positions ``t, t+1, ...`` where
the draft's greedy next token, given the target's greedy text so far, equals the target's
(capped at ``k``). :func:`greedy_agreement` computes that per-position agreement in one batched
forward pass of the draft over the target's greedy continuation, and :func:`acceptance_from_agreement`
replays the rounds from it: the same counts as :func:`speculative_greedy` (a unit test checks
this), at a fraction of the cost.

Acceptance numbers reported: the **acceptance rate** ``accepted / proposed`` draft tokens, and
**tokens per target call** (generated tokens over rounds; ``1`` means the draft never helps, at most
``k + 1``). For sampled (not greedy) speculative decoding the probability of accepting a draft token
is :math:`\sum_v \min(p(v), q(v)) = 1 - \mathrm{TV}(p, q)` (:func:`expected_acceptance`).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["greedy_decode", "speculative_greedy", "greedy_agreement", "acceptance_from_agreement",
           "SpeculativeStats", "expected_acceptance"]


def _window(model, tokens):
    max_len = getattr(model, "config", {}).get("max_len")
    return tokens[:, -max_len:] if max_len else tokens


def _check_prompt(prompt):
    if not isinstance(prompt, torch.Tensor) or prompt.ndim != 2 or prompt.shape[1] < 1:
        raise ValueError("prompt must be a [B, P] tensor of token ids with P >= 1")


def _check_n(name, n):
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{name} must be a positive int, got {n!r}")


@torch.no_grad()
def greedy_decode(model, prompt: torch.Tensor, n_new: int) -> torch.Tensor:
    """``prompt: [B, P]`` -> ``[B, P + n_new]``, appending the argmax token ``n_new`` times (the
    model sees at most its ``max_len`` last tokens)."""
    _check_prompt(prompt)
    _check_n("n_new", n_new)
    was = model.training
    model.eval()
    out = prompt
    try:
        for _ in range(n_new):
            nxt = model(_window(model, out))[:, -1].argmax(-1, keepdim=True)
            out = torch.cat([out, nxt], 1)
    finally:
        model.train(was)
    return out


@dataclass(frozen=True)
class SpeculativeStats:
    """Totals over sequences: ``proposed`` and ``accepted`` draft tokens, ``rounds`` (target calls)
    and ``generated`` tokens."""

    proposed: int
    accepted: int
    rounds: int
    generated: int

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / max(self.proposed, 1)

    @property
    def tokens_per_call(self) -> float:
        return self.generated / max(self.rounds, 1)

    def __add__(self, o: "SpeculativeStats") -> "SpeculativeStats":
        return SpeculativeStats(self.proposed + o.proposed, self.accepted + o.accepted,
                                self.rounds + o.rounds, self.generated + o.generated)


@torch.no_grad()
def speculative_greedy(draft, target, prompt: torch.Tensor, n_new: int, k: int = 4):
    """Greedy speculative decoding of ``n_new`` tokens after each row of ``prompt`` (rows are
    decoded one at a time). Returns ``(tokens [B, P + n_new], SpeculativeStats)``; the tokens equal
    ``greedy_decode(target, prompt, n_new)`` whenever ``P + n_new`` fits in the models' ``max_len``
    (beyond it both crop their context, at different places)."""
    _check_prompt(prompt)
    _check_n("n_new", n_new)
    _check_n("k", k)
    was = (draft.training, target.training)
    draft.eval()
    target.eval()
    rows, stats = [], SpeculativeStats(0, 0, 0, 0)
    try:
        for b in range(prompt.shape[0]):
            seq = prompt[b:b + 1]
            goal = prompt.shape[1] + n_new
            while seq.shape[1] < goal:
                kk = min(k, goal - seq.shape[1])
                prop = seq
                for _ in range(kk):                                 # draft proposes kk tokens
                    nxt = draft(_window(draft, prop))[:, -1].argmax(-1, keepdim=True)
                    prop = torch.cat([prop, nxt], 1)
                drafted = prop[0, seq.shape[1]:]
                # one target pass scores every proposal: its greedy token after each prefix
                ctx = _window(target, prop)
                logits = target(ctx)[0, -(kk + 1):]                  # predictions after seq, +1..+kk
                want = logits.argmax(-1)
                a = 0
                while a < kk and int(drafted[a]) == int(want[a]):
                    a += 1
                new = torch.cat([drafted[:a], want[a:a + 1]])           # accepted + target's token
                new = new[: goal - seq.shape[1]]
                seq = torch.cat([seq, new[None]], 1)
                stats = stats + SpeculativeStats(kk, a, 1, int(new.numel()))
            rows.append(seq)
    finally:
        draft.train(was[0])
        target.train(was[1])
    return torch.cat(rows), stats


@torch.no_grad()
def greedy_agreement(draft, sequence: torch.Tensor, start: int) -> torch.Tensor:
    """``[B, L - start]`` booleans: whether the draft's greedy next token after
    ``sequence[:, :t]`` equals ``sequence[:, t]``, for ``t = start .. L-1`` (one forward pass;
    ``sequence`` is the target's greedy continuation of a prompt of length ``start``; it must fit
    in the draft's ``max_len``)."""
    if sequence.ndim != 2 or not 1 <= start < sequence.shape[1]:
        raise ValueError("sequence must be [B, L] and 1 <= start < L")
    was = draft.training
    draft.eval()
    try:
        pred = draft(sequence[:, :-1]).argmax(-1)                   # pred[:, t-1]: after seq[:, :t]
    finally:
        draft.train(was)
    return pred[:, start - 1:] == sequence[:, start:]


def acceptance_from_agreement(agree: torch.Tensor, k: int = 4) -> SpeculativeStats:
    """Replay greedy speculative decoding from per-position agreement (:func:`greedy_agreement`):
    each round starting at ``t`` accepts the run of agreeing positions from ``t`` (at most ``k``,
    fewer near the end) and advances past it plus one target token."""
    _check_n("k", k)
    agree = torch.as_tensor(agree, dtype=torch.bool)
    if agree.ndim != 2:
        raise ValueError("agree must be [B, n_new]")
    stats = SpeculativeStats(0, 0, 0, 0)
    for row in agree.tolist():
        n, t = len(row), 0
        while t < n:
            kk = min(k, n - t)
            a = 0
            while a < kk and row[t + a]:
                a += 1
            gen = min(a + 1, n - t)
            stats = stats + SpeculativeStats(kk, a, 1, gen)
            t += gen
    return stats


def expected_acceptance(target_logits: torch.Tensor, draft_logits: torch.Tensor) -> float:
    r"""Mean over positions of :math:`\sum_v \min(p(v), q(v))`, the probability that sampled
    speculative decoding accepts a draft token (``[..., V]`` logits of target ``p`` and draft ``q``)."""
    if target_logits.shape != draft_logits.shape:
        raise ValueError(f"logit shapes differ: {tuple(target_logits.shape)} vs "
                         f"{tuple(draft_logits.shape)}")
    p = target_logits.double().softmax(-1)
    q = draft_logits.double().softmax(-1)
    return float(torch.minimum(p, q).sum(-1).mean())
