r"""Count floating-point operations with PyTorch's own counter (``FlopCounterMode``).

``torch.utils.flop_counter.FlopCounterMode`` intercepts the ATen operators a computation runs and
adds up a formula per operator: ``2 m n k`` for an ``[m, k] @ [k, n]`` product (a multiply and an
add per term), and the same for batched products, convolutions and attention. Element-wise work
(activations, norms, softmax, bias additions, gathers and scatters) is not counted, which is the
usual convention: at any realistic width the products dominate.

What is counted is what *ran*: a mixture of experts that sends each routed unit through one
expert is charged for one expert per unit, not for all of them. That is why chapters that match
"per-token FLOPs" across architectures measure them here instead of writing formulas by hand.

PyTorch 2.13 has formulas for the CUDA attention kernels but not for the CPU one
(``_scaled_dot_product_flash_attention_for_cpu``); on import this module registers the same
formulas for it (forward and backward), so attention is counted on a CPU too. Like PyTorch's, they
charge full (unmasked) attention, :math:`4 B H T^2 d` forward, also under a causal mask.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils import flop_counter as _fc

__all__ = ["count_flops", "flops_per_token", "flops_by_module"]


def _register_cpu_attention() -> None:
    aten = torch.ops.aten
    fwd = getattr(aten, "_scaled_dot_product_flash_attention_for_cpu", None)
    bwd = getattr(aten, "_scaled_dot_product_flash_attention_for_cpu_backward", None)
    if fwd is not None and fwd not in _fc.flop_registry:
        @_fc.register_flop_formula(fwd, get_raw=True)
        def _cpu_sdpa(query, key, value, *args, out_val=None, **kwargs) -> int:
            return _fc.sdpa_flop_count(query.shape, key.shape, value.shape)
    if bwd is not None and bwd not in _fc.flop_registry:
        @_fc.register_flop_formula(bwd, get_raw=True)
        def _cpu_sdpa_backward(grad_out, query, key, value, *args, out_val=None, **kwargs) -> int:
            return _fc.sdpa_backward_flop_count(grad_out.shape, query.shape, key.shape, value.shape)


_register_cpu_attention()


def count_flops(fn: Callable, *args, **kwargs) -> int:
    """Total FLOPs of ``fn(*args, **kwargs)`` (forward, and backward if ``fn`` calls it)."""
    if not callable(fn):
        raise TypeError(f"count_flops needs a callable, got {type(fn).__name__}")
    with _fc.FlopCounterMode(display=False) as counter:
        fn(*args, **kwargs)
    return int(counter.get_total_flops())


def flops_by_module(fn: Callable, *args, **kwargs) -> dict[str, int]:
    """FLOPs of ``fn(*args, **kwargs)`` by module path (``"Global"`` is the total; a module's
    count includes its children's), as ``FlopCounterMode`` attributes them."""
    with _fc.FlopCounterMode(display=False) as counter:
        fn(*args, **kwargs)
    return {k: int(sum(v.values())) for k, v in counter.get_flop_counts().items()}


def flops_per_token(module: torch.nn.Module, d_model: int, n_tokens: int = 256, *,
                    backward: bool = False, generator: torch.Generator | None = None) -> float:
    """FLOPs per token of a position-wise block (an FFN, a mixture of experts) on ``n_tokens``
    random inputs ``[n_tokens, d_model]``: forward, or forward and backward with ``backward=True``.

    Runs in training mode (a mixture of experts routes as it does in training) with gradients off
    for the input; the block's parameters keep theirs, so the backward pass is counted in full.
    """
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"flops_per_token needs an nn.Module, got {type(module).__name__}")
    if isinstance(n_tokens, bool) or not isinstance(n_tokens, int) or n_tokens < 1:
        raise ValueError(f"n_tokens must be a positive int, got {n_tokens!r}")
    p = next(module.parameters())
    x = torch.randn(n_tokens, d_model, generator=generator, dtype=p.dtype).to(p.device)

    def run():
        y = module(x)
        if backward:
            y.float().square().mean().backward()

    was = module.training
    module.train()
    try:
        total = count_flops(run)
    finally:
        module.train(was)
        if backward:
            module.zero_grad(set_to_none=True)
    return total / n_tokens
