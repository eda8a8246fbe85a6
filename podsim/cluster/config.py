"""What a cluster simulation is asked to run: the fleet, the queue policy, placement, restarts."""

from __future__ import annotations

from collections.abc import Mapping
from copy import copy
from typing import Any, Literal, get_args

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo

from podsim import quantities as q
from podsim.bounds import check_fleet, check_samples
from podsim.cluster.failures import FailureModel
from podsim.errors import PodsimError, first_error
from podsim.topology import PodLayout, get_generation

Policy = Literal["fifo", "backfill", "priority"]  # the queue policies (podsim.cluster.policies.QUEUE_POLICIES)
POLICY_NAMES: tuple[str, ...] = get_args(Policy)
SolverKind = Literal["greedy", "cpsat"]
PlacementFit = Literal["best", "first", "hilbert"]


class ClusterConfig(q.NoBoolNumbers):
    """A fleet of `pods` pods of one generation, OCS or static wiring, and how it is run.

    Restarts: a job interrupted by a failure or a preemption loses the work since its last
    checkpoint (checkpoints every `checkpoint_interval_s` of run time) and pays
    `restart_overhead_s` when it runs again; a slice that needs OCS circuits (a cube-level slice
    of an OCS pod) waits `reconfigure_s` for them (default: the generation's published OCS
    reconfiguration time, 10 s for v4, hardware.md ocs.17). Both count as allocated, not useful.
    Durations are seconds or strings with units ('1h', '30d').
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    generation: str = Field(..., description="generation id, e.g. tpu-v4, tpu-v5e")
    pods: q.PODS.type = Field(1, description="pods in the fleet")
    sites: q.SITES.type = Field(1, description="data centres the pods are split over (consecutive pods, equal numbers); "
                                            "a multislice job crosses sites only with span_sites")
    ocs: bool = Field(True, description="OCS wiring (False: cubes fixed in their home arrangement)")
    policy: Policy = Field("fifo", description="fifo, backfill (FIFO + EASY backfilling) or priority (with preemption)")
    solver: SolverKind = Field("greedy", description="greedy: fast path per job; cpsat: batch admission")
    placement: PlacementFit = Field("best", description="greedy fit policy: best, first, or hilbert (any free chips "
                                    "along a Hilbert curve: the non-contiguous baseline of a statically wired pod)")
    decision_time_limit: q.DECISION_TIME_LIMIT.type = Field(1.0, description="CP-SAT limit per scheduling decision, in CP-SAT's deterministic time units (work, not wall-clock seconds: reproducible)")
    batch_window: q.BATCH_WINDOW.type = Field(32, description="queued jobs offered to CP-SAT per decision, in policy order")
    cpsat_workers: q.WORKERS.type = Field(1, description="CP-SAT search workers per decision (keep 1 inside sweep workers)")
    schedule_depth: q.SCHEDULE_DEPTH.type = Field(500, description="queued jobs behind the head a full pass looks at (backfill, priority; cf. Slurm's bf_max_job_test)")
    horizon_s: q.HORIZON.duration = Field(..., description="simulated time (a second to a century)")
    warmup_s: q.Duration = Field(0.0, ge=0, le=q.MAX_HORIZON_S, description="steady-state metrics leave out the time before this (the fleet "
                                                                      "starts empty) and the jobs submitted in it")
    drain: bool = Field(False, description="after the horizon, let the jobs submitted in the window run on (no arrivals, "
                                           "failures go on) so their waits and slowdowns are whole; fleet figures stay over the window")
    drain_limit_s: q.Duration | None = Field(None, gt=0, le=q.MAX_HORIZON_S, description="how long a drain may run past the horizon (default: one horizon)")
    checkpoint_interval_s: q.CHECKPOINT_INTERVAL.duration = Field(3600.0, description="run time between checkpoints")
    restart_overhead_s: q.RESTART_OVERHEAD.duration = Field(300.0, description="time to restart from a checkpoint")
    reconfigure_s: q.RECONFIGURE.duration | None = Field(None, description="OCS reconfiguration delay (default: the generation's)")
    untwist_on_static: bool = Field(True, description="on a fleet without OCS, run twisted requests as plain tori")
    failures: FailureModel = Field(FailureModel(), description="failure processes (used when no failure list is given)")
    sample_interval_s: q.Duration | None = Field(None, gt=0, description="time-series step (default: horizon / 500)")
    fragmentation: bool = Field(True, description="sample the largest placeable slice with the time series")
    degraded_placement: Literal["off", "requested", "all"] = Field(
        "off", description="which jobs may run on a cube-level torus whose circuits on down OCS units are dark: "
                           "none, those with allow_degraded, or every job")
    spare_ports: bool = Field(False, description="move a cube's fiber off a failed OCS port onto a spare port of that OCS (ocs.4), at once")
    degraded_slowdown: q.DEGRADED_SLOWDOWN.type = Field(1.0, description="run time factor on a degraded slice (1: compute-bound, see docs/cluster.md)")
    fold: Literal["none", "allowed"] = Field("none", description="allowed: a request may be folded onto another box or "
                                             "split into whole blocks plus pieces (podsim.placement.reshape), at the "
                                             "slowdown the step-time model charges")
    slowdown_model: str | None = Field(None, description="model preset whose step prices a non-native placement of a "
                                       "job given in time (a job given in steps uses its own model)")
    slowdown_overrides: dict[str, int | float | str | bool] = Field(
        default_factory=dict, description="preset fields of slowdown_model, e.g. {n_layers: 2}: a slowdown is the ratio "
                                          "of two steps of one program, whose layers are alike")

    @field_validator("generation")
    @classmethod
    def _known(cls, v: str) -> str:
        gen = get_generation(v)
        if gen.slice_rule == "gpu_nodes":
            raise PodsimError(f"generation {v!r}: the cluster simulation places TPU slices; {v} is a switched GPU cluster")
        return v

    @field_validator("slowdown_model")
    @classmethod
    def _preset(cls, v: str | None) -> str | None:
        if v is not None:
            from podsim.trace.configs import get_model

            get_model(v)
        return v

    @model_validator(mode="after")
    def _bounded(self) -> ClusterConfig:
        if self.slowdown_overrides:
            if self.slowdown_model is None:
                raise PodsimError("slowdown_overrides change slowdown_model's preset; give slowdown_model too")
            from podsim.trace.configs import get_model

            get_model(self.slowdown_model, dict(self.slowdown_overrides))  # an unknown field: one line naming it
        check_fleet(self.pods, get_generation(self.generation).pod_chips)
        if self.placement == "hilbert" and (self.ocs and get_generation(self.generation).has_ocs or self.solver != "greedy"):
            raise PodsimError("placement hilbert allocates any free chips of a statically wired pod with the greedy "
                              "solver; set ocs false (--no-ocs, wiring: static) and solver greedy")
        if self.placement == "hilbert" and self.fold == "allowed":
            raise PodsimError("placement hilbert already takes any free chips; leave fold none")
        if self.pods % self.sites:
            raise PodsimError(f"sites {self.sites} must divide pods {self.pods} (each site holds the same number of pods)")
        check_samples(self.horizon_s, self.sample_step_s)
        if self.warmup_s >= self.horizon_s:
            raise PodsimError(f"warm-up {self.warmup_s:g} s must be shorter than the horizon {self.horizon_s:g} s "
                              "(the metrics are measured after it)")
        if self.drain_limit_s is not None and not self.drain:
            raise PodsimError("drain_limit_s is how long a drain may run; set drain too")
        return self

    @property
    def drain_limit(self) -> float:
        return self.drain_limit_s if self.drain_limit_s is not None else self.horizon_s

    def layout(self) -> PodLayout:
        return PodLayout(get_generation(self.generation), pods=self.pods, ocs=self.ocs)

    @property
    def reconfigure_delay_s(self) -> float:
        if self.reconfigure_s is not None:
            return self.reconfigure_s
        gen = get_generation(self.generation)
        return gen.ocs.reconfigure_time.require(f"{gen.id} OCS reconfiguration time") if gen.ocs else 0.0

    @property
    def sample_step_s(self) -> float:
        return self.sample_interval_s or self.horizon_s / 500


def default(field: str):
    """ClusterConfig's default for `field`: the scenario schema and the CLI take theirs from here."""
    return ClusterConfig.model_fields[field].default


def config_fields(names: Mapping[str, str]) -> dict[str, tuple[Any, FieldInfo]]:
    """ClusterConfig's fields under other names ({name: ClusterConfig field}), each with its type,
    range, default and description, as `pydantic.create_model` takes them: a model that sets some
    of the config's fields (a scenario's policy: and solver:) states none of them again."""
    return {name: (ClusterConfig.model_fields[field].annotation, copy(ClusterConfig.model_fields[field]))
            for name, field in names.items()}


def make_config(**fields) -> ClusterConfig:
    """ClusterConfig with pydantic's first error as one line naming the field and the value."""
    try:
        return ClusterConfig(**fields)
    except ValidationError as exc:
        where, msg = first_error(exc, "config")
        if not exc.errors()[0]["loc"]:  # a whole-config check (fleet size, sample count)
            raise PodsimError(msg) from None
        raise PodsimError(f"{where}: {msg} (got {exc.errors()[0].get('input')!r})") from None
