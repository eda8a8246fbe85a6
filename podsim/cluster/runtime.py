"""How long a job runs on a slice: its duration, or its steps times the step time there, times
the slice's slowdowns (a non-native placement, a degraded torus).

A folded, split or scattered slice (`fold: allowed`, Hilbert allocation) runs a job's step at
the factor its step on that slice takes over its step on the slice it asked for
(`CachedStepTime.slowdown`). The model stepped is the job's own (a job given in steps) or
`ClusterConfig.slowdown_model` (a job given in time). The simulation's step-time model prices
the placement when it can (the engine); the roofline has no communication to price, so then a
second model, the engine on the same studies, prices placements only (`pricer`) and the
roofline keeps timing the steps. A job with no model to step (given in time, no
slowdown_model) runs at factor 1: its run is counted in `runs_slowdown_not_charged` and the
output says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from podsim.cluster.gang import sites_spanned
from podsim.cluster.remedies import is_degraded
from podsim.study import CachedStepTime, EngineStepTime

if TYPE_CHECKING:
    from podsim.cluster.accounting import SimJob
    from podsim.cluster.config import ClusterConfig
    from podsim.placement import PodState
    from podsim.placement.problem import PlacementSettings
    from podsim.topology import PodLayout


def prices_placement(step_time: CachedStepTime) -> bool:
    """Whether the step-time model can time a step on a placed (non-native) slice."""
    return bool(getattr(step_time.inner, "prices_placement", False))


class RunTimes:
    """Run times and slowdowns of one simulation's jobs on the slices they are given."""

    def __init__(self, config: ClusterConfig, layout: PodLayout, state: PodState, settings: PlacementSettings,
                 step_time: CachedStepTime):
        self.config, self.layout, self.state, self.settings = config, layout, state, settings
        self.gen = layout.generation
        self.step_time = step_time
        self._pricer: CachedStepTime | None = step_time if prices_placement(step_time) else None

    @property
    def pricer(self) -> CachedStepTime:
        """The model that prices placements: the step-time model, or the engine on its studies."""
        if self._pricer is None:
            self._pricer = CachedStepTime(EngineStepTime(), self.step_time.study_of)
        return self._pricer

    def slowdown_model(self, job: SimJob) -> str | None:
        """The model whose step prices the job's non-native placements (None: none to price it)."""
        return job.job.model if job.job.model is not None else self.config.slowdown_model

    def work_s(self, job: SimJob, slc, slow: float | None = None) -> float:
        """Run time of the whole job on slice `slc` (a Slice or a Fit): its duration, or steps x
        step time there (`slow`: the slice's `slowdown`, if the caller has it already)."""
        j = job.job
        if slow is None:
            slow = self.slowdown(job, slc)
        if j.duration_s is not None:
            return float(j.duration_s) * slow
        sites = sites_spanned(slc, self.layout, self.settings.sites)
        return slow * j.steps * self.step_time.step_time_s(j.model, self.gen, tuple(slc.shape), slc.twisted,
                                                           slices=j.slices, sites=sites)

    def slowdown(self, job: SimJob, slc, degraded: bool | None = None) -> float:
        """Run time factor on `slc`: a degraded torus's (config.degraded_slowdown) times a
        non-native placement's (`reshape_slowdown`)."""
        slow = self.reshape_slowdown(job, slc)
        if not job.request.allow_degraded:
            return slow
        if degraded is None:
            degraded = is_degraded(self.state, self.layout, slc)
        return slow * (self.config.degraded_slowdown if degraded else 1.0)

    def reshape_slowdown(self, job: SimJob, slc) -> float:
        """A folded, split or scattered slice's run time factor: the job's model (or, for a job
        given in time, `config.slowdown_model`) stepped on that slice over its step as asked; 1
        for a native slice, or when there is no model to step (`charged` says which)."""
        if getattr(slc, "form", "native") == "native":
            return 1.0
        model = self.slowdown_model(job)
        if model is None:
            return 1.0
        slc = slc.slice if hasattr(slc, "assignment") else slc
        overrides = self.config.slowdown_overrides if job.job.model is None else None
        return self.pricer.slowdown(model, self.gen, slc, self.layout, overrides=overrides)[0]

    def charged(self, job: SimJob, slc) -> bool:
        """Whether the run's placement is priced: a native slice, or a model to step on it."""
        return getattr(slc, "form", "native") == "native" or self.slowdown_model(job) is not None
