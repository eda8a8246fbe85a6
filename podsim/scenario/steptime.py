"""The flow-level engine as a `StepTimeModel` (podsim.cluster.steptime), and the recorder that
keeps every answer of a scenario's step-time model for the report.

The cluster simulation knows its generation by id only; `RecordingStepTime` asks with the
scenario's own Generation (with its figure overrides) instead, so an overridden peak FLOP/s or
ICI bandwidth reaches the step time, whichever model answers.
"""

from __future__ import annotations

import math

from podsim.cluster import StepEstimate, StepTimeModel
from podsim.engine import simulate_step
from podsim.topology import DcnSpec, Generation, build_slice, format_shape
from podsim.trace import generate_trace
from podsim.trace.plans import plan_template, resolve_plan

__all__ = ["EngineStepTime", "RecordingStepTime", "plan_template", "resolve_plan"]


class EngineStepTime:
    """Step time from the engine: the model's generated trace on the slice, simulated
    (`efficiency` None: compute ops timed by the per-op model, as the roofline's None)."""

    def __init__(self, efficiency: float | None, plans: dict[str, str] | None = None,
                 dcn: DcnSpec | None = None, ocs: bool = True, routing: str = "dimension_order"):
        self.efficiency, self.plans, self.dcn, self.ocs = efficiency, dict(plans or {}), dcn, ocs
        self.routing = routing

    def estimate(self, model: str, generation: Generation, shape: tuple[int, ...], twisted: bool) -> StepEstimate:
        plan = resolve_plan(self.plans.get(model), model, math.prod(shape))
        trace = generate_trace(model, tuple(shape), plan, generation=generation, twisted=twisted)
        built = build_slice(generation, tuple(shape), twisted=twisted, ocs=self.ocs, dcn=self.dcn)
        r = simulate_step(trace, built, compute_efficiency=self.efficiency, routing=self.routing)
        return StepEstimate(r.step_time_s, r.compute_s, r.exposed_comm_s, f"engine ({plan})")


class RecordingStepTime:
    """Wraps a step-time model: asks with the scenario's Generation, keeps one row per question."""

    def __init__(self, inner: StepTimeModel, generation: Generation):
        self.inner, self.gen = inner, generation
        self.rows: list[dict] = []

    def estimate(self, model: str, generation: Generation, shape: tuple[int, ...], twisted: bool) -> StepEstimate:
        e = self.inner.estimate(model, self.gen, tuple(shape), twisted)
        self.rows.append({"model": model, "shape": format_shape(tuple(shape)), "twisted": bool(twisted),
                          "step_time_s": float(e.step_time_s), "compute_s": e.compute_s,
                          "exposed_comm_s": e.exposed_comm_s, "source": e.source})
        return e

    def table(self) -> dict[str, list]:
        cols = ("model", "shape", "twisted", "step_time_s", "compute_s", "exposed_comm_s", "source")
        return {c: [r.get(c) for r in self.rows] for c in cols}
