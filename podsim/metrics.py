"""The metric registry: every key figure a run reports, with its unit and definition.

One entry per metric, read by the CLI (`podsim metrics`, value formatting), the results store
(the `runs` columns it copies for SQL), the report (units of targets and references), the
scenario schema (which metrics a target may name, and how its threshold is written) and the
dashboard (help text). A new metric is one `register(Metric(...))` call, e.g. a step-study
metric from the step-time engine:

    register(Metric("hfu", "fraction", "hardware FLOPs / (peak FLOP/s x step time)", "step"))

kind: 'cluster' (job streams), 'step' (step studies), 'serving' (serving fleets) or 'both'
(any run). unit: 's', 'fraction', 'count', 'chip_h', 'usd', 'kwh', 'bytes', 'flops',
'ratio', 'rate' (per second), 'text' or 'bool'.
"""

from __future__ import annotations

from dataclasses import dataclass

UNITS = ("s", "fraction", "count", "chip_h", "usd", "kwh", "bytes", "flops", "ratio", "rate", "text", "bool")
KINDS = ("cluster", "step", "serving", "both")


@dataclass(frozen=True)
class Metric:
    """One metric: name (as in RunResult.metrics), unit, definition, which runs report it,
    whether a scenario target may name it, and its SQL type if the store copies it to `runs`."""

    name: str
    unit: str
    definition: str
    kind: str
    target: bool = False
    sql: str | None = None

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ValueError(f"metric {self.name}: unit {self.unit!r} is not one of {', '.join(UNITS)}")
        if self.kind not in KINDS:
            raise ValueError(f"metric {self.name}: kind {self.kind!r} is not one of {', '.join(KINDS)}")

    @property
    def threshold(self) -> str:
        """How a target's threshold is written: 'duration' (1h), 'fraction' (95%) or 'number'."""
        return "duration" if self.unit == "s" else "fraction" if self.unit == "fraction" else "number"


METRICS: dict[str, Metric] = {}


def register(*metrics: Metric) -> None:
    """Add metrics; a name registered twice with another meaning is a bug."""
    for m in metrics:
        old = METRICS.get(m.name)
        if old is not None and old != m:
            raise ValueError(f"metric {m.name} is registered twice with different meanings")
        METRICS[m.name] = m


def metric(name: str) -> Metric | None:
    return METRICS.get(name)


def definition(name: str) -> str:
    m = METRICS.get(name)
    return m.definition if m is not None else ""


def target_metrics(kind: str) -> tuple[str, ...]:
    """The metrics a scenario of this kind ('cluster', 'step' or 'serving') may set a target on."""
    return tuple(m.name for m in METRICS.values() if m.target and m.kind in (kind, "both"))


def store_columns() -> dict[str, str]:
    """Metric -> SQL type, for the store's `runs` columns (registry order)."""
    return {m.name: m.sql for m in METRICS.values() if m.sql is not None}


def units() -> dict[str, str]:
    """Metric -> unit, every registered metric (podsim.stats cuts intervals to a unit's range)."""
    return {m.name: m.unit for m in METRICS.values()}


def unit_kind(name: str) -> str:
    """'duration', 'fraction' or 'number' (unregistered names ending in _s are durations)."""
    m = METRICS.get(name)
    if m is not None:
        return m.threshold
    return "duration" if name.endswith("_s") else "number"


def _m(name: str, unit: str, text: str, kind: str, target: bool = False, sql: str | None = None) -> Metric:
    return Metric(name, unit, text, kind, target, sql)


