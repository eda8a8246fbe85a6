"""The scenario file as one pydantic schema: what to simulate, on what fleet, judged by what.

A scenario is either a *job stream* on a fleet (workload `synthetic` or `trace`: the cluster
simulation, with failures, a queue policy and a horizon) or a *step study* (workload `step`: one
training job's step on a slice or several slices, on the flow-level engine). Field-by-field
rules that need the generation (shapes, figure names, presets) live in `podsim.scenario.check`.
Durations, rates and fractions may carry units ('3h', '2/h', '99.5%').
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from podsim.errors import PodsimError
from podsim.scenario.fields import Duration, Fraction, Rate
from podsim.topology import get_generation


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _existing_file(value: Any, info: ValidationInfo) -> Path:
    """A path relative to the scenario file's folder (the loader passes it as `base_dir`)."""
    path = Path(str(value)).expanduser()
    base = (info.context or {}).get("base_dir")
    if not path.is_absolute() and base is not None:
        path = Path(base) / path
    if not path.is_file():
        raise PodsimError(f"file {str(value)!r} does not exist (looked for {path})")
    return path


class FigureOverride(_Model):
    """A published figure replaced for this scenario; the new value needs its source."""

    value: float = Field(..., description="in the figure's own unit (see `podsim topology GEN --json`)")
    source: str = Field(..., min_length=1, description="where the value comes from: a quote, a row id, a URL")
    unit: str | None = Field(None, description="optional; must equal the figure's unit")
    note: str = ""


class Topology(_Model):
    """The fleet: `pods` pods of one generation, wired through OCS or statically."""

    generation: str = Field(..., description="generation id, e.g. tpu-v4, tpu-v5p")
    pods: int = Field(1, ge=1, description="pods in the fleet")
    wiring: Literal["ocs", "static"] = Field("ocs", description="ocs: cubes joined by OCS; static: cubes fixed in the home arrangement")
    overrides: dict[str, FigureOverride] = Field(default_factory=dict, description="figure name -> {value, source}")

    @field_validator("generation")
    @classmethod
    def _known(cls, v: str) -> str:
        get_generation(v)
        return v


class Dcn(_Model):
    """The data-centre network between hosts: an EPS leaf-spine Clos or OCS-joined blocks."""

    kind: Literal["eps", "ocs"] = "eps"
    hosts_per_leaf: int = Field(16, ge=1, description="hosts under one leaf switch / aggregation block")
    spines: int = Field(8, ge=1, description="spine switches (eps)")
    oversubscription: float = Field(1.0, ge=1.0, description="host NIC bandwidth : leaf uplink bandwidth (eps)")
    switch_latency: Duration = Field(500e-9, description="per switch traversal (eps.11: 300-600 ns)")
    ocs_groups: Literal["job", "none"] | tuple[tuple[int, ...], ...] = Field(
        "none", description="ocs: 'job' engineers circuits among the blocks the step job spans; or lists of leaf ids")
    sites: int = Field(1, ge=1, description="data centres a step job's slices split over, joined by WAN links (eps)")
    wan_latency: Duration = Field(1e-3, description="one-way WAN latency between sites (assumption: ~200 km of fibre)")
    wan_gbps: float = Field(12800.0, gt=0, description="WAN capacity per site pair and direction, Gb/s (assumption: 16 x 800GbE)")

    @field_validator("ocs_groups", mode="before")
    @classmethod
    def _groups(cls, v: Any) -> Any:
        if isinstance(v, str) and v not in ("job", "none"):
            raise PodsimError(f"ocs_groups {v!r}: use 'job', 'none' or lists of leaf ids, e.g. [[0, 1, 2, 3]]")
        return v


class DurationDist(_Model):
    """Run time of a job on the slice it asked for (lognormal, exponential, fixed, uniform)."""

    kind: Literal["lognormal", "exponential", "fixed", "uniform"] = "lognormal"
    median: Duration = 3 * 3600.0
    sigma: float = Field(1.0, ge=0)
    mean: Duration = 3 * 3600.0
    low: Duration = 600.0
    high: Duration = 86400.0
    max: Duration | None = None


