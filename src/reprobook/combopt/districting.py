r"""DistrictNet and its baselines on synthetic cities.

**DistrictNet** (Cheikh Ahmed et al., NeurIPS 2024): a GNN maps the city to edge weights
:math:`\theta`, a CMST layer returns :math:`\hat y = \arg\min_y \theta^\top y` over trees whose root
subtrees have admissible sizes, and the subtrees are the districts. Training is decision-aware: a
*target* districting :math:`P^\star` (the set-partitioning optimum under estimated true costs on a
small city) is embedded as the :math:`\theta`-cheapest tree :math:`y^\star(\theta)` that decodes to
it, and the perturbed Fenchel-Young loss :math:`L_\varepsilon(\theta; y^\star)` is minimised.

**Baselines.** ``BD``: a Beardwood-Halton-Hammersley style regression of a district's cost,
:math:`\hat c(D) = \beta_0 + \beta_1 \sqrt{N_D A_D} + \beta_2 \bar d_D` (expected customers
:math:`N_D`, area :math:`A_D`, mean BU-depot distance :math:`\bar d_D`), fitted by least squares on
the same training cities' enumerated districts and their estimated costs, then the exact
set-partitioning optimiser. ``Euclidean CMST``: the same CMST layer with unlearned weights, the
Euclidean lengths of the edges.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ..gnn.message_passing import EdgeWeightGNN
from .cmst import CMSTGraph, check_districting, improve_partition, solve_cmst_columns, \
    solve_cmst_heuristic, tree_of_partition
from .district_instances import N_BU_FEATURES, DistrictInstance, bu_features
from .fenchel_young import fenchel_young_loss
from .routing_cost import DistrictCost, Scenarios
from .set_partition import connected_subsets, solve_set_partition

__all__ = ["City", "make_city", "target_partition", "make_model", "train_districtnet",
           "districtnet_partition", "districtnet_weights", "BDRegression", "bd_partition", "euclidean_partition",
           "co_assignment_agreement", "N_EDGE_FEATURES"]

N_EDGE_FEATURES = 2


@dataclass(eq=False)
class City:
    """An instance with everything the methods need, computed once."""

    inst: DistrictInstance
    graph: CMSTGraph
    x: torch.Tensor
    e_bu: torch.Tensor
    e_dep: torch.Tensor
    euclid: np.ndarray
    cost: DistrictCost | None = None
    _subsets: list | None = field(default=None, repr=False)

    @property
    def subsets(self):
        if self._subsets is None:
            self._subsets = connected_subsets(self.inst.adjacency, self.inst.lo, self.inst.hi)
        return self._subsets

    def problems(self, partition) -> list[str]:
        return check_districting(self.inst.adjacency, partition, self.inst.lo, self.inst.hi)


def make_city(inst: DistrictInstance, scenarios: Scenarios | None = None) -> City:
    """Features, the CMST graph and the Euclidean edge weights of ``inst``."""
    if not isinstance(inst, DistrictInstance):
        raise ValueError(f"inst must be a DistrictInstance, got {type(inst).__name__}")
    unit = np.sqrt(inst.areas.mean())
    c = inst.centroids
    length = np.linalg.norm(c[inst.edges[:, 0]] - c[inst.edges[:, 1]], axis=1) / unit
    dist = inst.depot_distance() / unit
    e_bu = np.stack([length, np.zeros_like(length)], 1)
    e_dep = np.stack([dist / 5, np.ones_like(dist)], 1)
    t = lambda a: torch.as_tensor(a, dtype=torch.float32)
    return City(inst=inst, graph=CMSTGraph(inst.n, inst.edges), x=t(bu_features(inst)),
                e_bu=t(e_bu), e_dep=t(e_dep), euclid=np.concatenate([length, dist]),
                cost=DistrictCost(scenarios) if scenarios is not None else None)


def target_partition(city: City) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """The expensive oracle: every connected district's cost estimated on the city's scenarios,
    then the exact set-partitioning optimum. Returns ``(partition, costs of city.subsets)``."""
    if city.cost is None:
        raise ValueError("city has no scenarios: build it with make_city(inst, scenarios)")
    costs = np.array([city.cost(s) for s in city.subsets])
    parts, _ = solve_set_partition(city.inst.n, city.subsets, costs)
    return sorted(parts), costs


def make_model(seed: int, hidden: int = 32, layers: int = 3, residual: bool = True
               ) -> EdgeWeightGNN:
    """A freshly initialised GNN (its initial weights come from ``torch.manual_seed(seed)``).

    ``residual=True``: the layer's weights are the Euclidean edge lengths plus the GNN's output,
    so training starts from the unlearned CMST and learns a correction."""
    torch.manual_seed(seed)
    model = EdgeWeightGNN(N_BU_FEATURES, N_EDGE_FEATURES, hidden=hidden, layers=layers)
    model.residual = bool(residual)
    return model


def _theta(model, city):
    out = model(city.x, torch.as_tensor(city.graph.edges), city.e_bu, city.e_dep)
    if getattr(model, "residual", False):
        out = out + torch.as_tensor(city.euclid, dtype=out.dtype)
    return out


def co_assignment_agreement(p, q, n: int) -> float:
    """Jaccard index of the sets of BU pairs that share a district in ``p`` and in ``q``."""
    def pairs(part):
        lab = np.empty(n, dtype=int)
        for i, d in enumerate(part):
            lab[list(d)] = i
        same = lab[:, None] == lab[None, :]
        return same[np.triu_indices(n, 1)]
    a, b = pairs(p), pairs(q)
    union = (a | b).sum()
    return float((a & b).sum() / union) if union else 1.0


def train_districtnet(model, cities, targets, *, epochs: int, lr: float = 3e-3, eps: float = 1.0,
                      n_samples: int = 8, seed: int = 0, sign: float = 1.0,
                      exact: bool = True, group_sizes=(2,), warm_start: bool = True) -> dict:
    """Adam on the perturbed Fenchel-Young loss, one city per step, cities in a seeded order.

    With ``exact`` (the default, for small training cities) the layer is solved exactly by
    set partitioning over tree-cost columns. Otherwise it is the heuristic, which runs its search
    from the Esau-Williams start and, with ``warm_start``, also from the target, keeping the
    cheaper: then the layer's answer is never worse than the target under the perturbed weights,
    so every loss term is >= 0. ``sign=-1`` flips the loss gradient (a planted bug). Returns the
    per-step ``loss`` and the co-assignment agreement of the layer's unperturbed answer with the
    target (``agreement``)."""
    if len(cities) != len(targets) or not cities:
        raise ValueError("cities and targets must be non-empty lists of the same length")
    if not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"epochs must be a positive integer, got {epochs!r}")
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    order_rng = np.random.default_rng(seed)
    hist = {"loss": [], "agreement": [], "city": []}
    for _ in range(epochs):
        for i in order_rng.permutation(len(cities)):
            city, target = cities[i], targets[i]
            lo, hi = city.inst.lo, city.inst.hi
            theta = _theta(model, city).double()
            th = theta.detach().numpy()
            y_star = tree_of_partition(city.graph, th, target)   # theta-cheapest target tree

            def solver(t, c=city):
                if exact:
                    return solve_cmst_columns(c.graph, t, lo, hi, subsets=c.subsets)[0]
                return solve_cmst_heuristic(c.graph, t, lo, hi, group_sizes=group_sizes,
                                            starts=[target] if warm_start else ())[0]

            loss = fenchel_young_loss(theta, y_star, solver, eps=eps, n_samples=n_samples,
                                      generator=gen, sign=sign)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if exact:
                _, pred = solve_cmst_columns(city.graph, th, lo, hi, subsets=city.subsets)
            else:
                _, pred = solve_cmst_heuristic(city.graph, th, lo, hi, group_sizes=group_sizes)
            hist["loss"].append(float(loss.detach()))
            hist["agreement"].append(co_assignment_agreement(pred, target, city.inst.n))
            hist["city"].append(int(i))
    return hist


def districtnet_weights(model, city: City) -> np.ndarray:
    """The CMST weights :math:`\theta` the trained GNN gives ``city`` (float64, one per BU-BU edge
    then one per depot-BU edge): what the layer minimises at test time."""
    if not isinstance(city, City):
        raise ValueError(f"city must be a City (make_city), got {type(city).__name__}")
    with torch.no_grad():
        return _theta(model, city).double().numpy()


def districtnet_partition(model, city: City, group_sizes=(2, 3), enforce_upper: bool = True):
    """DistrictNet's districting of ``city``: GNN weights, then the CMST heuristic."""
    th = districtnet_weights(model, city)
    return solve_cmst_heuristic(city.graph, th, city.inst.lo, city.inst.hi,
                                group_sizes=group_sizes, enforce_upper=enforce_upper)[1]


