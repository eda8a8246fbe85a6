"""Collective algorithms as schedules of phases (sizes in the nccl-tests convention).

- `ring`: unidirectional ring along the group's one axis, or along a snake (boustrophedon)
  ring through all its chips; reduce-scatter and all-gather take p - 1 steps of n/p.
- `bidir_ring`: the buffer split in two, one ring in each direction (the torus wraparound
  makes the two directions use different links; [SCALINGBOOK] col.21).
- `torus`: multi-dimensional torus: reduce-scatter axis by axis, then all-gather in reverse
  (Ying et al. 2018's 2-D torus all-reduce, col.20, generalised to any number of axes), with
  bidirectional rings on each axis; all-to-all axis by axis.
- `torus_all_links`: the buffer split over every rotation of the axis order and both
  directions, all at once, so at every step each chip drives all 2 x D of its links - what
  the documented pod all-reduce bandwidths (v4.23, v4.25) assume. The streams pass axis by
  axis in step (a stage per pass), so on a non-cubic torus they never share a ring.
- `halving_doubling`: recursive halving reduce-scatter and recursive doubling all-gather
  (Rabenseifner, col.4, col.2, col.9), nearest partner first; p a power of two.
- `direct`: pairwise, every chip sends to every other at once (all-to-all col.18; also
  reduce-scatter / all-gather / all-reduce).
- `hierarchical`: for groups that cross the data-centre network (the slices of a multislice
  job, the nodes of a GPU cluster): reduce-scatter inside each slice with all ICI links busy,
  all-reduce across slices on the DCN (a bidirectional ring per chip: on an EPS spine both
  directions share the NIC, on an OCS DCN they use two block-to-block links), all-gather
  inside each slice.

Broadcast is a binomial scatter from rank 0 followed by the algorithm's all-gather (van de
Geijn, col.13/col.14); reduce is the algorithm's reduce-scatter followed by a binomial gather
to rank 0 (Rabenseifner, col.16).
"""

from __future__ import annotations

import math

from podsim.collectives.groups import GroupLayout
from podsim.collectives.patterns import (
    pairs_pattern,
    ring_pattern,
    shift_pattern,
    tree_pattern,
    xor_pattern,
)
from podsim.collectives.schedule import Phase, Schedule, Stage, sequence
from podsim.errors import PodsimError
from podsim.trace.kinds import ALGORITHMS  # noqa: F401 (one list of names, with their aliases)
from podsim.trace.model import COLLECTIVE_KINDS, busbw_factor  # noqa: F401 (re-exported)

KINDS = (*COLLECTIVE_KINDS, "send_recv")
_REDUCING = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce")


