r"""LLM unlearning with only negative examples (Yao, Xu & Liu, NeurIPS 2024), and its baselines.

Given a model :math:`\theta` that produces undesirable answers, a **forget set**
:math:`D^\mathrm{fgt}` of (prompt, bad answer) pairs, a **normal set** :math:`D^\mathrm{nor}` of
ordinary sequences and a pool :math:`Y^\mathrm{rdn}` of ordinary answers, one unlearning step
descends

.. math::

    \mathcal L = \varepsilon_1 \mathcal L_\mathrm{fgt} + \varepsilon_2 \mathcal L_\mathrm{rdn}
               + \varepsilon_3 \mathcal L_\mathrm{nor},
    \qquad (\varepsilon_1, \varepsilon_2, \varepsilon_3) = (0.5, 1, 1)\ \text{(the official defaults)}

with, on a minibatch,

* :math:`\mathcal L_\mathrm{fgt} = -\frac1B\sum_i \frac{1}{|y_i|}\sum_{t\in y_i}
  -\log p_\theta(y_{i,t}\mid x_i, y_{i,<t})`: **gradient ascent** on the answer tokens of the
  forget pairs (each pair's tokens weighted by one over its answer length, prompts and padding
  weighted zero);
* :math:`\mathcal L_\mathrm{rdn}`: the same per-pair answer loss, *descended*, on every forget
  prompt paired with each of ``k_random`` answers drawn from :math:`Y^\mathrm{rdn}` (the **random
  mismatch**: the model is taught that a harmful prompt may be followed by anything ordinary,
  which keeps its outputs there from degenerating);
* :math:`\mathcal L_\mathrm{nor} = -\frac1{|M|}\sum_{t\in M}\sum_v p_{\theta_0}(v\mid s_{\le t})
  \log p_\theta(v\mid s_{\le t})`: the forward cross-entropy of the current model's next-token
  distribution against the frozen **original** model :math:`\theta_0` over every real token
  :math:`M` of normal sequences; it equals :math:`\mathrm{KL}(p_{\theta_0}\|p_\theta)` plus the
  constant entropy of :math:`p_{\theta_0}`, so its gradient is the KL's.

Setting :math:`\varepsilon_2=\varepsilon_3=0` gives **gradient ascent alone** (the paper's
ablation); :func:`refusal_sft` is the alignment baseline that needs positive data: supervised
fine-tuning on harmful prompts answered with refusals, mixed with normal pairs.

**Compute** is counted in *token passes*: a forward pass over one real (non-padding) token costs 1,
a backward pass 2 (the usual 1:2 FLOP ratio of forward and backward), so one training token costs 3
and a reference-model forward 1. :class:`ComputeMeter` adds them up; the counts are exact and do
not depend on the machine's load, unlike wall time.

Differences from the official code (``kevinyaobytedance/llm_unlearn``), all deliberate: the random
answers are drawn per forget pair (the official code draws one set of ``k_random`` answers per
batch and shares it), the random-mismatch loss covers only the answer tokens (the official code
computes the answer start with ``len()`` of a tokenizer output, which counts its fields, so it in
effect trains on the prompt too), and the normal term averages over real tokens only (the
official one also averages over padding).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

from .sft import PackedPairs, frozen_copy, pack_pairs

__all__ = ["UnlearnConfig", "ComputeMeter", "per_pair_answer_nll", "forget_loss",
           "random_mismatch_pairs", "normal_cross_entropy", "unlearn", "refusal_sft", "next_tokens",
           "METHODS"]

#: the weight vectors of the method and its ablations, by name
METHODS = {
    "unlearn": (0.5, 1.0, 1.0),        # the paper's full loss (official default weights)
    "ga-only": (0.5, 0.0, 0.0),        # gradient ascent alone
    "no-random": (0.5, 0.0, 1.0),      # random-mismatch term removed
    "no-normal": (0.5, 1.0, 0.0),      # KL-to-original term removed
    "normal-only": (0.0, 0.0, 1.0),    # nothing unlearned: only the KL anchor
}


@dataclass(frozen=True)
class UnlearnConfig:
    """Budget and weights of one run: at most ``steps`` Adam steps of ``batch_size`` forget (or
    refusal) pairs and as many normal pairs, learning rate ``lr``; ``weights`` = (eps1, eps2, eps3);
    ``k_random`` random answers per forget pair; stop early once the forget loss (the mean answer
    NLL of the forget batch) exceeds ``max_forget_loss`` (the official stopping rule; None: never)."""

    steps: int
    batch_size: int
    lr: float
    weights: tuple = METHODS["unlearn"]
    k_random: int = 5
    max_forget_loss: float | None = None

    def __post_init__(self):
        for name in ("steps", "batch_size", "k_random"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < (0 if name == "steps" else 1):
                raise ValueError(f"{name} must be a {'non-negative' if name == 'steps' else 'positive'}"
                                 f" int, got {v!r}")
        if not (isinstance(self.lr, (int, float)) and self.lr > 0):
            raise ValueError(f"lr must be a positive number, got {self.lr!r}")
        w = tuple(self.weights)
        if len(w) != 3 or any(not isinstance(x, (int, float)) or x < 0 for x in w):
            raise ValueError(f"weights must be three non-negative numbers (eps1, eps2, eps3), got {w!r}")
        if not any(w):
            raise ValueError("weights are all zero: nothing to train")


@dataclass
class ComputeMeter:
    """Token passes spent so far (forward 1, backward 2 per real token), and optimiser steps."""

    token_passes: int = 0
    steps: int = 0
    log: list = field(default_factory=list)

    def train(self, mask_or_tokens: torch.Tensor) -> None:
        """A forward and backward pass over the real tokens of ``[N, T]`` (nonzero = real)."""
        self.token_passes += 3 * int((mask_or_tokens != 0).sum())

    def forward(self, mask_or_tokens: torch.Tensor) -> None:
        """A forward pass only (the frozen reference model)."""
        self.token_passes += int((mask_or_tokens != 0).sum())


def _check_logits(logits, targets, mask):
    if logits.ndim != 3 or targets.shape != logits.shape[:2] or mask.shape != logits.shape[:2]:
        raise ValueError(f"logits must be [N, T, vocab] with targets and mask [N, T]; got "
                         f"{tuple(logits.shape)}, {tuple(targets.shape)}, {tuple(mask.shape)}")


def per_pair_answer_nll(logits: torch.Tensor, targets: torch.Tensor,
                        mask: torch.Tensor) -> torch.Tensor:
    """Per pair, the mean next-token NLL over its answer positions (``mask``): ``[N]``. A pair
    with no answer position contributes 0."""
    _check_logits(logits, targets, mask)
    nll = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none")
    nll = nll.view(targets.shape)
    m = mask.to(nll.dtype)
    return (nll * m).sum(1) / m.sum(1).clamp_min(1.0)


def forget_loss(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    r""":math:`\mathcal L_\mathrm{fgt}`: minus the per-pair answer NLL, averaged over pairs
    (descending it is gradient *ascent* on the bad answers)."""
    return -per_pair_answer_nll(logits, targets, mask).mean()


def random_mismatch_pairs(prompts: Sequence[Sequence[int]], answer_pool: Sequence[Sequence[int]],
                          k: int, generator: torch.Generator, *, eos_id: int,
                          pad_id: int) -> PackedPairs:
    """Every prompt paired with ``k`` answers drawn uniformly (with replacement) from
    ``answer_pool``, packed for the answer-only loss: ``len(prompts) * k`` pairs."""
    if not len(answer_pool):
        raise ValueError("answer_pool is empty: the random mismatch needs ordinary answers")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")
    idx = torch.randint(len(answer_pool), (len(prompts) * k,), generator=generator).tolist()
    ps = [list(p) for p in prompts for _ in range(k)]
    return pack_pairs(ps, [list(answer_pool[i]) for i in idx], eos_id=eos_id, pad_id=pad_id)


def normal_cross_entropy(logits: torch.Tensor, ref_logits: torch.Tensor,
                         valid: torch.Tensor) -> torch.Tensor:
    r""":math:`\mathcal L_\mathrm{nor}`: mean over ``valid`` positions of
    :math:`-\sum_v p_0(v)\log p_\theta(v)` (forward KL to the reference up to a constant)."""
    if ref_logits.shape != logits.shape or logits.ndim != 3 or valid.shape != logits.shape[:2]:
        raise ValueError(f"logits and ref_logits must be equal [N, T, vocab] and valid [N, T]; got "
                         f"{tuple(logits.shape)}, {tuple(ref_logits.shape)}, {tuple(valid.shape)}")
    ce = -(F.softmax(ref_logits, -1) * F.log_softmax(logits, -1)).sum(-1)
    v = valid.to(ce.dtype)
    return (ce * v).sum() / v.sum().clamp_min(1.0)


def _trim(batch: PackedPairs) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Inputs, targets, answer mask and real-token mask, cut to the last real column."""
    T = batch.inputs.shape[1]
    last = torch.where(batch.mask > 0, torch.arange(T), -1).amax(1)      # last target position
    valid = (torch.arange(T)[None, :] <= last[:, None]).float()
    t = int(last.max()) + 1
    return batch.inputs[:, :t], batch.targets[:, :t], batch.mask[:, :t], valid[:, :t]


