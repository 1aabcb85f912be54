"""Small, generic input checks shared by the kernels (each raises an error naming the argument)."""

from __future__ import annotations

import os
from collections.abc import Iterable

import torch

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def check_impl(impl: str, allowed: Iterable[str]) -> str:
    """Return ``impl`` if it is one of ``allowed``; otherwise raise ValueError naming ``impl``."""
    allowed = tuple(allowed)
    if impl not in allowed:
        raise ValueError(f"impl must be one of {allowed}, got {impl!r}")
    return impl


def check_tensor(name: str, x, ndim: int | None = None, dtypes=FLOAT_DTYPES) -> torch.Tensor:
    """Check that ``x`` is a tensor with ``ndim`` dimensions and a dtype in ``dtypes``."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if ndim is not None and x.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(x.shape)}")
    if dtypes is not None and x.dtype not in dtypes:
        raise TypeError(f"{name} has dtype {x.dtype}; expected one of {tuple(dtypes)}")
    return x


def check_shape(name: str, x: torch.Tensor, shape: tuple) -> torch.Tensor:
    """Check ``x.shape == shape``; entries of ``shape`` that are None match any size."""
    ok = x.dim() == len(shape) and all(s is None or s == d for s, d in zip(shape, x.shape))
    if not ok:
        want = tuple("*" if s is None else s for s in shape)
        raise ValueError(f"{name} must have shape {want}, got {tuple(x.shape)}")
    return x


def check_same_device(**tensors) -> None:
    """All given tensors (None entries ignored) must live on one device."""
    devs = {n: t.device for n, t in tensors.items() if t is not None}
    if len(set(devs.values())) > 1:
        raise ValueError(f"tensors must be on one device, got {devs}")


def check_power_of_two(name: str, n) -> int:
    """Check that ``n`` is a positive integer power of two."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1 or (n & (n - 1)) != 0:
        raise ValueError(f"{name} must be a positive power of two, got {n!r}")
    return n


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """float64 stays float64; every other float type is computed in float32."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def triton_interpreting() -> bool:
    """True when Triton kernels run in its numpy interpreter (``TRITON_INTERPRET=1``, read by
    Triton when it is imported)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def check_triton_target(name: str, x: torch.Tensor) -> None:
    """An ``impl='triton'`` input must be on a CUDA device, or Triton must be interpreting; the
    interpreter computes in numpy, which has no bfloat16."""
    interpret = triton_interpreting()
    if x.device.type != "cuda" and not interpret:
        raise ValueError(f"impl='triton' needs {name} on a CUDA device, or TRITON_INTERPRET=1 set "
                         f"before triton is imported (the CPU interpreter); {name} is on {x.device}")
    if interpret and x.dtype == torch.bfloat16:
        raise TypeError(f"{name} has dtype bfloat16, which the Triton interpreter cannot compute "
                        "with; use float16, float32 or float64 on CPU")
