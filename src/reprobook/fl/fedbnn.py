r"""FedBNN (our reconstruction), local Bayesian training, and FedAvg.

**Local VI.** Client $c$ fits a mean-field Gaussian $q_c(w)$ to its $n_c$ points by minimising the
per-example negative ELBO with a *function-space prior* term,

$$\mathcal L_c(q) = \frac{1}{n_c}\sum_{i} \mathbb E_q[-\log p(y_i \mid x_i, w)]
+ \frac{1}{n_c}\,\mathrm{KL}(q \,\|\, N(0, s^2))
+ \lambda\,\frac{1}{|A|}\sum_{x \in A} \mathrm{KL}\big(\Phi_c(x)\,\|\,p(\cdot \mid x, w)\big),$$

i.e. the prior is $p_c(w) \propto N(w; 0, s^2)\exp\{-\lambda\,n_c\,\overline{\mathrm{KL}}_A(\Phi_c \| f_w)\}$:
it prefers weights whose *outputs* on the public alignment set $A$ agree with the collaborative
knowledge $\Phi_c$. The prior lives in output space, so clients may have different architectures.
With $\lambda = 0$ the procedure is exactly local training.

**One round.** (1) every client trains ``local_steps`` Adam steps; (2) it sends its Monte Carlo
predictive $P_c(x) = \frac1S\sum_s \operatorname{softmax} f(x; w_s)$ on $A$ (optionally through the
Gaussian mechanism); (3) the server returns $\Phi_c = \sum_j W_{cj} P_j$, with personalized weights
$W_{cj} \propto \exp(-\tau\,\overline{\mathrm{JS}}(P_c, P_j))$ ($\tau = 0$: the plain mean).

**FedAvg.** One deterministic MLP shared by all; each round clients start from the global weights,
take ``local_steps`` Adam steps on cross-entropy, and the server averages weights by $n_c$.
It needs one architecture for everyone and raises otherwise. With ``finetune=True`` the last round's
local models are kept, not averaged: each client fine-tunes the global model of round $R-1$ for
``local_steps`` steps on its own data (FedAvg + local fine-tuning, the same total budget).

**FedMD-style distillation** (:func:`train_fedmd`): the same rounds, messages, aggregation and
function-space term, but every client is a deterministic MLP trained on cross-entropy, with no
weight posterior and no KL to a weight prior. FedBNN minus FedMD isolates the Bayesian part.

**Uniform-prior control** (``prior_target="uniform"``): the function-space term pulls toward the
uniform distribution $1/K$ instead of the aggregate. It keeps the regularisation and removes the
collaboration: no message carries information between clients.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch.nn import functional as F

from .bnn import BNN, MLP
from .data import FederatedData


def _js(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Mean Jensen-Shannon divergence between rows of two (n, K) probability tables."""
    m = 0.5 * (p + q)
    kl = lambda a, b: (a * (a.clamp_min(1e-12).log() - b.clamp_min(1e-12).log())).sum(-1)
    return (0.5 * kl(p, m) + 0.5 * kl(q, m)).mean()


