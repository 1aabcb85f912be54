r"""Vaccine: perturbation-aware alignment (Huang, Hu & Liu, NeurIPS 2024), on hooks.

Fine-tuning an aligned model on user data that holds a few harmful examples moves the hidden
embeddings of the alignment data (*harmful embedding drift*), and the alignment breaks. Vaccine
trains the alignment so that its loss stays low even when every hooked layer's output
:math:`e_l` is moved by a bounded perturbation :math:`\varepsilon_l`:

.. math::

    \min_\theta \max_{\|(\varepsilon_1,\dots,\varepsilon_L)\| \le \rho}
        \mathcal L\big(\theta;\, e_l \leftarrow e_l + \varepsilon_l\ \forall l\big),

SAM applied to activations instead of weights. One step of it takes two passes:

1. forward and backward the (answer-only) alignment loss, keeping only the gradients
   :math:`g_l = \partial\mathcal L/\partial e_l` of the hooked outputs;
2. the first-order worst case :math:`\varepsilon_l = \rho\, g_l / \|(g_1,\dots,g_L)\|` (one norm over
   all layers and the whole batch, as the official trainer computes it);
3. forward again with :math:`\varepsilon_l` added to each hooked output (constants, no gradient
   through them), backward, and the optimiser step on the parameters' gradients of this pass.

The official code hooks every attention module (the attention block's output, before it is added
to the residual stream); :func:`attention_modules` picks the same place in
:class:`reprobook.models.tiny_transformer.TinyTransformer`. The hooks never edit the model:
removing them gives back the unperturbed forward pass bit for bit.

``mode="random"`` replaces the crafted perturbation by a Gaussian direction of the **same global
norm** :math:`\rho` (the ablation "is it the adversarial direction, or any noise?"); ``rho = 0`` or
``mode="none"`` is plain supervised fine-tuning (SFT), the paper's baseline.

:func:`embedding_drift` measures the harmful embedding drift: the mean over tokens of
:math:`\|h_a(x) - h_b(x)\|^2`, the final hidden states (the LM head's input) of two models on the
same sequences.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import contextmanager

import torch
import torch.nn as nn

from .sft import PackedPairs, answer_loss

__all__ = ["MODES", "attention_modules", "hidden_gradients", "adversarial_perturbation",
           "random_perturbation", "perturbed", "vaccine_step", "train_pairs", "final_hidden",
           "embedding_drift"]

MODES = ("none", "adversarial", "random")


def attention_modules(model: nn.Module) -> list[nn.Module]:
    """The attention module of every block (``model.blocks[i].attn``): where Vaccine perturbs."""
    blocks = getattr(model, "blocks", None)
    if blocks is None or not all(hasattr(b, "attn") for b in blocks):
        raise ValueError("attention_modules needs a model with .blocks[i].attn (a TinyTransformer); "
                         "pass the modules to perturb explicitly for other models")
    return [b.attn for b in blocks]


def _out(output):
    # modules may return a tensor or a tuple whose first entry is the hidden state (HF attention)
    return output[0] if isinstance(output, tuple) else output


def hidden_gradients(modules: Sequence[nn.Module],
                     loss_fn: Callable[[], torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Run ``loss_fn()`` (a forward pass returning a scalar loss) and return the loss (detached)
    and :math:`\\partial \\mathcal L / \\partial e_l` for the output :math:`e_l` of each module.
    Parameter gradients are not touched (only the hidden states are differentiated)."""
    outs: dict[int, torch.Tensor] = {}

    def grab(i):
        def hook(_m, _inp, output):
            if i in outs:
                raise RuntimeError("a hooked module ran twice in one forward pass")
            outs[i] = _out(output)
        return hook

    handles = [m.register_forward_hook(grab(i)) for i, m in enumerate(modules)]
    try:
        loss = loss_fn()
    finally:
        for h in handles:
            h.remove()
    if len(outs) != len(modules):
        raise RuntimeError(f"only {len(outs)} of {len(modules)} hooked modules ran in the forward pass")
    hidden = [outs[i] for i in range(len(modules))]
    if not all(h.requires_grad for h in hidden):
        raise RuntimeError("a hooked output does not require grad: nothing trainable feeds it")
    grads = torch.autograd.grad(loss, hidden)
    return loss.detach(), [g.detach() for g in grads]


def _global_norm(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(t) for t in tensors]))


def _check_rho(rho):
    if isinstance(rho, bool) or not isinstance(rho, (int, float)) or not rho >= 0:
        raise ValueError(f"rho must be a non-negative number, got {rho!r}")


def adversarial_perturbation(grads: Sequence[torch.Tensor], rho: float) -> list[torch.Tensor]:
    """:math:`\\varepsilon_l = \\rho\\, g_l / \\|(g_1,\\dots,g_L)\\|`: the steepest ascent of the loss
    within the ball of radius ``rho`` (zero where every gradient is zero)."""
    _check_rho(rho)
    if not len(grads):
        raise ValueError("no gradients given")
    norm = _global_norm(grads)
    scale = rho / norm if float(norm) > 0 else torch.zeros_like(norm)
    return [g * scale for g in grads]


def random_perturbation(like: Sequence[torch.Tensor], rho: float,
                        generator: torch.Generator | None = None) -> list[torch.Tensor]:
    """A uniformly random direction (normalised Gaussian) with the same global norm ``rho``, shaped
    like ``like``: the control that keeps the size of Vaccine's perturbation but not its direction."""
    _check_rho(rho)
    noise = [torch.randn(t.shape, generator=generator, dtype=t.dtype).to(t.device) for t in like]
    return adversarial_perturbation(noise, rho)


