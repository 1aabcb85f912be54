r"""Simulated hardware devices whose latency and energy measurements have architecture-dependent
(heteroscedastic) noise, with known ground truth.

A device has a cost model of a sub-network ``arch`` of a :class:`~reprobook.models.supernet_gpt.GPTSpace`
(``F`` = forward FLOPs of one sequence, ``P`` = parameters, ``l`` = layers)::

    latency(arch) = a F + b 4P + c l + d                 (compute, weight traffic, per-layer, fixed)
    power(arch)   = p_idle + p_dyn F / (F + F_half)      (utilisation saturates with size)
    energy(arch)  = latency(arch) power(arch)

with ``(a, b, c, d, p_idle, p_dyn, F_half)`` drawn from a seeded prior of one of two regimes:
*CPU-like* (cost dominated by FLOPs and weight bytes) and *GPU-like* (dominated by per-layer
kernel-launch overhead and a fixed cost, FLOPs almost free).

A measurement is the true value times multiplicative log-normal noise whose level depends on the
architecture (the reproduction notes' model, on our space)::

    sigma_lat(arch) = 0.02 + 0.10 (l / l_max) (1 + 0.5 [heads differ across layers])
    sigma_en(arch)  = 0.03 + 0.08 (e / e_max) (1 + 0.5 [MLP ratios differ across layers])

so a measurement's standard deviation in its own units, :func:`noise_sd`, grows with both the
value and the noise level: heteroscedastic by construction. Energy noise is drawn independently
of latency noise. These devices are *simulated*: they test whether a surrogate method handles such
noise, not whether real devices have it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..models.supernet_gpt import Arch, GPTSpace

__all__ = ["SimDevice", "simulated_devices", "METRICS", "noise_level", "true_value", "noise_sd",
           "measure"]

METRICS = ("latency", "energy")


@dataclass(frozen=True)
class SimDevice:
    """One simulated device (see the module docstring); latencies in ms, energies in mJ."""

    name: str
    kind: str
    a: float
    b: float
    c: float
    d: float
    p_idle: float
    p_dyn: float
    f_half: float


def simulated_devices(n: int = 13, seed: int = 0) -> list[SimDevice]:
    """``n`` devices, alternating CPU-like and GPU-like, parameters from a prior seeded by ``seed``."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    rng = np.random.default_rng([int(seed), 4040])
    out = []
    for i in range(n):
        u = rng.uniform(0.5, 2.0, size=7)
        if i % 2 == 0:   # CPU-like: ~1-4 GFLOP/s, weight bytes matter, small per-layer cost
            dev = SimDevice(f"sim-cpu-{i // 2}", "cpu-like", a=5e-7 * u[0], b=2e-6 * u[1],
                            c=0.02 * u[2], d=0.05 * u[3], p_idle=10 * u[4], p_dyn=30 * u[5],
                            f_half=2e6 * u[6])
        else:            # GPU-like: FLOPs nearly free, launch overhead per layer dominates
            dev = SimDevice(f"sim-gpu-{i // 2}", "gpu-like", a=5e-9 * u[0], b=1e-8 * u[1],
                            c=0.15 * u[2], d=0.3 * u[3], p_idle=50 * u[4], p_dyn=200 * u[5],
                            f_half=2e7 * u[6])
        out.append(dev)
    return out


def _check_metric(metric):
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")


def noise_level(space: GPTSpace, archs, metric: str = "latency") -> np.ndarray:
    """The log-normal noise level sigma(arch) of each architecture (see the module docstring)."""
    _check_metric(metric)
    if metric == "latency":
        return np.array([0.02 + 0.10 * (a.layers / space.layers[-1]) * (1 + 0.5 * (len(set(a.heads)) > 1))
                         for a in archs])
    return np.array([0.03 + 0.08 * (a.e / space.embed[-1]) * (1 + 0.5 * (len(set(a.ratios)) > 1))
                     for a in archs])


def true_value(device: SimDevice, space: GPTSpace, archs, metric: str = "latency") -> np.ndarray:
    """Noise-free latency (ms) or energy (mJ) of each architecture on ``device``."""
    _check_metric(metric)
    F = np.array([space.flops(a) for a in archs], dtype=float)
    P = np.array([space.params(a) for a in archs], dtype=float)
    L = np.array([a.layers for a in archs], dtype=float)
    lat = device.a * F + device.b * 4 * P + device.c * L + device.d
    if metric == "latency":
        return lat
    power = device.p_idle + device.p_dyn * F / (F + device.f_half)     # W = mJ/ms
    return lat * power


def noise_sd(device: SimDevice, space: GPTSpace, archs, metric: str = "latency") -> np.ndarray:
    """Standard deviation of one measurement, in the metric's units (log-normal noise)."""
    s = noise_level(space, archs, metric)
    return true_value(device, space, archs, metric) * np.sqrt(np.expm1(s ** 2)) * np.exp(s ** 2 / 2)


def measure(device: SimDevice, space: GPTSpace, archs, repeats: int, rng: np.random.Generator,
            metric: str = "latency") -> np.ndarray:
    """``[n_archs, repeats]`` simulated measurements: true value times ``exp(sigma(arch) z)``."""
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a positive int, got {repeats!r}")
    archs = list(archs)
    if not archs or not all(isinstance(a, Arch) for a in archs):
        raise ValueError("archs must be a non-empty list of Arch")
    mu = true_value(device, space, archs, metric)
    s = noise_level(space, archs, metric)
    return mu[:, None] * np.exp(s[:, None] * rng.standard_normal((len(archs), repeats)))
