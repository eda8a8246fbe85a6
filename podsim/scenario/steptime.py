"""The flow-level engine as a `StepTimeModel` (podsim.cluster.steptime), and the recorder that
keeps every answer of a scenario's step-time model for the report.

The cluster simulation knows its generation by id only; `RecordingStepTime` asks with the
scenario's own Generation (with its figure overrides) instead, so an overridden peak FLOP/s or
ICI bandwidth reaches the step time, whichever model answers.
"""

from __future__ import annotations

import math

from podsim.cluster import StepEstimate, StepTimeModel
from podsim.cluster.steptime import check_spread
from podsim.engine import build_job, simulate_step
from podsim.perf.opmodel import compute_timing
from podsim.scenario.result import TABLES
from podsim.topology import DcnSpec, Generation, build_slice, format_shape
from podsim.trace import generate_trace
from podsim.trace.plans import multislice_plan, plan_template, resolve_plan

__all__ = ["EngineStepTime", "RecordingStepTime", "multislice_plan", "plan_template", "resolve_plan", "step_plan"]


def step_plan(template: str | None, model: str, chips: int, slices: int) -> str:
    """A step study's plan: `resolve_plan` inside a slice, with dcn=slices added when the
    template leaves dcn out."""
    plan = resolve_plan(template, model, chips)
    return f"{plan},dcn={slices}" if slices > 1 and "dcn" not in plan else plan


class EngineStepTime:
    """Step time from the engine: the model's generated trace on the slice, simulated
    (`efficiency` None: compute ops timed by the per-op model, as the roofline's None).
    N > 1 slices: the trace with a dcn=N axis on `build_job`'s N slices (fewest pods) behind
    `dcn`, split evenly over `sites` data centres joined by WAN links; the exposed
    communication then includes the DCN (and WAN) collectives."""

    def __init__(self, efficiency: float | None, plans: dict[str, str] | None = None,
                 dcn: DcnSpec | None = None, ocs: bool = True, routing: str = "dimension_order"):
        self.efficiency, self.plans, self.dcn, self.ocs = efficiency, dict(plans or {}), dcn, ocs
        self.routing = routing

    def estimate(self, model: str, generation: Generation, shape: tuple[int, ...], twisted: bool, *,
                 slices: int = 1, sites: int = 1) -> StepEstimate:
        check_spread(slices, sites)
        plan = multislice_plan(self.plans.get(model), model, math.prod(shape), slices)
        trace = generate_trace(model, tuple(shape), plan, generation=generation, twisted=twisted)
        if slices == 1:
            built = build_slice(generation, tuple(shape), twisted=twisted, ocs=self.ocs, dcn=self._dcn(1))
            r = simulate_step(trace, built, compute_efficiency=self.efficiency, routing=self.routing)
            return StepEstimate(r.step_time_s, r.compute_s, r.exposed_comm_s, f"engine ({plan}; {compute_timing(self.efficiency)})")
        job = build_job(trace, generation, tuple(shape), slices, twisted=twisted, ocs=self.ocs, dcn=self._dcn(sites))
        r = simulate_step(None, job, compute_efficiency=self.efficiency, routing=self.routing)
        where = f", {sites} sites" if sites > 1 else ""
        return StepEstimate(r.step_time_s, r.compute_s, r.exposed_comm_s, f"engine ({plan}, {slices} slices{where}; {compute_timing(self.efficiency)})")

    def _dcn(self, sites: int) -> DcnSpec | None:
        """The DCN with the job's own site count (one slice sits in one site)."""
        if self.dcn is None:
            return DcnSpec(sites=sites) if sites > 1 else None
        return self.dcn if self.dcn.sites == sites else self.dcn.model_copy(update={"sites": sites})


class RecordingStepTime:
    """Wraps a step-time model: asks with the scenario's Generation, keeps one row per question
    (a row of the `step_times` result table)."""

    def __init__(self, inner: StepTimeModel, generation: Generation):
        self.inner, self.gen = inner, generation
        self.rows: list[dict] = []

    def estimate(self, model: str, generation: Generation, shape: tuple[int, ...], twisted: bool, *,
                 slices: int = 1, sites: int = 1) -> StepEstimate:
        e = self.inner.estimate(model, self.gen, tuple(shape), twisted, slices=slices, sites=sites)
        self.rows.append({"model": model, "shape": format_shape(tuple(shape)), "twisted": bool(twisted),
                          "slices": int(slices), "sites": int(sites),
                          "step_time_s": float(e.step_time_s), "compute_s": e.compute_s,
                          "exposed_comm_s": e.exposed_comm_s, "source": e.source})
        return e

    def table(self) -> dict[str, list]:
        return {c: [r[c] for r in self.rows] for c in TABLES["step_times"]}
