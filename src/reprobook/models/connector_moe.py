r"""Vision-language connectors for a small multi-task "MLLM": linear, wide linear, and Uni-Med's CMoE.

A multimodal LLM in the MiniGPT-v2 / Uni-Med mould is *frozen visual encoder -> connector -> LLM*.
The connector maps each (resampled) visual token :math:`v\in\mathbb R^{d_v}` into the LLM's
embedding space :math:`\mathbb R^{d}`. Uni-Med (Zhu et al., NeurIPS 2024) argues that when one model
learns many tasks, their gradients pull a single shared connector in conflicting directions (the
"tug-of-war"), and replaces it by a **connector mixture of experts (CMoE)**:

.. math:: c(v, t) = \sum_{e=1}^{E} w_e(v, t)\, (A_e v + b_e),

with ``E`` projection experts and a **task-aware router**: a small MLP on the concatenation of a
learned task embedding :math:`\tau_t\in\mathbb R^{d_\tau}` and the visual token,
:math:`\ell = \mathrm{MLP}([\tau_t; v])\in\mathbb R^E`. Routing variants (``router=``):

* ``"soft"`` (Uni-Med's default): :math:`w = \sigma(\ell) / \sum_e \sigma(\ell_e)`;
* ``"sparse"``: softmax over the top-``k`` logits, zero elsewhere;
* ``"hard"``: one-hot on expert ``t mod E`` (one expert per task, no learned routing);
* ``"constant"``: :math:`w_e = 1/E` (a task-blind, content-blind mixture: a control);
* ``"visual"``: the soft router with the task embedding removed (task-blind, content-aware).

Resampling (MiniGPT-v2's): ``rate`` consecutive visual tokens are concatenated into one, which
shortens the sequence the LLM sees. Here the frozen "encoder" (:class:`FrozenPatchEncoder`) is a
fixed random projection of each 2x2 pixel patch to ``d_patch`` features with a GELU, and the
resampler concatenates ``rate`` consecutive patch tokens (raster order).

Baselines: :class:`LinearConnector` (one :math:`A v + b`, MiniGPT-v2's) and
:class:`WideLinearConnector`, a *parameter-matched* linear connector
:math:`B(Av + a) + b` with an inner width chosen (:func:`matched_width`) so that it holds as many
parameters as the CMoE; with ``activation="gelu"`` it is the two-layer MLP projector of LLaVA-1.5.
Without an activation it computes a linear map of rank at most ``min(d_v, d)``: the same function
class as :class:`LinearConnector`, with the CMoE's parameter budget.

:class:`DigitMLLM` wires encoder, connector and a :class:`~reprobook.models.tiny_transformer.TinyTransformer`
("LLM") together: the connector's outputs replace the embeddings of the ``<img>`` slots of the
token sequence (:mod:`reprobook.data.digit_tasks`). Every connector takes ``(visual [B, N, d_v],
task [B])`` and returns ``[B, N, d]``; a routed one keeps its last routing weights in
``last_weights`` (``[B, N, E]``, detached).
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .tiny_transformer import TinyTransformer

__all__ = ["ROUTERS", "FrozenPatchEncoder", "LinearConnector", "WideLinearConnector", "ConnectorMoE",
           "matched_width", "n_params", "DigitMLLM", "answer_loss", "batch_tensors", "train_mllm",
           "evaluate_mllm",
           "routing_js", "projection_params"]

ROUTERS = ("soft", "sparse", "hard", "constant", "visual")


def _positive(name, v):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise ValueError(f"{name} must be a positive int, got {v!r}")
    return int(v)


def n_params(module: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


class FrozenPatchEncoder(nn.Module):
    """Frozen "visual encoder": every 2x2 patch of an 8x8 image (raster order, 16 patches) is mapped
    to ``GELU(W p + c)`` with fixed random ``W: [d_patch, 4]``, ``c`` (drawn from ``seed``, never
    trained), then ``rate`` consecutive patch tokens are concatenated: ``(n, 64)`` grey levels
    (0..16) -> ``[n, 16 / rate, rate * d_patch]``."""

    def __init__(self, d_patch: int = 32, rate: int = 4, seed: int = 0):
        super().__init__()
        self.d_patch, self.rate = _positive("d_patch", d_patch), _positive("rate", rate)
        if 16 % self.rate:
            raise ValueError(f"rate must divide the 16 patch tokens, got {rate}")
        g = torch.Generator().manual_seed(int(seed))
        self.register_buffer("w", torch.randn(4, d_patch, generator=g, dtype=torch.float64) / 2.0)
        self.register_buffer("c", torch.randn(d_patch, generator=g, dtype=torch.float64) * 0.5)

    @property
    def d_out(self) -> int:
        return self.rate * self.d_patch

    @property
    def n_tokens(self) -> int:
        return 16 // self.rate

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        if pixels.ndim != 2 or pixels.shape[1] != 64:
            raise ValueError(f"pixels must have shape (n, 64), got {tuple(pixels.shape)}")
        x = pixels.to(self.w.dtype) / 8.0 - 1.0                          # grey levels to [-1, 1]
        p = x.reshape(-1, 4, 2, 4, 2).permute(0, 1, 3, 2, 4).reshape(-1, 16, 4)
        tok = F.gelu(p @ self.w + self.c)                                # [n, 16, d_patch]
        return tok.reshape(-1, self.n_tokens, self.d_out).float()


class LinearConnector(nn.Module):
    """One affine map ``A v + b`` shared by every task (MiniGPT-v2's connector)."""

    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        self.d_in, self.d_out = _positive("d_in", d_in), _positive("d_out", d_out)
        self.proj = nn.Linear(d_in, d_out)

    def forward(self, visual: torch.Tensor, task: torch.Tensor | None = None) -> torch.Tensor:
        _check(visual, self.d_in)
        return self.proj(visual)


class WideLinearConnector(nn.Module):
    """``B(A v + a) + b`` with inner width ``hidden``; ``activation="gelu"`` inserts a GELU (an MLP
    projector). Task-blind, like :class:`LinearConnector`."""

    def __init__(self, d_in: int, d_out: int, hidden: int, activation: str | None = None):
        super().__init__()
        self.d_in, self.d_out = _positive("d_in", d_in), _positive("d_out", d_out)
        self.hidden = _positive("hidden", hidden)
        if activation not in (None, "gelu"):
            raise ValueError(f"activation must be None or 'gelu', got {activation!r}")
        self.activation = activation
        self.inner, self.outer = nn.Linear(d_in, hidden), nn.Linear(hidden, d_out)

    def forward(self, visual: torch.Tensor, task: torch.Tensor | None = None) -> torch.Tensor:
        _check(visual, self.d_in)
        h = self.inner(visual)
        return self.outer(F.gelu(h) if self.activation else h)


def matched_width(d_in: int, d_out: int, target: int) -> int:
    """The inner width ``h`` of a :class:`WideLinearConnector` whose parameter count
    ``h (d_in + 1) + d_out (h + 1)`` is closest to ``target``."""
    d_in, d_out = _positive("d_in", d_in), _positive("d_out", d_out)
    if target < d_in + 2 * d_out + 1:
        raise ValueError(f"target={target} is below the smallest wide connector's parameter count")
    return max(1, round((target - d_out) / (d_in + 1 + d_out)))


class ConnectorMoE(nn.Module):
    """Uni-Med's connector mixture of experts (see the module docstring).

    Args:
        d_in: visual token width ``d_v``. d_out: LLM width ``d``. n_tasks: number of tasks.
        n_experts: projection experts ``E`` (Uni-Med: 3). router: one of :data:`ROUTERS`.
        task_dim: width of the learned task embedding. router_hidden: the router MLP's hidden width.
        top_k: experts kept by the ``"sparse"`` router.
        expert: ``"linear"`` (``A_e v + b_e``) or ``"mlp"`` (Linear-GELU-Linear, width ``d_out``).
    """

    def __init__(self, d_in: int, d_out: int, n_tasks: int, n_experts: int = 3, router: str = "soft",
                 task_dim: int = 16, router_hidden: int = 64, top_k: int = 1, expert: str = "linear"):
        super().__init__()
        self.d_in, self.d_out = _positive("d_in", d_in), _positive("d_out", d_out)
        self.n_tasks, self.n_experts = _positive("n_tasks", n_tasks), _positive("n_experts", n_experts)
        if router not in ROUTERS:
            raise ValueError(f"router must be one of {ROUTERS}, got {router!r}")
        if not 1 <= _positive("top_k", top_k) <= n_experts:
            raise ValueError(f"top_k must be in 1..n_experts={n_experts}, got {top_k}")
        if expert not in ("linear", "mlp"):
            raise ValueError(f"expert must be 'linear' or 'mlp', got {expert!r}")
        self.router_kind, self.top_k, self.expert_kind = router, int(top_k), expert
        self.task_dim = _positive("task_dim", task_dim)
        self.task_embed = nn.Embedding(n_tasks, task_dim)
        self.router = nn.Sequential(nn.Linear(task_dim + d_in, _positive("router_hidden", router_hidden)),
                                    nn.GELU(), nn.Linear(router_hidden, n_experts))
        if expert == "linear":
            self.experts = nn.ModuleList(nn.Linear(d_in, d_out) for _ in range(n_experts))
        else:
            self.experts = nn.ModuleList(nn.Sequential(nn.Linear(d_in, d_out), nn.GELU(),
                                                       nn.Linear(d_out, d_out))
                                         for _ in range(n_experts))
        self.last_weights = None

    def weights(self, visual: torch.Tensor, task: torch.Tensor) -> torch.Tensor:
        """Routing weights ``[B, N, E]`` (every row sums to 1)."""
        B, N, _ = visual.shape
        E = self.n_experts
        if self.router_kind == "constant":
            return visual.new_full((B, N, E), 1.0 / E)
        if self.router_kind == "hard":
            return F.one_hot(task % E, E).to(visual.dtype)[:, None, :].expand(B, N, E)
        emb = self.task_embed(task)[:, None, :].expand(B, N, self.task_dim)
        if self.router_kind == "visual":
            emb = torch.zeros_like(emb)              # the task is hidden from the router
        logits = self.router(torch.cat([emb, visual], -1))
        if self.router_kind == "sparse":
            top, idx = logits.topk(self.top_k, dim=-1)
            return torch.zeros_like(logits).scatter(-1, idx, top.softmax(-1))
        s = torch.sigmoid(logits)
        return s / s.sum(-1, keepdim=True)

    def forward(self, visual: torch.Tensor, task: torch.Tensor) -> torch.Tensor:
        _check(visual, self.d_in)
        task = _check_task(task, visual.shape[0], self.n_tasks)
        w = self.weights(visual, task)
        self.last_weights = w.detach()
        out = torch.stack([e(visual) for e in self.experts], -2)         # [B, N, E, d]
        return (w[..., None] * out).sum(-2)


def projection_params(connector: nn.Module) -> list[list[nn.Parameter]]:
    """The parameters that map visual tokens to the LLM, grouped: one group per expert of a
    :class:`ConnectorMoE`, one group for a linear or wide connector (router and task embedding
    are left out: they choose a map, they do not carry one)."""
    if isinstance(connector, ConnectorMoE):
        return [list(e.parameters()) for e in connector.experts]
    if isinstance(connector, (LinearConnector, WideLinearConnector)):
        return [list(connector.parameters())]
    raise TypeError(f"unknown connector {type(connector).__name__}")


def _check(visual, d_in):
    if visual.ndim != 3 or visual.shape[-1] != d_in:
        raise ValueError(f"visual tokens must be [B, N, {d_in}], got {tuple(visual.shape)}")


def _check_task(task, B, n_tasks):
    if task is None:
        raise ValueError("a routed connector needs the task indices")
    task = torch.as_tensor(task)
    if task.shape != (B,) or task.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"task must be a [{B}] integer tensor, got {tuple(task.shape)} {task.dtype}")
    if B and (int(task.min()) < 0 or int(task.max()) >= n_tasks):
        raise ValueError(f"task indices must lie in [0, {n_tasks})")
    return task.long()


