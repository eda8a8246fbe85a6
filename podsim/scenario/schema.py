"""The scenario file as one pydantic schema: what to simulate, on what fleet, judged by what.

A scenario is either a *job stream* on a fleet (workload `synthetic` or `trace`: the cluster
simulation, with failures, a queue policy and a horizon), a *step study* (workload `step`: one
training job's step on a slice or several slices, on the flow-level engine) or a *serving fleet*
(workload `serving`: requests served by replicas of a slice, podsim.serving). Field-by-field
rules that need the generation (shapes, figure names, presets) live in `podsim.scenario.check`.
Durations, rates and fractions may carry units ('3h', '2/h', '99.5%').
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)

from podsim import quantities as q
from podsim.cluster.config import config_fields
from podsim.cluster.failures import FailureSpec
from podsim.economics.assumptions import DEFAULTS as SPINE_DEFAULTS
from podsim.errors import PodsimError
from podsim.files import check_input_file
from podsim.quantities import Duration, Fraction, JobCount, Priority, Rate, Seed, Weight
from podsim.serving.spec import ServingWorkload
from podsim.study.multislice import MultisliceSpec
from podsim.topology import DcnSpec, get_generation
from podsim.trace.generate import GenerateOptions
from podsim.trace.options import Recompute
from podsim.workload.odd import OddShapeSpec
from podsim.workload.popularity import V4_SLICE_POPULARITY
from podsim.workload.replay import TraceSpec
from podsim.workload.synthetic import ArrivalSpec, DurationSpec, StepsSpec, SyntheticSpec


class _Model(q.NoBoolNumbers):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


def _existing_file(value: Any, info: ValidationInfo) -> Path | None:
    """A path relative to the scenario file's folder (the loader passes it as `base_dir`)."""
    if value is None:  # an optional file left out (as a stored scenario writes it)
        return None
    path = Path(str(value)).expanduser()
    base = (info.context or {}).get("base_dir")
    if not path.is_absolute() and base is not None:
        path = Path(base) / path
    if not path.exists():
        raise PodsimError(f"file {str(value)!r} does not exist (looked for {path})")
    return check_input_file(path, "input")  # a folder, a FIFO or a device: one line, nothing opened


class FigureOverride(_Model):
    """A published figure replaced for this scenario; the new value needs its source."""

    value: float = Field(..., description="in the figure's own unit (see `podsim topology GEN --json`)")
    source: str = Field(..., min_length=1, description="where the value comes from: a quote, a row id, a URL")
    unit: str | None = Field(None, description="optional; must equal the figure's unit")
    note: str = ""


class Topology(_Model):
    """The fleet: `pods` pods of one generation, wired through OCS or statically."""

    generation: str = Field(..., description="generation id, e.g. tpu-v4, tpu-v5p")
    pods: q.PODS.type = Field(1, description="pods in the fleet")
    wiring: Literal["ocs", "static"] = Field("ocs", description="ocs: cubes joined by OCS; static: cubes fixed in the home arrangement")
    routing: Literal["dimension_order", "shortest_paths", "adaptive"] = Field(
        "dimension_order", description="ICI routing inside a slice: one dimension-order path, an even split over all "
        "minimal paths, or minimal paths re-split by link load (podsim.topology.multipath)")
    overrides: dict[str, FigureOverride] = Field(default_factory=dict, description="figure name -> {value, source}")

    @field_validator("generation")
    @classmethod
    def _known(cls, v: str) -> str:
        get_generation(v)
        return v


