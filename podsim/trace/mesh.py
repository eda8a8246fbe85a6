"""Parallelism plans and their mapping onto the physical axes of a slice.

A plan gives the size of each logical mesh axis: `data`, `fsdp` (ZeRO-3), `pipeline`,
`tensor` (Megatron) and `expert`, whose product is the slice's chip count, plus `dcn`: data
parallelism across the slices of a multislice job.

The mapping reproduces jax's `mesh_utils.create_device_mesh` (jax/_src/mesh_utils.py,
checked against jax 0.10.2), so the groups are those a jax job on that slice would get: logical
axes are placed from the most to the least communication-heavy; each first tries to take whole
physical axes (any subset of still free axes whose sizes multiply to the logical size, larger
subsets first, for more links); if some axis cannot be placed that way, all are placed again
allowing a physical axis to be split into factors (`allow_split_physical_axes`), preferring
candidates that cover whole physical axes, then more of them, then (as jax's code compares,
although its comment says the opposite) a larger product on axes a heavier logical axis already
uses, then the lexically larger factor vector. Within a split physical axis the heavier logical
axis gets the minor (contiguous, stride 1) factor, as in jax's `_generate_logical_mesh`, so its
group is `x:SIZE` and the lighter one's `x:SIZE:STRIDE`. One constraint is podsim's: the
pipeline axis must lie on one physical axis (a SendRecv shifts along one axis).

"Communication-heavy" is measured: the generator counts the bytes each chip moves on each
logical axis per step (nccl bus-bandwidth factors) and ranks by that, ties broken by MaxText's
order (expert, tensor, fsdp, pipeline, data). Both the order and the whole mapping can be
given instead.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields

from podsim.errors import PodsimError
from podsim.trace.model import DCN_AXIS, SLICE_AXES, AxisGroup, parse_group

LOGICAL_AXES = ("data", "fsdp", "pipeline", "tensor", "expert")
# Most communication-heavy first when measured volumes tie (MaxText lists them the other way).
DEFAULT_INTENSITY = ("expert", "tensor", "fsdp", "pipeline", "data")
ALIASES = {
    "dp": "data", "data": "data",
    "fsdp": "fsdp", "zero3": "fsdp", "zero": "fsdp",
    "pp": "pipeline", "pipeline": "pipeline", "stage": "pipeline",
    "tp": "tensor", "tensor": "tensor", "model": "tensor", "mp": "tensor",
    "ep": "expert", "expert": "expert",
    "dcn": "dcn", "slices": "dcn",
}


@dataclass(frozen=True)
class ParallelPlan:
    """Sizes of the logical mesh axes; `dcn` is data parallelism across slices."""

    data: int = 1
    fsdp: int = 1
    pipeline: int = 1
    tensor: int = 1
    expert: int = 1
    dcn: int = 1

    @property
    def ici_chips(self) -> int:
        return self.data * self.fsdp * self.pipeline * self.tensor * self.expert

    @property
    def batch_shards(self) -> int:
        """Ways the global batch is split: data, fsdp, expert and dcn all hold distinct data."""
        return self.data * self.fsdp * self.expert * self.dcn

    def sizes(self) -> dict[str, int]:
        return {a: getattr(self, a) for a in LOGICAL_AXES}

    def __str__(self) -> str:
        parts = [f"{f.name}={getattr(self, f.name)}" for f in fields(self) if getattr(self, f.name) != 1]
        return ",".join(parts) or "data=1"


def parse_parallelism(text: str | Mapping[str, int] | ParallelPlan) -> ParallelPlan:
    """'data=8,tensor=16' (aliases dp, tp, pp, ep, zero3, dcn) -> ParallelPlan."""
    if isinstance(text, ParallelPlan):
        return text
    if isinstance(text, Mapping):
        items = list(text.items())
    else:
        parts = re.split(r"\s*,\s*|\s+", str(text).strip())
        if str(text).strip() and any(not p for p in parts):
            raise PodsimError(f"parallelism {str(text)!r} has an empty entry (a stray comma?); give e.g. 'data=8,tensor=16'")
        items = [p.partition("=")[::2] for p in parts if p]
    sizes: dict[str, int] = {}
    for key, value in items:
        axis = ALIASES.get(str(key).strip().lower())
        if axis is None:
            raise PodsimError(f"parallelism axis {key!r} is not known; use data, fsdp, pipeline, tensor, expert, dcn (e.g. 'data=8,tensor=16')")
        try:
            n = int(str(value).strip())
        except ValueError:
            raise PodsimError(f"parallelism {key}={value!r}: the size must be a whole number >= 1") from None
        if n < 1:
            raise PodsimError(f"parallelism {key}={n}: the size must be >= 1")
        if axis in sizes:
            raise PodsimError(f"parallelism names {axis} twice")
        sizes[axis] = n
    if not sizes:
        raise PodsimError("parallelism is empty; give e.g. 'data=8,tensor=16'")
    return ParallelPlan(**sizes)


def physical_axes(shape: Sequence[int]) -> tuple[str, ...]:
    if len(shape) > len(SLICE_AXES):
        raise PodsimError(f"slice shape {shape} has more than {len(SLICE_AXES)} axes")
    return SLICE_AXES[: len(shape)]


@dataclass(frozen=True)
class MeshMapping:
    """Each logical axis's group of physical axis blocks (empty for size-1 axes)."""

    groups: dict[str, tuple[AxisGroup, ...]]
    order: tuple[str, ...]  # logical axes, most communication-heavy first
    split: bool  # a physical axis is shared by two logical axes

    def describe(self) -> dict[str, str]:
        return {a: ",".join(str(g) for g in grp) for a, grp in self.groups.items() if grp}


