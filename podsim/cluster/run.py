"""`ClusterRun`: everything one cluster simulation is asked to do, as one validated object.

A scenario file (`podsim run`), the `podsim cluster` flags and the dashboard's Cluster page each
build a ClusterRun and hand it to `run_cluster`, so a default, a unit or a job-stream reader
lives in one place: the fleet and how it is run (ClusterConfig), the job stream (a synthetic
SyntheticSpec or a replayed TraceSpec), failures given as a trace, the compute timing of
step-based jobs (the per-op model, or a flat efficiency as an override) and the seed.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from podsim.cluster.config import ClusterConfig
from podsim.cluster.failures import FailureEvent, load_failure_trace
from podsim.cluster.result import ClusterResult
from podsim.cluster.simulate import ProgressFn, simulate
from podsim.errors import PodsimError, first_error
from podsim.quantities import Seed
from podsim.study import CachedStepTime, RooflineStepTime, StepTimeModel
from podsim.study.steptime import default_study
from podsim.workload import Job, SyntheticSpec, TraceSpec, generate_jobs
from podsim.workload.odd import OddShapeSpec, odd_shape_jobs


class ClusterRun(BaseModel):
    """A cluster simulation: `config`, one job stream (`synthetic`, `trace` or `odd`), an optional
    failure trace (instead of `config.failures`' processes), the compute efficiency (None: the
    per-op model) and the seed."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    config: ClusterConfig
    synthetic: SyntheticSpec | None = Field(None, description="a seeded synthetic job stream")
    trace: TraceSpec | None = Field(None, description="a job trace CSV replayed")
    odd: OddShapeSpec | None = Field(None, description="an odd-shape job stream (sizes from a truncated exponential, "
                                     "shapes their factorisations; podsim.workload.odd)")
    failure_trace: Path | None = Field(None, description="CSV time_s, component, id, repair_s instead of drawn failures")
    compute_efficiency: float | None = Field(None, gt=0, le=1,
                                     description="a flat fraction of peak FLOP/s for step-based jobs' compute (e.g. 0.6, "
                                                 "perf.3); default: the per-op compute model (podsim.perf)")
    seed: Seed = Field(0, description="seed of the synthetic jobs, the failures and CP-SAT")

    @model_validator(mode="after")
    def _one_stream(self) -> ClusterRun:
        if sum(x is not None for x in (self.synthetic, self.trace, self.odd)) != 1:
            raise PodsimError("give exactly one job stream: a synthetic stream, a job trace or an odd-shape stream")
        if self.failure_trace is not None and self.config.failures.any:
            raise PodsimError("give a failure trace or failure processes (host, OCS, link), not both")
        if self.synthetic is not None and self.synthetic.generation != self.config.generation:
            raise PodsimError(f"the job stream is drawn for {self.synthetic.generation}, the fleet is {self.config.generation}")
        return self

    def jobs(self) -> list[Job]:
        if self.trace is not None:
            return self.trace.jobs(self.config.generation)
        if self.odd is not None:
            return odd_shape_jobs(self.odd, self.seed)
        return generate_jobs(self.synthetic, self.seed)

    def failure_events(self) -> list[FailureEvent] | None:
        """The failure trace's events; None: draw them from `config.failures`."""
        return load_failure_trace(self.failure_trace) if self.failure_trace is not None else None


def make_run(**fields) -> ClusterRun:
    """ClusterRun with pydantic's first error as one line naming the field (a user error, exit 2)."""
    try:
        return ClusterRun(**fields)
    except ValidationError as exc:
        where, msg = first_error(exc, "run")
        raise PodsimError(msg if not exc.errors()[0]["loc"] else f"{where}: {msg}") from None


def run_cluster(run: ClusterRun, on_progress: ProgressFn | None = None, step_time: StepTimeModel | CachedStepTime | None = None,
                jobs: list[Job] | None = None) -> ClusterResult:
    """Simulate `run`; `step_time` replaces the roofline (each job's step a default study at
    `run.compute_efficiency`; None: per-op compute), e.g. with the engine on a scenario's studies
    (a CachedStepTime with its `study_of`); `jobs`: `run.jobs()` when the caller has drawn them already."""
    jobs = run.jobs() if jobs is None else jobs
    if not isinstance(step_time, CachedStepTime):
        eff = run.compute_efficiency
        step_time = CachedStepTime(step_time or RooflineStepTime(),
                                   lambda *job: default_study(*job, compute_efficiency=eff))
    return simulate(run.config, jobs, run.failure_events(), seed=run.seed, on_progress=on_progress, step_time=step_time)
