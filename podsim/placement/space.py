"""Free space as the placement algorithms see it, and the positions a slice may take.

Chip ids make two cheap views of one boolean array: on cube generations chip = cube x 64 +
local row-major index, so `free.reshape(n_cubes, 64)` is per cube; on static 2-D pods chip =
pod x chips_per_pod + row-major index, so `free.reshape(pods, *pod_shape)` is the grid.

Where a slice may go (shared by the greedy and CP-SAT solvers, so they search the same space):
- cube-level slices on OCS pods: any `need` usable cubes of one pod (the OCS joins them);
- sub-cube slices: inside one cube, at origins aligned to their own extent (a 2x2x1 slice is
  exactly one host, like a buddy allocator), in the requested axis order;
- static pods (2-D, and the OCS-less cube grid): boxes that do not straddle the pod edge, in
  any axis order the generation allows (`rotate`).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import cache

import numpy as np

from podsim.errors import PodsimError
from podsim.placement.requests import SliceRequest
from podsim.topology import Generation, PodLayout
from podsim.topology.blocks import BlockGeometry
from podsim.topology.shapes import SliceSpec, split_sides, validate_shape


@dataclass(frozen=True)
class Assignment:
    """Where one request goes: `shape` as realised (maybe rotated), pod, cubes, origin.

    cube-level OCS slices: `cubes` (any order); sub-cube: one cube and a local origin;
    static boxes: a chip-coordinate origin within the pod; `blocks` (whole blocks and pieces of
    blocks, podsim.topology.blocks): its cells' cubes in grid order, `origin` the geometry's
    parameters; `reshaped` (podsim.placement.reshape): `detail` holds (chips in logical order,
    circuits) and `form` how the asked topology is realised. `speed` is the fraction of its
    native speed the job runs at there (1 unless a step-time model priced it), which scales its
    admission value."""

    kind: str  # "cubes", "subcube", "box", "chipbox", "blocks", "reshaped"
    shape: tuple[int, ...]
    pod: int
    cubes: tuple[int, ...] = ()
    origin: tuple[int, ...] | None = None
    form: str = "native"  # native, fold, split, scatter
    detail: tuple = ()
    speed: float = 1.0


@dataclass(frozen=True)
class Option:
    """One way a request may be realised: its (maybe rotated) shape and the topology rules."""

    kind: str  # "cubes" (OCS), "subcube", "box" (static rectangle or OCS-less cube box), "chipbox" (a 3-D
    # box of chips on a statically wired generic torus), "blocks" (a generic torus's whole blocks and pieces)
    shape: tuple[int, ...]
    spec: SliceSpec
    unit_shape: tuple[int, ...]  # the box in placement cells: chips, or cubes for OCS-less cube boxes
    degraded: bool = False  # "cubes" only: may take cubes whose circuits on down OCS units are dark


def request_options(layout: PodLayout, req: SliceRequest, rotate: bool = True) -> list[Option]:
    """The shapes `req` may take on this layout; raises PodsimError if it can never fit."""
    gen = layout.generation
    spec = validate_shape(gen, req.shape, req.twisted, layout.ocs)
    if spec.kind == "blocks" and split_sides(gen, spec.shape):
        b = gen.cube_shape[0]
        raise PodsimError(f"slice {spec} on {gen.id}: side {split_sides(gen, spec.shape)[0]} is neither inside one {b}^3 "
                          f"block nor whole blocks (a multiple of {b}); with fold: allowed it is split into whole blocks plus pieces")
    if spec.kind == "subcube":
        return [Option("subcube", spec.shape, spec, spec.shape)]
    if spec.kind == "cubes" and layout.ocs:
        return [Option("cubes", spec.shape, spec, spec.shape, degraded=req.allow_degraded)]
    shapes = dict.fromkeys(itertools.permutations(spec.shape)) if rotate else {spec.shape: None}
    out = []
    for shp in shapes:
        try:
            s = validate_shape(gen, shp, req.twisted, layout.ocs)
        except PodsimError:
            continue
        if s.kind == "blocks":
            if not split_sides(gen, shp):
                out.append(Option("blocks", shp, s, shp))
            continue
        unit = tuple(v // c for v, c in zip(shp, gen.cube_shape, strict=True)) if s.kind == "cubes" else shp
        out.append(Option("chipbox" if s.kind == "rectangle" and layout.has_cubes else "box", shp, s, unit))
    return out


def cubes_needed(gen: Generation, shape: tuple[int, ...]) -> int:
    return math.prod(shape) // gen.chips_per_cube


def _box_mask(grid: tuple[int, ...], origin, shape: tuple[int, ...]) -> np.ndarray:
    """Flat boolean mask of a box at `origin` inside `grid`."""
    block = np.zeros(grid, bool)
    block[tuple(slice(o, o + s) for o, s in zip(origin, shape, strict=True))] = True
    return block.ravel()


def _candidates(shape, grid, ranges) -> tuple[np.ndarray, np.ndarray]:
    origins = np.array(list(itertools.product(*ranges)), np.int64).reshape(-1, len(shape))
    masks = np.stack([_box_mask(grid, org, shape) for org in origins]) if len(origins) else np.zeros((0, math.prod(grid)), bool)
    origins.setflags(write=False)
    masks.setflags(write=False)
    return origins, masks


@cache
def subcube_candidates(shape: tuple[int, ...], cube_shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(origins (k, 3), masks (k, chips_per_cube)) of the aligned positions of `shape` in a cube."""
    return _candidates(shape, cube_shape, [range(0, c - s + 1, s) for s, c in zip(shape, cube_shape, strict=True)])


