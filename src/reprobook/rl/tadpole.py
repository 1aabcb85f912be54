r"""TADPoLe's reward: dense, zero-shot rewards from a frozen text-conditioned diffusion model.

TADPoLe (Luo, He, Zeng & Sun, NeurIPS 2024) scores a rendered frame :math:`x_0` against a
prompt :math:`c` with a frozen :math:`\varepsilon`-prediction diffusion model. At a noise step
:math:`k` (one per episode, drawn from a window of the schedule) and with fresh noise
:math:`\varepsilon\sim\mathcal N(0,I)` for the frame,

.. math::
   x_k=\sqrt{\bar\alpha_k}\,x_0+\sqrt{1-\bar\alpha_k}\,\varepsilon,\qquad
   \hat\varepsilon_c=\varepsilon_\theta(x_k,k,c),\qquad
   \hat\varepsilon_\varnothing=\varepsilon_\theta(x_k,k,\varnothing),

and, with means over pixels,

.. math::
   A=\mathrm{mean}\big((\hat\varepsilon_c-\hat\varepsilon_\varnothing)^2\big),\qquad
   R=\mathrm{mean}\big((\hat\varepsilon_\varnothing-\varepsilon)^2\big)
     -\mathrm{mean}\big((\hat\varepsilon_c-\varepsilon)^2\big),

.. math:: r=\mathrm{symlog}(w_A A)+\mathrm{symlog}(w_R R),\qquad
          \mathrm{symlog}(x)=\mathrm{sign}(x)\log(1+|x|),

with the official code's :math:`w_A=2000`, :math:`w_R=200`. :math:`A` (the *alignment* term) is
how far the prompt moves the noise prediction; :math:`R` (the *reconstruction* term) is how much
the prompt helps to recover the noise that was actually added: a one-sample estimate of how much
more likely the frame is under the prompt than without it (the diffusion-classifier view).

**The frozen prior.** Here the "pretrained" model is a class-conditional DDPM
(:class:`~reprobook.rl.outcome_model.OutcomeDDPM`: an MLP :math:`\varepsilon`-network with the
cosine schedule) trained on flattened frames with their prompt ids, and with the prompt replaced
by the null id :math:`\varnothing` = ``n_prompts`` with probability ``p_uncond`` (the
classifier-free-guidance recipe, so one network gives both predictions). :func:`pretraining_set`
draws its data: blobs at uniform positions with *natural* shapes, :math:`e\sim\mathcal N(0,0.1^2)`,
labelled with their quadrant.
"""
from __future__ import annotations

import torch

from .outcome_model import OutcomeDDPM
from .point_blob import region_of, render_blobs

__all__ = ["symlog", "pretraining_set", "train_frame_prior", "tadpole_terms", "noise_steps",
           "TERMS", "episode_rewards", "region_reward"]

TERMS = ("reward", "alignment", "reconstruction")


def symlog(x: torch.Tensor) -> torch.Tensor:
    """:math:`\\mathrm{sign}(x)\\log(1+|x|)`, elementwise."""
    return torch.sign(x) * torch.log1p(torch.abs(x))


