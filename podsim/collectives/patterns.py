"""Step patterns over a group's grid: rings, exchanges, all pairs, trees, shifts.

Each builder returns a `Pattern` (memoised on the layout) whose flows cover every instance of
the group at once, and says under which cyclic rank shifts it is unchanged.
"""

from __future__ import annotations

import numpy as np

from podsim.collectives.groups import GroupLayout
from podsim.collectives.schedule import Pattern
from podsim.collectives.slicesplit import pairs_split, rank_split


def _memo(layout: GroupLayout, key: tuple, build) -> Pattern:
    if key not in layout.cache:
        layout.cache[key] = build()
    return layout.cache[key]


def _select(layout: GroupLayout, src_rank: np.ndarray, dst_rank: np.ndarray, weight, keep):
    """Flows src_rank[k] -> dst_rank[k] in every instance, optionally only kept sources."""
    src = layout.members[:, src_rank]
    dst = layout.members[:, dst_rank]
    w = None if weight is None else np.broadcast_to(np.asarray(weight, float), src.shape)
    if keep is None:
        return src.ravel(), dst.ravel(), None if w is None else w.ravel()
    m = keep[src]
    return src[m], dst[m], None if w is None else w[m]


def snake_order(grid: tuple[int, ...]) -> np.ndarray:
    """Ranks in boustrophedon order: consecutive ranks differ by one step along one axis.

    On a torus with even axes the last rank is one wraparound hop from the first, so the
    order is a Hamiltonian ring of physical links (the ring algorithm over several axes).
    """
    order = np.arange(grid[0])
    for j in range(1, len(grid)):
        block = np.prod(grid[:j], dtype=np.int64)
        rows = [order if (k % 2 == 0) else order[::-1] for k in range(grid[j])]
        order = np.concatenate([r + k * block for k, r in enumerate(rows)])
    return order


def folded_ring_next(n: int, step: int) -> np.ndarray:
    """Per position on an open line of n chips, the next one on the ring folded onto it: out
    along the even positions, back along the odd ones (0, 2, 4, ..., 5, 3, 1). Every hop is one or
    two links and every link carries one flow per direction, where a ring closed over the line
    would send its last hop back n - 1 links: the same bandwidth as a ring on a torus axis in one
    direction, twice the hops per step."""
    order = np.concatenate([np.arange(0, n, 2), np.arange(n - 1 if n % 2 == 0 else n - 2, 0, -2)])
    nxt = np.empty(n, np.int64)
    nxt[order] = order[(np.arange(n) + step) % n]
    return nxt


def ring_pattern(layout: GroupLayout, axis: int | None, step: int) -> Pattern:
    """Every rank sends to the next one (`step` = +1 or -1) along grid axis `axis`, or along
    the snake ring through all ranks (`axis` None). Along an axis whose ranks lie on an open
    line (`GroupLayout.line`: a mesh axis, a block of a longer axis) the ring is folded onto the
    line (`folded_ring_next`) from 4 ranks up."""

    def build() -> Pattern:
        p = layout.p
        folded = axis is not None and layout.line and layout.line[axis] and layout.grid[axis] >= 4
        if folded:
            idx = layout.rank_index().copy()
            idx[:, axis] = folded_ring_next(layout.grid[axis], step)[idx[:, axis]]
            nxt = layout.rank_of(idx)
            name = f"folded ring {layout.axes[axis]}{'+' if step > 0 else '-'}"
            periods = tuple(g if j == axis else 1 for j, g in enumerate(layout.grid))  # not shift-invariant along the line
        elif axis is None:
            order = snake_order(layout.grid)
            nxt = np.empty(p, np.int64)
            nxt[order] = order[(np.arange(p) + step) % p]
            name = f"snake ring {'+' if step > 0 else '-'}"
            periods = layout.grid  # the snake is not shift-invariant
        else:
            idx = layout.rank_index().copy()
            idx[:, axis] = (idx[:, axis] + step) % layout.grid[axis]
            nxt = layout.rank_of(idx)
            name = f"ring {layout.axes[axis]}{'+' if step > 0 else '-'}"
            periods = (1,) * len(layout.grid)
        ranks = np.arange(p)
        return Pattern(name, layout, periods, layout.instances * p, lambda lay, keep: _select(lay, ranks, nxt, None, keep),
                       lambda: rank_split(layout, ranks, nxt))

    return _memo(layout, ("ring", axis, step), build)