class DigitMLLM(nn.Module):
    """Frozen encoder -> connector -> small decoder-only transformer over ``[task][img x N][q][a]``.

    ``img_slot``: the token id of the visual placeholder; its positions (the same in every row) get
    the connector's outputs instead of token embeddings."""

    def __init__(self, encoder: FrozenPatchEncoder, connector: nn.Module, llm: TinyTransformer,
                 img_slot: int):
        super().__init__()
        self.encoder, self.connector, self.llm, self.img_slot = encoder, connector, llm, int(img_slot)
        for p in self.encoder.parameters():
            p.requires_grad_(False)

    def visual_tokens(self, pixels: torch.Tensor) -> torch.Tensor:
        """The frozen encoder's tokens ``[B, N, d_v]`` (no gradient: compute them once and reuse)."""
        with torch.no_grad():
            return self.encoder(pixels)

    def forward(self, inputs: torch.Tensor, tokens: torch.Tensor, task: torch.Tensor) -> torch.Tensor:
        """Logits ``[B, T, vocab]``. ``inputs``: pixels ``[B, 64]`` or precomputed visual tokens
        ``[B, N, d_v]`` (:meth:`visual_tokens`; the encoder is frozen, so this is the same)."""
        llm = self.llm
        if tokens.ndim != 2:
            raise ValueError(f"tokens must be [B, T], got {tuple(tokens.shape)}")
        slots = (tokens[0] == self.img_slot).nonzero().flatten()
        if len(slots) != self.encoder.n_tokens or not bool((tokens[:, slots] == self.img_slot).all()):
            raise ValueError(f"every row needs the same {self.encoder.n_tokens} image slots")
        x = llm.embed(tokens)
        if inputs.ndim == 2:
            inputs = self.visual_tokens(inputs)
        elif inputs.ndim != 3 or inputs.shape[1:] != (self.encoder.n_tokens, self.encoder.d_out):
            raise ValueError(f"inputs must be pixels [B, 64] or visual tokens [B, {self.encoder.n_tokens}, "
                             f"{self.encoder.d_out}], got {tuple(inputs.shape)}")
        vis = self.connector(inputs, task)
        x = x.index_copy(1, slots, vis.to(x.dtype))
        T = tokens.shape[1]
        if llm.pos_embed is not None:
            x = x + llm.pos_embed(torch.arange(T, device=tokens.device))
        for block in llm.blocks:
            x = block(x)
        return llm.head(llm.norm(x))


