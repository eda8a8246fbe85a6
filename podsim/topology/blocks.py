"""Slices made of whole blocks and pieces of blocks, joined by OCS circuits.

On an OCS pod a slice need not take whole cubes (blocks): along each axis it may

- `full`: span k whole blocks (a side k x b): a ring, closed through the OCS;
- `inner`: stay inside one block, at a local offset (a side < b): a mesh line, no circuit;
- `split`: span k whole blocks plus a piece of r < b chips (a side k x b + r): a mesh line whose
  piece touches the block face the circuit enters by (`side` lo: the piece comes last, at local
  0..r-1; hi: first, at b-r..b-1).

The slice is a grid of cells, one block each; a cell's region is the product of its per-axis
ranges, so the cells are whole blocks, faces, edges and a corner - RFold's split of a job into
full blocks plus face/edge/corner pieces (arXiv 2510.03891, `_reconfig_param_map`). Logical axis
d is physical dimension d (the circuits join a cell's '+' face chips to the next cell's '-' face
chips on the OCS unit of that dimension and face index, [ISCA23] §2.2, ocs.7), so the slice is
checked by `check_slice_topology` like any other: every ring of a `full` axis is closed, every
other axis a mesh line. A cube-level TPU slice is the case of every axis `full`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from podsim.errors import PodsimError
from podsim.topology.circuits import Circuit
from podsim.topology.pod import MINUS, PLUS, _row_major

MODES = ("full", "inner", "split")


@dataclass(frozen=True)
class BlockGeometry:
    """The cells of a `shape` slice on blocks of side `block`, for one choice of `params`:
    per axis the local offset of an `inner` axis, the side (0 lo, 1 hi) of a `split` one, 0
    for a `full` one."""

    shape: tuple[int, ...]
    block: int
    params: tuple[int, ...]

    def __post_init__(self):
        b = self.block
        for d, (s, p) in enumerate(zip(self.shape, self.params, strict=True)):
            mode = axis_mode(s, b)
            if (mode == "inner" and not 0 <= p <= b - s) or (mode == "split" and p not in (0, 1)) or (mode == "full" and p):
                raise PodsimError(f"block slice {self.shape}: parameter {p} of axis {d} ({mode}) is out of range")

    @cached_property
    def modes(self) -> tuple[str, ...]:
        return tuple(axis_mode(s, self.block) for s in self.shape)

    @cached_property
    def grid(self) -> tuple[int, ...]:
        b = self.block
        return tuple(1 if m == "inner" else s // b + (m == "split") for s, m in zip(self.shape, self.modes, strict=True))

    @property
    def n_cells(self) -> int:
        return math.prod(self.grid)

    @property
    def wrap(self) -> tuple[bool, ...]:
        return tuple(m == "full" for m in self.modes)

    @property
    def split(self) -> bool:
        return "split" in self.modes

    def axis_range(self, d: int, c: int) -> tuple[int, int]:
        """Local [lo, hi) of cell index c along axis d."""
        s, b, p, m = self.shape[d], self.block, self.params[d], self.modes[d]
        if m == "inner":
            return p, p + s
        if m == "full":
            return 0, b
        r, k = s % b, s // b
        if p == 0:
            return (0, r) if c == k else (0, b)
        return (b - r, b) if c == 0 else (0, b)

    def locate(self, d: int, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(cell index, local coordinate) of logical coordinates x along axis d."""
        s, b, p, m = self.shape[d], self.block, self.params[d], self.modes[d]
        if m == "inner":
            return np.zeros_like(x), p + x
        if m == "full" or p == 0:
            return x // b, x % b
        r = s % b
        first = x < r
        return np.where(first, 0, (x - r) // b + 1), np.where(first, b - r + x, (x - r) % b)

    @cached_property
    def cells(self) -> np.ndarray:
        """(n_cells, dims) grid positions in row-major order."""
        return _row_major(self.grid).astype(np.int64)

    def cell_kind(self, cell) -> tuple[str, ...]:
        """Per axis 'b' (whole block side), 'r' (a piece of a split axis) or 'i' (inner): the cell's
        type; cells of one type have one region and are interchangeable."""
        out = []
        for d, c in enumerate(cell):
            lo, hi = self.axis_range(d, int(c))
            out.append("i" if self.modes[d] == "inner" else "b" if hi - lo == self.block else "r")
        return tuple(out)

    def region_mask(self, cell) -> np.ndarray:
        """(block^dims,) bool: the chips of a block (local row-major) the cell takes."""
        b = self.block
        m = np.zeros((b,) * len(self.shape), bool)
        m[tuple(slice(*self.axis_range(d, int(c))) for d, c in enumerate(cell))] = True
        return m.ravel()

    def links(self, d: int, cell) -> tuple[bool, bool]:
        """(a circuit leaves the cell's '+' face, one enters its '-' face) along axis d."""
        g, c, m = self.grid[d], int(cell[d]), self.modes[d]
        if m == "inner":
            return False, False
        if m == "full":
            return True, True  # a ring: the last cell's '+' face goes back to the first's '-' face
        return c < g - 1, c > 0


def axis_mode(side: int, block: int) -> str:
    """'full' (whole blocks), 'inner' (inside one block) or 'split' (blocks plus a piece)."""
    if side % block == 0:
        return "full"
    return "inner" if side < block else "split"


def geometry_params(shape: tuple[int, ...], block: int) -> list[tuple[int, ...]]:
    """Every parameter choice of a shape (offsets of inner axes, sides of split ones)."""
    import itertools

    ranges = []
    for s in shape:
        m = axis_mode(s, block)
        ranges.append(range(block - s + 1) if m == "inner" else (0, 1) if m == "split" else (0,))
    return list(itertools.product(*ranges))


def cell_ports(layout, geom: BlockGeometry, cell, cube: int) -> tuple[np.ndarray, np.ndarray]:
    """(ocs, port) of the OCS ports the cell's circuits use when it sits in `cube`."""
    b = geom.block
    local = _row_major((b,) * len(geom.shape))
    region = geom.region_mask(cell)
    ocs_all, port_all = [], []
    for d in range(len(geom.shape)):
        out_plus, in_minus = geom.links(d, cell)
        others = [o for o in range(3) if o != d]
        for sign, edge, used in ((PLUS, b - 1, out_plus), (MINUS, 0, in_minus)):
            if not used:
                continue
            sel = region & (local[:, d] == edge)
            idx = np.ravel_multi_index(tuple(local[sel][:, others].T), (b, b))
            ocs, port = layout.ocs_port(np.full(len(idx), cube), d, sign, idx)
            ocs_all.append(ocs.ravel())
            port_all.append(port.ravel())
    if not ocs_all:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.concatenate(ocs_all).astype(np.int64), np.concatenate(port_all).astype(np.int64)


def block_chips_and_circuits(layout, geom: BlockGeometry, cubes) -> tuple[np.ndarray, list]:
    """The chips of the slice in logical row-major order and its OCS circuits, with cell k
    (row-major over the grid) in cube `cubes[k]`."""
    if len(cubes) != geom.n_cells:
        raise PodsimError(f"block slice {geom.shape} needs {geom.n_cells} blocks, got {len(cubes)}")
    b, dims = geom.block, len(geom.shape)
    cubes = np.asarray(cubes, np.int64)
    logical = _row_major(geom.shape).astype(np.int64)
    cell = np.empty_like(logical)
    loc = np.empty_like(logical)
    for d in range(dims):
        cell[:, d], loc[:, d] = geom.locate(d, logical[:, d])
    cube_of = cubes[np.ravel_multi_index(tuple(cell.T), geom.grid)]
    chips = layout.cube_chips[cube_of, np.ravel_multi_index(tuple(loc.T), (b,) * dims)]
    circuits = []
    index = {tuple(c): k for k, c in enumerate(geom.cells.tolist())}
    for d in range(dims):
        if geom.modes[d] == "inner":
            continue
        others = [o for o in range(dims) if o != d]
        at_face = loc[:, d] == b - 1
        for k, c in enumerate(geom.cells.tolist()):
            out_plus, _ = geom.links(d, c)
            if not out_plus:
                continue
            nxt = list(c)
            nxt[d] = (c[d] + 1) % geom.grid[d]
            sel = at_face & (cube_of == cubes[k])
            idx = np.ravel_multi_index(tuple(loc[sel][:, others].T), (b, b))
            ocs, pa = layout.ocs_port(np.full(len(idx), cubes[k]), d, PLUS, idx)
            _, pb = layout.ocs_port(np.full(len(idx), cubes[index[tuple(nxt)]]), d, MINUS, idx)
            circuits.extend(Circuit.from_columns(ocs.ravel().tolist(), pa.ravel().tolist(), pb.ravel().tolist()))
    return chips.astype(np.int32), circuits
