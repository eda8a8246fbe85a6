"""One training step on placed slices, as one request: `StepStudy`, and `run_study(study) ->
StepResult`, the one way podsim simulates a step.

A study names everything a step's time depends on, each as the library's own model: the model
(a preset, its field overrides and `GenerateOptions`) or a trace, the generation, the slice shape
and how many slices, the parallelism plan, the compute model, the DCN (`DcnSpec`, its `sites`
included) and the ICI routing. The CLI (`podsim steptime`, `podsim run`, `podsim scaling`), the
dashboard's Step time page, scenarios, the cluster's step-time model and the validation table
each build a StepStudy and hand it here; none assembles trace -> job -> simulation itself, so an
option a face offers reaches the engine, and a new option of the generator or the DCN (a field
of `GenerateOptions` or `DcnSpec`) reaches every face that passes those models through.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from podsim.collectives.fabricroutes import check_routing
from podsim.engine import StepResult, build_job, simulate_step
from podsim.engine.jobs import Job
from podsim.errors import PodsimError
from podsim.study.multislice import MultisliceSpec, with_terms
from podsim.topology import DcnSpec, Generation, get_generation, parse_shape
from podsim.topology.shapes import validate_shape
from podsim.topology.summary import Built
from podsim.topology.torus import torus_id
from podsim.trace.configs import ModelConfig
from podsim.trace.generate import GenerateOptions, generate_trace
from podsim.trace.model import StepTrace
from podsim.trace.plans import model_config, multislice_plan


@dataclass(frozen=True)
class StepStudy:
    """One training step of `model` (a preset name or a config; or a ready `trace`) on `slices`
    slices of `slice` (None: a whole pod) of `generation`.

    Parameters
    ----------
    generation : the chip generation (an id, or a Generation with scenario figure overrides).
    slice : the shape of each slice ('4x4x8' or a tuple); None: the whole pod.
    model : a preset name (`podsim trace models`) or a ModelConfig; give this or `trace`.
    trace : a step trace to run as it is (loaded from a file); its plan is its own.
    model_overrides : preset fields replaced, e.g. {'global_batch': 2048} (a preset name only).
    plan : the parallelism plan template ('fsdp=16,tensor=8', one axis may be `auto`; dcn is set
        to `slices` when left out); None: the default plan (`podsim.trace.plans.preset_plan`:
        FSDP as far as the batch splits, tensor parallel over the rest; data parallel for ResNet).
    slices : slices of a multislice job, data parallel over the DCN.
    twisted : a twisted torus slice.
    ocs : OCS wiring (False: static cubes).
    options : how the generated step runs (`GenerateOptions`).
    compute_efficiency : the compute model: None times each compute op by the per-op model
        (`podsim.perf`); a number is a flat fraction of peak FLOP/s for every op.
    dcn : the data-centre network between slices (`DcnSpec`; `dcn.sites` data centres).
    multislice : what running on several slices adds to the engine's step beyond the DCN time it
        leaves exposed (`podsim.study.multislice.MultisliceSpec`: the expected straggler wait and
        ECMP collision cost, each on by default, each from its source).
    engineer_dcn : an OCS DCN's circuits engineered among the job's blocks (jup.7).
    routing : ICI routing inside a slice (`podsim.topology.multipath.ROUTING_POLICIES`).
    fast_path : fold symmetric flows (False: simulate every flow; same answer, slower).
    name : the job's name in the result.
    on : a slice already built on a fabric of its own (`podsim.topology.placed`: a placement
        as the cluster made it - a fold, a split, a scattered allocation - or the asked topology
        built of blocks) to run the one slice on; None: `build_job` places the slices.

    Examples
    --------
    >>> from podsim.study import StepStudy, run_study
    >>> study = StepStudy("tpu-v4", "4x4x4", model="llama2-70b", plan="fsdp=16,tensor=4",
    ...                   model_overrides={"n_layers": 2, "global_batch": 16})
    >>> study.chips, study.sites
    (64, 1)
    >>> r = run_study(study)
    >>> r.step_time_s == r.compute_s + r.exposed_comm_s
    True
    """

    generation: Generation | str = "tpu-v4"
    slice: tuple[int, ...] | str | None = None
    model: str | ModelConfig | None = None
    trace: StepTrace | None = field(default=None, hash=False, repr=False)
    model_overrides: Mapping[str, Any] = field(default_factory=dict, hash=False)
    plan: str | None = None
    slices: int = 1
    twisted: bool = False
    ocs: bool = True
    options: GenerateOptions = field(default_factory=GenerateOptions)
    compute_efficiency: float | None = None
    dcn: DcnSpec = field(default_factory=DcnSpec)
    multislice: MultisliceSpec = field(default_factory=MultisliceSpec)
    engineer_dcn: bool = False
    routing: str = "dimension_order"
    fast_path: bool = True
    name: str = "job"
    on: Built | None = field(default=None, hash=False, repr=False)

    def __post_init__(self) -> None:
        gen = get_generation(self.generation)
        object.__setattr__(self, "generation", gen)
        if isinstance(self.slice, str):
            object.__setattr__(self, "slice", parse_shape(self.slice, gen.dims))
        elif self.slice is not None:
            object.__setattr__(self, "slice", tuple(int(d) for d in self.slice))
        object.__setattr__(self, "model_overrides", dict(self.model_overrides or {}))
        if (self.model is None) == (self.trace is None):
            raise PodsimError("a step study needs a model (a preset) or a trace, one of the two")
        if self.trace is not None:
            for name, given in (("options", self.options != GenerateOptions()), ("model_overrides", bool(self.model_overrides)),
                                ("plan", self.plan is not None)):
                if given:
                    raise PodsimError(f"{name} shape a generated step; a trace already holds its ops and plan (drop {name} or give a model)")
        elif not isinstance(self.model, str) and self.model_overrides:
            raise PodsimError(f"model_overrides apply to a preset name; set the fields on the {self.model.name} config instead")
        else:
            model_config(self.model, self.model_overrides)  # an unknown preset or field: one line now, not at run time
        for name in ("slices",):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise PodsimError(f"step time: {name} {v!r} must be a whole number >= 1")
        if self.dcn.sites > self.slices:
            raise PodsimError(f"step time: {self.slices} slice(s) cannot span {self.dcn.sites} sites; sites must be <= slices")
        eff = self.compute_efficiency
        if eff is not None and not (isinstance(eff, (int, float)) and 0 < eff <= 1):
            raise PodsimError(f"compute_efficiency {eff} must be in (0, 1] (a fraction of peak FLOP/s), or None for the per-op model")
        check_routing(self.routing)
        if self.engineer_dcn and self.dcn.kind != "ocs":
            raise PodsimError("engineering DCN circuits for the job needs an OCS DCN (dcn kind ocs)")
        if self.on is not None and self.slices != 1:
            raise PodsimError(f"a study on a built slice runs one slice, not {self.slices}")

    @property
    def shape(self) -> tuple[int, ...]:
        """Each slice's shape (the pod's when `slice` is None)."""
        return self.slice if self.slice is not None else self.generation.pod_shape

    @property
    def chips(self) -> int:
        """Chips per slice."""
        return math.prod(self.shape)

    @property
    def sites(self) -> int:
        """Data centres the slices split over (`dcn.sites`)."""
        return self.dcn.sites

    @property
    def model_name(self) -> str:
        """The model preset's (or config's) name, or the trace's."""
        if self.model is None:
            return self.trace.name
        return self.model if isinstance(self.model, str) else self.model.name

    def replace(self, **changes: Any) -> StepStudy:
        """This study with some fields changed (`sites=N` sets `dcn.sites`)."""
        if "sites" in changes:
            sites = changes.pop("sites")
            dcn = changes.get("dcn", self.dcn)
            changes["dcn"] = dcn if dcn.sites == sites else dcn.model_copy(update={"sites": sites})
        return replace(self, **changes)


