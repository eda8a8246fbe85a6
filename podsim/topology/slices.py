"""Slices: which chips a slice gets, the OCS circuits that make its torus, and its local view.

A slice's axis d is the physical dimension d of its chips' ICI ports; its chips are listed in
row-major order of slice coordinates, so `chips[i]` sits at `unravel_index(i, shape)`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from podsim.errors import PodsimError
from podsim.topology.circuits import Circuit, CircuitColumns, cube_circuit_columns
from podsim.topology.fabric import Fabric
from podsim.topology.pod import MINUS, PLUS, PodLayout, _row_major
from podsim.topology.shapes import SliceSpec, twist_vectors


@dataclass(frozen=True, eq=False)
class Slice:
    """A slice placed on a pod: its chips (slice row-major order), cubes and OCS circuits.

    `form` says how the slice realises the topology it asked for (`spec`): `native` (and `split`,
    whole blocks plus pieces, podsim.topology.blocks) keep slice axis d on physical dimension d;
    a `fold` lays the asked torus onto another box (podsim.topology.fold), so its links are found
    by which physical port reaches each logical neighbour; a `scatter` slice (a non-contiguous
    allocation) has no links of its own and is routed over the pod's torus."""

    spec: SliceSpec
    chips: np.ndarray
    pod: int = 0
    cubes: tuple[int, ...] = ()
    circuits: tuple[Circuit, ...] = ()
    origin: tuple[int, ...] | None = None
    form: str = "native"

    @property
    def shape(self) -> tuple[int, ...]:
        return self.spec.shape

    @property
    def twisted(self) -> bool:
        return self.spec.twisted

    @property
    def wrap(self) -> tuple[bool, ...]:
        return self.spec.wrap

    @property
    def n_chips(self) -> int:
        return len(self.chips)

    @cached_property
    def twist(self) -> np.ndarray:
        """(dims, dims) shift added to the other coordinates when crossing axis d's wraparound."""
        if not self.twisted:
            return np.zeros((len(self.shape),) * 2, np.int64)
        return np.array(twist_vectors(self.shape), np.int64)


@functools.lru_cache(maxsize=1024)
def _slice_coords(shape: tuple[int, ...]) -> np.ndarray:
    """`_row_major(shape)`, read-only and kept (a scheduler plans the same shapes again and again)."""
    out = _row_major(shape)
    out.setflags(write=False)
    return out


