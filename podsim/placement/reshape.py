"""Slices of whole blocks and pieces of blocks, and reshaped requests (`fold: allowed`).

Block slices (podsim.topology.blocks) are the native form of a generic torus pod's shapes whose
sides are inside one block or whole blocks (2x4x8 on 4^3 blocks), and the *split* of any other
shape into whole blocks plus face, edge and corner pieces joined by OCS circuits (6x6x6: one
block, three faces, three edges, a corner). `rank_blocks` finds blocks whose region each cell
needs is free and whose OCS ports for the cell's circuits are healthy: cell types with the fewest
candidate blocks first, each taking the candidates with the fewest free chips (pieces fill
fragments; whole free blocks stay whole) - RFold's corner placement of pieces (arXiv 2510.03891)
with every ring proved, not assumed.

A request may be reshaped when `PlacementSettings.fold` is `allowed` (single-slice, untwisted):
- `fold`: the asked torus laid onto a native box of the same size (podsim.topology.fold: every
  logical ring still closed), the box placed by the native fits;
- `split`: block slices of the asked shape that the generation's own rules do not have.
Native options are always tried first; `reshape_options` lists the others in the order the
greedy tries them (folds that only rotate, folds, splits). Every reshaped slice is checked by
`validate_placement` (the ring proof, `check_slice_topology`) like any other.
"""

from __future__ import annotations

import functools
import itertools
import math
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from podsim.errors import PodsimError
from podsim.placement.requests import SliceRequest
from podsim.placement.space import Assignment, FreeSpace, Option, request_options
from podsim.topology.blocks import BlockGeometry, axis_mode, geometry_params
from podsim.topology.fold import Fold, find_fold
from podsim.topology.pod import MINUS, PLUS, _row_major
from podsim.topology.shapes import SliceSpec, asked_spec, validate_shape

FOLD_MODES = ("none", "allowed")
MAX_FOLD_TARGETS = 6


@dataclass(frozen=True)
class Reshape:
    """One way to realise a request other than natively: a fold onto `targets` (the native
    options of its box) or a split (block slices of `shape`)."""

    form: str  # "fold" or "split"
    shape: tuple[int, ...]  # the logical shape (a rotation of the request's, for a split)
    spec: SliceSpec  # the topology asked for
    targets: tuple[Option, ...] = ()  # fold: native options of the box
    fold: Fold | None = None


@dataclass(frozen=True)
class HilbertRequest:
    """The one 'reshape' of a request under Hilbert allocation: any free chips (podsim.placement.hilbert)."""

    request: object
    form: str = "scatter"


# --- block slices -------------------------------------------------------------------------------

@functools.lru_cache(maxsize=8192)
def _region(geom: BlockGeometry, cell: tuple[int, ...]) -> np.ndarray:
    """The cell's region mask (read-only; geometries repeat from one decision to the next)."""
    m = geom.region_mask(cell)
    m.setflags(write=False)
    return m


@functools.lru_cache(maxsize=8192)
def _port_keys(geom: BlockGeometry, cell: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dim, sign, face index) of the OCS ports a cell's circuits use (any block)."""
    b = geom.block
    local = _row_major((b,) * 3)
    region = _region(geom, cell)
    dims, signs, idxs = [], [], []
    for d in range(3):
        out_plus, in_minus = geom.links(d, cell)
        others = [o for o in range(3) if o != d]
        for sign, edge, used in ((PLUS, b - 1, out_plus), (MINUS, 0, in_minus)):
            if used:
                sel = region & (local[:, d] == edge)
                idx = np.ravel_multi_index(tuple(local[sel][:, others].T), (b, b))
                dims.append(np.full(len(idx), d))
                signs.append(np.full(len(idx), sign))
                idxs.append(idx)
    if not dims:
        return (np.empty(0, np.int64),) * 3
    return np.concatenate(dims), np.concatenate(signs), np.concatenate(idxs)


