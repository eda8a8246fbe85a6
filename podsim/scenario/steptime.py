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
from podsim.errors import PodsimError
from podsim.perf.opmodel import compute_timing
from podsim.scenario.result import TABLES
from podsim.topology import (
    DcnSpec,
    Generation,
    build_slice,
    format_shape,
    get_generation,
    validate_shape,
)
from podsim.topology.placed import built_asked, built_placed
from podsim.topology.torus import torus_id
from podsim.trace import generate_trace
from podsim.trace.configs import get_model
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

    prices_placement = True  # estimate_on times the step on the slice actually placed

    def estimate_on(self, model: str, generation: Generation, slc, layout, *, asked: bool = False) -> StepEstimate:
        """The step of `model` (its plan for the slice's chips) on a placed slice alone on a fabric
        of its own (`built_placed`: a fold's logical links, a split's circuits, a scattered slice's
        routes over the pod), or, `asked`, on the slice of that shape as the job asked for it
        (`built_asked`)."""
        shape = tuple(slc.shape)
        chips = math.prod(shape)
        overrides = None
        try:
            plan = multislice_plan(self.plans.get(model), model, chips, 1)
        except PodsimError:  # an odd size the preset's batch does not split: FSDP over every chip, batch rounded up
            batch = get_model(model).global_batch
            plan, overrides = f"fsdp={chips}", {"global_batch": -(-batch // chips) * chips}
        trace = generate_trace(model, shape, plan, generation=trace_generation(generation, shape), twisted=bool(slc.twisted) and asked,
                               overrides=overrides)
        built = (built_asked(generation, shape, slc.twisted, self.ocs, self._dcn(1)) if asked
                 else built_placed(layout, slc, self._dcn(1)))
        r = simulate_step(trace, built, compute_efficiency=self.efficiency, routing=self.routing)
        where = "as asked" if asked else f"{slc.form} placement"
        return StepEstimate(r.step_time_s, r.compute_s, r.exposed_comm_s, f"engine ({plan}, {where}; {compute_timing(self.efficiency)})")

    def _dcn(self, sites: int) -> DcnSpec | None:
        """The DCN with the job's own site count (one slice sits in one site)."""
        if self.dcn is None:
            return DcnSpec(sites=sites) if sites > 1 else None
        return self.dcn if self.dcn.sites == sites else self.dcn.model_copy(update={"sites": sites})


def trace_generation(gen: Generation, shape: tuple[int, ...]) -> Generation:
    """`gen`, or for a shape its rules lack (a reshaped request) the generic torus twin of its pod
    (same chip figures, `base` = gen), whose rules take any shape: the trace is the same program."""
    try:
        validate_shape(gen, shape)
        return gen
    except PodsimError:
        if gen.cube_shape is None or gen.dims != 3 or gen.slice_rule == "torus":
            raise
    gbps = gen.link_bytes_per_s * 8 / 1e9
    return get_generation(torus_id("x".join(map(str, gen.pod_shape)), gen.cube_shape[0], 6, round(gbps, 6), base=gen.id))


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

    @property
    def prices_placement(self) -> bool:
        return bool(getattr(self.inner, "prices_placement", False))

    def estimate_on(self, model: str, generation: Generation, slc, layout, *, asked: bool = False) -> StepEstimate:
        return self.inner.estimate_on(model, self.gen, slc, layout, asked=asked)

    def table(self) -> dict[str, list]:
        return {c: [r[c] for r in self.rows] for c in TABLES["step_times"]}
