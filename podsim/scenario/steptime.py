"""Step-time models for a scenario's step-based jobs: the roofline or the flow-level engine,
each asked once per (model, shape, twist) and every answer kept for the report.

The cluster simulation names the generation by id; these models use the scenario's own
Generation (with its figure overrides) instead, so an overridden peak FLOP/s or ICI bandwidth
reaches the step time.
"""

from __future__ import annotations

import math
import re

from podsim.cluster import RooflineStepTime
from podsim.engine import simulate_step
from podsim.errors import PodsimError
from podsim.topology import DcnSpec, Generation, build_slice, format_shape
from podsim.trace import ParallelPlan, generate_trace, get_model, parse_parallelism
from podsim.trace.configs import ResNetConfig


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


class EngineStepTime:
    """Step time from the engine: the model's generated trace on the slice, simulated."""

    def __init__(self, generation: Generation, efficiency: float, plans: dict[str, str] | None = None,
                 dcn: DcnSpec | None = None, ocs: bool = True, routing: str = "dimension_order"):
        self.gen, self.efficiency, self.plans, self.dcn, self.ocs = generation, efficiency, dict(plans or {}), dcn, ocs
        self.routing = routing
        self.details: dict[tuple, dict] = {}

    def step_time_s(self, model: str, generation: str, shape: tuple[int, ...], twisted: bool) -> float:
        chips = math.prod(shape)
        plan = resolve_plan(self.plans.get(model), model, chips)
        trace = generate_trace(model, shape, plan, generation=self.gen, twisted=twisted)
        built = build_slice(self.gen, tuple(shape), twisted=twisted, ocs=self.ocs, dcn=self.dcn)
        r = simulate_step(trace, built, compute_efficiency=self.efficiency, routing=self.routing)
        self.details[(model, tuple(shape), bool(twisted))] = {
            "compute_s": r.compute_s, "exposed_comm_s": r.exposed_comm_s, "source": f"engine ({plan})"}
        return r.step_time_s


class RecordingStepTime:
    """Wraps a step-time model: uses the scenario's Generation, keeps one row per question."""

    def __init__(self, inner, generation: Generation):
        self.inner, self.gen = inner, generation
        self.rows: list[dict] = []

    def step_time_s(self, model: str, generation: str, shape: tuple[int, ...], twisted: bool) -> float:
        t = float(self.inner.step_time_s(model, self.gen, tuple(shape), twisted))
        if isinstance(self.inner, RooflineStepTime):
            extra = {"compute_s": t, "exposed_comm_s": 0.0, "source": f"roofline at {self.inner.efficiency:g} of peak"}
        else:
            extra = self.inner.details.get((model, tuple(shape), bool(twisted)), {})
        self.rows.append({"model": model, "shape": format_shape(tuple(shape)), "twisted": bool(twisted),
                          "step_time_s": t, **extra})
        return t

    def table(self) -> dict[str, list]:
        cols = ("model", "shape", "twisted", "step_time_s", "compute_s", "exposed_comm_s", "source")
        return {c: [r.get(c) for r in self.rows] for c in cols}