def _prime_factors(n: int) -> list[int]:
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out + ([n] if n > 1 else [])


def _whole_axes_pass(shape: Sequence[int], order: Sequence[str], sizes: Mapping[str, int], single_axis: set[str]) -> dict[str, list[int]] | None:
    """jax's first pass: each logical axis takes a subset of whole, still free physical axes."""
    free = list(shape)
    out: dict[str, list[int]] = {}
    for axis in order:
        n = sizes[axis]
        vec = [1] * len(shape)
        if n > 1:
            found = None
            for k in range(len(shape), 0, -1):
                if axis in single_axis and k > 1:
                    continue
                for combo in itertools.combinations(range(len(shape)), k):
                    if all(free[i] > 1 for i in combo) and math.prod(free[i] for i in combo) == n:
                        found = combo
                        break
                if found:
                    break
            if found is None:
                return None
            for i in found:
                vec[i], free[i] = shape[i], 1
        out[axis] = vec
    return out


def _candidates(n: int, room: Sequence[int], single: bool) -> list[tuple[int, ...]]:
    """Every way to spread n's prime factors over physical axes without exceeding `room`."""
    counts: dict[int, int] = {}
    for p in _prime_factors(n):
        counts[p] = counts.get(p, 0) + 1
    per_prime: list[list[tuple[int, ...]]] = []
    for p, k in counts.items():
        options = []
        for combo in itertools.combinations_with_replacement(range(len(room)), k):
            vec = [1] * len(room)
            for i in combo:
                vec[i] *= p
            options.append(tuple(vec))
        per_prime.append(options)
    out = set()
    for parts in itertools.product(*per_prime) if per_prime else [()]:
        vec = [1] * len(room)
        for part in parts:
            vec = [a * b for a, b in zip(vec, part, strict=True)]
        if all(r % v == 0 for v, r in zip(vec, room, strict=True)) and (not single or sum(v > 1 for v in vec) <= 1):
            out.add(tuple(vec))
    return sorted(out)