def answer_loss(model: DigitMLLM, inputs, tokens, targets, mask, task, reduction="mean"):
    """Cross-entropy of the answer tokens: ``a1`` predicted at position ``T-2`` (the last question
    token), ``a2`` at ``T-1`` (``a1``); masked where there is no ``a2``. ``reduction="none"`` gives
    the per-example sum over its answer tokens."""
    logits = model(inputs, tokens, task)[:, -2:]                       # [B, 2, V]
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                         reduction="none").view(targets.shape) * mask
    per_example = ce.sum(1)
    return per_example if reduction == "none" else per_example.mean()


def batch_tensors(model: DigitMLLM, batch, device="cpu") -> tuple:
    """``(visual tokens, tokens, targets, mask, task)`` of a
    :class:`~reprobook.data.digit_tasks.TaskBatch` as tensors on ``device``: the arguments of
    :func:`answer_loss` after ``model``. The frozen encoder runs once here."""
    pixels = torch.as_tensor(batch.pixels, dtype=torch.float32, device=device)
    return (model.visual_tokens(pixels),
            torch.as_tensor(batch.tokens, device=device), torch.as_tensor(batch.targets, device=device),
            torch.as_tensor(batch.mask, dtype=torch.float32, device=device),
            torch.as_tensor(batch.task, device=device))


