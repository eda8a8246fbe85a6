"""Slice shapes: parse `4x4x8` / `8x16` / `64` and check them against a generation's rules.

Rules (shared/data/tpu/tpu_slice_shapes.json, [ISCA23] §2.5, §2.9):
- OCS pods (v4, v5p, 7x): whole-cube slices (each dim a multiple of 4) are full 3-D tori;
  sub-cube slices (each dim 1, 2 or 4, fewer than 64 chips) are meshes; twistable shapes are
  k x k x 2k and k x 2k x 2k. Without OCS (a static v4 baseline) a slice has wraparound only
  on an axis that spans the whole pod.
- Static 2-D pods (v2, v3, v5e, v6e): rectangles, wraparound only on a full-length axis (and
  not on an axis the pod's wiring leaves open: the v3 multipod's long axis).
- GPU clusters: a GPU count (1, 2, 4, 8 or whole 8-GPU nodes).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

from podsim.errors import PodsimError
from podsim.quantities import MAX_FLEET_CHIPS
from podsim.topology.generations import Generation

SliceKind = Literal["cubes", "subcube", "rectangle", "gpu", "blocks"]


@dataclass(frozen=True)
class SliceSpec:
    """A validated slice request: the shape, its kind and the topology it will have."""

    generation: str
    shape: tuple[int, ...]
    twisted: bool
    kind: SliceKind
    wrap: tuple[bool, ...]

    @property
    def chips(self) -> int:
        return math.prod(self.shape)

    @property
    def topology(self) -> str:
        """'torus', 'twisted torus', 'mesh', 'partial torus' or 'switched'."""
        if self.kind == "gpu":
            return "switched"
        if self.twisted:
            return "twisted torus"
        live = [w for w, n in zip(self.wrap, self.shape, strict=True) if n > 1]
        if live and all(live):
            return "torus"
        return "partial torus" if any(live) else "mesh"

    def __str__(self) -> str:
        return slice_name(self.shape, self.twisted)


def parse_shape(text: str | tuple[int, ...] | list[int], dims: int | None = None) -> tuple[int, ...]:
    """'4x4x8' -> (4, 4, 8). A one-line error names the text and the expected form."""
    if isinstance(text, (tuple, list)):
        shape = tuple(int(v) for v in text)
    else:
        t = str(text).strip().lower()
        if not re.fullmatch(r"[0-9]+(x[0-9]+)*", t):
            raise PodsimError(f"slice shape {text!r} is not of the form AxBxC, AxB or N (e.g. 4x4x8, 8x16, 64)")
        shape = tuple(int(v) for v in t.split("x"))
    if any(v < 1 for v in shape):
        raise PodsimError(f"slice shape {text!r} has a zero dimension; every dimension must be >= 1")
    if math.prod(shape) > MAX_FLEET_CHIPS:  # no pod times pods is larger (podsim.quantities)
        raise PodsimError(f"slice shape {text!r} has {math.prod(shape):,} chips; podsim models at most "
                          f"{MAX_FLEET_CHIPS:,} (the largest pod times the most pods)")
    if dims is not None and len(shape) != dims:
        form = {1: "N", 2: "AxB", 3: "AxBxC"}[dims]
        raise PodsimError(f"slice shape {text!r} has {len(shape)} dimension(s); this generation needs {form}")
    return shape


def format_shape(shape: tuple[int, ...]) -> str:
    return "x".join(str(v) for v in shape)


def slice_name(shape: tuple[int, ...], twisted: bool = False) -> str:
    """'4x4x8_T' for a twisted slice, '4x4x8' otherwise (the v4 paper's Table 2 notation)."""
    return format_shape(shape) + ("_T" if twisted else "")


def split_slice_name(text: str) -> tuple[str, bool | None]:
    """'4x4x8_T' -> ('4x4x8', True), '4x4x8_NT' -> ('4x4x8', False), '4x4x8' -> ('4x4x8', None): the
    v4 paper's Table 2 suffix read once, for every reader of the notation (suffix in any case)."""
    base, _, tag = str(text).partition("_")
    tag = tag.upper()
    if tag not in ("", "T", "NT"):
        raise PodsimError(f"{text!r}: a shape may end in _T (twisted) or _NT, nothing else")
    return base, (tag == "T") if tag else None


def is_twistable(shape: tuple[int, ...]) -> bool:
    """k x k x 2k or k x 2k x 2k with k >= 4 ([ISCA23] §2.9), in this order."""
    if len(shape) != 3:
        return False
    a, b, c = shape
    return a >= 4 and a % 4 == 0 and ((2 * a == 2 * b == c) or (2 * a == b == c))


def twist_vectors(shape: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """Per axis, how far crossing that axis's wraparound (in the + direction) shifts the others.

    Camarero, Martinez, Beivide, IEEE TPDS 2015; the forms used by TPU v4 ([ISCA23] §2.8):
    k x k x 2k: the x and y wraparounds also advance z by k; k x 2k x 2k: the x wraparound
    also advances y and z by k.
    """
    a, b, c = shape
    if 2 * a == 2 * b == c:
        return ((0, 0, a), (0, 0, a), (0, 0, 0))
    if 2 * a == b == c:
        return ((0, a, a), (0, 0, 0), (0, 0, 0))
    raise PodsimError(f"shape {format_shape(shape)} is not twistable; twisted tori are k x k x 2k or k x 2k x 2k")


def validate_shape(gen: Generation, shape: str | tuple[int, ...], twisted: bool = False, ocs: bool = True) -> SliceSpec:
    """Check `shape` against the generation's rules and say which topology it gets.

    `ocs=False` models an OCS generation wired statically (the cubes fixed in the home
    arrangement), as the v4 paper's no-OCS baseline.
    """
    shp = parse_shape(shape, gen.dims)
    name = format_shape(shp)
    if twisted and not gen.twistable:
        raise PodsimError(f"{gen.id} has no twisted tori (no OCS); drop --twisted")
    rule = gen.slice_rule
    if rule == "cubes":
        return _validate_cubes(gen, shp, name, twisted, ocs)
    if rule == "torus":
        return _validate_torus(gen, shp, name, twisted, ocs)
    if twisted:
        raise PodsimError(f"{gen.id} slices cannot be twisted")
    if rule == "gpu_nodes":
        (n,) = shp
        per_node = int(gen.chips_per_host.value)
        if n > gen.pod_chips or (n > per_node and n % per_node) or (n < per_node and per_node % n):
            raise PodsimError(f"slice {name} on {gen.id}: use 1, 2, 4, 8 or a multiple of {per_node} GPUs up to {gen.pod_chips}")
        return SliceSpec(gen.id, shp, False, "gpu", (False,))
    if rule == "listed":
        allowed = set(gen.slice_shapes)
        if name not in allowed and format_shape(shp[::-1]) not in allowed:
            raise PodsimError(f"slice {name} is not a {gen.id} shape; allowed: {', '.join(gen.slice_shapes)}" if gen.slice_shapes else
                              f"slice {name}: {gen.id} has no slice shapes (its network is one slice, not one of several)")
    elif rule == "pow2_rectangle":
        pow2 = all(v >= 2 and v & (v - 1) == 0 for v in shp)
        if not pow2 or max(shp) > 2 * min(shp):
            raise PodsimError(f"slice {name} on {gen.id}: use AxB with A, B powers of two >= 2 and the longer side at most twice the shorter (2x2, 4x8, 16x32, ...)")
    if any(s > p for s, p in zip(shp, gen.pod_shape, strict=True)):
        raise PodsimError(f"slice {name} does not fit the {format_shape(gen.pod_shape)} pod of {gen.id}")
    return SliceSpec(gen.id, shp, False, "rectangle", full_axis_wrap(gen, shp))


def _validate_torus(gen: Generation, shp: tuple[int, ...], name: str, twisted: bool, ocs: bool) -> SliceSpec:
    """A generic torus pod (podsim.topology.torus): any shape that fits. With OCS a side that is
    a multiple of the block wraps, any other is a mesh line (inside a block, or, longer than a
    block, split into blocks plus a piece: placement does that only with `fold: allowed`); without
    OCS a box anywhere in the home torus, wrapping only on a full pod axis."""
    if twisted:
        raise PodsimError(f"{gen.id} has no twisted tori; drop twisted")
    if any(s > p for s, p in zip(shp, gen.pod_shape, strict=True)):
        raise PodsimError(f"slice {name} does not fit the {format_shape(gen.pod_shape)} pod of {gen.id}")
    b = gen.cube_shape[0]
    if not ocs:
        return SliceSpec(gen.id, shp, False, "rectangle", full_axis_wrap(gen, shp))
    if all(s % b == 0 for s in shp):
        return SliceSpec(gen.id, shp, False, "cubes", (True,) * 3)
    if all(s < b for s in shp):
        return SliceSpec(gen.id, shp, False, "subcube", (False,) * 3)
    return SliceSpec(gen.id, shp, False, "blocks", tuple(s % b == 0 for s in shp))


def split_sides(gen: Generation, shape: tuple[int, ...]) -> list[int]:
    """Sides of `shape` longer than a block but not whole blocks: a generic torus places such a
    shape only split into blocks plus pieces (`fold: allowed`)."""
    b = gen.cube_shape[0]
    return [s for s in shape if s > b and s % b]


def _validate_cubes(gen: Generation, shp: tuple[int, ...], name: str, twisted: bool, ocs: bool) -> SliceSpec:
    cube = gen.cube_shape
    assert cube is not None
    if all(v in (1, 2, 4) for v in shp) and math.prod(shp) < math.prod(cube):
        if twisted:
            raise PodsimError(f"slice {name} is smaller than a cube: sub-cube slices are meshes and cannot be twisted")
        return SliceSpec(gen.id, shp, False, "subcube", (False,) * 3)
    if any(v % c for v, c in zip(shp, cube, strict=True)):
        raise PodsimError(
            f"slice {name} on {gen.id}: each dimension must be 1, 2 or 4 (a sub-cube slice) "
            f"or a multiple of 4 (whole {format_shape(cube)} cubes)"
        )
    if gen.nondecreasing_shapes and list(shp) != sorted(shp):
        raise PodsimError(f"slice {name} on {gen.id}: dimensions must be non-decreasing (A<=B<=C), e.g. {format_shape(tuple(sorted(shp)))}")
    cubes = math.prod(shp) // math.prod(cube)
    max_cubes = int(gen.max_slice_cubes.value) if gen.max_slice_cubes else math.prod(gen.cube_grid)
    if cubes > max_cubes:
        raise PodsimError(f"slice {name} needs {cubes} cubes; the largest {gen.id} slice has {max_cubes}")
    if twisted and not is_twistable(shp):
        raise PodsimError(f"slice {name} cannot be twisted; twistable shapes are k x k x 2k and k x 2k x 2k with k a multiple of 4 (e.g. 4x4x8, 4x8x8)")
    if not ocs:
        if twisted:
            raise PodsimError("a twisted torus needs OCS; drop --twisted or use OCS wiring")
        if any(s > p for s, p in zip(shp, gen.pod_shape, strict=True)):
            raise PodsimError(f"slice {name} does not fit the statically wired {format_shape(gen.pod_shape)} pod")
        return SliceSpec(gen.id, shp, False, "cubes", full_axis_wrap(gen, shp))
    return SliceSpec(gen.id, shp, twisted, "cubes", (True,) * 3)


def full_axis_wrap(gen: Generation, shp: tuple[int, ...]) -> tuple[bool, ...]:
    """Per axis of a slice on a statically wired pod, whether it wraps: it spans the whole pod
    along that axis and the pod's wiring closes the axis (`Generation.axis_wraps`)."""
    return tuple(s == p and gen.axis_wraps_at(d) for d, (s, p) in enumerate(zip(shp, gen.pod_shape, strict=True)))


def asked_spec(gen: Generation, shape: str | tuple[int, ...], twisted: bool = False, ocs: bool = True) -> SliceSpec:
    """The topology a request asks for, also where the generation cannot place it natively (a
    reshaped request, `fold: allowed`): the generation's own spec when the shape is valid there,
    else the generic torus rule - an axis that is a multiple of the cube side wraps, any other is
    a mesh line (pods without cubes: an axis wraps only across the whole pod)."""
    try:
        return validate_shape(gen, shape, twisted, ocs)
    except PodsimError:
        if twisted:
            raise
    shp = parse_shape(shape, gen.dims)
    if any(s > p for s, p in zip(shp, gen.pod_shape, strict=True)) and math.prod(shp) > gen.pod_chips:
        raise PodsimError(f"slice {format_shape(shp)} has more chips than a {gen.id} pod")
    if gen.cube_shape is not None:
        b = gen.cube_shape[0]
        return SliceSpec(gen.id, shp, False, "blocks", tuple(s % b == 0 for s in shp))
    return SliceSpec(gen.id, shp, False, "rectangle", full_axis_wrap(gen, shp))