def _cells_fit(space: FreeSpace, geom: BlockGeometry, cell) -> np.ndarray:
    """(n_cubes,) blocks where the cell's region is free and its circuits' ports are healthy."""
    lay = space.layout
    cell = tuple(int(c) for c in cell)
    ok = space.cube_cells[:, _region(geom, cell)].all(axis=1)
    if space.port_ok is not None:
        d, sgn, idx = _port_keys(geom, cell)
        if len(d):
            cubes = np.arange(lay.n_cubes)
            pod, local = np.divmod(cubes, lay.cubes_per_pod)
            ocs = pod[:, None] * lay.ocs_per_pod + d[None, :] * lay.links_per_face + idx[None, :]
            ok &= space.port_ok[ocs, 2 * local[:, None] + sgn[None, :]].all(axis=1)
    return ok


@functools.lru_cache(maxsize=4096)
def _cell_types(geom: BlockGeometry) -> dict[tuple, list[int]]:
    """Cell kind -> the cells of that kind (interchangeable: one region, one set of ports)."""
    types: dict[tuple, list[int]] = {}
    for k, cell in enumerate(geom.cells.tolist()):
        types.setdefault(geom.cell_kind(cell), []).append(k)
    return types


@functools.lru_cache(maxsize=4096)
def _geometry(shape: tuple[int, ...], block: int, params: tuple[int, ...]) -> BlockGeometry:
    return BlockGeometry(shape, block, params)


def fit_geometry(space: FreeSpace, geom: BlockGeometry, policy: str) -> tuple[int, tuple[int, ...], int] | None:
    """(pod, cubes in cell order, whole free blocks it breaks into) of one geometry, or None."""
    lay = space.layout
    per = lay.cubes_per_pod
    types = _cell_types(geom)
    fits = {t: _cells_fit(space, geom, geom.cells[ks[0]]) for t, ks in types.items()}
    free = space.cube_cells.sum(axis=1)
    whole = space.cube_whole_free
    chips_per = lay.generation.chips_per_cube
    best = None
    for pod in range(lay.pods):
        sl = slice(pod * per, (pod + 1) * per)
        taken: set[int] = set()
        cubes = [-1] * geom.n_cells
        broken = 0
        for t in sorted(types, key=lambda t: (int(fits[t][sl].sum()), t)):
            ks = types[t]
            cand = np.flatnonzero(fits[t][sl]) + pod * per
            cand = [int(c) for c in cand if int(c) not in taken]
            if len(cand) < len(ks):
                break
            region = int(_region(geom, tuple(int(c) for c in geom.cells[ks[0]])).sum())
            if policy == "best":  # pieces into the fullest blocks; a whole block for a whole cell
                cand.sort(key=lambda c: (free[c] if region < chips_per else 0, c))
            for k, c in zip(ks, cand, strict=False):
                cubes[k] = c
                taken.add(c)
                broken += int(whole[c] and region < chips_per)
        else:
            key = (broken, pod)
            if best is None or key < best[0]:
                best = (key, pod, tuple(cubes), broken)
            if policy == "first" or broken == 0:
                break
    return None if best is None else best[1:]


def rank_blocks(space: FreeSpace, opts: Sequence[Option], policy: str = "best", form: str = "native"):
    """A block slice for one of `opts` (rotations), over every offset and side choice; `best`
    breaks the fewest whole free blocks (then the first pod), `first` takes the first fit. Its
    rank (podsim.placement.greedy.Ranked): the whole free blocks it breaks and the geometry's
    place in the search order (best), or that place (first)."""
    if not space.layout.ocs:
        return None
    b = space.layout.generation.cube_shape[0]
    best = None
    g = -1
    for opt in opts:
        for params in geometry_params(opt.shape, b):
            g += 1
            geom = _geometry(tuple(opt.shape), b, tuple(params))
            if geom.n_cells > space.layout.cubes_per_pod:
                return None
            got = fit_geometry(space, geom, policy)
            if got is None:
                continue
            pod, cubes, broken = got
            a = Assignment("blocks", opt.shape, pod, cubes, params, form=form)
            if policy == "first":
                return (g,), pod, (), a
            if broken == 0:
                return (0, g), pod, (), a
            if best is None or broken < best[0][0]:
                best = ((broken, g), pod, (), a)
    return best