def _prompts(batch: PackedPairs) -> list[list[int]]:
    return [batch.inputs[i, :int(pl)].tolist() for i, pl in enumerate(batch.prompt_lengths)]


Callback = Callable[[int, ComputeMeter], bool | None]


def _check_packed(name, data):
    if not isinstance(data, PackedPairs) or not len(data):
        raise ValueError(f"{name} must be non-empty PackedPairs (reprobook.models.sft.pack_pairs)")


def unlearn(model: nn.Module, forget: PackedPairs, normal: PackedPairs,
            answer_pool: Sequence[Sequence[int]], cfg: UnlearnConfig, generator: torch.Generator,
            *, eos_id: int, pad_id: int, reference: nn.Module | None = None,
            callback: Callback | None = None, device="cpu") -> dict:
    """Unlearn ``forget`` from ``model`` in place with the weighted loss of the module docstring.

    ``reference`` is the frozen original model of the normal term (default: a frozen copy of
    ``model`` as it is on entry). ``callback(step, meter)`` runs before the first step and after
    every step; returning True stops the run (e.g. a harmful-rate target reached). Returns
    ``{"meter", "steps", "losses": [(fgt, rdn, nor), ...], "stopped": why}``."""
    _check_packed("forget", forget)
    eps1, eps2, eps3 = (float(w) for w in cfg.weights)
    if eps3 and not len(normal):
        raise ValueError("normal data is empty but the normal term is weighted")
    ref = frozen_copy(model) if (reference is None and eps3) else reference
    meter, losses, stopped = ComputeMeter(), [], "budget"
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=cfg.lr)
    if callback is not None and callback(0, meter):
        return {"meter": meter, "steps": 0, "losses": losses, "stopped": "callback"}
    for step in range(1, cfg.steps + 1):
        model.train()
        opt.zero_grad(set_to_none=True)
        fb = forget.subset(torch.randint(len(forget), (cfg.batch_size,), generator=generator))
        x, y, m, v = (t.to(device) for t in _trim(fb))
        # the forget batch is always run: its loss is the stopping statistic (and is free when
        # eps1 > 0, where its gradient is needed anyway)
        with torch.set_grad_enabled(eps1 > 0):
            nll = per_pair_answer_nll(model(x), y, m)
        total = -eps1 * nll.mean() if eps1 else torch.zeros((), device=nll.device)
        (meter.train if eps1 else meter.forward)(v)
        terms = [float(nll.mean().detach()), 0.0, 0.0]
        if eps2:
            rb = random_mismatch_pairs(_prompts(fb), answer_pool, cfg.k_random, generator,
                                       eos_id=eos_id, pad_id=pad_id)
            xr, yr, mr, vr = (t.to(device) for t in _trim(rb))
            lr_ = per_pair_answer_nll(model(xr), yr, mr).mean()
            total = total + eps2 * lr_
            meter.train(vr)
            terms[1] = float(lr_.detach())
        if eps3:
            nb = normal.subset(torch.randint(len(normal), (cfg.batch_size,), generator=generator))
            xn, _, _, vn = (t.to(device) for t in _trim(nb))
            with torch.no_grad():
                ref_logits = ref(xn)
            ln = normal_cross_entropy(model(xn), ref_logits, vn)
            total = total + eps3 * ln
            meter.train(vn)
            meter.forward(vn)
            terms[2] = float(ln.detach())
        if total.requires_grad:
            total.backward()
            opt.step()
        meter.steps = step
        losses.append(tuple(terms))
        model.eval()
        if cfg.max_forget_loss is not None and terms[0] > cfg.max_forget_loss:
            stopped = "max_forget_loss"
            break
        if callback is not None and callback(step, meter):
            stopped = "callback"
            break
    model.eval()
    return {"meter": meter, "steps": meter.steps, "losses": losses, "stopped": stopped}


