"""Adaptive routing as a fixed point: minimal paths re-weighted by link load until rates settle.

A model of the ICI's adaptive routing at flow level (no packets, no virtual channels). Every
flow of a pattern starts split evenly over its minimal paths (`shortest_paths`). A link's load
is the time it needs to drain the bytes routed over it (sum of demand x fraction, over its
capacity): the backlog a router's adaptive port choice sees. (Utilisation under max-min rates
says nothing here: max-min saturates every link some flow is bottlenecked on.) Every link's
weight is multiplied by (mean load / load) ** ETA and each flow's bytes are re-split over its
minimal paths in proportion to the product of their links' weights (the path-counting DP of
podsim.topology.multipath: paths are never enumerated). After each split the max-min solver
gives the flows' rates; the iteration stops when no flow's rate moves by more than TOL
(relative) between rounds, or after MAX_ITER rounds. The split kept is the one whose busiest
link drains first (the lower bound on the pattern's time), so `adaptive` never does worse than
`shortest_paths` by that measure. A pattern is split as if alone on the fabric, once per
pattern; the engine then runs it against whatever else is in flight.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from podsim.maxmin import active_links, max_min_rates
from podsim.topology.multipath import PathDag

TOL = 1e-3
"""Relative change of every flow's max-min rate below which the re-splitting stops."""
MAX_ITER = 40
"""Most re-splitting rounds."""
ETA = 0.5
"""Step of the multiplicative weight update (0: never move; 1: jump to the inverse load)."""


def adaptive_split(make_dag: Callable[[], PathDag], even: tuple, capacity: np.ndarray, canon: np.ndarray,
                   demand: np.ndarray | None = None, tol: float = TOL, max_iter: int = MAX_ITER):
    """(indptr, links, frac) of a pattern's flows after load-driven re-splitting.

    `even` is the even split (round 0); `make_dag()` builds the flows' minimal-path DAGs,
    only when the even split leaves links unequally loaded (an equal load is the fixed point:
    no weight moves). `canon` folds fabric links onto the representatives the rates are
    solved on (identity, or a translation symmetry's map, under which the folded loads are
    the real ones); `demand` weighs the flows' bytes (default equal)."""
    n_flows = len(even[0]) - 1
    demand = np.ones(n_flows) if demand is None else np.asarray(demand, float)
    weight = np.ones(len(capacity))
    best, best_load, prev, dag = None, np.inf, None, None
    for _ in range(max_iter):
        indptr, links, frac = even if dag is None else dag.routes(weight[canon[dag.link]])
        used, local = active_links(canon[links], len(capacity))
        ef = np.repeat(np.arange(n_flows), np.diff(indptr))
        if not len(used):
            return indptr, links, frac
        load = np.bincount(local, weights=demand[ef] * frac, minlength=len(used)) / capacity[used]
        if load.max() < best_load * (1 - 1e-9):
            best, best_load = (indptr, links, frac), float(load.max())
        if dag is None:
            if load.max() <= load.mean() * (1 + tol):
                return best
            dag = make_dag()
        rates = max_min_rates(ef, local, dag.n_flows, capacity[used], frac)
        moving = np.isfinite(rates)
        if prev is not None and (np.abs(rates[moving] - prev[moving]) <= tol * prev[moving]).all():
            break
        prev = rates
        weight[used] *= (load.mean() / load) ** ETA
        weight[used] /= weight[used].mean()  # paths are equally long: only ratios matter
    return best
