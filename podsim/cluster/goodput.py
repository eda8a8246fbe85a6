"""The TPU v4 paper's Fig. 4: goodput versus slice size under host failures, with and without OCS.

[ISCA23] §2.3 (hardware.md av.1-av.8): with all slice requests of one size, how much of a pod
can equal slices use when hosts are up with probability A? Here, a Monte Carlo over failed-host
patterns: each host of the pod is down independently with probability 1 - A (the steady state
of any up/down process with that availability); goodput = E[slices that fit x chips per slice]
/ chips of the pod. The same patterns are used with and without OCS (common random numbers).

How many equal slices fit (exactly, `fitting_slices`):
- cube-level slices on an OCS pod: any cubes will do, so usable cubes // cubes per slice
  (`podsim.placement.count_fitting`);
- sub-cube slices: positions are aligned to the slice's extent and tile a cube, so the count is
  the positions whose chips are all healthy;
- cube boxes of the statically wired pod (cubes fixed in the 4x4x4 home arrangement, a slice a
  box of whole healthy cubes): maximum packing of the box in any orientation - a maximum
  matching for 1x1x2 boxes (grid graphs are bipartite), branch and bound otherwise, and
  CP-SAT (`count_fitting`) if the search grows past a node budget. Tests check every shape
  against `count_fitting` on random patterns.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import networkx as nx
import numpy as np

from podsim.errors import PodsimError
from podsim.placement import PodState, SliceRequest, SolverParams
from podsim.placement.place import count_fitting
from podsim.placement.space import FreeSpace, box_candidates, request_options, subcube_candidates
from podsim.topology import PodLayout, format_shape, get_generation, parse_shape

FIG4_SHAPES: tuple[str, ...] = ("2x2x1", "2x2x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8", "8x8x16", "8x16x16",
                                "12x16x16", "16x16x16")
FIG4_AVAILABILITY: tuple[float, ...] = (0.990, 0.995, 0.999)

# The paper's stated points (Fig. 4 caption and §2.3), as (row id, text).
PAPER_POINTS: tuple[tuple[str, str], ...] = (
    ("av.5", "with OCS at 99.0% and 99.5% host availability, 1K-chip slices: about 75% (3 slices fit)"),
    ("av.6", "one 2K-chip slice: 50% (half the pod spare)"),
    ("av.7", "one 3K-chip slice: 75% (a quarter spare)"),
    ("av.3", "without OCS, hosts must be 99.9% available for reasonable slice goodput"),
    ("av.4", "with OCS, goodput is fair at 99.0% and 99.5% for most slice sizes"),
)

NODE_BUDGET = 50_000


@dataclass(frozen=True)
class GoodputPoint:
    """Goodput of equal `shape` slices at host availability `availability`, OCS or static."""

    availability: float
    ocs: bool
    shape: str
    chips: int
    goodput: float  # mean fraction of the pod's chips in slices that fit
    stderr: float  # standard error of that mean over the trials
    mean_slices: float
    trials: int

    def to_dict(self) -> dict:
        return asdict(self)


# Exact counts ------------------------------------------------------------------------------

def _bits(mask: np.ndarray) -> int:
    return sum(1 << int(i) for i in np.flatnonzero(mask))


def _matching_count(free: np.ndarray) -> int:
    """Maximum number of disjoint 1x1x2 boxes (any orientation) on the free cells of a grid."""
    g = nx.Graph()
    cells = [tuple(int(v) for v in c) for c in np.argwhere(free)]
    g.add_nodes_from(cells)
    for c in cells:
        for d in range(free.ndim):
            n = list(c)
            n[d] += 1
            if n[d] < free.shape[d] and free[tuple(n)]:
                g.add_edge(c, tuple(n))
    top = [c for c in cells if sum(c) % 2 == 0]
    return len(nx.bipartite.hopcroft_karp_matching(g, top_nodes=top)) // 2


def _branch_and_bound(free: np.ndarray, units: Sequence[tuple[int, ...]]) -> int | None:
    """Maximum packing of boxes (given orientations) on the free cells; None past NODE_BUDGET."""
    vol = math.prod(units[0])
    free_bits = _bits(free.ravel())
    by_low: dict[int, list[int]] = {}
    cover = 0
    for u in units:
        _, masks = box_candidates(tuple(u), free.shape)
        for m in masks:
            b = _bits(m)
            if b & free_bits == b:
                by_low.setdefault(int(np.flatnonzero(m)[0]), []).append(b)
                cover |= b
    best, nodes = 0, 0

    def search(avail: int, count: int) -> bool:
        nonlocal best, nodes
        nodes += 1
        if nodes > NODE_BUDGET:
            return False
        if count + avail.bit_count() // vol <= best:
            return True
        if avail == 0:
            best = count
            return True
        low = avail & -avail
        for m in by_low.get(low.bit_length() - 1, ()):
            if m & avail == m and not search(avail & ~m, count + 1):
                return False
        return search(avail & ~low, count)  # the lowest free cell stays empty

    return best if search(free_bits & cover, 0) else None


def _static_box_count(state: PodState, shape: tuple[int, ...], opts) -> int:
    lay = state.layout
    space = FreeSpace.of(state)
    units = sorted({o.unit_shape for o in opts})
    total = 0
    for pod in range(lay.pods):
        free = space.cube_grid_free(pod)
        if math.prod(units[0]) == 1:
            n = int(free.sum())
        elif math.prod(units[0]) == 2:
            n = _matching_count(free)
        else:
            n = _branch_and_bound(free, units)
            if n is None:
                return count_fitting(state, shape, solver="cpsat", params=SolverParams(time_limit=10.0))
        total += n
    return total


def fitting_slices(state: PodState, shape: str | tuple[int, ...], twisted: bool = False) -> int:
    """How many copies of one slice shape fit in the state's free space at once (exact)."""
    shp = parse_shape(shape)
    opts = request_options(state.layout, SliceRequest("probe", shp, twisted))
    kind = opts[0].kind
    if kind == "cubes":
        return count_fitting(state, shp, twisted)
    if kind == "subcube":
        _, masks = subcube_candidates(opts[0].shape, state.layout.generation.cube_shape)
        cells = FreeSpace.of(state).cube_cells
        return int((((~cells).astype(np.int16) @ masks.T.astype(np.int16)) == 0).sum())
    if state.layout.has_cubes:
        return _static_box_count(state, shp, opts)
    return count_fitting(state, shp, twisted)


