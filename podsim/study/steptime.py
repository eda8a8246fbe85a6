"""Step time of a study, cheap or simulated: the bridge from a job's training steps to its run time.

A job may give its length in training steps of a model instead of in time; the cluster
simulation then needs the step time of that model on the slices actually placed (a rotated or
untwisted slice may be slower; slices in two sites talk over the WAN). One interface,
`StepTimeModel.estimate(study) -> StepEstimate` (the step time with its compute and
exposed-communication parts), keyed by the `StepStudy`, has two implementations:

- `EngineStepTime`: `run_study(study)`, the flow-level engine (collectives as flows on the
  slices' ICI, DCN and WAN links);
- `RooflineStepTime`: no communication. By default (`study.compute_efficiency` None) the study's
  trace with each compute op timed by the per-op model (`podsim.perf.opmodel.op_time_s`, the engine's
  default) and every collective free, so the step is the compute critical path of the op DAG -
  the engine's number less its exposed communication, for the study's own plan and options;
  with a flat `compute_efficiency` (e.g. 0.6, the v4 paper's average for LLM training,
  hardware.md perf.3): model FLOPs per step / (slices x chips x peak FLOP/s x efficiency); with
  efficiency 1 a lower bound on the step time.

`CachedStepTime` is what the cluster simulation asks: it turns a job's (model, shape, twist,
slices, sites) into a study (`study_of`: a scenario's adds its generation with figure overrides,
wiring, DCN, routing, compute model and the model's plan), asks the model once per study and
checks the answer.

A multislice job (`slices` N > 1, spread over `sites` data centres) trains the model's
`global_batch` over all N slices, data parallel across them (the plan's `dcn=N` axis): each
slice computes global_batch / N.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from podsim.errors import PodsimError
from podsim.perf import chip_compute
from podsim.perf.opmodel import compute_timing, op_timer
from podsim.study.study import StepStudy, run_study, study_plan, study_trace
from podsim.topology import DcnSpec, Generation
from podsim.topology.placed import built_asked, built_placed
from podsim.trace.configs import ResNetConfig
from podsim.trace.generate import generate_trace
from podsim.trace.mesh import parse_parallelism
from podsim.trace.model import Compute, StepTrace
from podsim.trace.plans import model_config, preset_plan_part


@dataclass(frozen=True)
class StepEstimate:
    """One training step: its wall time, the compute on its critical path, the communication no
    compute hides, what running on several slices adds beyond it (`multislice_s`:
    podsim.study.multislice), and which model said so: `step_time_s = compute_s + exposed_comm_s +
    multislice_s`."""

    step_time_s: float
    compute_s: float
    exposed_comm_s: float
    source: str
    multislice_s: float = 0.0


@runtime_checkable
class StepTimeModel(Protocol):
    """The step time of a study."""

    def estimate(self, study: StepStudy) -> StepEstimate: ...


def compute_critical_path_s(trace: StepTrace, generation: Generation) -> float:
    """The longest path through the trace's op DAG with compute ops timed as the engine times
    them when no flat efficiency is set (a fixed duration or the op's own efficiency, else the
    per-op model) and every collective or send taking no time."""
    duration = op_timer(generation, chip_compute(generation))
    finish: dict[str, float] = {}
    for op in trace.topological_order():
        t = duration(op) if isinstance(op, Compute) else 0.0
        finish[op.id] = max((finish[d] for d in op.deps), default=0.0) + t
    return max(finish.values(), default=0.0)


class EngineStepTime:
    """Step time from the engine: `run_study(study)`. N > 1 slices run on `build_job`'s N slices
    (fewest pods) behind the study's DCN, split over its sites; the exposed communication then
    includes the DCN (and WAN) collectives."""

    prices_placement = True  # a study `on` a placed slice times the step there (CachedStepTime.slowdown)

    def estimate(self, study: StepStudy) -> StepEstimate:
        r = run_study(study)
        plan = study_plan(study)  # as resolved from the template (its axis order), not re-formatted
        timing = compute_timing(study.compute_efficiency)
        if study.slices == 1:
            return StepEstimate(r.step_time_s, r.compute_s, r.exposed_comm_s, f"engine ({plan}; {timing})")
        where = f", {study.sites} sites" if study.sites > 1 else ""
        added = r.multislice.get("added_s", 0.0)
        terms = f"; + straggler wait and ECMP collisions {added:.3g} s" if added else ""
        return StepEstimate(r.step_time_s, r.compute_s, r.exposed_comm_s,
                            f"engine ({plan}, {study.slices} slices{where}; {timing}{terms})", added)


class RooflineStepTime:
    """Compute-only step time of a study: by default the per-op compute critical path of its trace
    (its plan and options honoured; no plan: the default plan), or model FLOPs / (chips x peak x
    efficiency) at a flat `compute_efficiency`. N slices share the global batch (chips = N x the
    slice's); no ICI, DCN or WAN traffic is timed by design, and a multislice answer says so in
    its `source`."""

    prices_placement = False  # no communication: a fold or a scattered slice computes as fast

    def estimate(self, study: StepStudy) -> StepEstimate:
        gen, slices, chips = study.generation, study.slices, study.chips
        multi = "" if slices == 1 else f", {slices} slices, DCN{' and WAN' if study.sites > 1 else ''} traffic not modelled"
        eff = study.compute_efficiency
        if eff is not None:
            if study.model is None:
                raise PodsimError("a flat-efficiency roofline needs the model's FLOPs; give a model, not a trace")
            flops = model_config(study.model, study.model_overrides).training_flops_per_step()
            t = flops / (slices * chips * gen.peak_flops_per_s * eff)
            return StepEstimate(t, t, 0.0, f"roofline at {eff:g} of peak{multi}")
        part = _part(study) if study.plan is None and study.model is not None else None
        if part is not None:  # the batch cannot use every chip: time a part of the slice, scale by chips
            plan, sub, k = part
            trace = generate_trace(study.model, sub, plan, generation=gen, twisted=False,
                                   overrides=study.model_overrides or None, options=study.options)
            t = compute_critical_path_s(trace, gen) / k
            return StepEstimate(t, t, 0.0, f"roofline, per-op compute ({plan} on {math.prod(sub)} chips, "
                                           f"/ {k} for {chips}){multi}")
        plan = study_plan(study)
        t = compute_critical_path_s(study_trace(study, plan), gen)
        return StepEstimate(t, t, 0.0, f"roofline, per-op compute ({plan}){multi}")


def _part(study: StepStudy) -> tuple[str, tuple[int, ...], int] | None:
    """When the model's batch (with the tensor parallelism it allows) cannot use all of the slice's
    chips: (its plan, a sub-shape with the chips it uses, the factor k = chips / those), the per-op
    compute then scaled by 1/k as the flat roofline scales FLOPs; None when the plan uses every chip."""
    shape, slices = study.shape, study.slices
    plan, used = preset_plan_part(study.model, math.prod(shape), slices, study.model_overrides)
    k = math.prod(shape) // used
    if k == 1 or isinstance(model_config(study.model, study.model_overrides), ResNetConfig):
        return None  # data parallel replicates work 1/k would not scale
    dims, left = list(shape), k
    for p in range(2, k + 1):
        while left % p == 0:
            i = max((j for j in range(len(dims)) if dims[j] % p == 0), key=lambda j: dims[j], default=None)
            if i is None:
                return None  # no sub-shape: preset_plan's error via study_plan
            dims[i] //= p
            left //= p
    return (f"{plan},dcn={slices}" if slices > 1 else plan), tuple(dims), k


StudyOf = Callable[[str, Generation, tuple[int, ...], bool, int, int], StepStudy]


def default_study(model: str, generation: Generation, shape: tuple[int, ...], twisted: bool, slices: int,
                  sites: int, compute_efficiency: float | None = None) -> StepStudy:
    """A job's step with every other setting the library's default (EPS DCN, dimension-order
    routing, the model's default plan; per-op compute unless `compute_efficiency`)."""
    return StepStudy(generation, tuple(shape), model=model, twisted=bool(twisted), slices=slices,
                     dcn=DcnSpec(sites=sites), compute_efficiency=compute_efficiency)


class CachedStepTime:
    """The cluster simulation's step times: a job's (model, generation, shape, twist, slices,
    sites) as a study (`study_of`; default `default_study`), each study asked of `inner` once
    and its answer checked."""

    def __init__(self, inner: StepTimeModel, study_of: StudyOf | None = None):
        if not isinstance(inner, StepTimeModel):
            raise PodsimError(f"{type(inner).__name__} has no estimate(study)")
        self.inner, self.study_of = inner, study_of or default_study
        self._cache: dict[StepStudy, StepEstimate] = {}
        self._slowdowns: dict[tuple, tuple[float, str]] = {}

    def study(self, model: str, generation: Generation, shape: tuple[int, ...], twisted: bool, *,
              slices: int = 1, sites: int = 1) -> StepStudy:
        """The study of one job's step."""
        for name, v in (("slices", slices), ("sites", sites)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise PodsimError(f"step time: {name} {v!r} must be a whole number >= 1")
        if sites > slices:
            raise PodsimError(f"step time: {slices} slice(s) cannot span {sites} sites; sites must be <= slices")
        return self.study_of(model, generation, tuple(shape), bool(twisted), slices, sites)

    def estimate(self, model: str, generation: Generation, shape: tuple[int, ...], twisted: bool, *,
                 slices: int = 1, sites: int = 1) -> StepEstimate:
        study = self.study(model, generation, shape, twisted, slices=slices, sites=sites)
        e = self._cache.get(study)
        if e is None:
            e = self.inner.estimate(study)
            if not isinstance(e, StepEstimate):
                raise PodsimError(f"{type(self.inner).__name__}.estimate returned {type(e).__name__}, not a StepEstimate")
            t = e.step_time_s
            if not (math.isfinite(t) and t > 0):
                where = f"{slices} x " if slices > 1 else ""
                raise PodsimError(f"step time of {model} on {generation.id} {where}{'x'.join(map(str, shape))} is {t}; it must be a positive number of seconds")
            self._cache[study] = e
        return e

    def slowdown(self, model: str | None, generation: Generation, slc, layout,
                 overrides: dict | None = None) -> tuple[float, str]:
        """(run time factor, source) of a job of `model` (preset fields `overrides`) on the placed
        slice `slc` against the slice it asked for: 1 for a native placement, or when the model
        cannot price placements (the roofline: no communication) or no model is given; else the
        step of the job's study `on` the placed slice (`built_placed`) over its step `on` the slice
        as asked (`built_asked`), cached per (model, overrides, shape, placement class and plan),
        never below 1."""
        form = getattr(slc, "form", "native")
        if form == "native":
            return 1.0, "native"
        if not getattr(self.inner, "prices_placement", False):
            return 1.0, "not charged: the step-time model has no communication to price a placement"
        if model is None:
            return 1.0, "not charged: no model to price the placement"
        ov = tuple(sorted((overrides or {}).items()))
        key = (model, ov, generation.id, tuple(slc.shape), bool(slc.twisted), form, _signature(slc))
        hit = self._slowdowns.get(key)
        if hit is None:
            study = self.study(model, generation, tuple(slc.shape), bool(slc.twisted))
            if ov:
                study = study.replace(model_overrides={**study.model_overrides, **dict(ov)})
            study, note = plan_for_any_size(study)
            dcn = study.dcn if study.sites == 1 else study.dcn.model_copy(update={"sites": 1})
            placed = self.inner.estimate(study.replace(twisted=False, dcn=dcn, on=built_placed(layout, slc, dcn)))
            asked = self.inner.estimate(study.replace(dcn=dcn, on=built_asked(study.generation, tuple(slc.shape), slc.twisted,
                                                                             study.ocs, dcn)))
            factor = placed.step_time_s / asked.step_time_s
            if not (math.isfinite(factor) and factor > 0):
                raise PodsimError(f"slowdown of {model} on a {form} {'x'.join(map(str, slc.shape))} slice is {factor}")
            plan, timing = study_plan(study), compute_timing(study.compute_efficiency)
            source = f"engine ({plan}{note}, {form} placement; {timing}) / engine ({plan}{note}, as asked; {timing})"
            hit = self._slowdowns[key] = (max(1.0, factor), source)  # never faster than asked: no credit
        return hit

    def step_time_s(self, model: str, generation: Generation, shape: tuple[int, ...], twisted: bool, *,
                    slices: int = 1, sites: int = 1) -> float:
        """Seconds per step (what the cluster simulation needs)."""
        return float(self.estimate(model, generation, shape, twisted, slices=slices, sites=sites).step_time_s)

    @property
    def calls(self) -> int:
        """How many distinct studies (and placements priced) were asked (cache misses)."""
        return len(self._cache) + len(self._slowdowns)


def _signature(slc) -> tuple:
    """What makes two placed slices of one shape and class time alike: a fold's plan (which box
    axes hold which logical factors) and a split's geometry; a scattered slice's first placement
    stands for the rest (its routes differ from one allocation to the next)."""
    if slc.form == "split":
        return tuple(slc.origin or ())
    if slc.form == "fold":
        return (len(slc.cubes), len(slc.circuits))
    return ()


def plan_for_any_size(study: StepStudy) -> tuple[StepStudy, str]:
    """The study a non-native placement is priced with, and a note saying what changed: the study
    itself, or, when its model's global batch does not split over an odd slice's chips (a
    reshaped request), the same plan (the model's default: FSDP over every chip) with the batch
    rounded up to the next multiple of the plan's batch shards. The slowdown is the ratio of two
    steps of that one program, so the rounding moves both alike."""
    try:
        plan = study_plan(study)
    except PodsimError:
        if study.plan is not None:
            raise  # the user's plan does not fit the slice: say so
        study = study.replace(plan=f"fsdp={study.chips}")  # the preset's batch does not reach every chip
        plan = study_plan(study)
    shards = parse_parallelism(plan).batch_shards
    batch = model_config(study.model, study.model_overrides).global_batch
    if batch % shards == 0:
        return study, ""
    rounded = -(-batch // shards) * shards
    return (study.replace(model_overrides={**study.model_overrides, "global_batch": rounded}),
            f", batch {batch} rounded up to {rounded}")
