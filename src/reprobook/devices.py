"""Device selection: ``"auto"`` picks CUDA when it is there, else the CPU."""
from __future__ import annotations

__all__ = ["select_device", "check_device_name", "device_description"]

_KNOWN = ("auto", "cpu", "cuda", "mps")


def select_device(device: str = "auto"):
    """Return a ``torch.device`` for ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"mps"``.

    Asking for an accelerator that is not present is an error, not a silent fall-back to the CPU:
    a chapter run at the ``gpu`` profile on a CPU machine should say so at once.
    """
    name = check_device_name(device)
    import torch

    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        return torch.device("cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"device {device!r} was asked for, but torch sees no CUDA device here")
    if name == "mps" and not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        raise RuntimeError("device 'mps' was asked for, but it is not available here")
    return torch.device(name)


def check_device_name(device) -> str:
    """The normalised device name, or an error naming what is wrong with it (needs no torch)."""
    if not isinstance(device, str):
        raise TypeError(f"device must be a string such as 'auto' or 'cpu', got {device!r}")
    name = device.strip().lower()
    if name.split(":")[0] not in _KNOWN:
        raise ValueError(f"unknown device {device!r}; use one of {', '.join(_KNOWN)} or 'cuda:N'")
    return name


def device_description(device) -> str:
    """A human-readable name for the ledger: the GPU model, or the CPU and its core count.

    ``device=None`` describes the CPU of a run that never loaded torch."""
    import os
    import platform

    cpu = platform.processor() or platform.machine()
    if device is None:
        return f"cpu: {cpu}, {os.cpu_count()} cores (torch not used)"
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        return f"cuda: {torch.cuda.get_device_name(device)}"
    return f"cpu: {cpu}, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads"