def shift_pattern(layout: GroupLayout, shift: int) -> Pattern:
    """Rank r sends to rank (r + shift) mod p of its instance (a collective permute along
    a one-axis group, as pipeline stages pass activations)."""

    def build() -> Pattern:
        ranks = np.arange(layout.p)
        dst = (ranks + shift) % layout.p
        sel = dst != ranks
        periods = (1,) if len(layout.grid) == 1 else layout.grid
        return Pattern(f"shift {shift:+d}", layout, periods, layout.instances * int(sel.sum()),
                       lambda lay, keep: _select(lay, ranks[sel], dst[sel], None, keep),
                       lambda: rank_split(layout, ranks[sel], dst[sel]))

    return _memo(layout, ("shift", shift), build)


def xor_pattern(layout: GroupLayout, bit: int) -> Pattern:
    """Rank r exchanges with rank r XOR 2**bit (recursive halving / doubling; p a power of 2).
    Along its grid axis the exchange repeats every 2**(bit + 1) ranks, except the axis's top
    bit: r XOR g/2 is r + g/2 mod g, a cyclic shift, which every shift of the axis keeps."""

    def build() -> Pattern:
        ranks = np.arange(layout.p)
        partner = ranks ^ (1 << bit)
        periods = []
        low = 0
        for g in layout.grid:
            bits = int(g).bit_length() - 1
            periods.append(2 ** (bit - low + 1) if low <= bit < low + bits - 1 else 1)
            low += bits
        return Pattern(f"exchange bit {bit}", layout, tuple(periods), layout.instances * layout.p,
                       lambda lay, keep: _select(lay, ranks, partner, None, keep),
                       lambda: rank_split(layout, ranks, partner))

    return _memo(layout, ("xor", bit), build)


def pairs_pattern(layout: GroupLayout, axis: int | None) -> Pattern:
    """Every rank sends to every other rank on its line along grid axis `axis`, or to every
    other rank of its instance (`axis` None): the direct all-to-all."""

    def make(lay: GroupLayout, keep):
        p = lay.p
        idx = lay.rank_index()
        line_len = p if axis is None else lay.grid[axis]
        inst, src_rank = (np.nonzero(keep[lay.members]) if keep is not None
                          else np.divmod(np.arange(lay.members.size), p))
        k = np.arange(1, line_len)
        if axis is None:
            dst_rank = (src_rank[:, None] + k[None, :]) % p
        else:
            others = idx[src_rank][:, None, :].repeat(len(k), axis=1)
            others[:, :, axis] = (others[:, :, axis] + k[None, :]) % line_len
            dst_rank = lay.rank_of(others.reshape(-1, idx.shape[1])).reshape(len(src_rank), len(k))
        src = np.repeat(lay.members[inst, src_rank], len(k))
        dst = lay.members[inst[:, None], dst_rank].ravel()
        return src, dst, None

    name = "all pairs" if axis is None else f"pairs along {layout.axes[axis]}"
    line = layout.p if axis is None else layout.grid[axis]
    n = layout.instances * layout.p * (line - 1)
    return _memo(layout, ("pairs", axis), lambda: Pattern(name, layout, (1,) * len(layout.grid), n, make,
                                                          lambda: pairs_split(layout, axis)))


def tree_pattern(layout: GroupLayout, mask: int, scatter: bool) -> Pattern:
    """One step of a binomial tree rooted at rank 0: ranks r with r % 2mask == 0 send to
    r + mask (scatter; the reverse for gather) the blocks of ranks r+mask .. r+2mask-1."""

    def build() -> Pattern:
        p = layout.p
        r = np.arange(0, p, 2 * mask)
        r = r[r + mask < p]
        weight = np.minimum(mask, p - r - mask).astype(float)
        a, b = (r, r + mask) if scatter else (r + mask, r)
        return Pattern(f"tree {'scatter' if scatter else 'gather'} {mask}", layout, layout.grid, layout.instances * len(r),
                       lambda lay, keep: _select(lay, a, b, weight, keep), lambda: rank_split(layout, a, b, weight))

    return _memo(layout, ("tree", mask, scatter), build)