def renamed(**names: str):
    """A before-validator that refuses a field's old spelling in one line naming the new one."""

    def check(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for old, new in names.items():
                if old in data:
                    raise PodsimError(f"{old!r} is now spelled {new!r} (same value); rename the field")
        return data

    return model_validator(mode="before")(classmethod(check))


class Dcn(DcnSpec):
    """The data-centre network between hosts (podsim.topology.DcnSpec: an EPS leaf-spine Clos or
    OCS-joined blocks, sites joined by WAN links), with one scenario value more: `ocs_groups: job`
    engineers an OCS DCN's circuits among the blocks the step job spans."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    ocs_groups: Literal["job", "none"] | tuple[tuple[int, ...], ...] = Field(
        "none", description="ocs: 'job' engineers circuits among the blocks the step job spans; or lists of leaf ids")

    _renamed = renamed(switch_latency="switch_latency_s", wan_latency="wan_latency_s")

    @field_validator("ocs_groups", mode="before")
    @classmethod
    def _groups(cls, v: Any) -> Any:
        if isinstance(v, str) and v not in ("job", "none"):
            raise PodsimError(f"ocs_groups {v!r}: use 'job', 'none' or lists of leaf ids, e.g. [[0, 1, 2, 3]]")
        return v

    @property
    def engineered(self) -> bool:
        """Circuits engineered for the step job's blocks (`ocs_groups: job`)."""
        return self.ocs_groups == "job"

    def spec(self) -> DcnSpec:
        """As the topology's DcnSpec (explicit OCS groups only; 'job' groups are engineered by build_job)."""
        groups = self.ocs_groups if isinstance(self.ocs_groups, tuple) else ()
        given = {k: getattr(self, k) for k in self.model_fields_set if k != "ocs_groups"}  # a tiered DCN refuses derived fields
        return DcnSpec(**given, ocs_groups=groups)


class Synthetic(_Model):
    """A seeded synthetic job stream: podsim.workload.SyntheticSpec in the scenario's short form
    (`rate` or `gaps` for its `arrival`, `mix` for its `slice_mix`; `spec()` gives the SyntheticSpec)."""

    jobs: JobCount = SyntheticSpec.model_fields["jobs"].default
    rate: Annotated[Rate, AfterValidator(q.ARRIVAL_RATE.check)] | None = Field(None, description="Poisson arrivals, e.g. 2/h, 48/d or 5/w")
    gaps: tuple[q.JOB_GAP.duration, ...] | None = Field(None, min_length=1, description="given inter-arrival gaps, cycled (at least one)")
    duration: DurationSpec = DurationSpec()
    mix: Any = Field("v4", description="'v4' (the v4 paper's popularity table) or SHAPE[_T|_NT] -> weight")
    priorities: dict[Priority, Weight] = Field(default_factory=SyntheticSpec.model_fields["priorities"].default_factory)
    models: dict[str, Weight] = Field(default_factory=dict, description="model preset -> weight: jobs given in steps")
    steps: StepsSpec = StepsSpec()
    slices: dict[q.JOB_SLICES.type, Weight] = Field(default_factory=lambda: {1: 1.0},
                                     description="slices per job -> weight: multislice jobs (all or none, fewest pods)")
    span_sites: bool = Field(False, description="multislice jobs may be split over the DCN's sites")

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
            if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0:
                raise PodsimError(f"mix weight of {k!r} is {w!r}; weights are numbers >= 0")
            out[str(k)] = float(q.WEIGHT.check(w, f"mix weight of {k!r}"))
        return out

    @model_validator(mode="after")
    def _arrivals(self) -> Synthetic:
        if (self.rate is None) == (self.gaps is None):
            raise ValueError("give rate (Poisson arrivals, e.g. 2/h) or gaps (a list of durations), one of the two")
        return self

    def spec(self, generation: str) -> SyntheticSpec:
        """The library's SyntheticSpec for this stream on `generation`."""
        arrival = ArrivalSpec(rate_per_h=self.rate) if self.rate is not None else ArrivalSpec(kind="given", gaps_s=self.gaps)
        mix = dict(V4_SLICE_POPULARITY) if self.mix == "v4" else dict(self.mix)
        return SyntheticSpec(generation=generation, arrival=arrival, slice_mix=mix,
                             **self.model_dump(include={"jobs", "priorities", "models", "slices", "span_sites"}), duration=self.duration, steps=self.steps)


class TraceWorkload(TraceSpec):
    """A real job trace (CSV) replayed (podsim.workload.TraceSpec), its path relative to the scenario file."""

    _path = field_validator("path", mode="before")(_existing_file)


class StepWorkload(_Model):
    """One training job's step on `slices` slices of `slice`, simulated on the flow-level engine."""

    model: str | None = Field(None, description="model preset (podsim trace models)")
    trace: Path | None = Field(None, description="a trace file instead of a preset")
    model_overrides: dict[str, Any] = Field(default_factory=dict, description="preset fields, e.g. {global_batch: 2048}")
    slice: str = Field(..., description="slice shape, e.g. 4x4x8")
    twisted: bool = False
    slices: q.JOB_SLICES.type = Field(1, description="slices of a multislice job (data parallel over the DCN)")
    parallelism: str | None = Field(None, description="e.g. 'fsdp=16,tensor=8'; default: data (ResNet) or fsdp over every chip")
    steps: q.TRAINING_STEPS_INT.type | None = Field(None, description="training steps, for time to train, chip-hours and cost")
    compute_efficiency: q.EFFICIENCY.type | None = Field(None, description="a flat fraction of peak FLOP/s for every "
                                             "compute op (e.g. 0.6, perf.3); default: the per-op compute model (podsim.perf)")
    options: GenerateOptions = Field(default_factory=GenerateOptions, description="how the generated step runs "
                                     "(podsim.trace.GenerateOptions; a preset model only)")
    multislice: MultisliceSpec = Field(default_factory=MultisliceSpec, description="what running on several slices adds beyond "
                                       "the DCN time the engine leaves exposed (podsim.study.multislice: straggler wait, ECMP collisions)")

    _trace = field_validator("trace", mode="before")(_existing_file)

    @model_validator(mode="after")
    def _one_source(self) -> StepWorkload:
        if (self.model is None) == (self.trace is None):
            raise ValueError("give model (a preset) or trace (a file), one of the two")
        if self.trace is not None and self.options != GenerateOptions():
            raise ValueError("options shape a generated step; a trace file already holds its ops (drop options or give model)")
        return self


class Workload(_Model):
    """Exactly one of: a synthetic job stream, a job trace, an odd-shape job stream (podsim.workload.odd:
    sizes from a truncated exponential, shapes their factorisations, jobs given in time), a step study,
    or a serving fleet."""

    synthetic: Synthetic | None = None
    trace: TraceWorkload | None = None
    odd: OddShapeSpec | None = None
    step: StepWorkload | None = None
    serving: ServingWorkload | None = Field(None, description="a serving fleet: a model on replicas of a slice, its "
                                            "request stream, batch policy and latency targets (podsim.serving)")

    @model_validator(mode="after")
    def _exactly_one(self) -> Workload:
        given = [k for k in ("synthetic", "trace", "odd", "step", "serving") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of synthetic, trace, odd, step or serving (got {', '.join(given) or 'none'})")
        return self

    @property
    def kind(self) -> str:
        return "step" if self.step is not None else "serving" if self.serving is not None else "cluster"


class Failures(_Model):
    """Failure processes of hosts, OCS units and ICI cables (podsim.cluster.failures.FailureSpec), or a trace."""

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


# A scenario's policy: and solver: sections are ClusterConfig's fields under the scenario's names
# (scenario name -> ClusterConfig field): each field's type, range, default and description live there.
POLICY_FIELDS = {"name": "policy", "checkpoint_interval": "checkpoint_interval_s", "restart_overhead": "restart_overhead_s",
                 "schedule_depth": "schedule_depth", "untwist_on_static": "untwist_on_static"}
SOLVER_FIELDS = {"kind": "solver", "placement": "placement", "degraded_placement": "degraded_placement",
                 "spare_ports": "spare_ports", "degraded_slowdown": "degraded_slowdown",
                 "decision_time_limit": "decision_time_limit", "batch_window": "batch_window", "workers": "cpsat_workers",
                 "fold": "fold", "slowdown_model": "slowdown_model", "slowdown_overrides": "slowdown_overrides"}

Policy = create_model("Policy", __base__=_Model, __module__=__name__, **config_fields(POLICY_FIELDS),
                      __doc__="The queue policy and restarts: podsim.cluster.ClusterConfig's fields (POLICY_FIELDS).")
Solver = create_model("Solver", __base__=_Model, __module__=__name__, **config_fields(SOLVER_FIELDS),
                      __doc__="How jobs are placed: podsim.cluster.ClusterConfig's fields (SOLVER_FIELDS).")


class StepTime(_Model):
    """How step-based jobs of a job stream get their step time: roofline (compute only) or the
    engine; either runs each job's step study with the model's plan from `parallelism`."""

    model: Literal["roofline", "engine"] = "roofline"
    compute_efficiency: q.EFFICIENCY.type | None = Field(None, description="a flat fraction of peak FLOP/s for every "
                                             "compute op (e.g. 0.6, perf.3); default: the per-op compute model (podsim.perf)")
    parallelism: dict[str, str] = Field(default_factory=dict, description="model preset -> plan, e.g. 'tensor=4,fsdp=auto'; "
                                        "default: FSDP as far as the batch splits, tensor parallel over the rest")

    _renamed = renamed(efficiency="compute_efficiency")


class Reference(_Model):
    """A published figure to set beside a result (e.g. an MLPerf step time)."""

    value: Duration = Field(..., description="in the metric's base unit (seconds, a fraction, USD) or a duration")
    source: str = Field(..., min_length=1)
    note: str = ""


class SpineGeneration(_Model):
    """Hosts and optics arriving in `year`: the DCN link (port) speed from then on."""

    year: int = Field(..., ge=0, le=50, description="year of the fleet's life it arrives (0 = first)")
    link_gbps: q.PORT_GBPS.type = Field(..., description="DCN link speed of its optics and switch ports, Gbps")
    host_gbps: q.PORT_GBPS.type | None = Field(None, description="DCN bandwidth per host; default: the generation's, scaled with link_gbps")
    transceiver_usd: q.USD.type | None = Field(None, description="price of one transceiver; default: link_gbps x assumption")
    transceiver_w: q.WATTS.type | None = Field(None, description="power of one transceiver; default: link_gbps x assumption")
    eps_usd_per_gbps: q.USD_PER_GBPS.type | None = Field(None, description="electrical switch ports bought from this year; default: the assumption (eps.17)")
    eps_w_per_gbps: q.W_PER_GBPS.type | None = Field(None, description="their power per Gbps; default: eps_switch_w / eps_switch_gbps (apo.7, eps.2)")
    source: str = Field("", description="where this generation's figures come from")


class SpineFigure(_Model):
    """A spine-model figure replaced for this scenario (podsim.economics.assumptions names)."""

    value: q.SPINE_FIGURE.type
    source: str = Field(..., min_length=1, description="a row id, a quote or 'assumption'")
    note: str = ""


class Spine(_Model):
    """Spine economics (issue 17): an EPS Clos against an OCS DCN over the fleet's life.

    Both are built as `dcn` describes (hosts per leaf, spines, oversubscription) on `pods` pods;
    the step workload runs on both each year, the OCS with `dcn.ocs_groups` (give `dcn: {kind:
    ocs, ocs_groups: job}` to engineer its circuits for the job; otherwise a uniform mesh)."""

    years: int = Field(6, ge=1, le=30, description="years of the fleet's life")
    generations: tuple[SpineGeneration, ...] = Field(..., min_length=1, description="hosts and optics by year, the first in year 0")
    pods: q.PODS.type | None = Field(None, description="pods the DCN spans (default topology.pods)")
    busy_fraction: Fraction = Field(1.0, description="share of the fleet's chip-hours running the step workload (an assumption)")
    assumptions: dict[str, SpineFigure] = Field(default_factory=dict, description="figure name -> {value, source}")

    @model_validator(mode="after")
    def _ordered(self) -> Spine:
        years = [g.year for g in self.generations]
        if years[0] != 0:
            raise PodsimError(f"spine.generations: the first arrives in year {years[0]}; it must arrive in year 0")
        if any(b <= a for a, b in zip(years, years[1:], strict=False)):
            raise PodsimError(f"spine.generations: years {years} must increase")
        if years[-1] >= self.years:
            raise PodsimError(f"spine.generations: year {years[-1]} is outside the {self.years} years (0..{self.years - 1})")
        if not 0 < self.busy_fraction <= 1:
            raise PodsimError(f"spine.busy_fraction: {self.busy_fraction} must be in (0, 1]")
        unknown = sorted(set(self.assumptions) - set(SPINE_DEFAULTS))
        if unknown:
            raise PodsimError(f"spine.assumptions: unknown figure {unknown[0]!r}; known: {', '.join(SPINE_DEFAULTS)}")
        return self


class Scaling(_Model):
    """A weak-scaling study (issue 13): one model on 1, 2, 4, ... slices of `slice`, the batch per
    slice fixed, on the scenario's generation (with its overrides), wiring, routing and DCN
    (`dcn`: kind, oversubscription, sites, ocs_groups). Results: the `scaling` table and `scaling_*` metrics."""

    model: str = Field(..., description="model preset (podsim trace models)")
    model_overrides: dict[str, Any] = Field(default_factory=dict, description="preset fields, e.g. {n_layers: 4}; "
                                            "not global_batch (the study sets it: batch_per_slice x slices)")
    slice: str = Field(..., description="shape of each slice, e.g. 4x4x4 (whole cubes of an OCS pod)")
    parallelism: str | None = Field(None, description="plan inside a slice, no dcn (the study adds dcn = slices), e.g. "
                                    "'fsdp=16,tensor=4'; default: data (ResNet) or fsdp over every chip")
    slices: tuple[q.JOB_SLICES.type, ...] = Field(..., description="slice counts, increasing, e.g. [1, 2, 4, 8]")
    batch_per_slice: q.BATCH.type = Field(..., description="global batch per slice (weak scaling: global batch = this x slices)")
    compute_efficiency: q.EFFICIENCY.type | None = Field(None, description="flat fraction of peak FLOP/s; default: "
                                             "the per-op compute model (as `podsim scaling`)")
    options: GenerateOptions = Field(default_factory=GenerateOptions, description="how each generated step runs (podsim.trace.GenerateOptions)")
    multislice: MultisliceSpec = Field(default_factory=MultisliceSpec, description="what running on several slices adds beyond "
                                       "the DCN time the engine leaves exposed (podsim.study.multislice)")


class PlanSection(_Model):
    """A plan search (issue 34, podsim.plan): the best parallelism plans of `model` on `chips` of the
    scenario's generation (with its overrides) over its DCN, ranked analytically and the best `top`
    confirmed on the engine; with `tokens`, the time to train them there, or with `days` the fewest
    chips that finish in time (host failures: the scenario's `failures.host`). Results: the `plan`
    table (one row per confirmed plan) and `plan_*` metrics."""

    model: str = Field(..., description="transformer model preset (podsim trace models)")
    model_overrides: dict[str, Any] = Field(default_factory=dict, description="preset fields, e.g. {global_batch: 2048}")
    chips: q.TENSOR_CHIPS.type | None = Field(None, description="chip budget: every split into equal slices")
    slice: str | None = Field(None, description="a fixed slice shape instead, e.g. 8x8x16")
    slices: q.JOB_SLICES.type | None = Field(None, description="a fixed slice count")
    options: GenerateOptions = Field(default_factory=GenerateOptions, description="generator options held fixed (not the searched ones)")
    recompute: tuple[Recompute, ...] | None = Field(None, description="recompute policies searched (default: every policy the generator has)")
    microbatches: tuple[q.MICROBATCHES.type, ...] | None = Field(None, description="micro-batch counts searched (default: every divisor up to 64)")
    collective_matmul: tuple[Literal["exposed", "all_gather", "reduce_scatter", "chunked"], ...] = Field(
        ("exposed", "all_gather", "reduce_scatter", "chunked"), description="collective-matmul modes searched with sequence parallelism")
    top: int = Field(5, ge=1, le=50, description="plans confirmed on the engine")
    tokens: str | float | None = Field(None, description="time to train this many tokens, e.g. 2T")
    days: float | None = Field(None, gt=0, description="with tokens: the fewest chips that finish within this many days")
    max_chips: q.TENSOR_CHIPS.type = Field(65536, description="with days: the most chips tried")
    checkpoint_interval: q.CHECKPOINT_INTERVAL.duration | None = Field(None, description="default: the cluster's (1h)")
    restart_overhead: q.RESTART_OVERHEAD.duration | None = Field(None, description="default: the cluster's (300s)")
    price_per_chip_hour: float | None = Field(None, gt=0, description="USD; default: the generation's published price")
    power_per_chip: float | None = Field(None, gt=0, description="W; default: the generation's published power")


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
    horizon: q.HORIZON.duration | None = Field(None, description="simulated time of a job stream, e.g. 14d (a second to a century)")
    warmup: q.JOB_GAP.duration = Field(0.0, description="job streams: leave the time before this (the fleet filling up) and "
                                                          "the jobs submitted in it out of the steady-state metrics, e.g. 2d")
    drain: bool = Field(False, description="job streams: after the horizon, let the jobs of the measured window run on "
                                           "(no arrivals) so their waits and slowdowns are whole")
    drain_limit: q.HORIZON.duration | None = Field(None, description="how long a drain may run past the horizon (default: one horizon)")
    seed: Seed = 0
    replicates: q.REPLICATES.type = Field(1, description="independent repeats of a job stream, seeds from "
                                          "numpy SeedSequence(seed).spawn(n); key figures are the mean with a 95% interval")
    samples: q.SAMPLES.type = Field(500, description="time-series samples over the horizon")
    targets: dict[str, Any] = Field(default_factory=dict, description="metric -> '<= 1h' / '>= 95%'")
    references: dict[str, Reference] = Field(default_factory=dict, description="metric -> published figure")
    spine: Spine | None = Field(None, description="spine economics: EPS against OCS over the fleet's life (needs a step workload)")
    scaling: Scaling | None = Field(None, description="weak-scaling study: step time, MFU and parallel efficiency against slice count")
    plan: PlanSection | None = Field(None, description="plan search: the best parallelism plans on a chip budget; with tokens, time to train")

    @property
    def kind(self) -> str:
        return self.workload.kind
