"""Parallelism plans for a slice of a given size: a template's `auto` axis takes the chips the
other axes leave; no template: data parallel for ResNet, FSDP over every chip for transformers
(for a preset's own batch, `preset_plan`: tensor parallel over the chips the batch cannot split over)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from podsim.errors import PodsimError
from podsim.trace.configs import ModelConfig, ResNetConfig, get_model
from podsim.trace.mesh import ALIASES, ParallelPlan, parse_parallelism

if TYPE_CHECKING:
    from podsim.trace.options import GenerateOptions


def model_config(model: str | ModelConfig, overrides: Mapping[str, object] | None = None) -> ModelConfig:
    """A preset by name with `overrides` applied, or a config as given."""
    return get_model(model, dict(overrides) if overrides else None) if isinstance(model, str) else model


def _name(model: str | ModelConfig) -> str:
    return model if isinstance(model, str) else model.name


def resolve_plan(template: str | None, model: str | ModelConfig, chips: int) -> str:
    """A parallelism plan for a `chips`-chip slice: `auto` in the template takes the chips the
    other axes leave (dcn, across slices, does not count); no template: data parallel for
    ResNet, FSDP over every chip for transformers."""
    if not template:
        axis = "data" if isinstance(model_config(model), ResNetConfig) else "fsdp"
        return f"{axis}={chips}"
    fixed = plan_template(template).ici_chips
    if chips % fixed:
        raise PodsimError(f"parallelism {template!r} for {_name(model)}: {fixed} does not divide the slice's {chips} chips")
    return re.sub(r"\bauto\b", str(chips // fixed), template)


def plan_template(template: str) -> ParallelPlan:
    """A plan template checked the way `parse_parallelism` checks plans, `auto` (at most one
    axis) standing for 1."""
    if len(re.findall(r"\bauto\b", template)) > 1:
        raise PodsimError(f"parallelism {template!r}: at most one axis may be auto")
    return parse_parallelism(re.sub(r"\bauto\b", "1", template))


def preset_plan_part(model: str | ModelConfig, chips: int, slices: int = 1,
                     overrides: Mapping[str, object] | None = None) -> tuple[str, int]:
    """The largest default plan of `model` (its global batch, after `overrides`) inside a slice of
    `chips` chips, and the chips it uses: FSDP (data for ResNet) over as many chips as the batch
    per slice splits over, tensor parallel over the largest part of the rest the model allows."""
    cfg = model_config(model, overrides)
    per_slice, rem = divmod(cfg.global_batch, slices)
    shards = math.gcd(chips, per_slice) if per_slice and not rem else chips  # else the generator says why
    if shards == chips:
        return resolve_plan(None, cfg, chips), chips
    if isinstance(cfg, ResNetConfig):
        return f"data={shards}", shards
    rest = chips // shards
    tensor = max(t for t in range(1, rest + 1) if rest % t == 0 and cfg.tensor_problem(t) is None)
    return (f"fsdp={shards},tensor={tensor}" if tensor > 1 else f"fsdp={shards}"), shards * tensor


def preset_plan(model: str | ModelConfig, chips: int, slices: int = 1, overrides: Mapping[str, object] | None = None) -> str:
    """`preset_plan_part` when it uses every chip; else one line naming the fixes."""
    plan, used = preset_plan_part(model, chips, slices, overrides)
    if used < chips:
        raise PodsimError(f"{_name(model)} on {slices} x {chips} chips: its global batch of {model_config(model, overrides).global_batch} "
                          f"splits over {used} chips per slice ({plan}) and the other {chips // used}x cannot be tensor "
                          "parallel; give the model a parallelism plan (step_time.parallelism) or a flat step_time.compute_efficiency")
    return plan


def names_dcn(plan: str) -> bool:
    """Whether a plan (template) sets its dcn axis itself (any spelling)."""
    return any(ALIASES.get(part.partition("=")[0].strip().lower()) == "dcn" for part in plan.split(","))


def multislice_plan(template: str | None, model: str | ModelConfig, chips: int, slices: int,
                    overrides: Mapping[str, object] | None = None) -> str:
    """The plan of a job on `slices` slices of `chips` chips: `resolve_plan` inside a slice (no
    template: `preset_plan` for the model's batch after `overrides`) and dcn=slices across them
    (data parallel over the DCN). A template that names dcn must name this slice count."""
    plan = resolve_plan(template, model, chips) if template else preset_plan(model, chips, slices, overrides)
    dcn = parse_parallelism(plan).dcn
    if dcn == slices:
        return plan
    if dcn != 1 or names_dcn(plan):
        raise PodsimError(f"parallelism {template!r} for {_name(model)}: dcn={dcn} but the job has {slices} slice(s); "
                          "leave dcn out (the slice count sets it)")
    return f"{plan},dcn={slices}"


def local_batch(global_batch: int, plan: ParallelPlan, unit: str) -> int:
    """Sequences or images each chip holds per step: the global batch over data x fsdp x expert x dcn."""
    shards = plan.batch_shards
    if global_batch % shards:
        raise PodsimError(f"global batch of {global_batch} {unit} does not split over data x fsdp x expert x dcn = {shards}; use a multiple of {shards} (--set global_batch=N)")
    return global_batch // shards


def grad_allreduce_blocking(opts: GenerateOptions, plan: ParallelPlan) -> bool:
    """Whether the data-parallel gradient all-reduces block the next compute: the DCN overlap
    switch governs them when they cross slices, the in-slice one otherwise."""
    return not (opts.overlap_dcn if plan.dcn > 1 else opts.overlap_grad_reduce)


def microbatches(local: int, plan: ParallelPlan, opts: GenerateOptions) -> int:
    """Micro-batches per step: as set, else 1 without a pipeline, else the largest divisor of the
    local batch up to 4 x stages."""
    if opts.microbatches is not None:
        m = opts.microbatches
        if m < 1 or local % m:
            raise PodsimError(f"microbatches {m} does not divide the {local} sequences each chip holds per step")
        return m
    if plan.pipeline == 1:
        return 1
    return max(d for d in range(1, min(local, 4 * plan.pipeline) + 1) if local % d == 0)