def aggregate(messages: torch.Tensor, temperature: float = 0.0) -> torch.Tensor:
    r"""Server step: from client predictives (C, n_A, K) to per-client targets Phi (C, n_A, K).

    $\Phi_c = \sum_j W_{cj} P_j$ with $W_{cj} \propto \exp(-\tau\,\mathrm{JS}(P_c, P_j))$, rows of W
    summing to one; ``temperature=0`` gives every client the plain mean of all messages.
    """
    if messages.ndim != 3:
        raise ValueError(f"messages must have shape (clients, n_public, classes), got "
                         f"{tuple(messages.shape)}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    c = messages.shape[0]
    d = torch.stack([torch.stack([_js(messages[i], messages[j]) for j in range(c)])
                     for i in range(c)])
    w = torch.softmax(-temperature * d, dim=1)
    return torch.einsum("cj,jak->cak", w.to(messages.dtype), messages)


def _sizes_per_client(arch, n_clients):
    if arch and isinstance(arch[0], (list, tuple)):
        if len(arch) != n_clients:
            raise ValueError(f"arch lists {len(arch)} architectures for {n_clients} clients")
        return [list(a) for a in arch]
    return [list(arch)] * n_clients


def _full_sizes(hidden, data):
    return [data.dim, *hidden, data.n_classes]


def train_fedbnn(data: FederatedData, hidden: Sequence | Sequence[Sequence], rounds: int,
                 local_steps: int, prior_weight: float, generator_seed: int, lr: float = 0.02,
                 prior_std: float = 1.0, n_samples: int = 8, temperature: float = 0.0,
                 mechanism=None, prior_sign: float = 1.0, bayesian: bool = True,
                 prior_target: str = "aggregate") -> list:
    """Run FedBNN and return the clients' personalized posteriors.

    ``hidden``: the hidden widths of every client's BNN, or one list per client (heterogeneous
    architectures). ``prior_weight`` is lambda; 0 gives local training (no communication used).
    ``mechanism`` (e.g. :class:`~reprobook.fl.privacy.GaussianMechanism`) privatises each message.
    ``prior_sign=-1`` flips the sign of the function-space prior term, so training pushes a client's
    outputs *away* from the aggregate: a planted bug for the chapter's controls.
    ``bayesian=False`` trains deterministic MLPs (FedMD-style distillation, see
    :func:`train_fedmd`). ``prior_target="uniform"`` replaces the aggregate by the uniform
    distribution (regularisation without collaboration).
    """
    if rounds < 1 or local_steps < 1:
        raise ValueError(f"rounds and local_steps must be >= 1, got {rounds}, {local_steps}")
    if prior_weight < 0:
        raise ValueError(f"prior_weight must be >= 0, got {prior_weight}")
    if prior_sign not in (1.0, -1.0):
        raise ValueError(f"prior_sign must be +1 or -1, got {prior_sign}")
    if prior_target not in ("aggregate", "uniform"):
        raise ValueError(f"prior_target must be 'aggregate' or 'uniform', got {prior_target!r}")
    n = len(data.clients)
    archs = _sizes_per_client(list(hidden), n)
    # separate streams: training noise vs communication noise, so lambda = 0 is bit-exact local
    train_g = [torch.Generator().manual_seed(generator_seed * 1000 + c) for c in range(n)]
    comm_g = [torch.Generator().manual_seed(generator_seed * 1000 + 500 + c) for c in range(n)]
    if bayesian:
        models = [BNN(_full_sizes(a, data), train_g[c], prior_std) for c, a in enumerate(archs)]
    else:
        models = [MLP(_full_sizes(a, data), train_g[c]) for c, a in enumerate(archs)]
    fwd = (lambda m, x, g: m(x, g)) if bayesian else (lambda m, x, g: m(x))
    opts = [torch.optim.Adam(m.parameters(), lr=lr) for m in models]
    targets = None
    for r in range(rounds):
        for c, (m, opt, cl) in enumerate(zip(models, opts, data.clients)):
            for _ in range(local_steps):
                opt.zero_grad()
                loss = F.cross_entropy(fwd(m, cl.x, train_g[c]), cl.y)
                if bayesian:
                    loss = loss + m.kl() / len(cl.y)
                if targets is not None and prior_weight > 0:
                    logq = torch.log_softmax(fwd(m, data.public, train_g[c]), -1)
                    phi = targets[c]
                    kl = (phi * (phi.clamp_min(1e-12).log() - logq)).sum(-1).mean()
                    loss = loss + prior_sign * prior_weight * kl
                loss.backward()
                opt.step()
        if prior_weight > 0 and r < rounds - 1 and prior_target == "uniform":
            k = data.n_classes
            targets = torch.full((n, len(data.public), k), 1.0 / k)
        elif prior_weight > 0 and r < rounds - 1:
            msgs = []
            for c, m in enumerate(models):
                p = m.predict_proba(data.public, n_samples, comm_g[c])
                if mechanism is not None:
                    p = mechanism(p, comm_g[c]).clamp(1e-6, 1.0)     # post-processing is free
                    p = p / p.sum(-1, keepdim=True)
                msgs.append(p)
            targets = aggregate(torch.stack(msgs), temperature)
    return models


def train_fedmd(data: FederatedData, hidden, rounds: int, local_steps: int, prior_weight: float,
                generator_seed: int, **kw) -> list[MLP]:
    """FedMD-style deterministic function-space distillation: :func:`train_fedbnn` with plain MLPs
    (same rounds, steps, messages, aggregation and distillation term; no posterior)."""
    return train_fedbnn(data, hidden, rounds, local_steps, prior_weight, generator_seed,
                        bayesian=False, **kw)


def train_local(data: FederatedData, hidden, rounds: int, local_steps: int, generator_seed: int,
                **kw) -> list[BNN]:
    """Local Bayesian training alone: FedBNN with prior weight 0 (same budget, no communication)."""
    return train_fedbnn(data, hidden, rounds, local_steps, 0.0, generator_seed, **kw)


def train_fedavg(data: FederatedData, hidden, rounds: int, local_steps: int, generator_seed: int,
                 lr: float = 0.02, finetune: bool = False):
    """FedAvg with the same rounds and local steps; returns the global model, or with ``finetune``
    the clients' own models of the last round (local fine-tuning of round R-1's global model)."""
    archs = _sizes_per_client(list(hidden), len(data.clients))
    if any(a != archs[0] for a in archs):
        raise ValueError(f"FedAvg averages weights, so every client needs the same architecture; "
                         f"got hidden sizes {archs}")
    g = torch.Generator().manual_seed(generator_seed)
    glob = MLP(_full_sizes(archs[0], data), g)
    total = sum(len(cl.y) for cl in data.clients)
    for r in range(rounds):
        states = []
        for cl in data.clients:
            m = MLP(glob.sizes, g)
            m.load_state_dict(glob.state_dict())
            opt = torch.optim.Adam(m.parameters(), lr=lr)
            for _ in range(local_steps):
                opt.zero_grad()
                F.cross_entropy(m(cl.x), cl.y).backward()
                opt.step()
            states.append((len(cl.y) / total, m.state_dict()))
            if finetune and r == rounds - 1:
                states[-1] = (states[-1][0], m)
        if finetune and r == rounds - 1:
            return [m for _, m in states]
        glob.load_state_dict({k: sum(w * s[k] for w, s in states) for k in states[0][1]})
    return glob


@torch.no_grad()
def evaluate(models, data: FederatedData, n_samples: int = 16, seed: int = 0, n_bins: int = 10):
    """Per-client test accuracy and ECE. ``models``: one per client, or one shared model."""
    from .metrics import expected_calibration_error
    if not isinstance(models, (list, tuple)):
        models = [models] * len(data.clients)
    g = torch.Generator().manual_seed(seed)
    acc, ece = [], []
    for m, cl in zip(models, data.clients):
        p = m.predict_proba(cl.x_test, n_samples, g)
        acc.append(float((p.argmax(-1) == cl.y_test).float().mean()))
        ece.append(expected_calibration_error(p, cl.y_test, n_bins))
    return torch.tensor(acc, dtype=torch.float64), torch.tensor(ece, dtype=torch.float64)