_C, _S, _B = "cluster", "step", "both"
register(
    # the run's setting (copied to the store for SQL)
    _m("generation", "text", "accelerator generation id (hardware.md)", _B, sql="VARCHAR"),
    _m("pods", "count", "pods in the fleet (of a step study: pods its slices span)", _B, sql="INTEGER"),
    _m("chips", "count", "chips in the fleet (job stream) or in the job's slices (step study)", _B, sql="BIGINT"),
    # job streams: podsim.cluster (definitions as in podsim/cluster/result.py)
    _m("utilisation", "fraction", "busy chip-hours / healthy chip-hours (a chip is busy while a job holds it, "
                                  "restart and OCS reconfiguration included)", _C, True, "DOUBLE"),
    _m("goodput", "fraction", "useful chip-hours / allocated chip-hours (allocated = useful + lost + overhead)",
       _C, True, "DOUBLE"),
    _m("fleet_goodput", "fraction", "useful chip-hours / all chip-hours of the fleet over the horizon", _C, True),
    _m("availability", "fraction", "healthy chip-hours / all chip-hours of the fleet", _C, True),
    _m("wait_p50_s", "s", "median wait (first start - submission) of the jobs that arrived in the measured window "
                          "and could be placed; a job still queued at the end counts with its wait so far", _C, True),
    _m("wait_p95_s", "s", "95th percentile wait of the jobs that arrived in the measured window and could be placed; "
                          "a job still queued at the end counts with its wait so far (a lower bound of its wait)",
       _C, True, "DOUBLE"),
    _m("wait_p99_s", "s", "99th percentile wait, jobs still queued at the end counted with their wait so far", _C, True),
    _m("wait_mean_s", "s", "mean wait, jobs still queued at the end counted with their wait so far", _C, True),
    _m("wait_p50_started_s", "s", "median wait over the jobs that started only (leaves the still-queued out: "
                                  "reads better than the fleet is)", _C),
    _m("wait_p95_started_s", "s", "95th percentile wait over the jobs that started only", _C),
    _m("wait_p99_started_s", "s", "99th percentile wait over the jobs that started only", _C),
    _m("wait_p95_with_queued_s", "s", "the same as wait_p95_s (its older name, kept for scenario files)", _C, True),
    _m("wait_p99_with_queued_s", "s", "the same as wait_p99_s (its older name)", _C, True),
    _m("wait_shape_mean_s", "s", "mean time a started job waited for shape: enough healthy chips free, but not in "
                                 "a form its slice can take (fragmentation, a reservation), first wait", _C, True),
    _m("wait_resource_mean_s", "s", "mean time a started job waited for resource: fewer healthy chips free than it "
                                    "needs, first wait", _C, True),
    _m("wait_shape_share", "fraction", "waiting-for-shape seconds / all waiting seconds, jobs that started", _C, True),
    _m("jct_mean_s", "s", "mean job completion time (end - submission), completed jobs", _C, True),
    _m("jct_p50_s", "s", "median job completion time, completed jobs", _C),
    _m("jct_p95_s", "s", "95th percentile job completion time (end - submission), completed jobs", _C, True, "DOUBLE"),
    _m("slowdown_mean", "ratio", "mean bounded slowdown (end - submission) / max(nominal run time, 10 s), "
                                 "completed jobs (Feitelson's tau = 10 s)", _C, True),
    _m("slowdown_p50", "ratio", "median bounded slowdown, completed jobs", _C),
    _m("slowdown_p95", "ratio", "95th percentile bounded slowdown, completed jobs", _C, True),
    _m("slowdown_p99", "ratio", "99th percentile bounded slowdown, completed jobs", _C),
    _m("jobs_total", "count", "jobs in the stream = completed + running + queued + unplaceable + not_arrived", _C),
    _m("jobs_measured", "count", "jobs submitted in the measured window [warm-up, horizon): the ones waits and "
                                 "slowdowns are over", _C),
    _m("warmup_s", "s", "start of the measured window: time before it (the fleet filling up) and its jobs are left "
                        "out of the steady-state metrics", _C),
    _m("drain_s", "s", "how long the simulation ran past the horizon to let the window's jobs finish (drain)", _C),
    _m("jobs_completed", "count", "jobs that finished by the horizon", _C),
    _m("jobs_running", "count", "jobs running at the horizon", _C),
    _m("jobs_queued", "count", "jobs waiting at the horizon", _C, True),
    _m("jobs_unplaceable", "count", "jobs whose slice cannot fit even an empty, healthy fleet", _C, True),
    _m("jobs_not_arrived", "count", "jobs submitted after the horizon", _C),
    _m("jobs_started", "count", "jobs that started at least once", _C),
    _m("jobs_untwisted", "count", "twisted requests run as a plain torus (fleet without OCS)", _C),
    _m("jobs_shape_inferred", "count", "replayed trace jobs without a shape: their accelerator count was mapped to "
                                       "the generation's shape ladder", _C),
    _m("jobs_rounded", "count", "replayed trace jobs whose accelerator count was rounded up to a shape with more chips", _C),
    _m("rounded_extra_chip_h", "chip_h", "chip-hours the rounded-up jobs hold beyond their accelerator counts "
                                         "(extra chips x duration)", _C),
    _m("fragmentation_mean", "fraction", "1 - largest placeable slice / free chips, mean over samples with free chips",
       _C, True),
    _m("largest_placeable_mean_chips", "count", "largest slice that still fits, mean over the samples", _C),
    _m("largest_placeable_min_chips", "count", "largest slice that still fits, least over the samples", _C),
    _m("fleet_chip_h", "chip_h", "chips x the measured window (the horizon without a warm-up); the breakdown "
                                 "(useful_chip_h ... down_chip_h) adds up to it", _C),
    _m("lost_failure_chip_h", "chip_h", "work since the last checkpoint thrown away when a failure stopped a job", _C),
    _m("lost_preemption_chip_h", "chip_h", "work since the last checkpoint thrown away when a job was preempted", _C),
    _m("restart_chip_h", "chip_h", "chip-hours restarting jobs from their checkpoints (restart overhead)", _C),
    _m("reconfiguration_chip_h", "chip_h", "chip-hours held waiting for OCS circuits to be set", _C),
    _m("degraded_chip_h", "chip_h", "extra run time of jobs on degraded slices (degraded_slowdown) and on non-native "
                                     "(folded, split, scattered) slices (the slowdown charged)", _C),
    _m("idle_queued_chip_h", "chip_h", "healthy chips free while jobs waited: fragmentation (no slice of the right "
                                       "shape free), queue order and reservations", _C),
    _m("idle_empty_chip_h", "chip_h", "healthy chips free while no job waited (no demand)", _C),
    _m("down_chip_h", "chip_h", "chip-hours of failed parts (hosts, OCS units, cables taking chips out)", _C),
    _m("healthy_chip_h", "chip_h", "chip-hours no failure covered", _C),
    _m("busy_chip_h", "chip_h", "chip-hours a job held", _C),
    _m("allocated_chip_h", "chip_h", "useful + lost + overhead chip-hours", _C),
    _m("useful_chip_h", "chip_h", "chip-hours of work that was kept (checkpointed or finished)", _C),
    _m("lost_chip_h", "chip_h", "work since the last checkpoint thrown away by a failure or a preemption", _C),
    _m("overhead_chip_h", "chip_h", "restart, OCS reconfiguration and degraded-slice chip-hours", _C),
    _m("restarts", "count", "runs after a job's first", _C),
    _m("failures_host", "count", "host failures in the horizon", _C),
    _m("failures_ocs", "count", "OCS unit failures in the horizon", _C),
    _m("failures_link", "count", "ICI cable failures in the horizon", _C),
    _m("sim_events", "count", "state changes simulated: job arrivals, run starts and ends (completions and stops), "
                          "part failures and repairs", _C),
    _m("job_interruptions", "count", "running jobs stopped by a failure", _C),
    _m("preemptions", "count", "running jobs stopped for a higher-priority job", _C),
    _m("ocs_reconfigurations", "count", "slices whose OCS circuits were set up", _C),
    _m("runs_fold", "count", "runs started on a folded slice (the asked torus laid onto another box)", _C),
    _m("runs_split", "count", "runs started on a split slice (whole blocks plus pieces joined by OCS circuits)", _C),
    _m("runs_scatter", "count", "runs started on a scattered slice (any free chips, Hilbert-curve allocation)", _C),
    _m("runs_slowdown_not_charged", "count", "runs on a non-native slice whose slowdown was not charged (a job given in "
                                             "time with no slowdown_model to price it ran at factor 1)", _C),
    _m("slowdown_charged_mean", "ratio", "mean run time factor charged to runs on a non-native slice (the step on "
                                         "the placed slice / the step as asked, by the engine)", _C, True),
    _m("slowdown_fold_mean", "ratio", "mean run time factor charged to runs on a folded slice", _C),
    _m("slowdown_split_mean", "ratio", "mean run time factor charged to runs on a split slice", _C),
    _m("slowdown_scatter_mean", "ratio", "mean run time factor charged to runs on a scattered (Hilbert) slice", _C),
    _m("slowdown_charged_max", "ratio", "largest run time factor charged to a run on a non-native slice", _C),
    _m("degraded_starts", "count", "runs started on a torus with a down OCS unit's circuits dark (degraded placement)", _C),
    _m("spare_remaps", "count", "cube fibers moved off a failed OCS port onto a spare port of that OCS", _C),
    _m("horizon_s", "s", "simulated time", _C),
    # step studies: podsim.study (run_study on the engine; podsim.scenario.run.step_metrics)
    _m("step_time_s", "s", "one training step's wall time (critical path of the step's op DAG)", _S, True, "DOUBLE"),
    _m("compute_s", "s", "compute time of one step (sum over compute ops)", _S),
    _m("comm_s", "s", "communication busy time of one step: the time at least one collective is in flight", _S),
    _m("exposed_comm_s", "s", "communication not hidden behind compute on the critical path", _S, True),
    _m("overlapped_comm_s", "s", "communication overlapped with compute (comm_s - exposed_comm_s)", _S),
    _m("mfu", "fraction", "model FLOPs utilisation: model FLOPs per step / (bf16 peak FLOP/s x chips x step time); over 1 is possible with int8 or fp8 matmuls", _S, True),
    _m("model_flops_per_step", "flops", "the model's FLOPs per training step (6 x parameters x tokens for dense)", _S),
    _m("link_peak_utilisation_max", "fraction", "the busiest ICI link's peak utilisation", _S),
    _m("dcn_collective_busy_s", "s", "time at least one collective that crosses the DCN is in flight, one step", _S),
    _m("dcn_collective_op_s", "s", "summed durations of the collectives that cross the DCN, one step (their algbw's time)", _S),
    _m("dcn_collective_bytes", "bytes", "bytes of the collectives that cross the DCN, one step", _S),
    _m("chip_s_per_step", "s", "chips x step time", _S),
    _m("time_to_train_s", "s", "steps x step time", _S, True),
    _m("step_time_error", "fraction", "typical |error| of podsim's step time against published runs of this kind: the 68th "
       "percentile over the validation corpus's runs of the kind (podsim.validation.bands; NaN: the corpus has none)", _S,
       sql="DOUBLE"),
    _m("step_time_error_runs", "count", "validation runs behind step_time_error", _S),
    _m("step_time_error_kind", "text", "the kind of run step_time_error is taken over (single-slice or multislice, "
       "generation); broader than the study's own when the corpus has fewer than 3 runs of it", _S),
    _m("step_time_error_text", "text", "step_time_error in words: the figure, its runs, and whether it is for this kind", _S),
    _m("chip_h", "chip_h", "chip-hours of the study (steps x chips x step time)", _S),
    # both: cost and energy (podsim.scenario.run.cost_figures)
    _m("cost_usd", "usd", "chip-hours x the published price per chip-hour (only where a price with a source is known)",
       _B, True, "DOUBLE"),
    _m("energy_kwh", "kwh", "busy chip-hours x the measured mean power per chip", _B, sql="DOUBLE"),
    _m("cost_per_useful_chip_h_usd", "usd", "cost of the fleet / useful chip-hours", _C, True),
    _m("engine_wall_s", "s", "wall time of the simulation (not a result; varies by machine)", _B),
    _m("replicates", "count", "independent repeats behind the figures (seeds spawned from seed); with more than one, "
                              "each figure is the mean and RunResult.intervals holds its 95% Student-t interval", _B,
       sql="INTEGER"),
    # the run's setting and the simulator's own counters (not results: reproducibility and cost of a run)
    _m("ocs", "bool", "OCS wiring (false: cubes fixed in their home arrangement)", _C),
    _m("policy", "text", "queue policy: fifo, backfill (EASY) or priority (with preemption)", _C),
    _m("solver", "text", "placement: greedy fast path per job, or CP-SAT batch admission", _C),
    _m("seed", "count", "seed of synthetic jobs, failures and CP-SAT", _C),
    _m("unplaceable", "text", "never-placed shapes: shape, jobs, reason", _C),
    _m("passes", "count", "scheduling passes", _C),
    _m("placement_calls", "count", "placement searches", _C),
    _m("placement_s", "s", "wall time spent placing (varies by machine)", _C),
    _m("cpsat_calls", "count", "CP-SAT batch admissions", _C),
    _m("cpsat_wall_capped", "count", "CP-SAT calls cut by the wall-time limit (then not reproducible)", _C),
    _m("audits", "count", "bookkeeping audits (tests only)", _C),
    _m("step_time_evaluations", "count", "step-time model calls (cache misses)", _C),
    _m("slice", "text", "the job's slice shape", _S),
    _m("twisted", "bool", "twisted torus", _S),
    _m("slices", "count", "slices the job spans (over the DCN when more than one)", _S),
    _m("model", "text", "the model (or trace file) of the step", _S),
    _m("parallelism", "text", "the parallelism plan (axis=degree, ...)", _S),
    _m("events", "count", "engine events of the step simulation", _S),
    _m("flows", "count", "network flows of the step simulation", _S),
    _m("flows_simulated", "count", "flows the engine simulated (the rest stand in symmetric classes: the fast path)", _S),
    _m("fold", "text", "flows the step simulates and why not fewer (what the symmetry folds leave)", _S),
    _m("algorithm_choices", "text", "each distinct collective's algorithm and why (closed forms; auto's ranking), one line", _S),
    _m("routing", "text", "ICI routing inside a slice: dimension_order, shortest_paths or adaptive", _S),
    _m("hardware_flops_per_step", "flops", "FLOPs every compute op executes per step, recomputation included (all chips)", _S),
    _m("compute_efficiency", "fraction", "a flat fraction of peak FLOP/s every compute op was given; "
       "none: the per-op compute model (podsim.perf)", _S),
    _m("dcn", "text", "DCN kind: eps (leaf/spine switches) or ocs", _S),
    _m("dcn_oversubscription", "ratio", "DCN leaf oversubscription (x:1)", _S),
    _m("dcn_ocs_groups", "text", "leaf blocks the DCN OCS engineers circuits for", _S),
    _m("sites", "count", "data centres the job's slices span (joined by WAN links)", _S),
    _m("wan_latency_s", "s", "one-way WAN latency between sites (assumption unless the scenario sources it)", _S),
    _m("ici_busy_s", "s", "time collectives inside the slices are in flight, one step", _S),
    _m("ici_exposed_s", "s", "the part of ici_busy_s no compute overlaps", _S, True),
    _m("dcn_busy_s", "s", "time collectives across slices (the DCN level) are in flight, one step", _S),
    _m("dcn_exposed_s", "s", "the part of dcn_busy_s no compute overlaps", _S, True),
    _m("wan_busy_s", "s", "time collectives across sites (the WAN level) are in flight, one step", _S),
    _m("wan_exposed_s", "s", "the part of wan_busy_s no compute overlaps", _S, True),
    _m("hfu", "fraction", "hardware FLOPs utilisation: FLOPs executed per step, recomputation included / (bf16 peak FLOP/s x chips x step time)", _S, True),
    _m("steps", "count", "training steps of the study", _S),
    _m("hbm_bytes_per_chip", "bytes", "peak HBM bytes per chip of the step: training state, gathered weights, kept activations, logits (podsim.trace.memory)", _S),
    _m("hbm_capacity_bytes", "bytes", "the chip's HBM capacity", _S),
    _m("hbm_fits", "bool", "the step's HBM bytes per chip fit the chip's HBM", _S),
    _m("input_s", "s", "the hosts' input pipeline busy per step, beside the chips (0: not modelled)", _S),
    _m("input_wait_s", "s", "the part of the step the chips wait for their hosts' input", _S),
    _m("input_bound", "bool", "the step waits for its hosts' input (input_wait_s > 0)", _S),
    # what running on several slices adds (podsim.study.multislice; 0 on one slice)
    _m("dcn_tail_s", "s", "what the cross-slice (DCN, WAN) ops add to the step: their time in flight while no compute "
       "and no ICI communication is (part of exposed_comm_s)", _S),
    _m("straggler_wait_s", "s", "expected wait for the slowest of the slices each step: E[max of N normals] x the "
       "per-slice step-time CV x compute (podsim.study.multislice; in step_time_s)", _S),
    _m("ecmp_collision_s", "s", "expected cost of per-flow ECMP hash collisions on the DCN uplinks beyond the even split "
       "the engine simulates (podsim.study.multislice; in step_time_s)", _S),
    _m("dcn_tail_source", "text", "where dcn_tail_s comes from", _S),
    _m("straggler_source", "text", "straggler_wait_s's per-slice CV and its source, or why the term is off", _S),
    _m("ecmp_collision_source", "text", "ecmp_collision_s's mechanism and source, or why the term is off", _S),
    _m("multislice_added_s", "s", "what the study adds to the engine's step for its slices: straggler_wait_s + "
       "ecmp_collision_s (step_time_s = compute_s + exposed_comm_s + this)", _S),
    # spine economics (podsim.scenario.spine.spine_metrics); per spine kind below
    _m("spine_years", "count", "years of the fleet's life the spine study covers", _B),
    _m("spine_capex_ratio", "ratio", "OCS spine capex / EPS spine capex over the life", _B),
    _m("spine_energy_ratio", "ratio", "OCS spine energy / EPS spine energy over the life", _B),
    _m("spine_year0_capex_ratio", "ratio", "OCS / EPS spine capex in the first year", _B),
    _m("spine_year0_power_ratio", "ratio", "OCS / EPS spine power in the first year", _B),
)
# busy time per collective kind of one step (podsim.engine.step_summary)
register(*(_m(f"{k}_busy_s", "s", f"time at least one of the step's {k.replace('_', '-')} ops is in flight "
                                   "(overlapping ops count once, as comm_s: a kind's busy time is at most comm_s)", _S)
           for k in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce", "send_recv")))
# per DCN tier of a step (StepResult.tiers; Fabric.dcn_tiers names them from the hosts up)
for _t in ("leaf", "tor", "aggregation", "spine", "ocs", "wan"):
    register(
        _m(f"tier_{_t}_busy_s", "s", f"time ops whose flows climb no higher than the DCN's {_t} tier are in flight, one step", _S),
        _m(f"tier_{_t}_exposed_s", "s", f"the part of tier_{_t}_busy_s no compute overlaps", _S),
        _m(f"tier_{_t}_link_busy_s", "s", f"the {_t} tier's busiest link: this job's bytes on it per step / its capacity", _S),
        _m(f"tier_{_t}_ecmp_collision_s", "s", f"the part of ecmp_collision_s charged to the {_t} tier's hashed uplinks", _S))
# a scenario's scaling section (podsim.scenario.scaling.scenario_scaling): its last row, the most slices
register(
    _m("scaling_slices_max", "count", "the most slices of the scaling study (its last row)", _B),
    _m("scaling_parallel_efficiency", "fraction", "weak-scaling parallel efficiency at the most slices: "
                                                  "step time on the fewest slices / step time on the most", _B),
    _m("scaling_mfu", "fraction", "MFU of the scaling study's step on the most slices", _B),
    _m("scaling_step_time_s", "s", "step time of the scaling study's step on the most slices", _B),
    _m("scaling_step_time_error", "fraction", "typical |error| of that step time over published runs of its kind "
       "(podsim.validation.bands; NaN: none of its kind)", _B),
    _m("scaling_step_time_error_text", "text", "scaling_step_time_error in words", _B),
    _m("scaling_parallelism", "text", "the scaling study's plan inside a slice (dcn = slices added per row)", _B))
# a scenario's plan section (podsim.scenario.plan.scenario_plan): the search's best plan as the engine ran it
register(
    _m("plan_best_step_time_s", "s", "step time of the plan search's best plan, on the engine", _B),
    _m("plan_best_mfu", "fraction", "MFU of the plan search's best plan", _B),
    _m("plan_best_tokens_per_s", "rate", "tokens per second of the plan search's best plan", _B),
    _m("plan_best_parallelism", "text", "the plan search's best plan: slices x shape, axes, micro-batches, recompute, "
                                        "sequence parallelism, collective matmul", _B),
    _m("plan_best_chips", "count", "chips of the plan search's best plan", _B),
    _m("plan_best_slices", "count", "slices of the plan search's best plan", _B),
    _m("plan_best_hbm_bytes_per_chip", "bytes", "peak HBM bytes per chip of the plan search's best plan", _B),
    _m("plan_plans_enumerated", "count", "plans the search enumerated", _B),
    _m("plan_plans_ranked", "count", "plans the search ranked by the analytic estimate (within HBM, not dominated)", _B),
    _m("plan_estimate_error_max", "fraction", "the largest |analytic estimate / engine - 1| over the confirmed plans", _B),
    _m("plan_train_chips", "count", "time to train: chips of the answer (the fewest that meet the deadline, or the budget)", _B),
    _m("plan_train_time_s", "s", "time to train: wall time, goodput included", _B),
    _m("plan_train_chip_hours", "chip_h", "time to train: chip-hours of wall time", _B),
    _m("plan_train_cost_usd", "usd", "time to train: chip-hours x the price per chip-hour (NaN where none is published)", _B),
    _m("plan_train_energy_kwh", "kwh", "time to train: energy of the chips' power (NaN where none is published)", _B),
    _m("plan_train_goodput", "fraction", "time to train: share of wall time that makes progress under host failures", _B))
# spine economics (podsim.scenario.spine.spine_metrics), per DCN spine kind over the fleet's life
for _k in ("eps", "ocs"):
    register(
        _m(f"spine_{_k}_capex_usd", "usd", f"{_k.upper()} spine capital cost over the fleet's life", _B),
        _m(f"spine_{_k}_energy_kwh", "kwh", f"{_k.upper()} spine energy over the fleet's life", _B),
        _m(f"spine_{_k}_cost_usd", "usd", f"{_k.upper()} spine capex + energy cost, cumulative at the end of life", _B),
        _m(f"spine_{_k}_rebuys", "count", f"years the {_k.upper()} spine is bought again for a faster link", _B),
        _m(f"spine_{_k}_usd_per_useful_chip_h", "usd", f"fleet lifetime cost / useful chip-hours, {_k.upper()} spine", _B),
        _m(f"spine_{_k}_spine_usd_per_useful_chip_h", "usd", f"{_k.upper()} spine lifetime cost / useful chip-hours", _B),
        _m(f"spine_{_k}_useful_chip_h", "chip_h", f"useful chip-hours over the fleet's life, {_k.upper()} spine", _B))
# serving fleets (podsim.serving.result.serving_metrics; definitions in its module docstring)
_V = "serving"
register(
    _m("replicas", "count", "replicas of the model, each on its own slice (prefill + decode when disaggregated)", _V),
    _m("batch_policy", "text", "continuous/chunked, continuous/separate (prefill-only steps), static/idle or static/saxml (who forms static batches)", _V),
    _m("serving_mode", "text", "colocated (prefill and decode on every replica) or disaggregated", _V),
    _m("requests", "count", "requests counted: arrived in [warmup, duration) (offline: all)", _V),
    _m("requests_completed", "count", "counted requests whose last token was generated", _V),
    _m("requests_unfinished", "count", "counted requests still queued or running when the simulation ended", _V, True),
    _m("requests_rejected", "count", "counted requests whose KV cache exceeds a whole replica's", _V, True),
    _m("offered_rps", "rate", "counted requests per second of the window", _V),
    _m("slo_ttft_s", "s", "the time-to-first-token target", _V),
    _m("slo_tpot_s", "s", "the time-per-output-token target", _V),
    _m("slo_attainment", "fraction", "counted requests that finished within both targets / counted requests", _V, True, "DOUBLE"),
    _m("goodput_rps", "rate", "requests that finished within both targets per second of the window", _V, True, "DOUBLE"),
    _m("throughput_rps", "rate", "counted requests finished per second of the window", _V, True),
    _m("output_tokens", "count", "output tokens of the counted requests that finished (every beam)", _V),
    _m("prompt_tokens", "count", "prompt tokens of the counted requests that finished", _V),
    _m("tokens_per_s", "rate", "output tokens per second of the window", _V, True),
    _m("tokens_per_s_per_chip", "rate", "output tokens per second per chip of the fleet", _V, True, "DOUBLE"),
    _m("serving_chip_h", "chip_h", "the fleet's chips x the window", _V),
    _m("cost_per_million_tokens_usd", "usd", "cost of the fleet over the window / million output tokens", _V, True, "DOUBLE"),
    _m("energy_per_million_tokens_kwh", "kwh", "energy of the fleet over the window (mean power per chip) / million output tokens", _V, True),
    _m("kv_cache_tokens", "count", "tokens one replica's KV cache holds (HBM less weights and workspace, whole pages)", _V),
    _m("kv_cache_pages", "count", "KV-cache pages of one replica", _V),
    _m("kv_peak_fraction", "fraction", "the most pages any replica held / its pages", _V),
    _m("kv_tokens_max", "count", "the most tokens any replica's KV cache held during a step", _V),
    _m("concurrent_seqs_max", "count", "the most sequences any replica ran in one step", _V),
    _m("kv_preemptions", "count", "sequences preempted for KV pages (recomputed later), counted requests", _V, True),
    _m("serving_steps", "count", "steps the fleet's replicas ran (a static batch counts as one)", _V),
    _m("tokens_per_step_mean", "count", "tokens per step (prefill and decode), mean over the fleet's steps", _V),
    _m("replica_busy_fraction", "fraction", "time replicas spent running steps / their time", _V),
    _m("weight_bytes_per_chip", "bytes", "weights one chip of a replica holds", _V),
    _m("hbm_bound_decode_s", "s", "weight bytes per chip / HBM bandwidth: no decode step is faster", _V),
    _m("decode_step_b1_s", "s", "one decode step of one sequence with a 1,024-token context", _V),
    _m("simulated_s", "s", "simulated time, the drain included", _V),
    _m("engine", "text", "the serving engine whose host time and kernels are modelled (podsim.serving.engines)", _V),
    _m("engine_figures", "text", "the engine's figures with their sources, in one line", _V),
    _m("matmul_peak_flops_per_s", "flops", "the weight matmuls' peak rate per chip at their precision", _V),
    _m("matmul_peak_source", "text", "that rate and its source id", _V),
    _m("serving_error_text", "text", "every serving answer's typical error against published runs of its kind, in one line", _V),
)
for _name, _what in (("ttft", "TTFT"), ("tpot", "TPOT"), ("throughput", "throughput"), ("cost", "cost per million tokens")):
    register(_m(f"{_name}_error", "fraction", f"typical |error| of podsim's {_what} against published serving runs of its kind: "
                "the 68th percentile over the serving validation table's rows (podsim.validation.bands; NaN: none)", _V),
             _m(f"{_name}_error_runs", "count", f"validation runs behind {_name}_error", _V),
             _m(f"{_name}_error_text", "text", f"{_name}_error in words: the figure, its runs, and whether it is for this kind", _V))
for _name, _what in (("ttft", "time to first token (first token - arrival)"),
                     ("tpot", "time per output token after the first ((last - first token) / (output - 1))"),
                     ("e2e", "end-to-end latency (last token - arrival)")):
    register(_m(f"{_name}_mean_s", "s", f"mean {_what}, counted requests", _V, True))
    for _q in (50, 95, 99):
        register(_m(f"{_name}_p{_q}_s", "s", f"{_q}th percentile {_what}, counted requests", _V, True,
                    "DOUBLE" if _q == 99 else None))
# a serving scenario's capacity search (podsim.serving.capacity.CapacityAnswer.metrics)
register(
    _m("capacity_rate_rps", "rate", "the request rate the capacity search serves", _V),
    _m("capacity_met", "bool", "some slice shape meets the p99 targets within the replica range", _V, True),
    _m("capacity_chips", "count", "fewest chips that meet the p99 TTFT and TPOT targets at the rate", _V, True, "BIGINT"),
    _m("capacity_replicas", "count", "replicas of the answer's slice", _V),
    _m("capacity_slice", "text", "the answer's slice shape", _V),
    _m("capacity_replicates", "count", "runs per probed size (independent seeds)", _V),
    _m("capacity_judge", "text", "mean (of the replicates) or interval (its 95% upper end) decides a size", _V),
    _m("capacity_ttft_p99_s", "s", "p99 TTFT at the answer (replicates' mean)", _V),
    _m("capacity_tpot_p99_s", "s", "p99 TPOT at the answer (replicates' mean)", _V),
    _m("capacity_cost_per_million_tokens_usd", "usd", "cost per million output tokens at the answer", _V, True),
    _m("capacity_tokens_per_s_per_chip", "rate", "output tokens per second per chip at the answer", _V),
    _m("capacity_answer", "text", "the capacity answer in words", _V),
    _m("capacity_chips_error", "fraction", "typical |error| of the serving rate within latency bounds the chips answer "
       "rests on (serving validation rows that measured such a rate; podsim.validation.bands)", _V),
    _m("capacity_chips_error_runs", "count", "validation runs behind capacity_chips_error", _V),
    _m("capacity_chips_error_text", "text", "capacity_chips_error in words", _V),
)