def euclidean_partition(city: City, group_sizes=(2, 3)):
    """Unlearned CMST: the layer with Euclidean edge lengths as weights."""
    return solve_cmst_heuristic(city.graph, city.euclid, city.inst.lo, city.inst.hi,
                                group_sizes=group_sizes)[1]


class BDRegression:
    r""":math:`\hat c(D) = \beta_0 + \beta_1 \sqrt{N_D A_D} + \beta_2 \bar d_D`, least squares."""

    def __init__(self):
        self.beta = None

    @staticmethod
    def features(inst: DistrictInstance, districts) -> np.ndarray:
        n_c, area, dist = inst.expected_customers, inst.areas, inst.depot_distance()
        rows = []
        for d in districts:
            d = list(d)
            rows.append([1.0, np.sqrt(n_c[d].sum() * area[d].sum()), dist[d].mean()])
        return np.array(rows)

    def fit(self, insts, district_lists, costs) -> "BDRegression":
        x = np.concatenate([self.features(i, ds) for i, ds in zip(insts, district_lists)])
        y = np.concatenate([np.asarray(c, dtype=float) for c in costs])
        if len(x) != len(y) or len(y) < 3:
            raise ValueError("costs must give one value per district, and at least 3 in all")
        self.beta = np.linalg.lstsq(x, y, rcond=None)[0]
        resid = y - x @ self.beta
        self.r2 = 1 - resid.var() / y.var()
        return self

    def predict(self, inst, districts) -> np.ndarray:
        if self.beta is None:
            raise ValueError("BDRegression: call fit() before predict()")
        return self.features(inst, districts) @ self.beta


def bd_partition(city: City, bd: BDRegression, exact_max_n: int = 25):
    """BD costs on every enumerated district, then the exact set-partitioning optimum (cities up to
    ``exact_max_n`` BUs) or, above, the local search of the CMST heuristic started from the
    Euclidean CMST's districting, with the BD costs."""
    inst = city.inst
    if inst.n <= exact_max_n:
        return sorted(solve_set_partition(inst.n, city.subsets,
                                          bd.predict(inst, city.subsets))[0])
    b0, b1, b2 = (float(v) for v in bd.beta)
    n_c, area = inst.expected_customers.tolist(), inst.areas.tolist()
    dist = inst.depot_distance().tolist()

    def cost(d):   # the BD formula in plain Python: called for many tiny districts
        return (b0 + b1 * np.sqrt(sum(n_c[b] for b in d) * sum(area[b] for b in d))
                + b2 * sum(dist[b] for b in d) / len(d))

    return improve_partition(inst.adjacency, inst.lo, inst.hi, cost, euclidean_partition(city))
