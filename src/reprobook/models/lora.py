r"""Low-rank adaptation (LoRA) of a model's linear layers, written out in plain torch.

LoRA (Hu et al., ICLR 2022) freezes a pretrained weight :math:`W \in \mathbb{R}^{d_o\times d_i}`
and learns a low-rank update beside it:

.. math::

    y = W x + b + \frac{\alpha}{r}\, B A\, \mathrm{drop}(x), \qquad
    A \in \mathbb{R}^{r\times d_i},\; B \in \mathbb{R}^{d_o\times r}.

:math:`A` starts Kaiming-uniform (:math:`a=\sqrt5`, as ``nn.Linear`` and ``peft`` do) and :math:`B`
at zero, so the adapted model starts *exactly* as the base model. Only :math:`A, B` train: the
update has :math:`r(d_i + d_o)` parameters instead of :math:`d_i d_o`. After training the update can
be folded into the weight (:func:`merge_lora`: :math:`W \leftarrow W + \tfrac{\alpha}{r} BA`), which
gives back a plain ``nn.Linear`` with the same outputs and no inference cost.

This module is the book's LoRA rather than ``peft``'s because importing ``peft`` costs seconds of
CPU (it imports ``transformers`` and ``accelerate``: about 8 s on this book's 2-core machine), most
of a smoke run's budget, for some twenty lines of arithmetic. Its initialisation and scaling follow
``peft``'s defaults (``init_lora_weights=True``, ``scaling = alpha / r``).

Example::

    add_lora(model, targets=("attn",), r=4, alpha=8)   # every Linear under a module named *attn*
    opt = torch.optim.Adam(lora_parameters(model), lr=1e-3)
    ...
    merge_lora(model)                                   # plain Linear layers again
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["LoRALinear", "add_lora", "merge_lora", "lora_parameters", "lora_layers"]


class LoRALinear(nn.Module):
    """A frozen ``nn.Linear`` plus a trainable rank-``r`` update scaled by ``alpha / r``."""

    def __init__(self, base: nn.Linear, r: int, alpha: float, dropout: float = 0.0):
        super().__init__()
        if not isinstance(base, nn.Linear):
            raise TypeError(f"LoRALinear wraps an nn.Linear, got {type(base).__name__}")
        if isinstance(r, bool) or not isinstance(r, int) or r < 1:
            raise ValueError(f"LoRA rank r must be a positive int, got {r!r}")
        if r > min(base.in_features, base.out_features):
            raise ValueError(f"LoRA rank r={r} exceeds the layer's smaller side "
                             f"({base.in_features} -> {base.out_features}): not low rank")
        if not (isinstance(alpha, (int, float)) and alpha > 0):
            raise ValueError(f"LoRA alpha must be a positive number, got {alpha!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"LoRA dropout must be in [0, 1), got {dropout!r}")
        self.base = base
        for p in self.base.parameters():
            p.requires_grad_(False)
        w = base.weight
        self.lora_A = nn.Parameter(torch.empty(r, base.in_features, device=w.device, dtype=w.dtype))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r, device=w.device, dtype=w.dtype))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.r, self.alpha, self.scaling = r, float(alpha), float(alpha) / r
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()

    def delta_weight(self) -> torch.Tensor:
        """The update :math:`\\tfrac{\\alpha}{r} BA`, shaped like the base weight."""
        return self.scaling * (self.lora_B @ self.lora_A)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + self.scaling * F.linear(F.linear(self.dropout(x), self.lora_A),
                                                      self.lora_B)

    def merged(self) -> nn.Linear:
        """A plain ``nn.Linear`` computing the same function (dropout aside)."""
        out = nn.Linear(self.base.in_features, self.base.out_features,
                        bias=self.base.bias is not None, device=self.base.weight.device,
                        dtype=self.base.weight.dtype)
        with torch.no_grad():
            out.weight.copy_(self.base.weight + self.delta_weight())
            if self.base.bias is not None:
                out.bias.copy_(self.base.bias)
        return out

    def extra_repr(self) -> str:
        return f"r={self.r}, alpha={self.alpha:g}"


def _matcher(targets) -> Callable[[str], bool]:
    if callable(targets):
        return targets
    if isinstance(targets, str):
        targets = (targets,)
    if not isinstance(targets, Iterable) or not all(isinstance(t, str) and t for t in targets):
        raise TypeError("targets must be a name fragment, a sequence of them, or a callable "
                        f"name -> bool; got {targets!r}")
    parts = set(targets)
    # a fragment is a whole module name: "attn" matches the module "blocks.0.attn" (and so every
    # Linear under it, see _hits), not "blocks.0.attn_norm"
    return lambda name: name.rsplit(".", 1)[-1] in parts


def add_lora(model: nn.Module, targets: str | Sequence[str] | Callable[[str], bool], r: int,
             alpha: float, dropout: float = 0.0, freeze: bool = True) -> nn.Module:
    """Wrap, in place, every ``nn.Linear`` whose dotted name (or a module above it) matches
    ``targets`` in a :class:`LoRALinear`; with ``freeze`` every other parameter stops training.

    ``targets``: a name component (``"attn"``), several, or a callable on the Linear's full name.
    Raises ``ValueError`` when nothing matches, so a typo cannot silently train nothing."""
    match = _matcher(targets)
    hits = [name for name, m in model.named_modules()
            if isinstance(m, nn.Linear) and not isinstance(m, LoRALinear)
            and not name.endswith(".base") and _hits(name, match)]
    if not hits:
        linears = [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]
        raise ValueError(f"no nn.Linear matches targets {targets!r}; the model's linear layers: "
                         f"{linears[:12]}{' ...' if len(linears) > 12 else ''}")
    if freeze:
        for p in model.parameters():
            p.requires_grad_(False)
    for name in hits:
        parent, _, leaf = name.rpartition(".")
        owner = model.get_submodule(parent) if parent else model
        setattr(owner, leaf, LoRALinear(getattr(owner, leaf), r, alpha, dropout))
    return model


def _hits(name: str, match) -> bool:
    # the Linear itself or any module above it may carry the target name
    parts = name.split(".")
    return any(match(".".join(parts[:i])) for i in range(1, len(parts) + 1))


def lora_layers(model: nn.Module) -> dict[str, LoRALinear]:
    """The model's LoRA layers by name."""
    return {n: m for n, m in model.named_modules() if isinstance(m, LoRALinear)}


def lora_parameters(model: nn.Module) -> list[nn.Parameter]:
    """The trainable LoRA factors (``A`` and ``B`` of every LoRA layer)."""
    layers = lora_layers(model)
    if not layers:
        raise ValueError("the model has no LoRA layers: call add_lora first")
    return [p for m in layers.values() for p in (m.lora_A, m.lora_B)]


def merge_lora(model: nn.Module) -> nn.Module:
    """Fold every LoRA update into its weight, in place: plain ``nn.Linear`` layers again (trainable
    as the base layers were frozen: ``requires_grad`` stays off)."""
    for name, m in list(lora_layers(model).items()):
        parent, _, leaf = name.rpartition(".")
        owner = model.get_submodule(parent) if parent else model
        lin = m.merged()
        lin.requires_grad_(False)
        setattr(owner, leaf, lin)
    return model
