"""Step time of a job's model on the slice(s) it was given: the bridge from steps to run time.

A job may give its length in training steps of a model instead of in time; the cluster
simulation then needs the step time of that model on the slices actually placed (a rotated or
untwisted slice may be slower; slices in two sites talk over the WAN). One interface,
`StepTimeModel.estimate(model, generation, shape, twisted, slices=1, sites=1) -> StepEstimate`
(the step time with its compute and exposed-communication parts), has two implementations:
`RooflineStepTime` here (no communication) and the flow-level engine
(`podsim.scenario.steptime.EngineStepTime`: collectives as flows on the slices' ICI and DCN
links). `CachedStepTime` asks either once per (model, generation, shape, twist, slices, sites)
and checks the answer.

A multislice job (`slices` N > 1 of `shape`, spread over `sites` data centres) trains the
model preset's `global_batch` over all N slices, data parallel across them (the trace plan's
`dcn=N` axis, as `podsim steptime --slices N`): each slice computes global_batch / N.

`RooflineStepTime` times compute two ways:
- by default (`efficiency=None`): the model's generated trace on the slice, each compute op
  timed by the per-op model (`podsim.perf.op_time_s`, the engine's default) and every
  collective free, so the step is the compute critical path of the op DAG - the engine's
  number less its exposed communication;
- with a flat `efficiency` override (e.g. 0.6, the v4 paper's average for LLM training,
  hardware.md perf.3): model FLOPs per step (what `podsim.trace.generate_trace` records as
  `meta["model_flops_per_step"]`) / (chips x peak FLOP/s x efficiency); with efficiency 1 a
  lower bound on the step time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from podsim.errors import PodsimError
from podsim.perf import chip_compute, op_timer
from podsim.topology import Generation
from podsim.trace import generate_trace
from podsim.trace.configs import ResNetConfig, get_model
from podsim.trace.model import Compute, StepTrace
from podsim.trace.plans import multislice_plan, preset_plan_part


@dataclass(frozen=True)
class StepEstimate:
    """One training step: its wall time, the compute on its critical path, the communication no
    compute hides (`step_time_s = compute_s + exposed_comm_s`), and which model said so."""

    step_time_s: float
    compute_s: float
    exposed_comm_s: float
    source: str


@runtime_checkable
class StepTimeModel(Protocol):
    """The step of `model` on `slices` slices of `shape` (twisted or not) of `generation`,
    spread over `sites` data centres (1: all behind one DCN)."""

    def estimate(self, model: str, generation: Generation, shape: tuple[int, ...], twisted: bool, *,
                 slices: int = 1, sites: int = 1) -> StepEstimate: ...


def check_spread(slices: int, sites: int) -> None:
    """One-line error unless `slices` >= 1 slices can sit in `sites` (1 <= sites <= slices)."""
    for name, v in (("slices", slices), ("sites", sites)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise PodsimError(f"step time: {name} {v!r} must be a whole number >= 1")
    if sites > slices:
        raise PodsimError(f"step time: {slices} slice(s) cannot span {sites} sites; sites must be <= slices")


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


class RooflineStepTime:
    """Compute-only step time: by default (`efficiency=None`) the per-op compute critical path of
    the model's trace (plan from `plans` by model, `auto` allowed; default FSDP over every chip,
    data parallel for ResNet), or model FLOPs / (chips x peak x efficiency) at a flat override.
    N slices share the global batch (chips = N x the slice's); no ICI, DCN or WAN traffic is
    timed by design, and a multislice answer says so in its `source`."""

    def __init__(self, efficiency: float | None = None, plans: dict[str, str] | None = None):
        if efficiency is not None and not 0 < efficiency <= 1:
            raise PodsimError(f"roofline efficiency {efficiency} must be in (0, 1] (fraction of peak FLOP/s), or None for the per-op model")
        self.efficiency = efficiency
        self.plans = dict(plans or {})

    def estimate(self, model: str, generation: Generation, shape: tuple[int, ...], twisted: bool, *,
                 slices: int = 1, sites: int = 1) -> StepEstimate:
        check_spread(slices, sites)
        chips = math.prod(shape)
        multi = "" if slices == 1 else f", {slices} slices, DCN{' and WAN' if sites > 1 else ''} traffic not modelled"
        if self.efficiency is not None:
            t = get_model(model).training_flops_per_step() / (slices * chips * generation.peak_flops_per_s * self.efficiency)
            return StepEstimate(t, t, 0.0, f"roofline at {self.efficiency:g} of peak{multi}")
        part = None if model in self.plans else _part(model, tuple(shape), slices)
        if part is not None:  # the batch cannot use every chip: time a part of the slice, scale by chips
            plan, sub, k = part
            trace = generate_trace(model, sub, plan, generation=generation, twisted=False)
            t = compute_critical_path_s(trace, generation) / k
            return StepEstimate(t, t, 0.0, f"roofline, per-op compute ({plan} on {math.prod(sub)} chips, "
                                           f"/ {k} for {chips}){multi}")
        plan = multislice_plan(self.plans.get(model), model, chips, slices)
        trace = generate_trace(model, tuple(shape), plan, generation=generation, twisted=twisted)
        t = compute_critical_path_s(trace, generation)
        return StepEstimate(t, t, 0.0, f"roofline, per-op compute ({plan}){multi}")


def _part(model: str, shape: tuple[int, ...], slices: int) -> tuple[str, tuple[int, ...], int] | None:
    """When the preset's batch (with the tensor parallelism it allows) cannot use all of `shape`'s
    chips: (its plan, a sub-shape with the chips it uses, the factor k = chips / those), the per-op
    compute then scaled by 1/k as the flat roofline scales FLOPs; None when the plan uses every chip."""
    plan, used = preset_plan_part(model, math.prod(shape), slices)
    k = math.prod(shape) // used
    if k == 1 or isinstance(get_model(model), ResNetConfig):  # data parallel replicates work 1/k would not scale
        return None
    dims, left = list(shape), k
    for p in range(2, k + 1):
        while left % p == 0:
            i = max((j for j in range(len(dims)) if dims[j] % p == 0), key=lambda j: dims[j], default=None)
            if i is None:
                return None  # no sub-shape: preset_plan's error via multislice_plan
            dims[i] //= p
            left //= p
    return (f"{plan},dcn={slices}" if slices > 1 else plan), tuple(dims), k


def _signature(slc) -> tuple:
    """What makes two placed slices of one shape and class time alike: a fold's plan (which box
    axes hold which logical factors) and a split's geometry; a scattered slice's first placement
    stands for the rest (its routes differ from one allocation to the next)."""
    if slc.form == "split":
        return tuple(slc.origin or ())
    if slc.form == "fold":
        return (len(slc.cubes), len(slc.circuits))
    return ()


class CachedStepTime:
    """Asks the wrapped model once per (model, generation, shape, twist, slices, sites); checks
    the answer."""

    def __init__(self, inner: StepTimeModel):
        if not isinstance(inner, StepTimeModel):
            raise PodsimError(f"{type(inner).__name__} has no estimate(model, generation, shape, twisted, *, slices, sites)")
        self.inner = inner
        self._cache: dict[tuple, StepEstimate] = {}

    def estimate(self, model: str, generation: Generation, shape: tuple[int, ...], twisted: bool, *,
                 slices: int = 1, sites: int = 1) -> StepEstimate:
        check_spread(slices, sites)
        key = (model, generation.id, tuple(shape), bool(twisted), slices, sites)
        e = self._cache.get(key)
        if e is None:
            e = self.inner.estimate(model, generation, tuple(shape), bool(twisted), slices=slices, sites=sites)
            if not isinstance(e, StepEstimate):
                raise PodsimError(f"{type(self.inner).__name__}.estimate returned {type(e).__name__}, not a StepEstimate")
            t = e.step_time_s
            if not (math.isfinite(t) and t > 0):
                where = f"{slices} x " if slices > 1 else ""
                raise PodsimError(f"step time of {model} on {generation.id} {where}{'x'.join(map(str, shape))} is {t}; it must be a positive number of seconds")
            self._cache[key] = e
        return e

    def slowdown(self, model: str | None, generation: Generation, slc, layout) -> tuple[float, str]:
        """(run time factor, source) of a job of `model` on the placed slice `slc` against the slice
        it asked for: 1 for a native placement, or when the model cannot price placements (the
        roofline: no communication) or no model is given; else the engine's step on the placed
        slice over its step as asked, cached per (model, shape, placement class and plan)."""
        form = getattr(slc, "form", "native")
        if form == "native":
            return 1.0, "native"
        if not getattr(self.inner, "prices_placement", False):
            return 1.0, "not charged: the step-time model has no communication to price a placement"
        if model is None:
            return 1.0, "not charged: no model to price the placement"
        key = ("slowdown", model, generation.id, tuple(slc.shape), bool(slc.twisted), form, _signature(slc))
        hit = self._cache.get(key)
        if hit is None:
            placed = self.inner.estimate_on(model, generation, slc, layout)
            asked = self.inner.estimate_on(model, generation, slc, layout, asked=True)
            factor = placed.step_time_s / asked.step_time_s
            if not (math.isfinite(factor) and factor > 0):
                raise PodsimError(f"slowdown of {model} on a {form} {'x'.join(map(str, slc.shape))} slice is {factor}")
            hit = (max(1.0, factor), f"{placed.source} / {asked.source}")  # never faster than asked: no credit
            self._cache[key] = hit
        return hit

    def step_time_s(self, model: str, generation: Generation, shape: tuple[int, ...], twisted: bool, *,
                    slices: int = 1, sites: int = 1) -> float:
        """Seconds per step (what the cluster simulation needs)."""
        return float(self.estimate(model, generation, shape, twisted, slices=slices, sites=sites).step_time_s)

    @property
    def calls(self) -> int:
        """How many distinct (model, generation, shape, twist, slices, sites) were asked (cache misses)."""
        return len(self._cache)
