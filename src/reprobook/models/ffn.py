r"""Feed-forward blocks for :class:`~reprobook.models.tiny_transformer.TinyTransformer`.

A feed-forward block (FFN) maps ``x: [..., d_model]`` to ``[..., d_model]`` position by position.
:class:`~reprobook.models.tiny_transformer.TinyTransformer` builds one per layer by name from
:data:`FFNS` as ``FFNS[name](d_model, **options)``. An FFN may also set, during ``forward``:

* ``aux_loss``: a scalar tensor the training loop adds to the language-model loss (times its own
  weight), e.g. a mixture of experts' load-balancing loss; ``None`` when there is none.

Built here:

* ``"mlp"`` (:class:`MLP`): ``W_out act(W_in x + b_in) + b_out``, the dense baseline;
* ``"nested"`` (:class:`NestedMLP`): MatFormer's nested FFN. Its first ``m`` hidden units form a
  smaller FFN, :math:`\mathrm{FFN}_m(x) = W_{out}[:, :m]\,\mathrm{act}(W_{in}[:m]\,x + b_{in}[:m]) +
  b_{out}`, so the FFNs of all widths :math:`m_1 < \dots < m_G` are nested,
  :math:`\mathrm{FFN}_{m_1} \subset \dots \subset \mathrm{FFN}_{m_G}`, and one set of weights holds
  them all. The width used by ``forward`` is the attribute ``width`` (or the ``width=`` argument).

The mixtures of experts (``"moe"``, ``"mh-moe"``) live in :mod:`reprobook.models.moe`.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["FFNS", "register_ffn", "ACTIVATIONS", "MLP", "NestedMLP"]

#: Registry of feed-forward blocks by name (see the module docstring for the protocol).
FFNS: dict[str, type[nn.Module]] = {}

#: Hidden-layer nonlinearities by name.
ACTIVATIONS = {"gelu": F.gelu, "relu": F.relu, "silu": F.silu}


def register_ffn(name: str):
    """Class decorator: make a feed-forward block available to TinyTransformer as ``ffn=name``."""
    def deco(cls):
        if name in FFNS and FFNS[name] is not cls:
            raise ValueError(f"an FFN named {name!r} is already registered ({FFNS[name].__name__})")
        FFNS[name] = cls
        return cls
    return deco


def _check_dims(d_model, hidden):
    for name, v in (("d_model", d_model), ("hidden", hidden)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")


def _activation(name: str):
    if name not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {name!r}")
    return ACTIVATIONS[name]


@register_ffn("mlp")
class MLP(nn.Module):
    """Dense two-layer FFN ``fc_out(act(fc_in(x)))`` with hidden width ``hidden``."""

    def __init__(self, d_model: int, hidden: int, activation: str = "gelu", bias: bool = True):
        super().__init__()
        _check_dims(d_model, hidden)
        self.act_name = activation
        self.act = _activation(activation)
        self.fc_in = nn.Linear(d_model, hidden, bias=bias)
        self.fc_out = nn.Linear(hidden, d_model, bias=bias)
        self.aux_loss = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc_out(self.act(self.fc_in(x)))


@register_ffn("nested")
class NestedMLP(nn.Module):
    """MatFormer's nested FFN (see the module docstring).

    Args:
        d_model: input and output width.
        hidden: the largest hidden width (the ``XL`` model's).
        widths: the widths trained explicitly, increasing, the last equal to ``hidden``
            (default: ``hidden/8, hidden/4, hidden/2, hidden``, the paper's four granularities).
            ``forward`` accepts any width in ``1..hidden`` (Mix'n'Match may pick others).
        activation, bias: as for :class:`MLP`.
    """

    def __init__(self, d_model: int, hidden: int, widths: list[int] | None = None,
                 activation: str = "gelu", bias: bool = True):
        super().__init__()
        _check_dims(d_model, hidden)
        if widths is None:
            if hidden % 8:
                raise ValueError(f"hidden={hidden} must be divisible by 8 for the default widths "
                                 "(or give widths)")
            widths = [hidden // 8, hidden // 4, hidden // 2, hidden]
        widths = [int(w) for w in widths]
        if any(b <= a for a, b in zip(widths, widths[1:])) or widths[0] < 1 or widths[-1] != hidden:
            raise ValueError(f"widths must increase from >= 1 to hidden={hidden}, got {widths}")
        self.widths = widths
        self.act_name = activation
        self.act = _activation(activation)
        self.fc_in = nn.Linear(d_model, hidden, bias=bias)
        self.fc_out = nn.Linear(hidden, d_model, bias=bias)
        self.width = hidden
        self.aux_loss = None

    @property
    def hidden(self) -> int:
        return self.fc_in.out_features

    def check_width(self, m) -> int:
        if isinstance(m, bool) or not isinstance(m, int) or not 1 <= m <= self.hidden:
            raise ValueError(f"width must be an int in 1..{self.hidden}, got {m!r}")
        return m

    def forward(self, x: torch.Tensor, width: int | None = None) -> torch.Tensor:
        m = self.check_width(self.width if width is None else width)
        b_in = self.fc_in.bias[:m] if self.fc_in.bias is not None else None
        h = self.act(F.linear(x, self.fc_in.weight[:m], b_in))
        return F.linear(h, self.fc_out.weight[:, :m], self.fc_out.bias)

    def extract(self, width: int) -> MLP:
        """A standalone :class:`MLP` of hidden width ``width`` holding copies of the sliced weights."""
        m = self.check_width(width)
        mlp = MLP(self.fc_in.in_features, m, self.act_name, bias=self.fc_in.bias is not None)
        mlp.to(self.fc_in.weight.device, self.fc_in.weight.dtype)   # before loading: no rounding
        mlp.load_state_dict(self.sliced_state(m))
        return mlp

    def sliced_state(self, width: int) -> dict[str, torch.Tensor]:
        """The state dict of the width-``width`` sub-FFN, with :class:`MLP`'s keys."""
        m = self.check_width(width)
        state = {"fc_in.weight": self.fc_in.weight[:m], "fc_out.weight": self.fc_out.weight[:, :m]}
        if self.fc_in.bias is not None:
            state["fc_in.bias"] = self.fc_in.bias[:m]
            state["fc_out.bias"] = self.fc_out.bias
        return {k: v.detach().clone() for k, v in state.items()}