def train_mllm(model: DigitMLLM, train, *, steps: int, batch_size: int, lr: float, seed: int,
               weight_decay: float = 0.01, device="cpu", on_step=None) -> list[float]:
    """AdamW (constant rate after a warm-up of ``steps // 10``) on mini-batches of mixed tasks drawn
    uniformly from ``train`` (a :class:`~reprobook.data.digit_tasks.TaskBatch`) by a generator seeded
    with ``seed``: two models trained with the same seed see the same examples in the same order.
    ``on_step(step, model)`` is called after every step. Returns the training losses."""
    _positive("steps", steps)
    _positive("batch_size", batch_size)
    data = batch_tensors(model, train, device)
    g = torch.Generator().manual_seed(int(seed))
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    warm = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm))
    model.train()
    losses = []
    n = len(train)
    for step in range(steps):
        idx = torch.randint(n, (batch_size,), generator=g).to(device)
        loss = answer_loss(model, *(t[idx] for t in data))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        if on_step is not None:
            on_step(step + 1, model)
    return losses


@torch.no_grad()
def evaluate_mllm(model: DigitMLLM, batch, device="cpu", chunk: int = 4096) -> dict:
    """``correct (n,)`` bool (every answer token right), ``weights`` (``[n, N, E]`` routing weights
    of a routed connector, else ``None``) on the examples of ``batch``."""
    was = model.training
    model.eval()
    pix, tok, tgt, mask, task = batch_tensors(model, batch, device)
    correct, weights = [], []
    for i in range(0, len(task), chunk):
        sl = slice(i, i + chunk)
        pred = model(pix[sl], tok[sl], task[sl])[:, -2:].argmax(-1)
        ok = (pred == tgt[sl]) | (mask[sl] == 0)
        correct.append(ok.all(1).cpu())
        w = getattr(model.connector, "last_weights", None)
        if w is not None:
            weights.append(w.cpu())
    model.train(was)
    return {"correct": torch.cat(correct).numpy(),
            "weights": torch.cat(weights).numpy() if weights else None}