# The Monte Carlo ------------------------------------------------------------------------------

def fig4_goodput(generation: str = "tpu-v4", shapes: Sequence[str] = FIG4_SHAPES,
                 availabilities: Sequence[float] = FIG4_AVAILABILITY, trials: int = 400, seed: int = 0,
                 wiring: Sequence[bool] = (True, False),
                 on_progress: Callable[[float, float], None] | None = None) -> list[GoodputPoint]:
    """Goodput of equal slices of each shape, per host availability and wiring (True = OCS).

    Each trial fails every host independently with probability 1 - A; the same trials serve
    every shape and both wirings. Seeded: the same arguments give the same table.
    on_progress(trials done, trials in all) after each trial."""
    gen = get_generation(generation)
    if not gen.has_ocs:
        raise PodsimError(f"{generation} has no OCS; Fig. 4 compares OCS and static wiring of an OCS generation (tpu-v4, tpu-v5p)")
    if trials < 1:
        raise PodsimError(f"trials {trials} must be >= 1")
    for a in availabilities:
        if not 0 < a <= 1:
            raise PodsimError(f"host availability {a} must be in (0, 1]")
    layouts = {ocs: PodLayout(gen, pods=1, ocs=ocs) for ocs in wiring}
    names = [format_shape(parse_shape(s)) for s in shapes]
    valid = {}
    for ocs, lay in layouts.items():
        for s in names:
            try:
                request_options(lay, SliceRequest("probe", s))
                valid[(ocs, s)] = True
            except PodsimError:
                valid[(ocs, s)] = False  # e.g. a slice longer than the static pod: never fits
    rng = np.random.default_rng(seed)
    n_hosts = next(iter(layouts.values())).n_hosts
    out: list[GoodputPoint] = []
    for a in availabilities:
        counts = {(ocs, s): np.zeros(trials) for ocs in wiring for s in names}
        cache: dict[tuple, int] = {}
        for t in range(trials):
            failed = np.flatnonzero(rng.random(n_hosts) >= a)
            for ocs, lay in layouts.items():
                state = PodState(lay)
                state.fail(hosts=failed)
                cubes_down = np.packbits(~FreeSpace.of(state).cube_whole_free).tobytes()
                for s in names:
                    if not valid[(ocs, s)]:
                        continue
                    sub = math.prod(parse_shape(s)) < gen.chips_per_cube
                    key = None if sub else (ocs, s, cubes_down)  # cube-level counts depend only on failed cubes
                    if key is not None and key in cache:
                        n = cache[key]
                    else:
                        n = fitting_slices(state, s)
                        if key is not None:
                            cache[key] = n
                    counts[(ocs, s)][t] = n
            if on_progress is not None:
                on_progress(len(out) // max(1, len(counts)) * trials + t + 1, len(availabilities) * trials)
        for ocs in wiring:
            for s in names:
                chips = math.prod(parse_shape(s))
                frac = counts[(ocs, s)] * chips / gen.pod_chips
                se = float(frac.std(ddof=1) / math.sqrt(trials)) if trials > 1 else math.nan
                out.append(GoodputPoint(a, ocs, s, chips, float(frac.mean()), se, float(counts[(ocs, s)].mean()), trials))
    return out


def goodput_table(points: Sequence[GoodputPoint]) -> tuple[list[str], list[list[str]]]:
    """Header and rows: one row per slice shape, one column per (availability, wiring)."""
    cols = sorted({(p.availability, p.ocs) for p in points}, key=lambda c: (c[0], not c[1]))
    shapes = list(dict.fromkeys(p.shape for p in points))
    by = {(p.shape, p.availability, p.ocs): p for p in points}
    header = ["slice", "chips"] + [f"{a:.1%} {'OCS' if ocs else 'static'}" for a, ocs in cols]
    rows = []
    for s in shapes:
        chips = by[(s, *cols[0])].chips
        rows.append([s, str(chips)] + [f"{by[(s, a, ocs)].goodput:.1%}" for a, ocs in cols])
    return header, rows
