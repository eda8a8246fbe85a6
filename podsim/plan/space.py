"""The plans a search enumerates: slices x slice shape over the DCN, the logical axes inside a
slice, micro-batches, recompute policy, sequence parallelism and collective-matmul mode.

Slice shapes are those the generation's rules accept (`validate_shape`, the rule `podsim
steptime --slice` applies) with the asked chips, a multislice job's shapes whole-cube or
rectangular slices (as `place_slices` places them). The axes are every factorisation of the
slice's chips into data x fsdp x tensor x expert; which of them the model can take (heads,
experts, batch) is the generator's question (`transformer_shard`), asked per candidate, not
repeated here. Sequence parallelism and the collective-matmul modes are enumerated only with a
tensor axis (without one they change nothing); `hidden` (the ideal overlap bound) is not a plan
and is never enumerated. Pipeline parallelism and twisted tori are not searched.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from podsim.errors import PodsimError
from podsim.plan.candidate import Candidate
from podsim.topology import Generation, format_shape
from podsim.topology.shapes import validate_shape
from podsim.trace.generate import RECOMPUTE_POLICIES

RECOMPUTE = RECOMPUTE_POLICIES
"""The generator's recompute policies, least recompute first (the order dominance relies on)."""
TENSOR_MODES = ("exposed", "all_gather", "reduce_scatter", "chunked")
"""Collective-matmul modes searched with sequence parallelism (`exposed`: the all-gathers and
reduce-scatters on the chain); without it the only program is Megatron's all-reduces."""
MAX_MICROBATCHES = 64
"""The most micro-batches (gradient accumulation steps) a search tries by default."""


def divisors(n: int) -> list[int]:
    """The divisors of n, ascending."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def slice_shapes(gen: Generation, chips: int, multislice: bool = False) -> list[tuple[int, ...]]:
    """Every slice shape of `chips` chips the generation accepts (one per arrangement its rules
    tell apart; a shape and its transpose are one on a generation that fixes no order)."""
    out: list[tuple[int, ...]] = []
    seen: set[tuple[int, ...]] = set()

    def factor(n: int, k: int) -> Iterator[tuple[int, ...]]:
        if k == 1:
            yield (n,)
            return
        for d in divisors(n):
            for rest in factor(n // d, k - 1):
                yield (d, *rest)

    for shape in factor(chips, gen.dims):
        key = shape if gen.nondecreasing_shapes else tuple(sorted(shape))
        if key in seen:
            continue
        try:
            spec = validate_shape(gen, shape)
        except PodsimError:
            continue
        if multislice and spec.kind not in ("cubes", "rectangle"):
            continue
        seen.add(key)
        out.append(shape)
    return out


@dataclass(frozen=True)
class Layouts:
    """The (slices, shape) pairs a search covers and why others were left out."""

    pairs: tuple[tuple[int, tuple[int, ...]], ...]
    notes: tuple[str, ...] = ()


def job_layouts(gen: Generation, chips: int | None = None, slice_shape: tuple[int, ...] | None = None,
                slices: int | None = None, fewest: bool = False) -> Layouts:
    """The slices x shapes of a search: a fixed shape and/or slice count, or every split of a chip
    budget into equal slices the generation can place (`fewest`: those with the fewest slices).
    A one-line error when there is none."""
    if slice_shape is not None:
        validate_shape(gen, slice_shape)
        n = slices or (chips // math.prod(slice_shape) if chips else 1)
        if chips is not None and n * math.prod(slice_shape) != chips:
            raise PodsimError(f"--chips {chips} is not a whole number of {format_shape(slice_shape)} slices "
                              f"({math.prod(slice_shape)} chips each)")
        if n > 1 and validate_shape(gen, slice_shape).kind not in ("cubes", "rectangle"):
            raise PodsimError(f"a multislice job takes whole-cube or rectangular slices; {format_shape(slice_shape)} is neither")
        return Layouts(((n, tuple(slice_shape)),))
    if chips is None:
        raise PodsimError("give --chips (a budget) or --slice (a shape)")
    counts = [slices] if slices is not None else divisors(chips)
    pairs = []
    for n in counts:
        if chips % n:
            raise PodsimError(f"--chips {chips} does not split into {n} equal slices")
        for shape in slice_shapes(gen, chips // n, multislice=n > 1):
            pairs.append((n, shape))
    if pairs and fewest:
        n_min = min(n for n, _ in pairs)
        pairs = [p for p in pairs if p[0] == n_min]
    if not pairs:
        sizes = sorted({math.prod(s) for k in range(1, gen.pod_chips + 1) if gen.pod_chips % k == 0
                        for s in slice_shapes(gen, k)})
        raise PodsimError(f"--chips {chips}: no {gen.id} slice shape, or equal slices of one, has that many chips; "
                          f"slices have {', '.join(map(str, sizes[:12]))}{' ...' if len(sizes) > 12 else ''} chips")
    return Layouts(tuple(pairs))


def axis_splits(chips: int, moe: bool) -> Iterator[tuple[int, int, int, int]]:
    """(data, fsdp, tensor, expert) with the product `chips` (expert > 1 only for an MoE model)."""
    for tensor in divisors(chips):
        rest = chips // tensor
        for expert in divisors(rest) if moe else (1,):
            for fsdp in divisors(rest // expert):
                yield rest // expert // fsdp, fsdp, tensor, expert


def bases(layouts: Layouts, *, moe: bool, tensor_modes: Sequence[str] = TENSOR_MODES) -> Iterator[Candidate]:
    """Every candidate of the search space with recompute none and one micro-batch: the plans
    whose recompute and micro-batches the search then chooses (`microbatch_options`)."""
    for slices, shape in layouts.pairs:
        for data, fsdp, tensor, expert in axis_splits(math.prod(shape), moe):
            tp_opts = [(False, "auto")] if tensor == 1 else [(False, "exposed"), *((True, m) for m in tensor_modes)]
            for sp, cm in tp_opts:
                yield Candidate(shape, slices, data, fsdp, tensor, expert, 1, "none", sp, cm)


def microbatch_options(global_batch: int, cand: Candidate, given: Sequence[int] | None = None,
                       max_microbatches: int = MAX_MICROBATCHES) -> list[int]:
    """The micro-batch counts tried for a plan, ascending: those given, or the divisors of the
    sequences each chip holds up to `max_microbatches` ([1] when the batch does not split: the
    generator then says why)."""
    shards = cand.plan.batch_shards
    if global_batch % shards:
        return [1]
    if given is not None:
        return sorted(set(given))
    return [m for m in divisors(global_batch // shards) if m <= max_microbatches]