def routing_js(weights: np.ndarray, task: np.ndarray, n_tasks: int) -> float:
    r"""Mean pairwise Jensen-Shannon divergence (natural log, in [0, log 2]) between the tasks'
    average routing distributions :math:`\bar w_t = \mathrm{mean}_{i: t_i = t,\,n} w_{i,n}`.
    ``weights``: ``[n, N, E]`` (or ``[n, E]``); ``task``: ``(n,)``. 0 when routing ignores the task."""
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim == 3:
        w = w.mean(1)
    task = np.asarray(task)
    if w.ndim != 2 or task.shape != (w.shape[0],):
        raise ValueError(f"weights must be [n, N, E] or [n, E] and task (n,), got {w.shape}, {task.shape}")
    present = [t for t in range(n_tasks) if np.any(task == t)]
    if len(present) < 2:
        raise ValueError("routing_js needs examples of at least two tasks")
    means = [w[task == t].mean(0) for t in present]

    def kl(p, q):
        nz = p > 0
        return float(np.sum(p[nz] * np.log(p[nz] / q[nz])))

    js = []
    for i in range(len(means)):
        for j in range(i + 1, len(means)):
            m = 0.5 * (means[i] + means[j])
            js.append(0.5 * kl(means[i], m) + 0.5 * kl(means[j], m))
    return float(np.mean(js))

