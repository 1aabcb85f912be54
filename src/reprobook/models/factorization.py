r"""Scale-invariant losses of a matrix product :math:`f(XY^\top)`, with closed-form gradients.

Two problems of Li, Zhang & He (2024) and their reproduction notes, each written as a loss of the
product :math:`W = XY^\top` (:math:`X \in \mathbb R^{d_1\times r}`, :math:`Y \in \mathbb R^{d_2\times
r}`; rank one is :math:`r = 1`):

* :class:`NoisyMatrixFit` (the paper's eq. 11): :math:`f_\xi(W) = \|W - (A + \alpha N_\xi)\|_F^2`
  with :math:`N_\xi = D\,U_\xi`, :math:`U_\xi` a fresh standard normal matrix each step and
  :math:`D` a diagonal of row scales; :math:`\alpha` sets the signal-to-noise ratio.
* :class:`LoRARegression`: a frozen linear map :math:`W_0` plus a LoRA update,
  :math:`f_B(W) = \frac{1}{2|B|}\sum_{i\in B}\|(W_0 + W) z_i - t_i\|^2` on a minibatch :math:`B`.

Both give :math:`G = \nabla_W f` in closed form, and the chain rule gives the factor gradients

.. math:: g_X = G\,Y, \qquad g_Y = G^\top X,

which :func:`factor_grads` computes without autograd (fast for the long trajectories of the
chapter; the tests check them against autograd). Everything carries a leading *member* dimension
``M``: ``M`` independent problems (seeds, noise levels) stepped side by side.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["NoisyMatrixFit", "LoRARegression", "factor_grads", "factor_loss"]


def _check_factors(x: torch.Tensor, y: torch.Tensor, d1: int, d2: int, members: int) -> None:
    for name, f, d in (("X", x, d1), ("Y", y, d2)):
        if not isinstance(f, torch.Tensor) or f.dim() != 3:
            raise ValueError(f"{name} must be a tensor of shape (members, {d}, rank), got "
                             f"{getattr(f, 'shape', type(f).__name__)}")
        if f.shape[0] != members or f.shape[1] != d:
            raise ValueError(f"{name} must have shape ({members}, {d}, rank), got {tuple(f.shape)}")
    if x.shape[2] != y.shape[2]:
        raise ValueError(f"X and Y must have the same rank, got {x.shape[2]} and {y.shape[2]}")


@dataclass
class NoisyMatrixFit:
    r""":math:`\|XY^\top - (A + \alpha_m D U_\xi)\|_F^2` per member :math:`m` (the paper's NOP toy).

    ``target`` is :math:`A` (d1, d2), shared; ``noise_scale`` holds :math:`\alpha_m` per member;
    ``row_scales`` is the diagonal of :math:`D` (ones by default). ``fixed_noise`` (members, d1,
    d2), if given, replaces the fresh draws by one fixed noise matrix per member (a deterministic
    loss, as in the reproduction notes' rank-one problem).
    """

    target: torch.Tensor
    noise_scale: torch.Tensor
    row_scales: torch.Tensor | None = None
    fixed_noise: torch.Tensor | None = None

    def __post_init__(self):
        if not isinstance(self.target, torch.Tensor) or self.target.dim() != 2:
            raise ValueError("target must be a (d1, d2) tensor")
        self.noise_scale = torch.as_tensor(self.noise_scale, dtype=self.target.dtype,
                                           device=self.target.device)
        if self.noise_scale.dim() != 1 or (self.noise_scale < 0).any():
            raise ValueError("noise_scale must be a 1-d tensor of alphas >= 0, one per member")
        d1, d2 = self.target.shape
        if self.row_scales is None:
            self.row_scales = torch.ones(d1, dtype=self.target.dtype, device=self.target.device)
        if self.row_scales.shape != (d1,):
            raise ValueError(f"row_scales must have shape ({d1},), got {tuple(self.row_scales.shape)}")
        if self.fixed_noise is not None and self.fixed_noise.shape != (self.members, d1, d2):
            raise ValueError(f"fixed_noise must have shape ({self.members}, {d1}, {d2})")

    @property
    def members(self) -> int:
        return int(self.noise_scale.shape[0])

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.target.shape)

    def batches(self, generator: torch.Generator | None, batch_size: None = None):
        """An endless stream of per-step targets (see :meth:`sample_batch`)."""
        if batch_size is not None:
            raise ValueError("the matrix fit has no data set to batch: pass batch_size=None")
        while True:
            yield self.sample_batch(generator)

    def sample_batch(self, generator: torch.Generator | None, batch_size: None = None):
        """The step's target :math:`A + \\alpha D U` per member, shape (members, d1, d2)."""
        if batch_size is not None:
            raise ValueError("the matrix fit has no data set to batch: pass batch_size=None")
        if self.fixed_noise is not None:
            u = self.fixed_noise
        else:
            if generator is None:
                raise ValueError("fresh noise needs a torch.Generator")
            u = torch.randn(self.members, *self.shape, generator=generator,
                            dtype=self.target.dtype, device=self.target.device)
            u = self.row_scales[:, None] * u
        return self.target + self.noise_scale[:, None, None] * u

    def loss_of_product(self, w: torch.Tensor, batch: torch.Tensor) -> torch.Tensor:
        """Per-member loss (members,) at the product ``w`` (members, d1, d2); differentiable."""
        return (w - batch).pow(2).sum(dim=(1, 2))

    def grad_of_product(self, w: torch.Tensor, batch: torch.Tensor):
        """Per-member loss and :math:`G = 2(W - T_\\xi)`."""
        r = w - batch
        return r.pow(2).sum(dim=(1, 2)), 2 * r


@dataclass
class LoRARegression:
    r"""Least squares through a frozen map plus a LoRA update, one data set per member.

    ``inputs`` (members, n, d_in), ``targets`` (members, n, d_out), ``base`` :math:`W_0`
    (members, d_out, d_in). A batch is a (members, b) tensor of row indices (one minibatch per
    member), a tuple of the gathered (inputs, targets) rows, or ``None`` (the full data set).
    """

    inputs: torch.Tensor
    targets: torch.Tensor
    base: torch.Tensor

    def __post_init__(self):
        if self.inputs.dim() != 3 or self.targets.dim() != 3 or self.base.dim() != 3:
            raise ValueError("inputs (M, n, d_in), targets (M, n, d_out) and base (M, d_out, d_in) "
                             "must all be 3-d")
        m, n, d_in = self.inputs.shape
        if self.targets.shape[:2] != (m, n):
            raise ValueError(f"targets must have shape ({m}, {n}, d_out), got "
                             f"{tuple(self.targets.shape)}")
        if self.base.shape != (m, self.targets.shape[2], d_in):
            raise ValueError(f"base must have shape ({m}, {self.targets.shape[2]}, {d_in}), got "
                             f"{tuple(self.base.shape)}")

    @property
    def members(self) -> int:
        return int(self.inputs.shape[0])

    @property
    def shape(self) -> tuple[int, int]:
        return int(self.targets.shape[2]), int(self.inputs.shape[2])

    @property
    def n(self) -> int:
        return int(self.inputs.shape[1])

    def sample_batch(self, generator: torch.Generator | None, batch_size: int | None = None):
        """Row indices (members, b) drawn without replacement per member, or None (full batch)."""
        if batch_size is None or batch_size >= self.n:
            return None
        if generator is None:
            raise ValueError("minibatches need a torch.Generator")
        keys = torch.rand(self.members, self.n, generator=generator, device=self.inputs.device)
        return keys.argsort(dim=1)[:, :batch_size]

    def batches(self, generator: torch.Generator | None, batch_size: int | None = None):
        """An endless stream of minibatches: each member reshuffles its rows every epoch and walks
        through them ``batch_size`` at a time (the rows are gathered once, for both of SAM's
        gradients). ``None`` or a size >= n: the full data set every step."""
        if batch_size is None or batch_size >= self.n:
            while True:
                yield None
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        if generator is None:
            raise ValueError("minibatches need a torch.Generator")
        per_epoch = self.n // batch_size
        while True:
            order = torch.rand(self.members, self.n, generator=generator,
                               device=self.inputs.device).argsort(dim=1)
            for k in range(per_epoch):
                yield self._rows(order[:, k * batch_size:(k + 1) * batch_size])

    def _rows(self, batch):
        if batch is None:
            return self.inputs, self.targets
        if isinstance(batch, tuple):       # rows already gathered
            return batch
        idx = batch.to(self.inputs.device)
        z = torch.gather(self.inputs, 1, idx[:, :, None].expand(-1, -1, self.inputs.shape[2]))
        t = torch.gather(self.targets, 1, idx[:, :, None].expand(-1, -1, self.targets.shape[2]))
        return z, t

    def loss_of_product(self, w: torch.Tensor, batch=None) -> torch.Tensor:
        z, t = self._rows(batch)
        r = torch.bmm(z, (self.base + w).transpose(1, 2)) - t
        return 0.5 * r.pow(2).sum(dim=(1, 2)) / z.shape[1]

    def grad_of_product(self, w: torch.Tensor, batch=None):
        r"""Per-member loss and :math:`G = R^\top Z/b` with residuals :math:`R`."""
        z, t = self._rows(batch)
        r = torch.bmm(z, (self.base + w).transpose(1, 2)) - t
        b = z.shape[1]
        return 0.5 * r.pow(2).sum(dim=(1, 2)) / b, torch.bmm(r.transpose(1, 2), z) / b

    def test_mse(self, w: torch.Tensor, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean squared error per output coordinate on held-out data, per member."""
        r = torch.bmm(inputs, (self.base + w).transpose(1, 2)) - targets
        return r.pow(2).mean(dim=(1, 2))


def factor_loss(problem, x: torch.Tensor, y: torch.Tensor, batch) -> torch.Tensor:
    """Per-member loss at :math:`XY^\\top` (differentiable in ``x`` and ``y``)."""
    d1, d2 = problem.shape
    _check_factors(x, y, d1, d2, problem.members)
    return problem.loss_of_product(torch.bmm(x, y.transpose(1, 2)), batch)


def factor_grads(problem, x: torch.Tensor, y: torch.Tensor, batch):
    """Per-member loss and the closed-form factor gradients :math:`(GY, G^\\top X)`."""
    d1, d2 = problem.shape
    _check_factors(x, y, d1, d2, problem.members)
    loss, g = problem.grad_of_product(torch.bmm(x, y.transpose(1, 2)), batch)
    return loss, torch.bmm(g, y), torch.bmm(g.transpose(1, 2), x)
