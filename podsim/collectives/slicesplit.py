"""How a pattern's flows fall on the slices of a multislice job: inside a slice, or across.

A group's ranks are (rank in the slice, slice), the slice axes (`dcn`, `site`) outermost
(groups.group_layout): rank = local rank + p_slice x slice, and every instance has the same
local chips in every slice. So a flow stays in its slice when its ends share rank // p_slice,
and two slices carry the same inside flows (on the same local chips) when the inside rank
pairs of one instance agree there. Every pattern builder says this from one instance's rank
pairs (all instances alike) or, for all pairs, in closed form: the symmetry of a step and the
flow count of a candidate algorithm are found without building a single flow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from podsim.collectives.groups import SLICE_GRID_AXES, GroupLayout


@dataclass(frozen=True, eq=False)
class SliceSplit:
    """A pattern's flows over every instance: `inside` stay in their slice, `crossing` go
    between slices; per slice of the job, how many stay inside it (`slice_inside`) and a label
    (`labels`: slices with one label carry the same inside flows on the same local chips); per
    rank of an instance, the crossing flows it sends and receives."""

    inside: int
    crossing: int
    slice_inside: np.ndarray
    labels: np.ndarray
    out_crossing: np.ndarray
    in_crossing: np.ndarray


def _slice_axes(layout: GroupLayout) -> tuple[int, int]:
    """(ranks of an instance in one slice, slices an instance spans)."""
    n = math.prod(g for g, a in zip(layout.grid, layout.axes, strict=True) if a in SLICE_GRID_AXES)
    return layout.p // n, n


def _uniform(layout: GroupLayout, per_instance: int) -> SliceSplit:
    """Every flow inside: a group without slice axes has its instances in every slice alike."""
    s = max(layout.slices, 1)
    zeros = np.zeros(layout.p, np.int64)
    return SliceSplit(layout.instances * per_instance, 0, np.full(s, layout.instances // s * per_instance, np.int64),
                      np.zeros(s, np.int64), zeros, zeros)


def rank_split(layout: GroupLayout, src_rank: np.ndarray, dst_rank: np.ndarray, weight=None) -> SliceSplit:
    """The split of a pattern whose every instance sends src_rank[k] -> dst_rank[k] (weight[k])."""
    p_slice, n = _slice_axes(layout)
    if n == 1:
        return _uniform(layout, len(src_rank))
    src_rank, dst_rank = np.asarray(src_rank, np.int64), np.asarray(dst_rank, np.int64)
    w = np.ones(len(src_rank)) if weight is None else np.broadcast_to(np.asarray(weight, float), src_rank.shape)
    ss, sd = src_rank // p_slice, dst_rank // p_slice
    inside = ss == sd
    inst = layout.instances
    slice_inside = np.bincount(ss[inside], minlength=n).astype(np.int64) * inst
    # per slice, its inside pairs in local ranks (sorted) as bytes: equal bytes, equal flows
    ls, ld, wl, sl = src_rank[inside] % p_slice, dst_rank[inside] % p_slice, w[inside], ss[inside]
    order = np.lexsort((wl, ld, ls, sl))
    ls, ld, wl, sl = ls[order], ld[order], wl[order], sl[order]
    cuts = np.searchsorted(sl, np.arange(n + 1))
    seen: dict[bytes, int] = {}
    labels = np.array([seen.setdefault(ls[a:b].tobytes() + ld[a:b].tobytes() + wl[a:b].tobytes(), len(seen))
                       for a, b in zip(cuts[:-1], cuts[1:], strict=True)], np.int64)
    cross = ~inside
    return SliceSplit(int(inside.sum()) * inst, int(cross.sum()) * inst, slice_inside, labels,
                      np.bincount(src_rank[cross], minlength=layout.p).astype(np.int64),
                      np.bincount(dst_rank[cross], minlength=layout.p).astype(np.int64))


def pairs_split(layout: GroupLayout, axis: int | None) -> SliceSplit:
    """The split of all pairs along grid axis `axis` (None: every pair of an instance), in
    closed form (an instance has p (line - 1) of them, too many to list on a large group)."""
    p = layout.p
    line = p if axis is None else layout.grid[axis]
    p_slice, n = _slice_axes(layout)
    if n == 1:
        return _uniform(layout, p * (line - 1))
    inst = layout.instances
    if axis is None:
        inside_per_rank, cross_per_rank = p_slice - 1, p - p_slice
    elif layout.axes[axis] in SLICE_GRID_AXES:
        inside_per_rank, cross_per_rank = 0, line - 1
    else:
        inside_per_rank, cross_per_rank = line - 1, 0
    degree = np.full(p, cross_per_rank, np.int64)
    return SliceSplit(inst * p * inside_per_rank, inst * p * cross_per_rank,
                      np.full(n, inst * p_slice * inside_per_rank, np.int64), np.zeros(n, np.int64), degree, degree)