@functools.lru_cache(maxsize=1024)
def _cube_chip_order(shape: tuple[int, ...], cube_shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """For a cube-level slice's chips in row-major slice order: the position of each chip's cube
    in the slice's cube list, and the chip's index inside its cube."""
    local = _row_major(shape)
    cube = np.array(cube_shape)
    grid = tuple(int(v) for v in np.array(shape) // cube)
    out = (np.ravel_multi_index(tuple((local // cube).T), grid), np.ravel_multi_index(tuple((local % cube).T), cube_shape))
    for arr in out:
        arr.setflags(write=False)
    return out


def plan_slice(layout: PodLayout, spec: SliceSpec, cubes: Sequence[int] | None = None,
               origin: Sequence[int] | None = None, pod: int = 0, lazy_circuits: bool = False) -> Slice:
    """Place `spec` on the given cubes (OCS pods) or at `origin` (static pods, sub-cube slices).

    Defaults put the slice on the first cubes of the pod / at the origin. Checks that the cubes
    exist, are distinct and in one pod; the circuits come from `cube_circuits` (`lazy_circuits`:
    a cube-level slice's as `CircuitColumns`, made into Circuits when first read).
    """
    gen = layout.generation
    shape = spec.shape
    local = _slice_coords(tuple(shape))
    if not 0 <= pod < layout.pods:
        raise PodsimError(f"pod {pod} does not exist; the fabric has {layout.pods} pod(s)")
    pod_base = pod * layout.chips_per_pod
    if spec.kind == "gpu":
        start = int(origin[0]) if origin is not None else 0
        per_node = layout.chips_per_host
        n = len(local)
        if start < 0 or start + n > layout.chips_per_pod or (n >= per_node and start % per_node) or (n < per_node and start // per_node != (start + n - 1) // per_node):
            raise PodsimError(f"a {n}-GPU slice cannot start at GPU {start}: slices take whole nodes or fit inside one")
        return Slice(spec, pod_base + start + np.arange(n, dtype=np.int32), pod, origin=(start,))
    if spec.kind == "cubes" and layout.ocs:
        cube_shape = np.array(gen.cube_shape)
        grid = tuple(int(v) for v in np.array(shape) // cube_shape)
        need = math.prod(grid)
        if cubes is None:
            cubes = list(range(pod * layout.cubes_per_pod, pod * layout.cubes_per_pod + need))
        cubes = [int(c) for c in cubes]
        if len(cubes) != need:
            raise PodsimError(f"slice {spec} needs {need} cubes, got {len(cubes)}")
        if len(set(cubes)) != need:
            raise PodsimError(f"slice {spec}: a cube is listed twice in {cubes}")
        bad = [c for c in cubes if not (pod * layout.cubes_per_pod <= c < (pod + 1) * layout.cubes_per_pod)]
        if bad:
            raise PodsimError(f"cube {bad[0]} is not in pod {pod} (cubes {pod * layout.cubes_per_pod}..{(pod + 1) * layout.cubes_per_pod - 1})")
        cube_idx, in_cube = _cube_chip_order(tuple(shape), tuple(gen.cube_shape))
        chips = layout.cube_chips[np.array(cubes)[cube_idx], in_cube]
        columns = cube_circuit_columns(layout, grid, cubes, spec.twisted)
        circuits = CircuitColumns(*columns) if lazy_circuits else tuple(Circuit.from_columns(*(c.tolist() for c in columns)))
        return Slice(spec, chips.astype(np.int32), pod, tuple(cubes), circuits)
    if spec.kind == "blocks":
        from podsim.topology.blocks import BlockGeometry, block_chips_and_circuits

        geom = BlockGeometry(shape, gen.cube_shape[0], tuple(int(v) for v in (origin or (0,) * len(shape))))
        cubes = [int(c) for c in (cubes if cubes is not None else range(pod * layout.cubes_per_pod, pod * layout.cubes_per_pod + geom.n_cells))]
        bad = [c for c in cubes if not (pod * layout.cubes_per_pod <= c < (pod + 1) * layout.cubes_per_pod)]
        if bad or len(set(cubes)) != len(cubes):
            raise PodsimError(f"slice {spec}: blocks {cubes} must be distinct blocks of pod {pod}")
        chips, circuits = block_chips_and_circuits(layout, geom, cubes)
        return Slice(spec, chips, pod, tuple(cubes), tuple(circuits), geom.params, "split" if geom.split else "native")
    if spec.kind == "subcube":
        cube = int(cubes[0]) if cubes else pod * layout.cubes_per_pod
        org = np.array(origin if origin is not None else (0,) * 3)
        cube_shape = np.array(gen.cube_shape)
        if (org < 0).any() or (org + np.array(shape) > cube_shape).any():
            raise PodsimError(f"sub-cube slice {spec} at {tuple(org)} does not fit inside a {gen.cube_shape} cube")
        if not 0 <= cube < layout.n_cubes:
            raise PodsimError(f"cube {cube} does not exist (0..{layout.n_cubes - 1})")
        in_cube = np.ravel_multi_index(tuple((org + local).T), tuple(cube_shape))
        return Slice(spec, layout.cube_chips[cube, in_cube].astype(np.int32), int(layout.pod_of_cube[cube]), (cube,), origin=tuple(int(v) for v in org))
    # Rectangles on static pods, and whole-cube boxes on a statically wired OCS generation.
    org = np.array(origin if origin is not None else (0,) * len(shape))
    pod_shape = np.array(gen.pod_shape)
    if len(org) != len(shape) or (org < 0).any() or (org >= pod_shape).any():
        raise PodsimError(f"origin {tuple(org)} is outside the {gen.pod_shape} pod")
    if spec.kind == "cubes" and (org % np.array(gen.cube_shape)).any():
        raise PodsimError(f"origin {tuple(org)} is not on a cube boundary (multiples of {gen.cube_shape})")
    coords = (org + local) % pod_shape
    chips = layout.chip_at[(np.full(len(coords), pod), *coords.T)]
    cubes_used = tuple(int(c) for c in dict.fromkeys(layout.cube_of_chip[chips])) if layout.has_cubes else ()
    return Slice(spec, chips.astype(np.int32), pod, cubes_used, origin=tuple(int(v) for v in org))


@dataclass(frozen=True, eq=False)
class SliceView:
    """A slice seen inside a wired fabric: its chips' ICI ports in slice-local indices."""

    fabric: Fabric
    slice: Slice
    coords: np.ndarray  # (N, dims) slice coordinates
    port_link: np.ndarray  # (N, dims, 2) fabric link ids; -1 where the port leaves the slice or is dark
    port_peer: np.ndarray  # (N, dims, 2) slice-local index of the peer, -1 likewise

    @property
    def chips(self) -> np.ndarray:
        return self.slice.chips

    @property
    def shape(self) -> tuple[int, ...]:
        return self.slice.shape

    @property
    def n(self) -> int:
        return len(self.slice.chips)


def slice_view(fabric: Fabric, slc: Slice) -> SliceView:
    """Restrict the fabric's ICI ports to the slice; peers become slice-local indices. A folded
    slice's logical port (d, sign) is the physical port that reaches its logical neighbour there
    (`_logical_ports`)."""
    local = np.full(fabric.n_chips, -1, np.int32)
    local[slc.chips] = np.arange(slc.n_chips, dtype=np.int32)
    if slc.form == "fold":
        return _logical_ports(fabric, slc, local)
    if slc.form == "scatter":  # no links of its own; routed over the pod (routing.slice_routes)
        none = np.full((slc.n_chips, len(slc.shape), 2), -1, np.int32)
        return SliceView(fabric, slc, _row_major(slc.shape), none, none.copy())
    peer_global = fabric.port_peer[slc.chips]
    peer = np.where(peer_global >= 0, local[np.maximum(peer_global, 0)], -1)
    link = np.where(peer >= 0, fabric.port_link[slc.chips], -1)
    coords = _row_major(slc.shape)
    return SliceView(fabric, slc, coords, link.astype(np.int32), peer.astype(np.int32))


def _logical_ports(fabric: Fabric, slc: Slice, local: np.ndarray) -> SliceView:
    """The view of a folded slice: for each chip and logical (axis, sign), the physical port
    whose peer is the logical neighbour the asked topology names (-1 where none is). Each
    physical port serves one logical port while an unused one reaches the neighbour (a size-2
    ring's two logical ports take both cables where there are two), else it is shared."""
    want = expected_peers(slc)  # (N, dims, 2) slice-local
    n, dims = want.shape[:2]
    phys_peer = fabric.port_peer[slc.chips]  # (N, pdims, 2) global chip ids
    phys_link = fabric.port_link[slc.chips]
    peer_local = np.where(phys_peer >= 0, local[np.maximum(phys_peer, 0)], -1).reshape(n, -1)
    links = phys_link.reshape(n, -1)
    used = np.zeros(peer_local.shape, bool)
    link = np.full((n, dims, 2), -1, np.int64)
    peer = np.full((n, dims, 2), -1, np.int64)
    rows = np.arange(n)
    for d in range(dims):
        for sgn in (PLUS, MINUS):
            w = want[:, d, sgn]
            hit = (peer_local == w[:, None]) & (w[:, None] >= 0)
            free = hit & ~used
            k = np.where(free.any(1), free.argmax(1), hit.argmax(1))
            ok = hit[rows, k]
            link[ok, d, sgn] = links[rows[ok], k[ok]]
            peer[ok, d, sgn] = w[ok]
            used[rows[ok], k[ok]] = True
    coords = _row_major(slc.shape)
    return SliceView(fabric, slc, coords, link.astype(np.int32), peer.astype(np.int32))


def expected_peers(slc: Slice) -> np.ndarray:
    """(N, dims, 2) slice-local neighbours the requested topology should have (-1: none)."""
    shape = np.array(slc.shape)
    coords = _row_major(slc.shape).astype(np.int64)
    n, dims = coords.shape
    out = np.full((n, dims, 2), -1, np.int64)
    twist = slc.twist
    for d in range(dims):
        if shape[d] == 1:
            continue
        for sign, step in ((PLUS, 1), (MINUS, -1)):
            nxt = coords.copy()
            nxt[:, d] += step
            crossed = (nxt[:, d] < 0) | (nxt[:, d] >= shape[d])
            ok = ~crossed | slc.wrap[d]
            nxt[:, d] %= shape[d]
            nxt[crossed] = (nxt[crossed] + step * twist[d]) % shape
            out[ok, d, sign] = np.ravel_multi_index(tuple(nxt[ok].T), tuple(shape))
    return out


def check_slice_topology(view: SliceView) -> None:
    """Raise unless the slice's live ICI links form exactly the topology it asked for (a
    scattered slice asks for none of its own: its flows go over the pod's torus)."""
    if view.slice.spec.kind == "gpu" or view.slice.form == "scatter":
        return
    want = expected_peers(view.slice)
    got = view.port_peer
    if not np.array_equal(want, got):
        i, d, s = (int(v[0]) for v in np.nonzero(want != got))
        coord = tuple(int(v) for v in view.coords[i])
        raise PodsimError(
            f"slice {view.slice.spec} is not wired as a {view.slice.spec.topology}: chip at {coord}, "
            f"dim {d}{'+-'[s]} reaches {int(got[i, d, s])}, expected {int(want[i, d, s])}"
        )