class StepsDist(_Model):
    """Length of step-based jobs in training steps."""

    kind: Literal["lognormal", "fixed", "uniform"] = "lognormal"
    median: float = Field(10000, gt=0)
    sigma: float = Field(0.5, ge=0)
    low: float = Field(1000, gt=0)
    high: float = Field(100000, gt=0)


class Synthetic(_Model):
    """A seeded synthetic job stream (podsim.workload.SyntheticSpec with units)."""

    jobs: int = Field(200, ge=1)
    rate: Rate | None = Field(None, description="Poisson arrivals, e.g. 2/h or 48/d")
    gaps: tuple[Duration, ...] | None = Field(None, description="given inter-arrival gaps, cycled")
    duration: DurationDist = DurationDist()
    mix: Any = Field("v4", description="'v4' (the v4 paper's popularity table) or SHAPE[_T|_NT] -> weight")
    priorities: dict[int, float] = Field(default_factory=lambda: {0: 1.0})
    models: dict[str, float] = Field(default_factory=dict, description="model preset -> weight: jobs given in steps")
    steps: StepsDist = StepsDist()

    @field_validator("mix")
    @classmethod
    def _mix(cls, v: Any) -> Any:
        if isinstance(v, str):
            if v.lower() != "v4":
                raise PodsimError(f"mix {v!r}: use 'v4' (the TPU v4 paper's popularity table) or a mapping SHAPE[_T|_NT]: weight")
            return "v4"
        if not isinstance(v, dict) or not v:
            raise PodsimError("mix: use 'v4' or a non-empty mapping SHAPE[_T|_NT]: weight, e.g. {4x4x4: 2, 4x4x8_T: 1}")
        out = {}
        for k, w in v.items():
            if isinstance(w, bool) or not isinstance(w, (int, float)) or w < 0:
                raise PodsimError(f"mix weight of {k!r} is {w!r}; weights are numbers >= 0")
            out[str(k)] = float(w)
        return out

    @model_validator(mode="after")
    def _arrivals(self) -> Synthetic:
        if (self.rate is None) == (self.gaps is None):
            raise ValueError("give rate (Poisson arrivals, e.g. 2/h) or gaps (a list of durations), one of the two")
        return self


class TraceColumns(_Model):
    id: str = "job_id"
    submit: str = "submission_time"
    duration: str = "duration"
    accelerators: str = "num_gpu"
    time_scale: float = Field(1.0, gt=0)


class TraceWorkload(_Model):
    """A real job trace (CSV) replayed: accelerator counts round up to the generation's shapes."""

    path: Path
    columns: TraceColumns = TraceColumns()
    arrival_scale: float = Field(1.0, gt=0, description="multiply submission times (0.9: 11% more load)")
    limit: int | None = Field(None, ge=1)

    _path = field_validator("path", mode="before")(_existing_file)


class StepWorkload(_Model):
    """One training job's step on `slices` slices of `slice`, simulated on the flow-level engine."""

    model: str | None = Field(None, description="model preset (podsim trace models)")
    trace: Path | None = Field(None, description="a trace file instead of a preset")
    model_overrides: dict[str, Any] = Field(default_factory=dict, description="preset fields, e.g. {global_batch: 2048}")
    slice: str = Field(..., description="slice shape, e.g. 4x4x8")
    twisted: bool = False
    slices: int = Field(1, ge=1, description="slices of a multislice job (data parallel over the DCN)")
    parallelism: str | None = Field(None, description="e.g. 'fsdp=16,tensor=8'; default: data (ResNet) or fsdp over every chip")
    steps: int | None = Field(None, ge=1, description="training steps, for time to train, chip-hours and cost")
    compute_efficiency: float = Field(0.6, gt=0, le=1, description="fraction of peak FLOP/s compute reaches (perf.3: 0.6)")

    _trace = field_validator("trace", mode="before")(_existing_file)

    @model_validator(mode="after")
    def _one_source(self) -> StepWorkload:
        if (self.model is None) == (self.trace is None):
            raise ValueError("give model (a preset) or trace (a file), one of the two")
        return self


