r"""An autoregressive toy language model whose every response can be enumerated, with a known reward.

**Space.** Prompts :math:`x \in \{0..X-1\}`, responses :math:`y = (y_1..y_L) \in V^L`; with the
defaults (:math:`X=16, |V|=6, L=3`) there are 216 responses per prompt and 3 456 sequences, so every
probability, expectation and KL below is computed **exactly**, with no sampling error.

**Model** (:class:`ToyLM`). :math:`\pi_\theta(y\mid x) = \prod_t \pi_\theta(y_t\mid x, y_{<t})`, each
factor a softmax of an MLP on the sum of a prompt embedding, a position embedding and one embedding
per prefix slot (empty slots get a padding token). All :math:`\sum_{t<L}|V|^t` prefixes of all
prompts go through the MLP in one batch, and :meth:`ToyLM.log_probs` assembles the
:math:`[X, |V|^L]` table of :math:`\log\pi_\theta(y\mid x)` from them.

**Task** (:class:`ToyTask`). A true reward linear in known features,
:math:`r^*(x,y) = w^{*\top}\phi(x,y)` with :math:`|V| + 18` features (24 by default): the count of each token, indicators of 12
fixed bigrams, whether the first / last token matches the prompt's token :math:`x \bmod |V|`, how
often it appears, whether all tokens differ, whether :math:`y_1 = y_L`, whether the tokens rise.
A fixed random *reference* model :math:`\pi_\mathrm{ref}` (the "pretrained LM") and the **expert**

.. math:: \pi_E(y\mid x) \propto \pi_\mathrm{ref}(y\mid x)\, e^{r^*(x,y)/\beta},

the KL-regularised optimum of :math:`r^*`, which writes the demonstrations.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["ToyLM", "ToyTask", "enumerate_responses", "make_task", "n_features"]

N_BIGRAMS = 12


def n_features(vocab: int) -> int:
    """How many features :math:`\\phi` has: token counts, bigram indicators and six more."""
    return vocab + N_BIGRAMS + 6


def enumerate_responses(vocab: int, length: int) -> torch.Tensor:
    """All responses in lexicographic order: ``[vocab**length, length]`` (row ``i`` is ``i``
    written in base ``vocab``)."""
    if vocab < 2 or length < 1:
        raise ValueError(f"need vocab >= 2 and length >= 1, got vocab={vocab}, length={length}")
    return torch.tensor(list(itertools.product(range(vocab), repeat=length)), dtype=torch.long)


class ToyLM(nn.Module):
    """Autoregressive MLP over (prompt, prefix) with exact log-probabilities of every response."""

    def __init__(self, n_prompts: int = 16, vocab: int = 6, length: int = 3, width: int = 32,
                 init_scale: float = 1.0, generator: torch.Generator | None = None):
        super().__init__()
        for name, v in (("n_prompts", n_prompts), ("vocab", vocab), ("length", length),
                        ("width", width)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if vocab ** length > 4096:
            raise ValueError(f"vocab**length = {vocab ** length} responses per prompt: too many to "
                             "enumerate (keep it at most 4096)")
        self.n_prompts, self.vocab, self.length = n_prompts, vocab, length
        self.prompt = nn.Embedding(n_prompts, width)
        self.pos = nn.Embedding(length, width)
        self.slots = nn.ModuleList(nn.Embedding(vocab + 1, width) for _ in range(max(length - 1, 1)))
        self.mlp = nn.Sequential(nn.Linear(width, width), nn.Tanh(), nn.Linear(width, width),
                                 nn.Tanh(), nn.Linear(width, vocab))
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=generator) * init_scale / max(p.shape[-1], 1) ** 0.5
                        if p.ndim > 1 else torch.zeros_like(p))
        # every prefix of every length, padded with the token `vocab`; and for each response the
        # row of each of its prefixes
        prefixes, index = [], []
        for t in range(length):
            for pre in itertools.product(range(vocab), repeat=t):
                prefixes.append((t, list(pre) + [vocab] * (length - 1 - t)))
        self._t = torch.tensor([p[0] for p in prefixes])
        self._slots = torch.tensor([p[1][:max(length - 1, 1)] if length > 1 else [vocab]
                                    for p in prefixes])
        offs = [sum(vocab ** s for s in range(t)) for t in range(length)]
        ys = enumerate_responses(vocab, length)
        for t in range(length):
            code = torch.zeros(len(ys), dtype=torch.long)
            for s in range(t):
                code = code * vocab + ys[:, s]
            index.append(offs[t] + code)
        self._row = torch.stack(index, 1)          # [R, L]: prefix row of each position
        self.responses = ys                          # [R, L]

    def prefix_logits(self) -> torch.Tensor:
        """Next-token logits ``[X, P, |V|]`` for every prompt and every prefix."""
        h = self.prompt.weight[:, None] + self.pos(self._t)[None]
        for s, emb in enumerate(self.slots):
            h = h + emb(self._slots[:, s])[None]
        return self.mlp(h)

    def log_probs(self) -> torch.Tensor:
        """:math:`\\log\\pi(y\\mid x)` for every prompt and response: ``[X, |V|^L]``."""
        lp = F.log_softmax(self.prefix_logits(), -1)            # [X, P, V]
        return sum(lp[:, self._row[:, t], self.responses[:, t]] for t in range(self.length))

    def index_of(self, y: torch.Tensor) -> torch.Tensor:
        """Row of each response ``y: [N, L]`` in :attr:`responses`."""
        if y.ndim != 2 or y.shape[1] != self.length:
            raise ValueError(f"responses must be [N, {self.length}], got {tuple(y.shape)}")
        code = torch.zeros(len(y), dtype=torch.long)
        for s in range(self.length):
            code = code * self.vocab + y[:, s]
        return code


def _features(responses: torch.Tensor, n_prompts: int, vocab: int,
              bigrams: list[tuple[int, int]]) -> torch.Tensor:
    """:math:`\\phi(x, y)` for every prompt and response: ``[X, R, n_features(vocab)]``."""
    R, L = responses.shape
    out = torch.zeros(n_prompts, R, n_features(vocab))
    counts = F.one_hot(responses, vocab).sum(1).float()                 # [R, V]
    out[:, :, :vocab] = counts[None]
    for j, (a, b) in enumerate(bigrams):
        hit = ((responses[:, :-1] == a) & (responses[:, 1:] == b)).any(1).float()
        out[:, :, vocab + j] = hit[None]
    k = vocab + len(bigrams)
    tok = torch.arange(n_prompts) % vocab                              # the prompt's own token
    out[:, :, k] = (responses[None, :, 0] == tok[:, None]).float()
    out[:, :, k + 1] = (responses[None, :, -1] == tok[:, None]).float()
    out[:, :, k + 2] = (responses[None] == tok[:, None, None]).sum(-1).float()
    distinct = torch.tensor([len(set(r.tolist())) == L for r in responses]).float()
    out[:, :, k + 3] = distinct[None]
    out[:, :, k + 4] = (responses[:, 0] == responses[:, -1]).float()[None]
    out[:, :, k + 5] = (responses[:, 1:] > responses[:, :-1]).all(1).float()[None]
    return out


@dataclass
class ToyTask:
    """A reference model, the true reward and the expert it implies (see the module docstring)."""

    reference: ToyLM
    features: torch.Tensor      # [X, R, F]
    w_star: torch.Tensor        # [F]
    beta: float
    ref_logp: torch.Tensor      # [X, R]
    expert_logp: torch.Tensor   # [X, R]

    @property
    def reward(self) -> torch.Tensor:
        """:math:`r^*(x, y)`: ``[X, R]``."""
        return self.features @ self.w_star

    def sample(self, logp: torch.Tensor, n: int, rng: np.random.Generator,
               prompts: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``n`` (prompt, response-row) pairs: prompts uniform (or the ones given), responses
        drawn from ``exp(logp[x])``."""
        X = logp.shape[0]
        x = rng.integers(X, size=n) if prompts is None else np.asarray(prompts)
        p = logp.detach().exp().double().numpy()
        p = p / p.sum(1, keepdims=True)
        cdf = np.cumsum(p[x], 1)
        u = rng.random(len(x))[:, None]
        y = np.minimum((u > cdf).sum(1), p.shape[1] - 1)
        return x, y

    def expected_reward(self, logp: torch.Tensor) -> float:
        """:math:`\\mathbb E_x \\mathbb E_{y\\sim\\pi}[r^*]`, prompts uniform, exact."""
        return float((logp.detach().exp() * self.reward).sum(1).mean())

    def kl_from_expert(self, logp: torch.Tensor) -> float:
        """:math:`\\mathbb E_x\\,\\mathrm{KL}(\\pi_E \\| \\pi)`, exact."""
        pe = self.expert_logp.exp()
        return float((pe * (self.expert_logp - logp.detach())).sum(1).mean())


