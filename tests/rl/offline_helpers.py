"""Offline data sets for the rl tests, built from plain arrays."""
import numpy as np
import torch


def one_step_data(s: np.ndarray, a: np.ndarray, r: np.ndarray) -> dict:
    """A one-step (terminal) offline data set ``(E, N, .)`` as the learners take it: each state is
    its own next state and nothing continues, so a critic's target is the reward alone."""
    t = lambda x: torch.tensor(x, dtype=torch.float32)  # noqa: E731
    return dict(obs=t(s), actions=t(a), rewards=t(r), next_obs=t(s),
                not_done=torch.zeros(*np.shape(r)[:2], 1))