def _split_pass(shape: Sequence[int], order: Sequence[str], sizes: Mapping[str, int], single_axis: set[str]) -> dict[str, list[int]] | None:
    """jax's splitting pass with its preference order."""
    used = [1] * len(shape)
    out: dict[str, list[int]] = {}
    for axis in order:
        room = [s // u for s, u in zip(shape, used, strict=True)]
        cands = _candidates(sizes[axis], room, axis in single_axis)
        if not cands:
            return None

        def score(v: tuple[int, ...], used=tuple(used)) -> tuple:
            whole = [i for i, x in enumerate(v) if x == shape[i]]
            whole_size = math.prod(v[i] for i in whole)
            whole_count = sum(1 for i in whole if v[i] > 1)
            overlap = math.prod(x for i, x in enumerate(v) if used[i] > 1)
            return (whole_size, whole_count, overlap, v)

        best = max(cands, key=score)
        out[axis] = list(best)
        used = [u * b for u, b in zip(used, best, strict=True)]
    return out


def map_mesh(
    shape: Sequence[int],
    plan: ParallelPlan,
    order: Sequence[str] = DEFAULT_INTENSITY,
    *,
    explicit: Mapping[str, str] | None = None,
) -> MeshMapping:
    """Place the plan's logical axes on the slice's physical axes (see the module docstring).

    `order`: logical axes from most to least communication-heavy. `explicit`: a full mapping
    {'tensor': 'z', 'data': 'x,y'} checked for consistency instead of searched.
    """
    shape = tuple(int(s) for s in shape)
    axes = physical_axes(shape)
    sizes = plan.sizes()
    if plan.ici_chips != math.prod(shape):
        raise PodsimError(
            f"parallelism {plan} uses {plan.ici_chips} chips per slice but the slice "
            f"{'x'.join(map(str, shape))} has {math.prod(shape)}; the sizes other than dcn must multiply to the slice's chips"
        )
    given = tuple(order)
    bad = [a for a in given if a not in LOGICAL_AXES]
    if bad:
        raise PodsimError(f"mesh order names {bad[0]!r}; logical axes are {', '.join(LOGICAL_AXES)}")
    repeated = next((a for i, a in enumerate(given) if a in given[:i]), None)
    if repeated is not None:
        raise PodsimError(f"mesh order {','.join(given)} names {repeated!r} twice; name each logical axis at most once, "
                          f"heaviest first (logical axes: {', '.join(LOGICAL_AXES)})")
    order = given + tuple(a for a in DEFAULT_INTENSITY if a not in given)
    if explicit:
        return _check_explicit(shape, axes, sizes, explicit, order)
    single = {"pipeline"}  # a pipeline shift runs along one physical axis
    vectors = _whole_axes_pass(shape, order, sizes, single)
    split = vectors is None
    if split:
        vectors = _split_pass(shape, order, sizes, single)
    if vectors is None:
        raise PodsimError(f"parallelism {plan} cannot be laid on slice {'x'.join(map(str, shape))} (a pipeline axis must fit on one physical axis)")
    groups: dict[str, tuple[AxisGroup, ...]] = {}
    stride = [1] * len(shape)
    for axis in order:  # heavier axes first: they take the minor (stride-1) factor
        vec = vectors[axis]
        grp = []
        for i, v in enumerate(vec):
            if v > 1:
                grp.append(AxisGroup(axes[i]) if v == shape[i] else AxisGroup(axes[i], v, stride[i]))
                stride[i] *= v
        groups[axis] = tuple(grp)
    return MeshMapping(groups, order, split)


def _check_explicit(shape, axes, sizes, explicit: Mapping[str, str], order) -> MeshMapping:
    groups: dict[str, tuple[AxisGroup, ...]] = {a: () for a in LOGICAL_AXES}
    for key, text in explicit.items():
        axis = ALIASES.get(key.strip().lower())
        if axis not in LOGICAL_AXES:
            raise PodsimError(f"mesh mapping names {key!r}; logical axes are {', '.join(LOGICAL_AXES)}")
        grp = parse_group(text)
        for g in grp:
            if g.axis not in axes:
                raise PodsimError(f"mesh mapping {axis}={text}: group axis {g.axis!r} is not an axis of this slice ({', '.join(axes)})")
        groups[axis] = grp
    missing = [a for a in LOGICAL_AXES if sizes[a] > 1 and not groups[a]]
    if missing:
        raise PodsimError(f"mesh mapping gives no group for {missing[0]} (size {sizes[missing[0]]}); map every axis larger than 1")
    blocks: dict[int, list[tuple[int, int, str]]] = {i: [] for i in range(len(shape))}
    for a, grp in groups.items():
        n = 1
        for g in grp:
            i = axes.index(g.axis)
            size = shape[i] if g.size is None else g.size
            blocks[i].append((g.stride, size, a))
            n *= size
        if grp and n != sizes[a]:
            raise PodsimError(f"mesh mapping {a}={','.join(map(str, grp))} spans {n} chips but {a}={sizes[a]}")
    for i, items in blocks.items():
        expect = 1
        for stride, size, a in sorted(items):
            if stride != expect:
                raise PodsimError(f"mesh mapping on axis {axes[i]}: {a}'s block (stride {stride}) does not tile the axis; strides must be 1, then the product of the smaller blocks")
            expect *= size
        if expect != shape[i]:
            raise PodsimError(f"mesh mapping covers {expect} of the {shape[i]} chips along {axes[i]}; every chip must be in exactly one block per axis")
    return MeshMapping(groups, tuple(order), any(len(v) > 1 for v in blocks.values()))


def merge_groups(parts: Sequence[Sequence[AxisGroup]], shape: Sequence[int]) -> tuple[AxisGroup, ...] | None:
    """The union of several logical axes' groups as one group, or None when two blocks on one
    physical axis are not adjacent factors (e.g. x:2 and x:2:4 with a third axis between)."""
    axes = physical_axes(shape)
    by_axis: dict[str, list[AxisGroup]] = {}
    extra: list[AxisGroup] = []
    for grp in parts:
        for g in grp:
            if g.axis == DCN_AXIS:
                extra.append(g)
            else:
                by_axis.setdefault(g.axis, []).append(g)
    out: list[AxisGroup] = []
    for axis, blocks in by_axis.items():
        n = shape[axes.index(axis)]
        spans = sorted((g.stride, n if g.size is None else g.size) for g in blocks)
        stride0, total = spans[0][0], 1
        expect = stride0
        for stride, size in spans:
            if stride != expect:
                return None
            expect *= size
            total *= size
        out.append(AxisGroup(axis) if (stride0 == 1 and total == n) else AxisGroup(axis, total, stride0))
    return parse_group(out + extra)