def pretraining_set(n: int, size: int, generator: torch.Generator, e_std: float = 0.1,
                    sigma: float = 0.25) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` flattened frames (n, size*size) of natural blobs and their quadrant labels (n,)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an int >= 1, got {n!r}")
    if e_std < 0:
        raise ValueError(f"e_std must be >= 0, got {e_std}")
    p = torch.rand(n, 2, generator=generator) * 2 - 1
    e = (torch.randn(n, generator=generator) * e_std).clamp(-1, 1)
    return render_blobs(p, e, size, sigma).reshape(n, -1), region_of(p)


def train_frame_prior(frames: torch.Tensor, labels: torch.Tensor, n_prompts: int, *, steps: int,
                      batch: int, lr: float, generator: torch.Generator, p_uncond: float = 0.2,
                      hidden: int = 256, layers: int = 3, emb: int = 64,
                      n_steps: int = 1000) -> tuple[OutcomeDDPM, list[float]]:
    """Train the class-conditional frame prior (see the module docstring) with Adam; returns the
    frozen model (eval mode, no gradients) and the loss of every step."""
    if frames.ndim != 2 or labels.shape != (frames.shape[0],):
        raise ValueError(f"frames must be (n, dim) and labels (n,), got {tuple(frames.shape)} and "
                         f"{tuple(labels.shape)}")
    if not 0 <= p_uncond < 1:
        raise ValueError(f"p_uncond must lie in [0, 1), got {p_uncond}")
    if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= n_prompts):
        raise ValueError(f"labels must lie in [0, {n_prompts})")
    if steps < 0 or batch < 1 or lr <= 0:
        raise ValueError(f"need steps >= 0, batch >= 1, lr > 0; got {steps}, {batch}, {lr}")
    model = OutcomeDDPM(frames.shape[1], n_prompts + 1, hidden=hidden, layers=layers, emb=emb,
                        n_steps=n_steps, generator=generator)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, frames.shape[0], (batch,), generator=generator)
        s = labels[idx].clone()
        s[torch.rand(batch, generator=generator) < p_uncond] = n_prompts    # the null prompt
        loss = model.loss(frames[idx], s, generator)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    model.eval()
    for q in model.parameters():
        q.requires_grad_(False)
    return model, losses


def noise_steps(shape: tuple, low: int, high: int, generator: torch.Generator) -> torch.Tensor:
    """Noise steps drawn uniformly from ``[low, high)`` (the official window is [400, 500))."""
    if not 1 <= low < high:
        raise ValueError(f"need 1 <= low < high, got {low}, {high}")
    return torch.randint(low, high, shape, generator=generator)


@torch.no_grad()
def tadpole_terms(model: OutcomeDDPM, frames: torch.Tensor, prompts: torch.Tensor,
                  k: torch.Tensor, noise: torch.Tensor, *, align_scale: float = 2000.0,
                  recon_scale: float = 200.0) -> dict[str, torch.Tensor]:
    r"""TADPoLe's reward of flattened ``frames`` (B, dim) for ``prompts`` (B,) at noise steps
    ``k`` (B,) with the added ``noise`` (B, dim). The null prompt is ``model.n_states - 1``.

    Returns per-frame tensors (B,): ``A`` and ``R`` (the raw terms), ``alignment``
    (:math:`\mathrm{symlog}(w_AA)`), ``reconstruction`` (:math:`\mathrm{symlog}(w_RR)`) and
    ``reward`` (their sum).
    """
    if frames.ndim != 2 or frames.shape[1] != model.dim:
        raise ValueError(f"frames must have shape (B, {model.dim}), got {tuple(frames.shape)}")
    B = frames.shape[0]
    if prompts.shape != (B,) or k.shape != (B,) or noise.shape != frames.shape:
        raise ValueError(f"need prompts (B,), k (B,) and noise {tuple(frames.shape)} for B = {B}, "
                         f"got {tuple(prompts.shape)}, {tuple(k.shape)}, {tuple(noise.shape)}")
    null = model.n_states - 1
    if prompts.numel() and (int(prompts.min()) < 0 or int(prompts.max()) >= null):
        raise ValueError(f"prompts must lie in [0, {null}) (id {null} is the null prompt)")
    if k.numel() and (int(k.min()) < 1 or int(k.max()) > model.n_steps):
        raise ValueError(f"noise steps must lie in [1, {model.n_steps}]")
    ab = model.alpha_bar[k][:, None]
    xk = ab.sqrt() * frames + (1 - ab).sqrt() * noise
    # one batched call for both branches (as the official code stacks them)
    eps = model.eps(torch.cat([xk, xk]), torch.cat([k, k]),
                    torch.cat([prompts, torch.full_like(prompts, null)]))
    e_c, e_0 = eps[:B], eps[B:]
    A = ((e_c - e_0) ** 2).mean(1)
    R = ((e_0 - noise) ** 2).mean(1) - ((e_c - noise) ** 2).mean(1)
    align, recon = symlog(align_scale * A), symlog(recon_scale * R)
    return {"A": A, "R": R, "alignment": align, "reconstruction": recon, "reward": align + recon}


def episode_rewards(model: OutcomeDDPM, p: torch.Tensor, e: torch.Tensor, prompts: torch.Tensor,
                    generator: torch.Generator, *, size: int, sigma: float, low: int, high: int,
                    term: str = "reward", align_scale: float = 2000.0,
                    recon_scale: float = 200.0) -> torch.Tensor:
    """TADPoLe's dense reward of every step of a batch of episodes.

    ``p`` (P, N, T, 2) and ``e`` (P, N, T) are the states after each step of N episodes of each
    of P policies, ``prompts`` (P,) the prompt of each policy. Each frame is rendered, and scored
    at one noise step per *episode* drawn from ``[low, high)`` with fresh noise per frame (as the
    official code does). ``term`` picks the full reward or one of its two terms (the ablations).
    Returns (P, N, T)."""
    if term not in TERMS:
        raise ValueError(f"unknown term {term!r}; expected one of {TERMS}")
    if p.ndim != 4 or p.shape[-1] != 2 or e.shape != p.shape[:-1] or prompts.shape != p.shape[:1]:
        raise ValueError(f"need p (P, N, T, 2), e (P, N, T) and prompts (P,), got "
                         f"{tuple(p.shape)}, {tuple(e.shape)}, {tuple(prompts.shape)}")
    P, N, T = e.shape
    frames = render_blobs(p, e, size, sigma).reshape(P * N * T, -1)
    k = noise_steps((P, N), low, high, generator)[..., None].expand(P, N, T).reshape(-1)
    c = prompts[:, None, None].expand(P, N, T).reshape(-1)
    noise = torch.randn(frames.shape, generator=generator)
    out = tadpole_terms(model, frames, c, k, noise, align_scale=align_scale,
                        recon_scale=recon_scale)
    return out[term].reshape(P, N, T)


def region_reward(p: torch.Tensor, prompts: torch.Tensor) -> torch.Tensor:
    """The ground-truth reward of the oracle: 1 for every step that ends in the prompted quadrant,
    0 otherwise (shape of ``p`` without its last axis). It ignores the blob's shape."""
    if p.ndim < 2 or prompts.shape != p.shape[:1]:
        raise ValueError(f"prompts must have one entry per policy (p.shape[0]), got "
                         f"{tuple(prompts.shape)} for p {tuple(p.shape)}")
    return (region_of(p) == prompts.reshape(-1, *([1] * (p.ndim - 2)))).float()
