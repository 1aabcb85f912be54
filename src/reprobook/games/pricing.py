r"""A two-company sequential pricing game for generative AI (our reconstruction of Mahmood, 2024).

**Users.** A user with a task of type :math:`t` prompts a model until one output satisfies them,
giving up after :math:`K` prompts (:math:`K=\infty` allowed). Each prompt of model :math:`i`
satisfies with probability :math:`\theta_i^t`, independently, and costs the price :math:`p_i`.
The number of prompts is :math:`N=\min(G, K)` with :math:`G\sim\mathrm{Geometric}(\theta)`, so

.. math::

   \mathbb E[pN] = p\,\frac{1-(1-\theta)^K}{\theta},\qquad
   \Pr[\text{satisfied}] = 1-(1-\theta)^K,\qquad
   \frac{\mathbb E[\text{cost}]}{\Pr[\text{satisfied}]} = \frac{p}{\theta}

for every cap :math:`K`: the *cost per satisfied task* is :math:`p/\theta`. Model B is the
cost-effective choice on task :math:`t` iff :math:`p_B/\theta_B^t \le p_A/\theta_A^t`, i.e.
:math:`p_B \le \kappa_t\,p_A` with :math:`\kappa_t = \theta_B^t/\theta_A^t` (ties go to B).

**Game.** Company A (first to market) sets a price :math:`q`; company B observes it and sets
:math:`p`; users then pick the cost-effective model task by task. Task :math:`t` brings demand
:math:`D_t(\pi) = a_t e^{-b\pi}` at price :math:`\pi` to whichever company serves it (a factor for
prompt volume is absorbed into :math:`a_t`), so with :math:`S_B(p, q) = \{t: p \le \kappa_t q\}`

.. math::

   R_B(p; q) = p\,e^{-bp}\sum_{t\in S_B} a_t, \qquad R_A(q) = q\,e^{-bq}\sum_{t\notin S_B(p^*(q), q)} a_t .

**B's exact best response.** Sort :math:`\kappa_{(1)}\ge\dots\ge\kappa_{(T)}`, put
:math:`\kappa_{(T+1)}=0` and :math:`A_j=\sum_{t\le j}a_{(t)}`. Capturing the top :math:`j` tasks
means :math:`p\in(\kappa_{(j+1)}q, \kappa_{(j)}q]`; :math:`g(p)=pe^{-bp}` rises to its peak at
:math:`1/b` and falls after, so the best price in that piece is
:math:`p_j=\min(1/b, \kappa_{(j)}q)`, valid if it exceeds :math:`\kappa_{(j+1)}q` (otherwise the
piece's supremum sits at its open lower end and is beaten by piece :math:`j+1`). B takes the
best :math:`j`; revenue ties go to capturing more tasks.

**When A is shut out.** A earns nothing at every price iff
:math:`\kappa_{(T)}A_T \ge \max_j \kappa_{(j)}A_j` (proved in the chapter; it does not depend on
:math:`b`). For two tasks: iff :math:`\kappa_{(2)}/\kappa_{(1)} \ge a_{(1)}/(a_{(1)}+a_{(2)})`.

The model is *reconstructed* from the paper's abstract and figure captions; see the chapter.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["cost_per_success", "simulate_users", "PricingGame", "random_game", "game_with_similarity",
           "similarity_switch"]


def cost_per_success(price, theta, cap=None):
    r"""Expected cost divided by the probability of satisfaction, :math:`p/\theta`, computed from
    the two expectations (so a test can check the identity for any ``cap``; ``None`` = no cap)."""
    price = np.asarray(price, dtype=np.float64)
    theta = np.asarray(theta, dtype=np.float64)
    if np.any(price < 0):
        raise ValueError("price must be non-negative")
    if np.any((theta <= 0) | (theta > 1)):
        raise ValueError("theta must lie in (0, 1]")
    if cap is not None and (not isinstance(cap, (int, np.integer)) or cap < 1):
        raise ValueError(f"cap must be None or a positive int, got {cap!r}")
    p_sat = 1.0 if cap is None else 1.0 - (1.0 - theta) ** cap
    expected_prompts = p_sat / theta
    return price * expected_prompts / p_sat


def simulate_users(price: float, theta: float, cap, n: int, rng: np.random.Generator) -> dict:
    """Monte-Carlo users: prompts until satisfied or ``cap`` prompts. Returns total cost, number
    satisfied, per-user costs and satisfaction flags."""
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    cost_per_success(price, theta, cap)  # validates the arguments
    g = rng.geometric(theta, size=n)      # prompts until the first satisfying output
    prompts = g if cap is None else np.minimum(g, cap)
    satisfied = np.ones(n, dtype=bool) if cap is None else g <= cap
    cost = price * prompts
    return {"cost": cost, "satisfied": satisfied, "total_cost": float(cost.sum()),
            "n_satisfied": int(satisfied.sum())}


@dataclass(frozen=True)
class PricingGame:
    """Demand scales ``a`` (T,), performance ratios ``kappa`` = theta_B / theta_A (T,), and the
    price sensitivity ``b`` of the exponential demand."""

    a: np.ndarray
    kappa: np.ndarray
    b: float = 0.5

    def __post_init__(self):
        a = np.asarray(self.a, dtype=np.float64).reshape(-1)
        k = np.asarray(self.kappa, dtype=np.float64).reshape(-1)
        if a.size == 0 or a.size != k.size:
            raise ValueError(f"a and kappa must be non-empty and of equal length, got {a.size} "
                             f"and {k.size}")
        if not np.all(np.isfinite(a)) or np.any(a <= 0):
            raise ValueError("a (demand scales) must be positive and finite")
        if not np.all(np.isfinite(k)) or np.any(k <= 0):
            raise ValueError("kappa (performance ratios) must be positive and finite")
        if not (np.isfinite(self.b) and self.b > 0):
            raise ValueError(f"b (price sensitivity) must be positive, got {self.b!r}")
        order = np.argsort(-k, kind="stable")
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "kappa", k)
        object.__setattr__(self, "b", float(self.b))
        object.__setattr__(self, "_order", order)

    @property
    def T(self) -> int:
        return self.a.size

    # ------------------------------------------------------------------ the rules of the game
    def captured(self, p, q) -> np.ndarray:
        """Boolean ``[..., T]``: the tasks on which users choose B at prices ``p`` (B), ``q`` (A)."""
        p, q = np.broadcast_arrays(np.asarray(p, float), np.asarray(q, float))
        return p[..., None] <= self.kappa * q[..., None]

    def revenues(self, p, q) -> tuple[np.ndarray, np.ndarray]:
        """``(R_A, R_B)`` straight from the definition: users pick the cost-effective model."""
        p, q = np.broadcast_arrays(np.asarray(p, float), np.asarray(q, float))
        cap = self.captured(p, q)
        rb = p * np.exp(-self.b * p) * (cap * self.a).sum(axis=-1)
        ra = q * np.exp(-self.b * q) * (~cap * self.a).sum(axis=-1)
        return ra, rb

    # ------------------------------------------------------------------ B's best response
    def latecomer_best_response(self, q) -> dict:
        """B's exact best response to A's price(s) ``q``: ``{"p", "revenue", "n_captured"}``."""
        q = np.asarray(q, dtype=np.float64)
        if np.any(q <= 0):
            raise ValueError("q (A's price) must be positive")
        ks = self.kappa[self._order]
        cum = np.cumsum(self.a[self._order])                       # A_j, j = 1..T
        upper = ks * q[..., None]                                  # kappa_(j) q
        lower = np.concatenate([ks[1:], [0.0]]) * q[..., None]     # kappa_(j+1) q
        pj = np.minimum(1.0 / self.b, upper)
        rev = np.where(pj > lower, pj * np.exp(-self.b * pj) * cum, -np.inf)
        # ties in revenue go to the option that captures more tasks: search from j = T down
        j = self.T - 1 - np.argmax(rev[..., ::-1], axis=-1)
        p = np.take_along_axis(pj, j[..., None], axis=-1)[..., 0]
        r = np.take_along_axis(rev, j[..., None], axis=-1)[..., 0]
        return {"p": p, "revenue": r, "n_captured": j + 1}

    def brute_force_best_response(self, q: float, grid) -> tuple[float, float]:
        """B's best price on a given price grid, evaluated from the definition (a check)."""
        grid = np.asarray(grid, dtype=np.float64)
        _, rb = self.revenues(grid, np.full_like(grid, float(q)))
        i = int(np.argmax(rb))
        return float(grid[i]), float(rb[i])

    # ------------------------------------------------------------------ A's problem
    def first_mover_revenue(self, q) -> np.ndarray:
        """A's revenue when B best-responds to ``q``."""
        q = np.asarray(q, dtype=np.float64)
        br = self.latecomer_best_response(q)
        ra, _ = self.revenues(br["p"], q)
        return ra

    def price_grid(self, n_grid: int = 20000, q_range=(1e-9, 50.0)) -> np.ndarray:
        """A log-spaced grid of A's prices over ``q_range / b``, with A's monopoly price ``1/b``."""
        if not isinstance(n_grid, (int, np.integer)) or n_grid < 10:
            raise ValueError(f"n_grid must be an int >= 10, got {n_grid!r}")
        lo, hi = q_range
        if not 0 < lo < hi:
            raise ValueError(f"q_range must be (low, high) with 0 < low < high, got {q_range}")
        qs = np.geomspace(lo / self.b, hi / self.b, n_grid)
        return np.sort(np.append(qs, 1.0 / self.b))

    def shut_out_on_grid(self, n_grid: int = 2000, q_range=(1e-9, 50.0)) -> bool:
        """True when B's best response captures every task at every price on A's grid."""
        n_cap = self.latecomer_best_response(self.price_grid(n_grid, q_range))["n_captured"]
        return bool(np.all(n_cap == self.T))

    def first_mover_optimum(self, n_grid: int = 20000, q_range=(1e-9, 50.0),
                            refine: int = 60) -> dict:
        """A's best revenue over q (a supremum): a log grid over ``q_range / b``, then bisection
        on every change of B's response between neighbouring grid points (A's revenue is smooth
        and unimodal within a piece, with its peak at ``1/b``, so the supremum is at ``1/b`` or at
        a piece boundary). Returns ``{"q", "revenue", "shut_out"}``; ``shut_out`` is exact on the
        grid: B captures every task at every grid price."""
        qs = self.price_grid(n_grid, q_range)
        n_cap = self.latecomer_best_response(qs)["n_captured"]
        ra = self.first_mover_revenue(qs)
        best_i = int(np.argmax(ra))
        best_q, best_r = float(qs[best_i]), float(ra[best_i])
        change = np.nonzero(np.diff(n_cap) != 0)[0]
        for i in change:
            a_, b_ = qs[i], qs[i + 1]
            left = n_cap[i]
            for _ in range(refine):          # keep [a_, b_] straddling the change
                m = 0.5 * (a_ + b_)
                if self.latecomer_best_response(m)["n_captured"] == left:
                    a_ = m
                else:
                    b_ = m
            for qq in (a_, b_):
                r = float(self.first_mover_revenue(qq))
                if r > best_r:
                    best_q, best_r = float(qq), r
        return {"q": best_q, "revenue": best_r, "shut_out": bool(np.all(n_cap == self.T))}

    # ------------------------------------------------------------------ the closed form
    def shut_out_margin(self) -> float:
        r""":math:`\kappa_{(T)}A_T - \max_{j<T} \kappa_{(j)}A_j`, relative to
        :math:`\kappa_{(1)}A_T`: A is shut out at every price iff this is :math:`\ge 0`
        (``inf`` for a single task, which B always takes)."""
        ks = self.kappa[self._order]
        cum = np.cumsum(self.a[self._order])
        v = ks * cum
        if self.T == 1:
            return float("inf")
        return float((v[-1] - v[:-1].max()) / (ks[0] * cum[-1]))

    def similarity(self) -> float:
        """Task similarity :math:`\\kappa_{\\min}/\\kappa_{\\max}` (1 = identical tasks for B vs A)."""
        return float(self.kappa.min() / self.kappa.max())

    def shut_out_toward_identical(self, lams, n_grid: int = 2000,
                                  q_range=(1e-9, 50.0)) -> np.ndarray:
        """:meth:`shut_out_on_grid` of ``toward_identical(lam)`` for every ``lam``, in one pass.

        Moving toward identical tasks keeps the order of the tasks, so B's options are the same
        pieces for every ``lam``; the best responses over ``[lam, q, piece]`` are computed at once,
        with the tie rule of :meth:`latecomer_best_response`.
        """
        lams = np.asarray(lams, dtype=np.float64).reshape(-1)
        if lams.size == 0 or np.any((lams < 0) | (lams > 1)):
            raise ValueError("lams must be a non-empty sequence of values in [0, 1]")
        q = self.price_grid(n_grid, q_range)
        kappa = (1 - lams)[:, None] * self.kappa + lams[:, None] * self.kappa.max()  # [L, T]
        ks = kappa[:, self._order]
        cum = np.cumsum(self.a[self._order])
        upper = ks[:, None, :] * q[None, :, None]                                   # [L, Q, T]
        lower = np.concatenate([ks[:, 1:], np.zeros((lams.size, 1))], axis=1)[:, None, :] * q[None, :, None]
        pj = np.minimum(1.0 / self.b, upper)
        rev = np.where(pj > lower, pj * np.exp(-self.b * pj) * cum, -np.inf)
        n_cap = self.T - np.argmax(rev[..., ::-1], axis=-1)
        return np.all(n_cap == self.T, axis=-1)

    def toward_identical(self, lam: float) -> "PricingGame":
        r"""The game with every task moved a fraction ``lam`` of the way to B's strongest one:
        :math:`\kappa_t(\lambda) = (1-\lambda)\kappa_t + \lambda\kappa_{\max}`, demands unchanged.

        ``lam = 0`` is this game, ``lam = 1`` has identical tasks. The order of the tasks is kept
        and every ratio :math:`\kappa_{(T)}/\kappa_{(j)}` (so the similarity) grows with ``lam``:
        a path of increasing similarity through the game.
        """
        lam = float(lam)
        if not 0.0 <= lam <= 1.0:
            raise ValueError(f"lam must lie in [0, 1], got {lam!r}")
        return PricingGame(a=self.a, kappa=(1 - lam) * self.kappa + lam * self.kappa.max(),
                           b=self.b)


