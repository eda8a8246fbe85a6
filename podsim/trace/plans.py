"""Parallelism plans for a slice of a given size: a template's `auto` axis takes the chips the
other axes leave; no template: data parallel for ResNet, FSDP over every chip for transformers."""

from __future__ import annotations

import re

from podsim.errors import PodsimError
from podsim.trace.configs import ResNetConfig, get_model
from podsim.trace.mesh import ParallelPlan, parse_parallelism


def resolve_plan(template: str | None, model: str, chips: int) -> str:
    """A parallelism plan for a `chips`-chip slice: `auto` in the template takes the chips the
    other axes leave (dcn, across slices, does not count); no template: data parallel for
    ResNet, FSDP over every chip for transformers."""
    if not template:
        axis = "data" if isinstance(get_model(model), ResNetConfig) else "fsdp"
        return f"{axis}={chips}"
    fixed = plan_template(template).ici_chips
    if chips % fixed:
        raise PodsimError(f"parallelism {template!r} for {model}: {fixed} does not divide the slice's {chips} chips")
    return re.sub(r"\bauto\b", str(chips // fixed), template)


def plan_template(template: str) -> ParallelPlan:
    """A plan template checked the way `parse_parallelism` checks plans, `auto` (at most one
    axis) standing for 1."""
    if len(re.findall(r"\bauto\b", template)) > 1:
        raise PodsimError(f"parallelism {template!r}: at most one axis may be auto")
    return parse_parallelism(re.sub(r"\bauto\b", "1", template))


def multislice_plan(template: str | None, model: str, chips: int, slices: int) -> str:
    """The plan of a job on `slices` slices of `chips` chips: `resolve_plan` inside a slice and
    dcn=slices across them (data parallel over the DCN), as `podsim steptime --slices` does.
    A template that names dcn must name this slice count."""
    plan = resolve_plan(template, model, chips)
    dcn = parse_parallelism(plan).dcn
    if dcn == slices:
        return plan
    if dcn != 1:
        raise PodsimError(f"parallelism {template!r} for {model}: dcn={dcn} but the job has {slices} slice(s); "
                          "leave dcn out (the slice count sets it)")
    return f"{plan},dcn={slices}"