class Workload(_Model):
    """Exactly one of: a synthetic job stream, a job trace, or a step study."""

    synthetic: Synthetic | None = None
    trace: TraceWorkload | None = None
    step: StepWorkload | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Workload:
        given = [k for k in ("synthetic", "trace", "step") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of synthetic, trace or step (got {', '.join(given) or 'none'})")
        return self

    @property
    def kind(self) -> str:
        return "step" if self.step is not None else "cluster"


class FailureSpec(_Model):
    """Up/down renewal process of one kind of part: availability or MTBF, and MTTR."""

    availability: Fraction | None = Field(None, description="steady-state availability, e.g. 99.5%")
    mtbf: Duration | None = Field(None, description="mean time between failures of one part")
    mttr: Duration = Field(3600.0, description="mean time to repair")
    distribution: Literal["exponential", "weibull"] = "exponential"
    weibull_shape: float = Field(1.0, gt=0)

    @model_validator(mode="after")
    def _one(self) -> FailureSpec:
        if (self.availability is None) == (self.mtbf is None):
            raise ValueError("give availability (e.g. 99.5%) or mtbf (e.g. 2000h), one of the two")
        if self.availability is not None and not 0 < self.availability < 1:
            raise ValueError(f"availability {self.availability} must be strictly between 0 and 1")
        if (self.mtbf is not None and self.mtbf <= 0) or self.mttr <= 0:
            raise ValueError("mtbf and mttr must be > 0")
        return self


class Failures(_Model):
    host: FailureSpec | None = None
    ocs: FailureSpec | None = None
    link: FailureSpec | None = None
    trace: Path | None = Field(None, description="CSV time_s, component, id, repair_s instead of processes")

    _trace = field_validator("trace", mode="before")(_existing_file)

    @model_validator(mode="after")
    def _trace_or_processes(self) -> Failures:
        if self.trace is not None and self.any_process:
            raise ValueError("give a failure trace or failure processes (host, ocs, link), not both")
        return self

    @property
    def any_process(self) -> bool:
        return any(p is not None for p in (self.host, self.ocs, self.link))

    @property
    def given(self) -> bool:
        return self.any_process or self.trace is not None


class Policy(_Model):
    name: Literal["fifo", "backfill", "priority"] = "fifo"
    checkpoint_interval: Duration = 3600.0
    restart_overhead: Duration = 300.0
    schedule_depth: int = Field(500, ge=1)
    untwist_on_static: bool = True


class Solver(_Model):
    kind: Literal["greedy", "cpsat"] = "greedy"
    placement: Literal["best", "first"] = "best"
    decision_time_limit: float = Field(1.0, gt=0, description="CP-SAT limit per decision (deterministic units)")
    batch_window: int = Field(32, ge=1)
    workers: int = Field(1, ge=1, description="CP-SAT workers (a sweep caps this at 1 per sweep worker)")


class StepTime(_Model):
    """How step-based jobs of a job stream get their step time: roofline or the engine."""

    model: Literal["roofline", "engine"] = "roofline"
    efficiency: float = Field(0.6, gt=0, le=1, description="fraction of peak FLOP/s (perf.3: 0.6)")
    parallelism: dict[str, str] = Field(default_factory=dict, description="model preset -> plan for the engine, e.g. 'tensor=4,fsdp=auto'")


class Reference(_Model):
    """A published figure to set beside a result (e.g. an MLPerf step time)."""

    value: Duration = Field(..., description="in the metric's base unit (seconds, a fraction, USD) or a duration")
    source: str = Field(..., min_length=1)
    note: str = ""


class Scenario(_Model):
    """One scenario file."""

    name: str = Field(..., min_length=1)
    question: str = ""
    description: str = ""
    topology: Topology
    dcn: Dcn = Dcn()
    workload: Workload
    failures: Failures = Failures()
    policy: Policy = Policy()
    solver: Solver = Solver()
    step_time: StepTime = StepTime()
    horizon: Duration | None = Field(None, description="simulated time of a job stream, e.g. 14d")
    seed: int = Field(0, ge=0)
    samples: int = Field(500, ge=2, le=20000, description="time-series samples over the horizon")
    targets: dict[str, Any] = Field(default_factory=dict, description="metric -> '<= 1h' / '>= 95%'")
    references: dict[str, Reference] = Field(default_factory=dict, description="metric -> published figure")

    @property
    def kind(self) -> str:
        return self.workload.kind
