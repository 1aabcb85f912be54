r"""Multi-query associative recall (MQAR): a synthetic in-context retrieval task.

The task of Arora et al. (2023, "Zoology") used to compare sequence mixers. Each example is a
token sequence of length ``seq_len`` that starts with ``num_kv_pairs`` key–value pairs and later
asks for every key again; the model must answer each query with the value that followed that key.
The ground truth is known by construction, and only the query positions are scored::

    position:  0   1   2   3   ...  2P-2 2P-1 | ...  p    p+1  ...
    token:     k1  v1  k2  v2  ...  kP   vP   | ...  k3   v3   ...     (queries in random order)
    target:    -   -   -   -   ...  -    -    | ...  v3   -    ...     (IGNORE_INDEX elsewhere)

Vocabulary layout (as in Zoology): keys are drawn from ``[1, vocab_size // 2)`` and values from
``[vocab_size // 2, vocab_size)``, both without replacement inside one example, so each key has one
answer. Token 0 is never a key or a value. Each query occupies two positions: the key at ``p`` (an
even offset after the context) and, at ``p + 1``, its value, which is what a left-to-right model
reads next (teacher forcing); the target at ``p`` is that value. Positions that hold neither context
nor a query are filler: random tokens (``random_non_queries=True``, Zoology's default) or 0.

Where the queries go: ``num_kv_pairs`` distinct slots among the ``(seq_len - 2P) // 2`` slots after
the context, uniformly (``power_a=None``) or with Zoology's power law ``P(slot j) ∝ (j+1)^(a-1)``
(``power_a=a`` in (0, 1]; small ``a`` puts queries soon after the context).

Example::

    from reprobook.data.mqar import make_mqar
    batch = make_mqar(64, seq_len=128, num_kv_pairs=16, vocab_size=256, seed=0)
    logits = model(batch.inputs)                         # [N, L, vocab]
    acc = batch.accuracy(logits)                         # fraction of queries answered right
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["IGNORE_INDEX", "MQARBatch", "make_mqar", "check_mqar_config"]

#: Target value at positions that are not scored (``torch.nn.functional.cross_entropy``'s default).
IGNORE_INDEX = -100


@dataclass(frozen=True)
class MQARBatch:
    """A batch of MQAR examples with its ground truth.

    Attributes:
        inputs: ``[N, L]`` int64 tokens fed to the model.
        targets: ``[N, L]`` int64; the value token at each query position, ``IGNORE_INDEX`` elsewhere.
        keys, values: ``[N, P]`` the context pairs, in the order they appear.
        query_positions: ``[N, P]`` positions of the query keys (sorted), each in ``[2P, L - 1)``.
        vocab_size: size of the token vocabulary the batch was drawn from.
    """

    inputs: torch.Tensor
    targets: torch.Tensor
    keys: torch.Tensor
    values: torch.Tensor
    query_positions: torch.Tensor
    vocab_size: int

    @property
    def query_mask(self) -> torch.Tensor:
        """``[N, L]`` bool, True at the scored (query) positions."""
        return self.targets != IGNORE_INDEX

    @property
    def num_queries(self) -> int:
        return int(self.query_positions.numel())

    def to(self, device) -> "MQARBatch":
        """The same batch with its tensors on ``device``."""
        mv = {f: getattr(self, f).to(device) for f in ("inputs", "targets", "keys", "values",
                                                        "query_positions")}
        return MQARBatch(vocab_size=self.vocab_size, **mv)

    def accuracy(self, logits: torch.Tensor) -> float:
        """Fraction of query positions whose argmax prediction is the right value.

        ``logits``: ``[N, L, vocab]`` (any vocabulary ≥ ``vocab_size``).
        """
        if logits.shape[:2] != self.targets.shape:
            raise ValueError(f"logits must have shape [N, L, vocab] with N, L = "
                             f"{tuple(self.targets.shape)}, got {tuple(logits.shape)}")
        mask = self.query_mask.to(logits.device)
        pred = logits.argmax(-1)
        right = (pred == self.targets.to(logits.device)) & mask
        return float(right.sum()) / max(int(mask.sum()), 1)


def check_mqar_config(seq_len: int, num_kv_pairs: int, vocab_size: int) -> None:
    """Raise ValueError (naming the argument) unless the three sizes make a valid task."""
    for name, x in (("seq_len", seq_len), ("num_kv_pairs", num_kv_pairs), ("vocab_size", vocab_size)):
        if isinstance(x, bool) or not isinstance(x, int) or x < 1:
            raise ValueError(f"{name} must be a positive int, got {x!r}")
    if seq_len < 4 * num_kv_pairs:
        raise ValueError(f"seq_len must be >= 4 * num_kv_pairs = {4 * num_kv_pairs} (context of "
                         f"2P tokens plus P two-token queries), got seq_len={seq_len}")
    if vocab_size // 2 - 1 < num_kv_pairs:
        raise ValueError(f"vocab_size must give at least num_kv_pairs={num_kv_pairs} distinct keys "
                         f"in [1, vocab_size // 2), i.e. vocab_size >= {2 * (num_kv_pairs + 1)}, "
                         f"got {vocab_size}")


def _distinct(n: int, k: int, pool: int, g: torch.Generator) -> torch.Tensor:
    """``[n, k]`` rows of ``k`` distinct integers from ``range(pool)``, uniformly at random."""
    return torch.rand(n, pool, generator=g).argsort(dim=1)[:, :k]


def make_mqar(num_examples: int, seq_len: int = 64, num_kv_pairs: int = 4, vocab_size: int = 8192,
              *, power_a: float | None = None, random_non_queries: bool = True,
              seed: int | None = None, generator: torch.Generator | None = None) -> MQARBatch:
    """Draw ``num_examples`` MQAR sequences (see the module docstring for the layout).

    Args:
        num_examples: batch size ``N``.
        seq_len: tokens per example ``L`` (≥ 4 · ``num_kv_pairs``).
        num_kv_pairs: key–value pairs ``P`` in the context; each is queried once.
        vocab_size: vocabulary size (keys in the lower half, values in the upper half).
        power_a: ``None`` for uniformly placed queries, or Zoology's power-law exponent in (0, 1].
        random_non_queries: fill unused positions with random tokens (else 0).
        seed / generator: randomness source; pass a ``torch.Generator`` to draw successive
            batches from one stream, or a ``seed`` (default 0) for a fresh CPU generator. Same
            seed, same batch.

    Returns:
        An :class:`MQARBatch` on the CPU.
    """
    if isinstance(num_examples, bool) or not isinstance(num_examples, int) or num_examples < 1:
        raise ValueError(f"num_examples must be a positive int, got {num_examples!r}")
    check_mqar_config(seq_len, num_kv_pairs, vocab_size)
    if power_a is not None and not (isinstance(power_a, (int, float)) and 0 < power_a <= 1):
        raise ValueError(f"power_a must be None or in (0, 1], got {power_a!r}")
    if generator is not None and seed is not None:
        raise ValueError("pass either seed or generator, not both")
    if generator is None:
        generator = torch.Generator().manual_seed(0 if seed is None else int(seed))
    elif not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    g, N, L, P = generator, num_examples, seq_len, num_kv_pairs
    half = vocab_size // 2

    keys = _distinct(N, P, half - 1, g) + 1                      # in [1, half)
    values = _distinct(N, P, vocab_size - half, g) + half        # in [half, vocab)
    rows = torch.arange(N)[:, None]

    if random_non_queries:
        inputs = torch.randint(0, vocab_size, (N, L), generator=g)
    else:
        inputs = torch.zeros(N, L, dtype=torch.long)
    inputs[:, 0:2 * P:2] = keys
    inputs[:, 1:2 * P:2] = values

    n_slots = (L - 2 * P) // 2
    if power_a is None:
        slots = _distinct(N, P, n_slots, g)
    else:
        w = power_a * torch.arange(1, n_slots + 1, dtype=torch.float64) ** (power_a - 1)
        slots = torch.multinomial(w.expand(N, n_slots), P, replacement=False, generator=g)
    slots = slots.sort(dim=1).values
    positions = 2 * P + 2 * slots                                   # even offsets after the context
    order = _distinct(N, P, P, g)                                   # which pair each query asks for
    q_keys, q_values = keys.gather(1, order), values.gather(1, order)
    inputs[rows, positions] = q_keys
    inputs[rows, positions + 1] = q_values

    targets = torch.full((N, L), IGNORE_INDEX, dtype=torch.long)
    targets[rows, positions] = q_values
    return MQARBatch(inputs=inputs, targets=targets, keys=keys, values=values,
                     query_positions=positions, vocab_size=vocab_size)