# --- reshaped requests --------------------------------------------------------------------------

def _factor_shapes(n: int, dims: int) -> list[tuple[int, ...]]:
    """Every ordered way to write n as `dims` factors."""
    if dims == 1:
        return [(n,)]
    out = []
    for a in range(1, n + 1):
        if n % a == 0:
            out.extend((a, *rest) for rest in _factor_shapes(n // a, dims - 1))
    return out


_RESHAPES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # layout -> memo of _reshapes


def reshape_options(layout, req, fold: str = "none", rotate: bool = True, policy: str = "best") -> tuple:
    """The reshaped realisations of `req` on this layout, in the order the greedy tries them;
    none unless `fold` is `allowed` (and the request is a single untwisted slice). Under
    Hilbert allocation (`policy` hilbert, static pods) the one realisation is any free chips.
    Folds and splits depend on the layout and the request's shape only, so they are kept per
    layout (the scheduler asks again for every queued job at every pass)."""
    if fold not in FOLD_MODES:
        raise PodsimError(f"fold {fold!r} is not known; use one of {', '.join(FOLD_MODES)}")
    if policy == "hilbert":
        if layout.ocs:
            raise PodsimError("hilbert allocation is the baseline of statically wired pods; use --no-ocs (wiring: static)")
        if req.slices > 1:
            return ()
        if math.prod(req.shape) > layout.generation.pod_chips:
            return ()
        return (HilbertRequest(req),)
    if fold == "none" or req.twisted or req.slices > 1:
        return ()
    memo = _RESHAPES.setdefault(layout, {})
    key = (tuple(req.shape), rotate)
    if key not in memo:
        memo[key] = _reshapes(layout, tuple(req.shape), rotate)
    return memo[key]


def _reshapes(layout, shape: tuple[int, ...], rotate: bool) -> tuple:
    gen = layout.generation
    try:
        spec = asked_spec(gen, shape, False, layout.ocs)
    except PodsimError:
        return ()
    native = {o.shape for o in _native(layout, shape, rotate)}
    out: list[Reshape] = []
    folds = []
    for target in _factor_shapes(math.prod(spec.shape), len(spec.shape)):
        if target in native or target == spec.shape:
            continue
        opts = _native(layout, target, False)
        if not opts:
            continue
        f = find_fold(spec.shape, spec.wrap, target, opts[0].spec.wrap)
        if f is not None:
            folds.append((not f.identity, sum(1 for p in f.plan if p and isinstance(p[0], tuple)), target, f, opts))
    for *_, _target, f, opts in sorted(folds, key=lambda t: (t[0], t[1], t[2]))[:MAX_FOLD_TARGETS]:
        out.append(Reshape("fold", spec.shape, spec, tuple(opts), f))
    if layout.ocs and gen.cube_shape is not None:
        b = gen.cube_shape[0]
        shapes = dict.fromkeys(itertools.permutations(spec.shape)) if rotate else {spec.shape: None}
        for shp in shapes:
            if shp in native or any(s > p for s, p in zip(shp, gen.pod_shape, strict=True)):
                continue
            if gen.slice_rule == "torus" and "split" not in (axis_mode(s, b) for s in shp):
                continue  # a block slice is native there
            g = BlockGeometry(shp, b, geometry_params(shp, b)[0])
            if g.n_cells <= layout.cubes_per_pod:
                out.append(Reshape("split", shp, asked_spec(gen, shp, False, True)))
    return tuple(out)


def _native(layout, shape, rotate) -> list[Option]:
    """The native options of `shape` on the layout (kept per layout: folds probe every factor shape)."""
    memo = _RESHAPES.setdefault(layout, {})
    key = ("native", tuple(shape), rotate)
    if key not in memo:
        try:
            memo[key] = list(request_options(layout, SliceRequest("probe", shape), rotate))
        except PodsimError:
            memo[key] = []
    return memo[key]


def native_spec_ok(gen, shape, ocs) -> bool:
    try:
        validate_shape(gen, shape, False, ocs)
        return True
    except PodsimError:
        return False