@contextmanager
def perturbed(modules: Sequence[nn.Module], perturbations: Sequence[torch.Tensor]):
    """Inside the block, each module's output gets its perturbation added (a constant: no gradient
    flows into it). On exit the hooks are removed and the model is as it was."""
    if len(modules) != len(perturbations):
        raise ValueError(f"{len(perturbations)} perturbations for {len(modules)} modules")

    def add(eps):
        def hook(_m, _inp, output):
            h = _out(output)
            if h.shape != eps.shape:
                raise ValueError(f"perturbation of shape {tuple(eps.shape)} for an output of shape "
                                 f"{tuple(h.shape)}: it was computed on another batch")
            h = h + eps.detach()
            return (h, *output[1:]) if isinstance(output, tuple) else h
        return hook

    handles = [m.register_forward_hook(add(e)) for m, e in zip(modules, perturbations)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def vaccine_step(loss_fn: Callable[[], torch.Tensor], optimizer: torch.optim.Optimizer,
                 modules: Sequence[nn.Module], rho: float, mode: str = "adversarial",
                 generator: torch.Generator | None = None) -> dict:
    """One optimiser step of perturbation-aware training (SFT for ``mode="none"``).

    Returns ``{"loss": unperturbed loss of the first pass, "perturbed_loss": loss of the second}``
    (equal for ``"none"``)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    _check_rho(rho)
    optimizer.zero_grad(set_to_none=True)
    if mode == "none":
        loss = loss_fn()
        loss.backward()
        optimizer.step()
        return {"loss": float(loss.detach()), "perturbed_loss": float(loss.detach())}
    if mode == "adversarial":
        loss0, grads = hidden_gradients(modules, loss_fn)
        eps = adversarial_perturbation(grads, rho)
    else:
        with torch.no_grad():       # shapes of this batch's hidden states, for the noise
            loss0, shapes = _shapes(modules, loss_fn)
        eps = random_perturbation(shapes, rho, generator)
    with perturbed(modules, eps):
        loss = loss_fn()
    loss.backward()
    optimizer.step()
    return {"loss": float(loss0), "perturbed_loss": float(loss.detach())}


def _shapes(modules, loss_fn):
    outs = {}
    handles = [m.register_forward_hook(lambda _m, _i, o, i=i: outs.__setitem__(i, _out(o)))
               for i, m in enumerate(modules)]
    try:
        loss = loss_fn()
    finally:
        for h in handles:
            h.remove()
    return loss.detach(), [outs[i] for i in range(len(modules))]


def train_pairs(model: nn.Module, data: PackedPairs, *, params: Sequence[nn.Parameter], steps: int,
                batch_size: int, lr: float, generator: torch.Generator, rho: float = 0.0,
                mode: str = "none", modules: Sequence[nn.Module] | None = None,
                weight_decay: float = 0.0, device="cpu") -> list[float]:
    """Train ``params`` of ``model`` for ``steps`` Adam(W) steps on minibatches of ``data`` (drawn
    with ``generator``, with replacement) with the answer-only loss, by :func:`vaccine_step`
    (``mode="none"``: plain SFT). ``modules`` default to :func:`attention_modules`. Returns the
    unperturbed loss of every step."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be a non-negative int, got {steps!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    params = list(params)
    if not params:
        raise ValueError("no parameters to train")
    if mode != "none" and modules is None:
        modules = attention_modules(model)
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    model.train()
    losses = []
    for _ in range(steps):
        idx = torch.randint(len(data), (batch_size,), generator=generator)
        batch = data.subset(idx)
        x, y, m = batch.inputs.to(device), batch.targets.to(device), batch.mask.to(device)
        # trim the padding columns this batch does not use
        T = int(m.nonzero()[:, 1].max()) + 1
        x, y, m = x[:, :T], y[:, :T], m[:, :T]
        out = vaccine_step(lambda: answer_loss(model(x), y, m), opt, modules or [], rho, mode,
                           generator)
        losses.append(out["loss"])
    model.eval()
    return losses


@torch.no_grad()
def final_hidden(model: nn.Module, inputs: torch.Tensor, at: nn.Module | None = None) -> torch.Tensor:
    """The hidden states ``[N, T, d]`` at the output of ``at`` (default ``model.norm``: the final
    normalised states that the LM head reads)."""
    at = model.norm if at is None else at
    got = []
    h = at.register_forward_hook(lambda _m, _i, o: got.append(_out(o)))
    was = model.training
    model.eval()
    try:
        model(inputs)
    finally:
        h.remove()
        model.train(was)
    return got[-1]


@torch.no_grad()
def embedding_drift(model_a: nn.Module, model_b: nn.Module, data: PackedPairs,
                    batch_size: int = 512, device="cpu") -> float:
    """Mean over the real (non-padding) tokens of :math:`\\|h_a - h_b\\|^2`, the squared distance
    between the two models' final hidden states on the same sequences."""
    total, count = 0.0, 0
    T = data.inputs.shape[1]
    # a sequence's real tokens run up to its last answer-mask position
    last = torch.where(data.mask > 0, torch.arange(T), -1).amax(1)
    valid = torch.arange(T)[None, :] <= last[:, None]
    for s in range(0, len(data), batch_size):
        x = data.inputs[s:s + batch_size].to(device)
        v = valid[s:s + batch_size].to(device)
        d = (final_hidden(model_a, x) - final_hidden(model_b, x)).pow(2).sum(-1)
        total += float(d[v].sum())
        count += int(v.sum())
    return total / max(count, 1)
