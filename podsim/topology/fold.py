"""Homomorphic folds: a logical torus (the shape a job asked for) laid onto a physical box of
the same size so that every logical link is a physical link - every logical ring still closed.

A fold is built from two moves, each keeping neighbours neighbours:

- *split an axis*: a logical axis of length n = f1 x f2 x ... is walked as a Hamiltonian path of
  the f1 x f2 x ... grid (boustrophedon), or, when the axis is a ring, a Hamiltonian cycle of it
  (a mesh cycle: it needs an even n and no wraparound; `grid_cycle`). One factor alone is the
  axis itself (a ring then needs the physical axis to wrap).
- *merge two axes of 2*: two length-2 factors share one physical ring of 4 (K2 x K2 = C4, Gray
  order 0, 1, 3, 2), which needs the physical axis to wrap - RFold's "2 folded into 4"
  (arXiv 2510.03891, `are_homomorphic_fast`).

Each physical axis holds one factor (of its length) or one merged pair. `find_fold` searches
every such assignment (at most (2 + d)^d for d axes) and builds the first that works;
`check_fold` proves a fold independently: a bijection onto the box, and each logical
neighbour pair (rings closed where the logical axis wraps) physically adjacent.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import cache

import numpy as np

GRAY4 = (0, 1, 3, 2)  # K2 x K2 on C4: (a, b) -> GRAY4[2a + b]


@dataclass(frozen=True)
class Fold:
    """Logical `shape` (wraps `wrap`) laid onto the physical box `target` (wraps `target_wrap`):
    `coords[i]` is the physical coordinate of logical chip i (row-major over `shape`)."""

    shape: tuple[int, ...]
    wrap: tuple[bool, ...]
    target: tuple[int, ...]
    target_wrap: tuple[bool, ...]
    coords: np.ndarray
    plan: tuple  # per physical axis: (logical axis, factor index), or ((k1, i1), (k2, i2)) merged; () unused

    @property
    def identity(self) -> bool:
        """The fold only renames axes (a rotation): every logical axis is one physical axis."""
        return all(isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], int) for p in self.plan if p)

    @property
    def describe(self) -> str:
        names = "xyz"
        parts = []
        for j, p in enumerate(self.plan):
            if not p:
                continue
            if isinstance(p[0], tuple):
                parts.append(f"{names[j]}={names[p[0][0]]}2*{names[p[1][0]]}2")
            else:
                parts.append(f"{names[j]}<-{names[p[0]]}")
        return ",".join(parts)


def snake(grid: tuple[int, ...]) -> list[tuple[int, ...]]:
    """A Hamiltonian path of the mesh `grid` (boustrophedon): consecutive entries are neighbours."""
    if not grid:
        return [()]
    rest = snake(grid[1:])
    out = []
    for i in range(grid[0]):
        out.extend((i, *r) for r in (rest if i % 2 == 0 else rest[::-1]))
    return out


def grid_cycle(grid: tuple[int, ...]) -> list[tuple[int, ...]] | None:
    """A Hamiltonian cycle of the mesh `grid` (no wraparound), or None when none exists (an odd
    number of cells, a side of 1, or a single axis longer than 2). Row 0 starts the cycle; the
    other rows snake over columns 1.. and column 0 brings it home; `a` is an even side."""
    grid = tuple(grid)
    n = math.prod(grid)
    if n == 2 and len(grid) == 1:
        return [(0,), (1,)]
    if len(grid) < 2 or min(grid) < 2 or n % 2:
        return None
    a_axis = next(k for k, g in enumerate(grid) if g % 2 == 0)
    rest_axes = [k for k in range(len(grid)) if k != a_axis]
    path = snake(tuple(grid[k] for k in rest_axes))  # the columns, as a path through the other axes
    a, r = grid[a_axis], len(path)
    order = [(0, j) for j in range(r)]
    for i in range(1, a):
        cols = range(r - 1, 0, -1) if i % 2 == 1 else range(1, r)
        order.extend((i, j) for j in cols)
    order.extend((i, 0) for i in range(a - 1, 0, -1))
    out = []
    for i, j in order:
        c = [0] * len(grid)
        c[a_axis] = i
        for k, v in zip(rest_axes, path[j], strict=True):
            c[k] = v
        out.append(tuple(c))
    return out


def _walk(factors: tuple[int, ...], ring: bool) -> list[tuple[int, ...]] | None:
    """The factor coordinates a logical axis visits, in order (None if a ring cannot close)."""
    if len(factors) == 1:
        return [(i,) for i in range(factors[0])]
    return grid_cycle(factors) if ring else snake(factors)


def _plans(shape: tuple[int, ...], target: tuple[int, ...], target_wrap: tuple[bool, ...]):
    """Every assignment of physical axes to logical factors (see the module docstring)."""
    live = [k for k, n in enumerate(shape) if n > 1]
    choices = []
    for j, p in enumerate(target):
        if p == 1:
            choices.append([()])
            continue
        opts: list = [(k,) for k in live]
        if p == 4 and target_wrap[j]:
            opts += [(k1, k2) for k1, k2 in itertools.combinations_with_replacement(live, 2)]
        choices.append(opts)
    yield from itertools.product(*choices)


@cache
def _find(shape: tuple[int, ...], wrap: tuple[bool, ...], target: tuple[int, ...],
          target_wrap: tuple[bool, ...]) -> tuple[tuple, tuple] | None:
    """(plan, walks) of the first fold that works, or None."""
    for choice in _plans(shape, target, target_wrap):
        factors: dict[int, list[tuple[int, int]]] = {k: [] for k in range(len(shape))}  # k -> [(physical axis, size)]
        for j, c in enumerate(choice):
            if len(c) == 1:
                factors[c[0]].append((j, target[j]))
            elif len(c) == 2:
                factors[c[0]].append((j, 2))
                factors[c[1]].append((j, 2))
        if any(math.prod(s for _, s in factors[k]) != n for k, n in enumerate(shape)):
            continue
        walks, ok = {}, True
        for k, n in enumerate(shape):
            if n == 1:
                continue
            fs = tuple(s for _, s in factors[k])
            ring = wrap[k] and n > 2
            if len(fs) == 1 and ring:
                j = factors[k][0][0]
                if len(choice[j]) == 2 or not target_wrap[j]:  # one physical ring of its own, which wraps
                    ok = False
                    break
            w = _walk(fs, ring)
            if w is None:
                ok = False
                break
            walks[k] = w
        if not ok:
            continue
        plan = []
        slot: dict[int, int] = {k: 0 for k in range(len(shape))}
        for c in choice:
            if len(c) == 1:
                plan.append((c[0], slot[c[0]]))
                slot[c[0]] += 1
            elif len(c) == 2:
                a = (c[0], slot[c[0]])
                slot[c[0]] += 1
                b = (c[1], slot[c[1]])
                slot[c[1]] += 1
                plan.append((a, b))
            else:
                plan.append(())
        return tuple(plan), tuple(sorted(walks.items()))
    return None


def find_fold(shape, wrap, target, target_wrap) -> Fold | None:
    """A fold of the logical `shape` (ring axes `wrap`) onto the physical box `target`
    (`target_wrap`: its axes with wraparound), or None; proved by `check_fold` before it is
    returned."""
    shape, wrap = tuple(int(v) for v in shape), tuple(bool(v) for v in wrap)
    target, target_wrap = tuple(int(v) for v in target), tuple(bool(v) for v in target_wrap)
    if math.prod(shape) != math.prod(target) or len(shape) != len(target):
        return None
    found = _find(shape, wrap, target, target_wrap)
    if found is None:
        return None
    plan, walks = found
    walks = dict(walks)
    logical = np.stack(np.unravel_index(np.arange(math.prod(shape)), shape), axis=1)
    seq = {k: np.array(w, np.int64) for k, w in walks.items()}  # k -> (n_k, factors)
    coords = np.zeros((len(logical), len(target)), np.int64)
    for j, p in enumerate(plan):
        if not p:
            continue
        if isinstance(p[0], tuple):
            (k1, i1), (k2, i2) = p
            a = seq[k1][logical[:, k1], i1]
            b = seq[k2][logical[:, k2], i2]
            coords[:, j] = np.asarray(GRAY4)[2 * a + b]
        else:
            k, i = p
            coords[:, j] = seq[k][logical[:, k], i]
    fold = Fold(shape, wrap, target, target_wrap, coords, plan)
    problem = check_fold(fold)
    if problem:
        raise AssertionError(f"fold of {shape} onto {target} is broken: {problem}")  # a bug in the construction
    return fold


def logical_neighbours(shape: tuple[int, ...], wrap: tuple[bool, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(a, b): every logical link as index pairs a < b ... (each ring's wraparound included)."""
    n = math.prod(shape)
    coords = np.stack(np.unravel_index(np.arange(n), shape), axis=1)
    a_all, b_all = [], []
    for d, size in enumerate(shape):
        if size == 1:
            continue
        nxt = coords.copy()
        nxt[:, d] += 1
        ok = nxt[:, d] < size
        if wrap[d] and size > 2:
            nxt[:, d] %= size
            ok[:] = True
        idx = np.ravel_multi_index(tuple(nxt[ok].T), shape)
        a_all.append(np.arange(n)[ok])
        b_all.append(idx)
    if not a_all:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.concatenate(a_all), np.concatenate(b_all)


def check_fold(fold: Fold) -> str:
    """'' if the fold is a bijection onto its box and every logical link joins physical
    neighbours (wraparound only on axes that wrap); else what is wrong."""
    c = np.asarray(fold.coords)
    target = np.array(fold.target)
    if c.shape != (math.prod(fold.shape), len(target)) or (c < 0).any() or (c >= target).any():
        return "coordinates outside the box"
    if len(np.unique(np.ravel_multi_index(tuple(c.T), fold.target))) != len(c):
        return "two logical chips on one physical chip"
    a, b = logical_neighbours(fold.shape, fold.wrap)
    diff = np.abs(c[a] - c[b])
    wrap_ok = np.array(fold.target_wrap) & (target > 2)
    step = (diff == 1) | ((diff == target - 1) & wrap_ok)
    moved = diff > 0
    adjacent = (moved.sum(1) == 1) & (step | ~moved).all(1)
    if not adjacent.all():
        k = int(np.flatnonzero(~adjacent)[0])
        return (f"logical chips {int(a[k])} and {int(b[k])} are neighbours but land on {tuple(c[a[k]])} and "
                f"{tuple(c[b[k]])}, not physical neighbours")
    return ""