def refusal_sft(model: nn.Module, positive: PackedPairs, normal: PackedPairs, cfg: UnlearnConfig,
                generator: torch.Generator, *, callback: Callback | None = None,
                device="cpu") -> dict:
    """The positive-data alignment baseline, in place: each Adam step descends the answer-only
    SFT loss (per-pair normalised, as the unlearning terms) on ``batch_size`` harmful prompts
    answered with the *desired* answer (a refusal) plus the same loss on ``batch_size`` normal
    pairs (so that the model keeps its ordinary skills). ``cfg.weights`` and ``k_random`` are
    ignored. Same returns and ``callback`` as :func:`unlearn`."""
    _check_packed("positive", positive)
    _check_packed("normal", normal)
    meter, losses = ComputeMeter(), []
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=cfg.lr)
    if callback is not None and callback(0, meter):
        return {"meter": meter, "steps": 0, "losses": losses, "stopped": "callback"}
    stopped = "budget"
    for step in range(1, cfg.steps + 1):
        model.train()
        opt.zero_grad(set_to_none=True)
        total, terms = 0.0, []
        for data in (positive, normal):
            b = data.subset(torch.randint(len(data), (cfg.batch_size,), generator=generator))
            x, y, m, v = (t.to(device) for t in _trim(b))
            loss = per_pair_answer_nll(model(x), y, m).mean()
            total = total + loss
            meter.train(v)
            terms.append(float(loss.detach()))
        total.backward()
        opt.step()
        meter.steps = step
        losses.append(tuple(terms))
        model.eval()
        if callback is not None and callback(step, meter):
            stopped = "callback"
            break
    model.eval()
    return {"meter": meter, "steps": meter.steps, "losses": losses, "stopped": stopped}


@torch.no_grad()
def next_tokens(model: nn.Module, prompts: Sequence[Sequence[int]], *, pad_id: int,
                device="cpu") -> list[int]:
    """The greedy first answer token after each prompt (prompts of any lengths, one forward pass:
    right padding does not reach earlier positions of a causal model)."""
    if not len(prompts) or any(not len(p) for p in prompts):
        raise ValueError("prompts must be a non-empty list of non-empty token lists")
    T = max(len(p) for p in prompts)
    x = torch.full((len(prompts), T), pad_id, dtype=torch.long)
    for i, p in enumerate(prompts):
        x[i, :len(p)] = torch.tensor(list(map(int, p)))
    last = torch.tensor([len(p) - 1 for p in prompts])
    was = model.training
    model.eval()
    logits = model(x.to(device))
    model.train(was)
    return logits[torch.arange(len(prompts)), last.to(logits.device)].argmax(-1).tolist()