def study_plan(study: StepStudy) -> str:
    """The study's parallelism plan as run (dcn included when slices > 1); a trace's own."""
    if study.trace is not None:
        return str((study.trace.meta or {}).get("parallelism", ""))
    return multislice_plan(study.plan, study.model, study.chips, study.slices, study.model_overrides)


def study_trace(study: StepStudy, plan: str | None = None) -> StepTrace:
    """The step trace the study runs: its trace, or the model's generated for its plan (`plan`
    when the caller has resolved it already)."""
    if study.trace is not None:
        return study.trace
    gen = study.generation if study.on is None else trace_generation(study.generation, study.shape)
    return generate_trace(study.model, study.shape, plan or study_plan(study), generation=gen,
                          twisted=study.twisted, overrides=study.model_overrides or None, options=study.options)


def trace_generation(gen: Generation, shape: tuple[int, ...]) -> Generation:
    """`gen`, or for a shape its rules lack (a reshaped request run `on` a built slice) the generic
    torus twin of its pod (same chip figures, `base` = gen), whose rules take any shape: the
    trace is the same program."""
    try:
        validate_shape(gen, shape)
        return gen
    except PodsimError:
        if gen.cube_shape is None or gen.dims != 3 or gen.slice_rule == "torus":
            raise
    gbps = gen.link_bytes_per_s * 8 / 1e9
    return get_generation(torus_id("x".join(map(str, gen.pod_shape)), gen.cube_shape[0], 6, round(gbps, 6), base=gen.id))


def study_job(study: StepStudy, trace: StepTrace | None = None) -> Job:
    """The study's trace as a job on its slices: `build_job` (one slice, or `slices` slices packed
    pod by pod behind the DCN)."""
    trace = study_trace(study) if trace is None else trace
    if study.on is not None:
        return Job.on(study.on, trace, name=study.name)
    return build_job(trace, study.generation, study.slice, study.slices, twisted=study.twisted, ocs=study.ocs,
                     dcn=study.dcn, engineer_dcn=study.engineer_dcn, name=study.name)


def run_study(study: StepStudy, job: Job | None = None) -> StepResult:
    """Simulate one step of the study on the flow-level engine: the one way podsim simulates a step.

    Parameters
    ----------
    study : StepStudy
        The step: model or trace, slices, plan, options, compute model, DCN, routing.
    job : Job, optional
        The study's job as `study_job` built it, for a caller that reruns one job under other
        compute constants (podsim.validation.split.Predictor); None builds it.

    Returns
    -------
    StepResult
        Step time, compute, busy and exposed communication (per level ici / dcn / wan and per
        DCN tier), per-kind totals, the op timeline and link loads; its trace is `result.trace`,
        its fabric (pods, DCN) `result.fabric`. `podsim.engine.step_summary` flattens it. On
        several slices the step also holds what `study.multislice` adds (`result.multislice`):
        step_time_s = compute_s + exposed_comm_s + multislice['added_s'].

    Examples
    --------
    >>> from podsim import StepStudy, run_study
    >>> r = run_study(StepStudy("tpu-v4", "4x4x4", model="llama2-70b", plan="fsdp=16,tensor=4",
    ...                         model_overrides={"n_layers": 2, "global_batch": 32}))
    >>> round(r.step_time_s, 4), r.trace.meta["parallelism"]
    (0.1237, 'fsdp=16,tensor=4')
    """
    r = simulate_step(None, study_job(study) if job is None else job, compute_efficiency=study.compute_efficiency,
                      fast_path=study.fast_path, routing=study.routing)
    return with_terms(r, study.multislice)