@cache
def box_candidates(shape: tuple[int, ...], grid: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(origins (k, d), masks (k, cells)) of every position of `shape` inside `grid` (no straddle)."""
    return _candidates(shape, grid, [range(g - s + 1) for s, g in zip(shape, grid, strict=True)])


def window_sums(occ: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum of `occ` over every window of `shape`, indexed by the window's origin."""
    out = occ.astype(np.int32)
    for axis, k in enumerate(shape):
        c = np.cumsum(out, axis=axis)
        n = c.shape[axis]
        hi, lo, rest = ([slice(None)] * c.ndim for _ in range(3))
        hi[axis], lo[axis], rest[axis] = slice(k - 1, n), slice(0, max(n - k, 0)), slice(1, None)
        out = c[tuple(hi)].copy()  # the window at origin i is c[i + k - 1] - c[i - 1], c[-1] = 0
        out[tuple(rest)] -= c[tuple(lo)]
    return out


def contact(occ: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Per origin, occupied (or pod-edge) cells touching the faces of a `shape` box there.

    The best-fit score of static placement ("maximal contact"): a box against walls and other
    slices leaves the free space in fewer, larger pieces."""
    padded = np.pad(occ.astype(np.int32), 1, constant_values=1)
    n_orig = [g - s + 1 for g, s in zip(occ.shape, shape, strict=True)]
    total = np.zeros(n_orig, np.int32)
    for d in range(occ.ndim):
        face = list(shape)
        face[d] = 1
        w = window_sums(padded, tuple(face))
        for off in (0, shape[d] + 1):
            sl = tuple(slice(off, off + n_orig[a]) if a == d else slice(1, 1 + n_orig[a]) for a in range(occ.ndim))
            total += w[sl]
    return total


class FreeSpace:
    """A mutable copy of a pod state's free chips, with cube usability; cheap to take."""

    def __init__(self, layout: PodLayout, chip_free: np.ndarray, cube_ocs_ok: np.ndarray,
                 cube_ocs_degraded_ok: np.ndarray | None = None, port_ok: np.ndarray | None = None):
        self.layout = layout
        self.chip_free = chip_free.copy()
        self.cube_ocs_ok = cube_ocs_ok.copy()
        # (n_ocs, ports) healthy OCS ports on live units (shared, read-only): what a piece of a block may use
        self.port_ok = port_ok
        # cubes a degraded-allowed slice may take (down OCS units ignored); default: the strict mask
        self.cube_ocs_degraded_ok = (cube_ocs_ok if cube_ocs_degraded_ok is None else cube_ocs_degraded_ok).copy()

    @classmethod
    def of(cls, state) -> FreeSpace:
        return cls(state.layout, state.chip_free, state.cube_ocs_ok, state.cube_ocs_degraded_ok, state.port_ok)

    def copy(self) -> FreeSpace:
        return FreeSpace(self.layout, self.chip_free, self.cube_ocs_ok, self.cube_ocs_degraded_ok, self.port_ok)

    # Views ------------------------------------------------------------------------------------
    @property
    def cube_cells(self) -> np.ndarray:
        """(n_cubes, chips_per_cube) free flags; a view."""
        return self.chip_free.reshape(self.layout.n_cubes, -1)

    @property
    def grid(self) -> np.ndarray:
        """(pods, *pod_shape) free flags of a static pod (a view; a copy on a cube layout, whose
        chip ids are cube-major)."""
        if self.layout.has_cubes:
            return self.chip_free[self.layout.chip_at]
        return self.chip_free.reshape(self.layout.pods, *self.layout.generation.pod_shape)

    @property
    def cube_whole_free(self) -> np.ndarray:
        return self.cube_cells.all(axis=1)

    @property
    def cube_usable(self) -> np.ndarray:
        """Cubes a cube-level slice may take: whole, free, healthy, with working OCS."""
        return self.cube_whole_free & self.cube_ocs_ok

    @property
    def cube_usable_degraded(self) -> np.ndarray:
        """Cubes a degraded-allowed cube-level slice may take: as `cube_usable`, but a down OCS
        unit only darkens its circuits (the pod keeps at least one OCS up per dimension)."""
        return self.cube_whole_free & self.cube_ocs_degraded_ok

    def cube_grid_free(self, pod: int) -> np.ndarray:
        """(cube_grid) whole-free cubes of `pod` in the home arrangement (OCS-less boxes)."""
        lay = self.layout
        per = lay.cubes_per_pod
        return self.cube_whole_free[pod * per:(pod + 1) * per].reshape(lay.generation.cube_grid)

    # Updates ----------------------------------------------------------------------------------
    def take(self, chips: np.ndarray) -> None:
        self.chip_free[chips] = False

    def give_back(self, chips, cubes=(), ports: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        """A slice's chips freed, and (`cubes`: those whose circuits it held) its cubes' OCS ports
        usable again as far as `ports` (strict, degraded health per cube; None without OCS) allow."""
        self.chip_free[chips] = True
        if len(cubes) and ports is not None:
            self.cube_ocs_ok[cubes] = ports[0][cubes]
            self.cube_ocs_degraded_ok[cubes] = ports[1][cubes]

    def chips_of(self, a: Assignment) -> np.ndarray:
        """Chip ids an assignment covers (any order)."""
        lay = self.layout
        gen = lay.generation
        if a.kind == "cubes":
            return lay.cube_chips[list(a.cubes)].ravel()
        if a.kind == "subcube":
            return a.cubes[0] * gen.chips_per_cube + np.flatnonzero(_box_mask(gen.cube_shape, a.origin, a.shape))
        if a.kind == "reshaped":
            return np.asarray(a.detail[0])
        if a.kind == "blocks":
            geom = BlockGeometry(a.shape, gen.cube_shape[0], a.origin)
            return np.concatenate([lay.cube_chips[c][geom.region_mask(cell)] for c, cell in zip(a.cubes, geom.cells, strict=True)])
        return lay.chip_at[a.pod].ravel()[_box_mask(gen.pod_shape, a.origin, a.shape)]