def make_task(seed: int, n_prompts: int = 16, vocab: int = 6, length: int = 3, width: int = 32,
              beta: float = 1.0, reward_scale: float = 1.0, ref_scale: float = 2.0) -> ToyTask:
    """The toy task of seed ``seed``: a random reference model (``ref_scale`` sets how peaked it
    is), 12 random bigrams and :math:`w^* \\sim \\mathcal N(0, \\text{reward\\_scale}^2 I)`."""
    if not beta > 0:
        raise ValueError(f"beta must be > 0, got {beta!r}")
    if vocab < 4:
        raise ValueError(f"the features need vocab >= 4 (12 distinct bigrams), got {vocab}")
    g = torch.Generator().manual_seed(seed)
    ref = ToyLM(n_prompts, vocab, length, width, init_scale=ref_scale, generator=g)
    for p in ref.parameters():
        p.requires_grad_(False)
    pairs = [(a, b) for a in range(vocab) for b in range(vocab)]
    pick = torch.randperm(len(pairs), generator=g)[:N_BIGRAMS].tolist()
    feats = _features(ref.responses, n_prompts, vocab, [pairs[i] for i in pick])
    w = torch.randn(n_features(vocab), generator=g) * reward_scale
    with torch.no_grad():
        ref_logp = ref.log_probs()
    expert = torch.log_softmax(ref_logp + feats @ w / beta, 1)
    return ToyTask(reference=ref, features=feats, w_star=w, beta=beta, ref_logp=ref_logp,
                   expert_logp=expert)