def _is_pow2(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def applicable(kind: str, layout: GroupLayout) -> dict[str, str]:
    """Algorithm -> '' if it can run `kind` on this group, else the reason it cannot."""
    out: dict[str, str] = {}
    n_axes = len(layout.grid)
    for alg in ALGORITHMS:
        why = ""
        if kind == "send_recv":
            why = "send_recv is a single direct step" if alg != "direct" else ""
        elif alg in ("ring", "bidir_ring"):
            why = "" if kind in _REDUCING else f"{alg} has no {kind}"
        elif alg == "torus":
            if n_axes < 2 and kind in _REDUCING:
                why = "on one axis torus is bidir_ring"
            elif n_axes < 2 and kind == "all_to_all":
                why = "on one axis torus is direct"
        elif alg == "torus_all_links":
            if kind not in _REDUCING:
                why = f"torus_all_links has no {kind}"
            elif layout.dcn_axes:
                why = "torus_all_links runs on ICI axes only and this group crosses the DCN"
            elif n_axes < 2:
                why = "torus_all_links needs a group over two or more axes (on one axis it is bidir_ring)"
        elif alg == "halving_doubling":
            if kind not in _REDUCING:
                why = f"halving_doubling has no {kind}"
            elif not all(_is_pow2(g) for g in layout.grid):
                why = f"halving_doubling needs power-of-two axes; this group's grid is {'x'.join(map(str, layout.grid))}"
        elif alg == "direct":
            why = "" if kind in ("all_to_all", "all_reduce", "reduce_scatter", "all_gather") else f"direct has no {kind}"
        elif alg == "hierarchical":
            if kind not in _REDUCING:
                why = f"hierarchical has no {kind}"
            elif not layout.dcn_axes or not layout.ici_axes:
                why = "hierarchical needs a group with axes inside the slice and across the DCN (e.g. x,y,z,dcn)"
        out[alg] = why
    return out


def _rs_axes(layout: GroupLayout, order, step: int, n: float) -> list[Phase]:
    """Reduce-scatter n bytes with rings along the grid axes in `order` (None: the snake)."""
    phases = []
    for j in order:
        p = layout.p if j is None else layout.grid[j]
        if p > 1:
            phases.append(Phase(ring_pattern(layout, j, step), n / p, p - 1))
            n /= p
    return phases


def _multi_stream(layout: GroupLayout, plans, kind: str, n: float) -> tuple[Stage, ...]:
    """Streams that each run `kind` on a share of the buffer along their (axis order,
    direction) plan - reduce-scatter forwards, all-gather as its mirror - in step: the k-th
    axis pass of every stream forms one stage, so rotated streams never meet on one axis.
    Shares are sized so every stream's first pass - where most bytes move - takes the same
    time: equal on a cube, smaller for streams that start on a longer ring."""
    weights = []
    for order, _ in plans:
        p = layout.p if order[0] is None else layout.grid[order[0]]
        weights.append(p / (p - 1) if p > 1 else 1.0)
    total = sum(weights)
    streams = []
    for (order, step), w in zip(plans, weights, strict=True):
        rs = _rs_axes(layout, order, step, n * w / total)
        streams.append({"reduce_scatter": rs, "all_gather": rs[::-1], "all_reduce": rs + rs[::-1]}[kind])
    depth = max(len(st) for st in streams)
    return tuple(tuple((st[k],) for st in streams if k < len(st)) for k in range(depth))


def _plans(alg: str, layout: GroupLayout, axes: tuple[int, ...]):
    whole = (None,) if len(axes) > 1 else axes
    if alg == "ring":
        return [(whole, 1)]
    if alg == "bidir_ring":
        return [(whole, 1), (whole, -1)]
    if alg == "torus":
        return [(axes, 1), (axes, -1)]
    rotations = [axes[r:] + axes[:r] for r in range(len(axes))]
    return [(order, step) for order in rotations for step in (1, -1)]


def _one(phases) -> tuple[Stage, ...]:
    return ((tuple(phases),),)


def _rs_ag_ar(alg: str, layout: GroupLayout, kind: str, n: float) -> tuple[Stage, ...]:
    """reduce_scatter / all_gather / all_reduce under `alg`."""
    if alg == "halving_doubling":
        rs = [Phase(xor_pattern(layout, k), n / 2 ** (k + 1)) for k in range(int(math.log2(layout.p)))]
        return _one({"reduce_scatter": rs, "all_gather": rs[::-1], "all_reduce": rs + rs[::-1]}[kind])
    if alg == "direct":
        ph = Phase(pairs_pattern(layout, None), n / layout.p)
        return _one([ph, ph] if kind == "all_reduce" else [ph])
    if alg == "hierarchical":
        inner = _plans("torus_all_links", layout, layout.ici_axes)
        outer = [(layout.dcn_axes, 1), (layout.dcn_axes, -1)]
        n_out = n / math.prod(layout.grid[j] for j in layout.ici_axes)
        if kind == "reduce_scatter":
            return sequence(_multi_stream(layout, inner, kind, n), _multi_stream(layout, outer, kind, n_out))
        if kind == "all_gather":
            return sequence(_multi_stream(layout, outer, kind, n_out), _multi_stream(layout, inner, kind, n))
        return sequence(_multi_stream(layout, inner, "reduce_scatter", n), _multi_stream(layout, outer, kind, n_out),
                        _multi_stream(layout, inner, "all_gather", n))
    axes = tuple(range(len(layout.grid)))
    return _multi_stream(layout, _plans(alg, layout, axes), kind, n)


def _tree(layout: GroupLayout, n: float, scatter: bool) -> tuple[Stage, ...]:
    """Binomial scatter from (gather to) rank 0 of n bytes: ceil(lg p) steps."""
    p = layout.p
    masks = [1 << k for k in range(max(p - 1, 0).bit_length())]
    if scatter:
        masks = masks[::-1]
    return _one([Phase(tree_pattern(layout, m, scatter), n / p) for m in masks])


def build_schedule(kind: str, layout: GroupLayout, size_bytes: float, algorithm: str, shift: int = 1) -> Schedule:
    """The schedule of one collective; a one-line error if the algorithm cannot run it."""
    if kind not in KINDS:
        raise PodsimError(f"unknown collective {kind!r}; known: {', '.join(KINDS)}")
    if algorithm not in ALGORITHMS:
        raise PodsimError(f"unknown algorithm {algorithm!r}; known: auto, {', '.join(ALGORITHMS)}")
    if size_bytes < 0:
        raise PodsimError(f"collective size {size_bytes} is negative; it must be >= 0 bytes")
    why = applicable(kind, layout)[algorithm]
    if why:
        ok = [a for a, w in applicable(kind, layout).items() if not w]
        raise PodsimError(f"algorithm {algorithm!r} cannot run {kind} on group {layout.name}: {why}; use one of: auto, {', '.join(ok)}")
    n = float(size_bytes)
    if layout.p == 1:
        stages: tuple[Stage, ...] = ()
    elif kind == "send_recv":
        stages = _one([Phase(shift_pattern(layout, shift), n)])
    elif kind == "all_to_all":
        if algorithm == "direct":
            stages = _one([Phase(pairs_pattern(layout, None), n / layout.p)])
        else:
            stages = _one([Phase(pairs_pattern(layout, j), n / g) for j, g in enumerate(layout.grid)])
    elif kind in ("reduce_scatter", "all_gather", "all_reduce"):
        stages = _rs_ag_ar(algorithm, layout, kind, n)
    elif kind == "broadcast":
        stages = sequence(_tree(layout, n, True), _rs_ag_ar(algorithm, layout, "all_gather", n))
    else:  # reduce
        stages = sequence(_rs_ag_ar(algorithm, layout, "reduce_scatter", n), _tree(layout, n, False))
    return Schedule(kind, algorithm, layout, n, stages)