def random_game(rng: np.random.Generator, T: int, a_range=(50.0, 500.0), kappa_range=(0.3, 3.0),
                b: float = 0.5) -> PricingGame:
    """A random instance: ``a_t ~ U(a_range)``, ``kappa_t ~ U(kappa_range)``."""
    if not isinstance(T, (int, np.integer)) or T < 1:
        raise ValueError(f"T must be a positive int, got {T!r}")
    return PricingGame(a=rng.uniform(*a_range, size=T), kappa=rng.uniform(*kappa_range, size=T),
                       b=b)


def game_with_similarity(rng: np.random.Generator, T: int, similarity: float,
                         a_range=(50.0, 500.0), kappa_max_range=(0.3, 3.0),
                         b: float = 0.5) -> PricingGame:
    """A random instance whose task similarity ``kappa_min / kappa_max`` is exactly ``similarity``:
    ``kappa_max ~ U(kappa_max_range)``, one task at ``kappa_max``, one at ``similarity *
    kappa_max``, the rest uniform in between."""
    if not isinstance(T, (int, np.integer)) or T < 2:
        raise ValueError(f"T must be an int >= 2, got {T!r}")
    if not 0 < similarity <= 1:
        raise ValueError(f"similarity must lie in (0, 1], got {similarity!r}")
    kmax = rng.uniform(*kappa_max_range)
    k = np.concatenate([[kmax, similarity * kmax],
                        rng.uniform(similarity * kmax, kmax, size=T - 2)])
    return PricingGame(a=rng.uniform(*a_range, size=T), kappa=rng.permutation(k), b=b)


def similarity_switch(game: PricingGame, shut_out, tol: float = 1e-10) -> float:
    """Where A becomes shut out along the path :meth:`PricingGame.toward_identical`: the ``lam`` at
    which ``shut_out(game.toward_identical(lam))`` switches from False to True, by bisection to
    ``tol``. Returns 0.0 if A is already shut out at ``lam = 0`` and ``nan`` if it never is (at
    ``lam = 1``). Bisection assumes a single switch; check that separately on a grid of ``lam``.
    """
    if not callable(shut_out):
        raise TypeError("shut_out must be a function of a PricingGame returning a bool")
    if not (isinstance(tol, float) and 0 < tol < 1):
        raise ValueError(f"tol must be a float in (0, 1), got {tol!r}")
    if shut_out(game.toward_identical(0.0)):
        return 0.0
    if not shut_out(game.toward_identical(1.0)):
        return float("nan")
    lo, hi = 0.0, 1.0
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if shut_out(game.toward_identical(mid)):
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi)
