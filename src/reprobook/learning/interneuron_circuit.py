"""A recurrent circuit of primary neurons and interneurons that shapes its response distribution
(Lipshutz & Simoncelli, NeurIPS 2024), with its online gain, synapse and activation-shape rules.

The circuit. ``s_dim`` primary neurons receive a stimulus ``s`` and are recurrently connected,
through synapses ``W`` (``s_dim`` x ``K``, unit-norm columns ``w_i``), to ``K`` interneurons.
Interneuron ``i`` sees ``z_i = w_i . r`` and outputs ``n_i = g_i f_{theta_i}(z_i)``, with gain
``g_i >= 0`` and an odd, increasing activation whose shape is set by ``theta_i`` in [1, 3]:

    f_theta(z) = a(theta) z + b(theta) sign(z) |z|^theta,
    a(theta) = exp(max(2 theta - 3.85, 0)^1.95),    b(theta) = exp(max(theta^2.32 - 6, 0)).

The steady-state response ``r`` balances the stimulus with the interneurons' feedback,

    s = W n(r) = sum_i w_i g_i f_{theta_i}(w_i . r).

Writing ``F_theta`` for the antiderivative of ``f_theta``, ``W n(r)`` is the gradient of the
convex potential ``phi(r) = sum_i g_i F_{theta_i}(w_i . r)``, so ``r = (grad phi)^{-1}(s)``: the
input-response map is the gradient of the convex conjugate ``phi*``, a Brenier (optimal-transport)
map. We compute ``r`` by minimising ``phi(r) - s . r`` with damped Newton steps, batched over
stimuli; the Hessian ``W diag(g f'(z)) W^T`` is symmetric positive semi-definite for every input,
and its inverse is the Jacobian ``dr/ds``.

The learning rules (one step a mini-batch; ``E`` is the batch mean). Each interneuron enforces on
its own projection ``z_i`` the Gaussian target's second and ``(theta+1)``-th absolute moments,

    c(theta, z) = a(theta) (z^2 - 1) / 2 + b(theta) (|z|^(theta+1) - m_(theta+1)) / (theta + 1),
    m_p = E|N(0,1)|^p = sqrt(2^p / pi) Gamma((p + 1) / 2),

* gains:      g <- max(g + lr_g E[g c(theta, z)], 0)   (g multiplies the step: a step in log g);
* shapes:     theta <- clip(theta + lr_theta E[dc/dtheta(theta, z)], 1, 3);
* synapses:   W <- W + lr_w E[r n^T], then every column back to unit norm (Hebbian).

With ``theta`` frozen at 1, ``f_1(z) = 2 z`` and ``c(1, z) = z^2 - 1``: the circuit is linear and its
gains drive every ``E[z_i^2]`` to 1; with ``K >= s_dim (s_dim + 1) / 2`` generic directions that
forces ``Cov(r) = I``, and the only symmetric linear map that does it is ZCA whitening
``Cov(s)^{-1/2}`` (the adaptive whitening circuit of Lipshutz et al. 2023). Adapting ``theta``
lets each interneuron also match a higher moment, which linear whitening cannot.

``dc/dtheta`` follows the official implementation (github.com/dlipshutz/shaping, ``circuit.py``),
including its ``b'(theta) = 2.32 theta^1.32 b(theta)`` also where the ``max`` in ``b`` clips (there
the true derivative of ``b`` is 0): that is the rule whose results the paper reports.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.special import digamma, gammaln

THETA_MIN, THETA_MAX = 1.0, 3.0


# ----------------------------------------------------------------------------- the activation family
def gaussian_abs_moment(p):
    """``m_p = E|Z|^p`` for ``Z ~ N(0, 1)``: ``sqrt(2^p / pi) Gamma((p + 1) / 2)``."""
    p = np.asarray(p, dtype=np.float64)
    return np.exp(0.5 * p * np.log(2.0) - 0.5 * np.log(np.pi) + gammaln((p + 1) / 2))


def gaussian_abs_moment_dp(p):
    """``d m_p / dp = m_p (log 2 + digamma((p + 1) / 2)) / 2``."""
    p = np.asarray(p, dtype=np.float64)
    return 0.5 * gaussian_abs_moment(p) * (np.log(2.0) + digamma((p + 1) / 2))


def shape_coefficients(theta):
    """``(a(theta), b(theta))``, the linear and power weights of ``f_theta``."""
    theta = np.asarray(theta, dtype=np.float64)
    a = np.exp(np.maximum(2 * theta - 3.85, 0.0) ** 1.95)
    b = np.exp(np.maximum(theta**2.32 - 6.0, 0.0))
    return a, b


def shape_coefficients_dtheta(theta):
    """``(a'(theta), b'(theta))`` as in the official code (``b'`` not masked where ``b`` clips)."""
    theta = np.asarray(theta, dtype=np.float64)
    a, b = shape_coefficients(theta)
    return a * 3.9 * np.maximum(2 * theta - 3.85, 0.0) ** 0.95, b * 2.32 * theta**1.32


def activation(z, theta, coef=None):
    """``f_theta(z) = a z + b sign(z) |z|^theta`` (broadcasts ``theta`` over the last axis;
    ``coef = shape_coefficients(theta)`` may be passed in to save recomputing it)."""
    a, b = shape_coefficients(theta) if coef is None else coef
    return a * z + b * np.sign(z) * np.abs(z) ** theta


def activation_slope(z, theta, coef=None):
    """``f'_theta(z) = a + b theta |z|^(theta - 1)`` (``> 0``: the activation is increasing)."""
    a, b = shape_coefficients(theta) if coef is None else coef
    return a + b * theta * np.abs(z) ** (theta - 1)


def activation_potential(z, theta, coef=None):
    """``F_theta(z) = a z^2 / 2 + b |z|^(theta + 1) / (theta + 1)``, convex, ``F' = f``."""
    a, b = shape_coefficients(theta) if coef is None else coef
    return 0.5 * a * z**2 + b * np.abs(z) ** (theta + 1) / (theta + 1)


def moment_constraint(z, theta):
    """``c(theta, z)``: zero in expectation iff ``z`` has the Gaussian's second and (theta+1)-th
    absolute moments in the combination ``a (E z^2 - 1)/2 + b (E|z|^(theta+1) - m)/(theta+1)``."""
    a, b = shape_coefficients(theta)
    p = theta + 1
    return a * (z**2 - 1) / 2 + b * (np.abs(z) ** p - gaussian_abs_moment(p)) / p


def moment_constraint_dtheta(z, theta):
    """``dc/dtheta``, the activation-shape update (official form, see the module docstring)."""
    a, b = shape_coefficients(theta)
    da, db = shape_coefficients_dtheta(theta)
    p = theta + 1
    absz = np.abs(z)
    power = absz**p
    mono = (power - gaussian_abs_moment(p)) / p
    # d|z|^p/dp = log|z| |z|^p, which tends to 0 at z = 0
    log_power = np.where(absz > 0, np.log(np.where(absz > 0, absz, 1.0)) * power, 0.0)
    return (da * (z**2 - 1) / 2 + db * mono - b * mono / p
            + b * (log_power - gaussian_abs_moment_dp(p)) / p)


def tight_frame(s_dim: int, n_dim: int, rng: np.random.Generator) -> np.ndarray:
    """A random ``s_dim`` x ``n_dim`` Parseval frame ``U I_{s,n} V`` (``U``, ``V`` Haar-orthogonal),
    the official initial synapses, with its columns brought to unit norm (as the first synapse
    update does in the official code)."""
    from scipy.stats import ortho_group

    if n_dim < s_dim:
        raise ValueError(f"need at least s_dim={s_dim} interneurons, got n_dim={n_dim}")
    u = ortho_group.rvs(s_dim, random_state=rng) if s_dim > 1 else np.ones((1, 1))
    v = ortho_group.rvs(n_dim, random_state=rng) if n_dim > 1 else np.ones((1, 1))
    w = u @ np.eye(s_dim, n_dim) @ v
    return w / np.linalg.norm(w, axis=0)


# ----------------------------------------------------------------------------- the circuit
def _solve(h: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``h^{-1} v`` for stacks of symmetric positive-definite ``h``; 2 x 2 in closed form (the
    response solver's inner loop is dominated by call overhead, not arithmetic)."""
    if h.shape[-1] != 2:
        return np.linalg.solve(h, v[..., None])[..., 0]
    h00, h01, h11 = h[..., 0, 0], h[..., 0, 1], h[..., 1, 1]
    det = h00 * h11 - h01 * h01
    return np.stack([h11 * v[..., 0] - h01 * v[..., 1], h00 * v[..., 1] - h01 * v[..., 0]], -1) / det[..., None]


def _flag(flag, batch: tuple) -> np.ndarray:
    """A per-circuit switch as a boolean array broadcastable to the parameters' batch shape."""
    f = np.asarray(flag, dtype=bool)
    if f.ndim and f.shape != batch:
        raise ValueError(f"a per-circuit flag must be a bool or have the batch shape {batch}, "
                         f"got shape {f.shape}")
    return f


@dataclass
class InterneuronCircuit:
    """The circuit's parameters and its online rules, for one circuit or a stack of independent
    ones (leading batch axes: ``W`` (*B, s_dim, K), ``g`` and ``theta`` (*B, K); stimuli then
    come as (*B, n, s_dim), one set per circuit), so that replicates run as one vectorised loop.

    ``adapt_theta=False`` freezes the activation shapes (with ``theta = 1``: linear adaptive
    whitening); ``adapt_gains`` / ``adapt_synapses`` switch the other two rules off (controls).
    Each flag is a bool or a boolean array of the batch shape (per circuit)."""

    W: np.ndarray
    g: np.ndarray
    theta: np.ndarray
    adapt_gains: object = True
    adapt_theta: object = True
    adapt_synapses: object = True
    newton_tol: float = 1e-10
    newton_max_iter: int = 60
    history: dict = field(default_factory=lambda: {"g": [], "theta": [], "W": []}, repr=False)

    @classmethod
    def create(cls, s_dim: int, n_dim: int, rng: np.random.Generator, *, batch: tuple = (),
               linear: bool = False, g0=1.0, theta0=2.0, **flags) -> "InterneuronCircuit":
        """Circuits with the official initialisation: a random tight-frame ``W`` each, gains
        ``g0`` and shapes ``theta0`` (scalars or arrays broadcastable to (*batch, n_dim)); or
        linear circuits, ``theta = 1`` frozen."""
        batch = tuple(int(b) for b in batch)
        W = np.stack([tight_frame(s_dim, n_dim, rng) for _ in range(int(np.prod(batch)))])
        shape = batch + (n_dim,)
        theta = np.ones(shape) if linear else np.broadcast_to(theta0, shape).astype(np.float64)
        if linear:
            flags["adapt_theta"] = False
        g = np.broadcast_to(g0, shape).astype(np.float64)
        return cls(W.reshape(batch + (s_dim, n_dim)), g, theta, **flags)

    @classmethod
    def concatenate(cls, circuits) -> "InterneuronCircuit":
        """Stack circuits of one batch shape along a new leading axis (flags per circuit), so that
        different variants train in one vectorised loop."""
        circuits = list(circuits)
        if not circuits:
            raise ValueError("need at least one circuit")
        shapes = {c.W.shape for c in circuits}
        if len(shapes) != 1:
            raise ValueError(f"circuits must have the same shapes, got {sorted(shapes)}")
        first = circuits[0]

        def flags(name):
            return np.stack([np.broadcast_to(getattr(c, name), c.batch_shape) for c in circuits])

        return cls(np.stack([c.W for c in circuits]), np.stack([c.g for c in circuits]),
                   np.stack([c.theta for c in circuits]), adapt_gains=flags("adapt_gains"),
                   adapt_theta=flags("adapt_theta"), adapt_synapses=flags("adapt_synapses"),
                   newton_tol=first.newton_tol, newton_max_iter=first.newton_max_iter)

    def __post_init__(self):
        self.W = np.array(self.W, dtype=np.float64)
        self.g = np.array(self.g, dtype=np.float64)
        self.theta = np.array(self.theta, dtype=np.float64)
        if self.W.ndim < 2:
            raise ValueError(f"W must be (*batch, s_dim, n_dim), got shape {self.W.shape}")
        shape = self.W.shape[:-2] + self.W.shape[-1:]
        if self.g.shape != shape or self.theta.shape != shape:
            raise ValueError(f"g and theta must have shape {shape}, got {self.g.shape} and "
                             f"{self.theta.shape}")
        if np.any(self.g < 0):
            raise ValueError("gains must be non-negative")
        if np.any((self.theta < THETA_MIN) | (self.theta > THETA_MAX)):
            raise ValueError(f"theta must lie in [{THETA_MIN}, {THETA_MAX}]")
        for name in ("adapt_gains", "adapt_theta", "adapt_synapses"):
            setattr(self, name, _flag(getattr(self, name), self.batch_shape))

    @property
    def s_dim(self) -> int:
        return self.W.shape[-2]

    @property
    def batch_shape(self) -> tuple:
        return self.W.shape[:-2]

    def _check(self, s) -> np.ndarray:
        s = np.asarray(s, dtype=np.float64)
        want = self.batch_shape + ("n", self.s_dim)
        if s.ndim != len(want) or s.shape[:-2] != self.batch_shape or s.shape[-1] != self.s_dim:
            raise ValueError(f"stimuli must have shape {want}, got {s.shape}")
        return s

    def _z(self, r) -> np.ndarray:
        return r @ self.W                                  # (*B, n, K)

    def _coef(self):
        theta = self.theta[..., None, :]
        return theta, shape_coefficients(theta)

    def interneuron_output(self, r, _coef=None) -> np.ndarray:
        """``n = g * f_theta(W^T r)`` for responses ``r`` (*B, n, s_dim) -> (*B, n, K)."""
        theta, coef = _coef or self._coef()
        return self.g[..., None, :] * activation(self._z(r), theta, coef)

    def hessian(self, r, _coef=None) -> np.ndarray:
        """``W diag(g f'(W^T r)) W^T`` at each response, (*B, n, s_dim, s_dim): the inverse
        Jacobian ``ds/dr`` of the input-response map."""
        theta, coef = _coef or self._coef()
        d = self.g[..., None, :] * activation_slope(self._z(r), theta, coef)
        return (self.W[..., None, :, :] * d[..., None, :]) @ np.swapaxes(self.W, -1, -2)[..., None, :, :]

    def jacobian(self, r) -> np.ndarray:
        """``dr/ds = (W diag(g f') W^T)^{-1}`` at each response (*B, n, s_dim, s_dim)."""
        return np.linalg.inv(self.hessian(r))

    def _objective(self, r, s, _coef) -> np.ndarray:
        theta, coef = _coef
        pot = activation_potential(self._z(r), theta, coef)
        return (self.g[..., None, :] * pot).sum(-1) - (r * s).sum(-1)

    def responses(self, s) -> np.ndarray:
        """The steady state ``r`` with ``W n(r) = s`` for each stimulus.

        Damped Newton on the strictly convex ``phi(r) - s . r``: a full step where it lowers the
        objective, otherwise halved until it does (per stimulus). Raises if in some circuit the
        interneurons with positive gain do not span the response space (the map is then not
        invertible)."""
        s = self._check(s)
        active = self.W * (self.g > 0)[..., None, :]
        gram = active @ np.swapaxes(active, -1, -2)        # (*B, s, s), PSD
        if np.any(np.linalg.eigvalsh(gram)[..., 0] <= 1e-12):
            raise np.linalg.LinAlgError("the interneurons with positive gain do not span the "
                                        "response space: the circuit cannot invert")
        # Everything below is written in z = W^T r and one power |z|^(theta - 1) per iterate:
        # f = z (a + b |z|^(theta-1)), f' = a + b theta |z|^(theta-1),
        # F = z^2 (a/2 + b |z|^(theta-1) / (theta+1)); a trial point's z is z - t (step W), and an
        # accepted trial's z and power are the next iterate's (the loop is overhead-bound).
        theta = self.theta[..., None, :]
        a, b = shape_coefficients(theta)
        g = self.g[..., None, :]
        Wt = np.swapaxes(self.W, -1, -2)

        def power(z):
            return np.abs(z) ** (theta - 1)

        def objective(r, z, pw):
            return (g * z**2 * (0.5 * a + b * pw / (theta + 1))).sum(-1) - (r * s).sum(-1)

        r = s.copy()
        z = r @ self.W
        pw = power(z)
        f0 = objective(r, z, pw)
        scale = 1.0 + np.abs(s).max(axis=-1)
        for _ in range(self.newton_max_iter):
            grad = (g * z * (a + b * pw)) @ Wt - s
            if not np.any(np.linalg.norm(grad, axis=-1) > self.newton_tol * scale):
                break
            hess = (self.W[..., None, :, :] * (g * (a + b * theta * pw))[..., None, :]) @ Wt[..., None, :, :]
            step = _solve(hess, grad)
            dz = step @ self.W
            # Armijo test, with slack at the objective's rounding level: close to the solution
            # the decrease is below float precision and a full Newton step must be accepted
            slack = 1e-12 * (1.0 + np.abs(f0))
            decrease = 1e-4 * (grad * step).sum(-1)
            t = np.ones(f0.shape)
            for _ in range(40):
                rt, zt = r - t[..., None] * step, z - t[..., None] * dz
                pwt = power(zt)
                ft = objective(rt, zt, pwt)
                worse = ft > f0 - t * decrease + slack
                if not worse.any():
                    break
                t = np.where(worse, 0.5 * t, t)
            r, z, pw, f0 = rt, zt, pwt, ft
        return r

    def step(self, batch, lr_g: float = 1e-2, lr_theta: float = 1e-2, lr_w: float = 1e-3) -> np.ndarray:
        """One online update on a mini-batch of stimuli (*B, n, s_dim); returns its responses.
        All three rules read the same pre-update state."""
        r = self.responses(batch)
        z = self._z(r)
        theta = self.theta[..., None, :]
        n = self.g[..., None, :] * activation(z, theta)
        dg = (self.g[..., None, :] * moment_constraint(z, theta)).mean(-2)
        dtheta = moment_constraint_dtheta(z, theta).mean(-2)
        dW = np.swapaxes(r, -1, -2) @ n / r.shape[-2]
        self.g = np.where(self.adapt_gains[..., None], np.maximum(self.g + lr_g * dg, 0.0), self.g)
        self.theta = np.where(self.adapt_theta[..., None],
                              np.clip(self.theta + lr_theta * dtheta, THETA_MIN, THETA_MAX),
                              self.theta)
        W = self.W + lr_w * dW
        W = W / np.linalg.norm(W, axis=-2, keepdims=True)
        self.W = np.where(self.adapt_synapses[..., None, None], W, self.W)
        return r

    def fit(self, data, n_steps: int, batch_size: int, rng: np.random.Generator, *,
            record_every: int = 0, **lrs) -> "InterneuronCircuit":
        """``n_steps`` online updates on mini-batches drawn without replacement from each
        circuit's ``data`` (*B, N, s_dim) (a fresh permutation each pass). ``record_every > 0``
        keeps the parameters' trajectory in ``history``."""
        data = self._check(data)
        n_data = data.shape[-2]
        if int(n_steps) != n_steps or n_steps < 0:
            raise ValueError(f"n_steps must be a non-negative integer, got {n_steps!r}")
        if int(batch_size) != batch_size or not 1 <= batch_size <= n_data:
            raise ValueError(f"batch_size must be in [1, {n_data}], got {batch_size!r}")

        def permutation():
            return rng.random(self.batch_shape + (n_data,)).argsort(axis=-1)

        order, pos = permutation(), 0
        for t in range(int(n_steps)):
            if pos + batch_size > n_data:
                order, pos = permutation(), 0
            idx = order[..., pos:pos + batch_size, None]
            self.step(np.take_along_axis(data, idx, axis=-2), **lrs)
            pos += batch_size
            if record_every and (t + 1) % record_every == 0:
                self.history["g"].append(self.g.copy())
                self.history["theta"].append(self.theta.copy())
                self.history["W"].append(self.W.copy())
        return self
