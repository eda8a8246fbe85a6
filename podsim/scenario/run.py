"""`run_scenario(scenario) -> RunResult`: a validated scenario through the cluster simulation
(job streams) or the step-time engine (step studies), with cost, energy, targets, the
published figures it is compared with, and the spine and scaling studies a scenario asks for.
No output files: the CLI and the dashboard own I/O.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from podsim.engine import StepResult, step_summary
from podsim.engine.core import busy_time_s
from podsim.engine.summary import compute_constants_rows
from podsim.scenario.check import check_scenario
from podsim.scenario.clusterrun import cluster_run
from podsim.scenario.fields import parse_target, target_met
from podsim.scenario.replicates import pool_replicates, run_replicates
from podsim.scenario.result import TABLES, RunResult, normalise_table
from podsim.scenario.scaling import scenario_scaling
from podsim.scenario.schema import Scenario
from podsim.scenario.spine import spine_study
from podsim.scenario.steptime import RecordingStepTime
from podsim.scenario.studies import job_studies, step_study
from podsim.study import CachedStepTime, EngineStepTime, RooflineStepTime, StepStudy, run_study
from podsim.study.study import study_plan
from podsim.topology import DcnSpec, Generation, format_shape, get_generation, topology_summary
from podsim.topology.shapes import slice_name
from podsim.validation.bands import step_band

if TYPE_CHECKING:  # a job stream imports the cluster simulation (CP-SAT, ...) where it runs, not a step
    from podsim.cluster import ClusterResult

ProgressFn = Callable[[float, float], None]
STEP_JSON_TABLES = ("step_kinds", "compute_constants")  # the tables a step's --json carries (podsim run, podsim steptime)
_TOPOLOGY_CACHE: dict[str, dict] = {}


def fleet_topology(gen: Generation, ocs: bool, dcn: DcnSpec, pods: int) -> dict:
    """The pod's figures (topology_summary, cached: a pod is built once per process) and the fleet's."""
    dcn = dcn.model_copy(update={"sites": 1}) if dcn.sites > 1 else dcn  # one pod sits in one site
    key = json.dumps([gen.model_dump(mode="json"), ocs, dcn.model_dump(mode="json")], sort_keys=True)
    if key not in _TOPOLOGY_CACHE:
        _TOPOLOGY_CACHE[key] = topology_summary(gen, None, ocs=ocs, dcn=dcn)
    pod = dict(_TOPOLOGY_CACHE[key])
    return {**pod, "pods": pods, "fleet_chips": pods * gen.pod_chips}


def cost_figures(gen: Generation, chip_h: float, busy_chip_h: float, useful_chip_h: float | None = None) -> dict:
    """Cost = chip-hours x price per chip-hour (only where a price with a source is known);
    energy = busy chip-hours x the measured mean power per chip (idle chips not counted)."""
    price, power = gen.price_per_chip_hour, gen.power_per_chip
    cost = chip_h * price.value if price.value is not None else None
    out = {
        "chip_h": chip_h, "busy_chip_h": busy_chip_h,
        "price_per_chip_h_usd": price.value, "price_source": price.source, "price_note": price.note,
        "cost_usd": cost,
        "power_per_chip_w": power.value, "power_source": power.source, "power_note": power.note,
        "energy_kwh": busy_chip_h * power.value / 1000.0 if power.value is not None else None,
    }
    if useful_chip_h is not None:
        out["useful_chip_h"] = useful_chip_h
        out["cost_per_useful_chip_h_usd"] = cost / useful_chip_h if cost is not None and useful_chip_h > 0 else None
    return out


def _targets(s: Scenario, metrics: dict, intervals: dict | None = None) -> tuple[dict, ...]:
    """Each target judged on the metric's value (a replicated run's mean; its interval rides along)."""
    out = []
    for metric, text in s.targets.items():
        op, threshold = parse_target(metric, text)
        value = metrics.get(metric)
        row = {"metric": metric, "op": op, "threshold": threshold, "text": str(text), "value": value,
               "met": target_met(op, value, threshold)}
        if intervals and metric in intervals:
            row["interval"] = intervals[metric]
        out.append(row)
    return tuple(out)


# Settings and the simulator's own counters: the same in every replicate or not a result, so
# they are not averaged (the first replicate's value is kept).
_NOT_AVERAGED = frozenset({"generation", "pods", "chips", "ocs", "policy", "solver", "seed", "horizon_s", "unplaceable",
                           "passes", "placement_calls", "placement_s", "cpsat_calls", "cpsat_wall_capped", "audits",
                           "step_time_evaluations", "engine_wall_s", "fleet_chip_h", "replicates"})


def _run_replicates(s: Scenario, gen: Generation, on_progress: ProgressFn | None, cpsat_workers_cap: int | None):
    """A job stream run `s.replicates` times with independent seeds (podsim.scenario.replicates):
    metrics are the means over the replicates, `intervals` their 95% Student-t intervals, tables
    the first replicate's plus `replicates` (every replicate's figures)."""
    seeds, parts = run_replicates(s.seed, s.replicates, lambda seed, progress: _run_cluster(
        s.model_copy(update={"seed": seed}), gen, progress, cpsat_workers_cap), on_progress)
    metrics, intervals, table = pool_replicates([p[0] for p in parts], seeds, s.seed, _NOT_AVERAGED)
    _, topo, cost, tables = parts[0]
    cost = {**cost, **{k: metrics[k] for k in ("useful_chip_h", "cost_per_useful_chip_h_usd", "energy_kwh") if k in cost}}
    cost["busy_chip_h"] = metrics["busy_chip_h"]
    return metrics, topo, cost, {**tables, "replicates": table}, intervals


def _references(s: Scenario, metrics: dict) -> tuple[dict, ...]:
    out = []
    for metric, ref in s.references.items():
        value = metrics.get(metric)
        ratio = value / ref.value if value is not None and ref.value and not math.isnan(value) else None
        out.append({"metric": metric, "published": ref.value, "source": ref.source, "note": ref.note,
                    "podsim": value, "ratio": ratio})
    return tuple(out)


# Job streams ------------------------------------------------------------------------------
def _run_cluster(s: Scenario, gen: Generation, on_progress: ProgressFn | None, cpsat_workers_cap: int | None):
    from podsim.cluster import run_cluster

    run = cluster_run(s, gen, cpsat_workers_cap)
    jobs = run.jobs()
    recorder = RecordingStepTime(EngineStepTime() if s.step_time.model == "engine" else RooflineStepTime())
    result = run_cluster(run, on_progress, CachedStepTime(recorder, job_studies(s, gen)), jobs=jobs)
    return cluster_parts(result, gen, s.dcn.spec(), {j.id: j.model or "" for j in jobs}, recorder.table(),
                         s.topology.wiring == "ocs")


def cluster_parts(result: ClusterResult, gen: Generation, dcn: DcnSpec | None = None, model_of: dict | None = None,
                  step_times: dict | None = None, ocs: bool | None = None) -> tuple[dict, dict, dict, dict]:
    """A cluster simulation's record as a RunResult's metrics (with cost and energy), topology,
    cost and tables: the one shape `podsim run`, `podsim cluster` and the dashboard report."""
    m = dict(result.metrics)
    model_of = model_of or {}
    outs = result.jobs
    tables = {
        "timeseries": normalise_table("timeseries", result.timeseries),
        "jobs": normalise_table("jobs", {
            **{c: [getattr(o, c) for o in outs] for c in TABLES["jobs"] if c not in ("shape", "model")},
            "shape": [slice_name(o.shape, o.twisted) for o in outs], "model": [model_of.get(o.id, "") for o in outs]}),
        "step_times": normalise_table("step_times", step_times or {}),
    }
    m["unplaceable"] = list(result.unplaceable)
    cost = cost_figures(gen, m["fleet_chip_h"], m["busy_chip_h"], m["useful_chip_h"])
    m.update(cost_usd=cost["cost_usd"], cost_per_useful_chip_h_usd=cost["cost_per_useful_chip_h_usd"],
             energy_kwh=cost["energy_kwh"])
    topo = fleet_topology(gen, m["ocs"] if ocs is None else ocs, dcn or DcnSpec(), m["pods"])
    return m, topo, cost, tables


def cluster_run_result(result: ClusterResult, name: str = "cluster", wall_s: float = 0.0) -> RunResult:
    """A `podsim.cluster.simulate` record as the RunResult `run_scenario` returns for a job
    stream (no targets; `scenario` holds the ClusterConfig)."""
    metrics, topo, cost, tables = cluster_parts(result, get_generation(result.metrics["generation"]))
    return RunResult(name=name, kind="cluster", scenario={"cluster": result.config}, metrics=metrics, topology=topo,
                     cost=cost, tables=tables, wall_s=wall_s)


# Step studies -----------------------------------------------------------------------------
def step_metrics(study: StepStudy, r: StepResult, steps: int | None = None, model: str | None = None) -> dict:
    """A simulated step as flat key figures (every name in the metric registry): the one shape of a
    step's result, for `podsim run` and `podsim steptime` alike. `model`: the model's label
    (default the study's model or trace name)."""
    summ = step_summary(r)
    dcn, chips = r.fabric.dcn, study.chips
    total_chips = chips * study.slices
    m = {
        "generation": study.generation.id, "slice": format_shape(study.shape), "twisted": study.twisted,
        "slices": study.slices, "chips": total_chips, "model": model or study.model_name, "parallelism": study_plan(study),
        "step_time_s": r.step_time_s, "compute_s": r.compute_s, "comm_s": r.comm_s,
        "exposed_comm_s": r.exposed_comm_s, "overlapped_comm_s": r.comm_s - r.exposed_comm_s,
        "mfu": summ.get("mfu", math.nan), "model_flops_per_step": summ.get("model_flops_per_step", math.nan),
        "hfu": summ.get("hfu", math.nan), "hardware_flops_per_step": summ.get("hardware_flops_per_step", math.nan),
        "link_peak_utilisation_max": summ["link_peak_utilisation_max"], "engine_wall_s": r.engine_wall_s,
        "events": r.events, "flows": r.flows, "flows_simulated": r.flows_simulated, "fold": r.fold,
        "algorithm_choices": " | ".join(f"{k}: {why}" for k, why in r.algorithm_choices.items()),
        "compute_efficiency": study.compute_efficiency, "routing": study.routing,
        "dcn": dcn.kind, "dcn_oversubscription": dcn.oversubscription, "dcn_ocs_groups": [list(g) for g in dcn.ocs_groups],
        "sites": dcn.sites, "wan_latency_s": dcn.wan_latency_s, "pods": r.fabric.layout.pods,
        "chip_s_per_step": total_chips * r.step_time_s,
        "input_s": r.input_s, "input_wait_s": r.input_wait_s, "input_bound": r.input_wait_s > 0,
    }
    if "hbm_bytes_per_chip" in summ:  # a generated trace: does the plan fit the chip at all?
        m.update({k: summ[k] for k in ("hbm_bytes_per_chip", "hbm_capacity_bytes", "hbm_fits")})
    for kind, k in summ["collectives"].items():
        m[f"{kind}_busy_s"] = k["busy_s"]
    for level, d in r.levels.items():
        m[f"{level}_busy_s"], m[f"{level}_exposed_s"] = d["busy_s"], d["exposed_s"]
    for tier, d in r.tiers.items():  # the DCN's tiers (podsim.topology.dcntiers), those the step's traffic has links on
        m.update({f"tier_{tier}_{k}": d[k] for k in ("busy_s", "exposed_s", "link_busy_s", "ecmp_collision_s") if k in d})
    m.update({k: summ[k] for k in ("dcn_tail_s", "straggler_wait_s", "ecmp_collision_s", "multislice_added_s")})
    if r.multislice:
        m.update({f"{term}_source": v for term, v in r.multislice["notes"].items()})  # dcn_tail, straggler, ecmp_collision
    dcn_ops = [t for t in r.timeline if t.step == 0 and "dcn" in t.group.split(",")]
    m["dcn_collective_busy_s"] = busy_time_s((t.start_s, t.end_s) for t in dcn_ops)
    m["dcn_collective_op_s"] = sum(t.duration_s for t in dcn_ops)
    m["dcn_collective_bytes"] = sum(t.bytes for t in dcn_ops)
    if steps:
        m["steps"] = steps
        m["time_to_train_s"] = steps * r.step_time_s
    band = step_band(study.generation.id, study.slices)
    m.update({"step_time_error": band.typical if band.typical is not None else math.nan,
              "step_time_error_runs": band.n_runs, "step_time_error_kind": "/".join(band.used),
              "step_time_error_text": band.text()})
    return m


def step_parts(study: StepStudy, r: StepResult, steps: int | None = None,
               model: str | None = None) -> tuple[dict, dict, dict, dict]:
    """A simulated step as a RunResult's metrics (with cost and energy), topology, cost and tables."""
    gen = study.generation
    m = step_metrics(study, r, steps, model)
    summ = step_summary(r)
    chip_h = m["chips"] * r.step_time_s * (steps or 1) / 3600.0
    cost = cost_figures(gen, chip_h, chip_h)
    cost["per"] = f"{steps} steps" if steps else "one step"
    m.update(chip_h=chip_h, cost_usd=cost["cost_usd"], energy_kwh=cost["energy_kwh"])
    ops = [t for t in r.timeline if t.step == 0]
    kinds = summ["collectives"]
    constants = compute_constants_rows(r, study.compute_efficiency)
    tables = {
        "step_ops": normalise_table("step_ops", {
            "op": [t.id for t in ops], "kind": [t.kind for t in ops], "start_s": [t.start_s for t in ops],
            "end_s": [t.end_s for t in ops], "bytes": [t.bytes for t in ops], "algorithm": [t.algorithm for t in ops],
            "closed_form_s": [math.nan if t.closed_form_s is None else t.closed_form_s for t in ops]}),
        "step_kinds": normalise_table("step_kinds", {
            "kind": list(kinds), "ops": [k["ops"] for k in kinds.values()], "bytes": [k["bytes"] for k in kinds.values()],
            "busy_s": [k["busy_s"] for k in kinds.values()], "op_s": [k["op_s"] for k in kinds.values()],
            "closed_form_s": [k["closed_form_s"] for k in kinds.values()],
            "algorithms": [",".join(k["algorithms"]) for k in kinds.values()]}),
        "compute_constants": normalise_table("compute_constants", {
            k: [c[k] for c in constants] for k in ("name", "value", "basis", "source", "why")}),
    }
    dcn = r.fabric.dcn
    topo = topology_summary(gen, None if study.slice is None else format_shape(study.slice), twisted=study.twisted,
                            ocs=study.ocs, dcn=dcn.model_copy(update={"sites": 1}))
    pods = r.fabric.layout.pods
    topo.update(pods=pods, fleet_chips=pods * gen.pod_chips, job_slices=study.slices, sites=dcn.sites)
    return m, topo, cost, tables


def step_result(study: StepStudy, steps: int | None = None, r: StepResult | None = None) -> RunResult:
    """A step study as a RunResult (`kind` 'step'; `scenario` holds the study's fields): what
    `podsim steptime` reports, in the shape `run_scenario` gives a scenario's step study."""
    t0 = time.perf_counter()
    r = run_study(study) if r is None else r
    metrics, topo, cost, tables = step_parts(study, r, steps)
    return RunResult(name=study.name, kind="step", scenario={"study": study_record(study)}, metrics=metrics,
                     topology=topo, cost=cost, tables=tables, wall_s=time.perf_counter() - t0)


def study_record(study: StepStudy) -> dict:
    """The study's fields as JSON-ready values (a trace by its name)."""
    out = {}
    for f in dataclasses.fields(study):
        v = getattr(study, f.name)
        if f.name == "trace":
            v = None if v is None else v.name
        elif f.name == "generation":
            v = v.id
        elif hasattr(v, "model_dump"):
            v = v.model_dump(mode="json")
        elif dataclasses.is_dataclass(v):
            v = {k: val for k, val in dataclasses.asdict(v).items()}
        elif isinstance(v, tuple):
            v = list(v)
        out[f.name] = v
    return out


def _run_step(s: Scenario, gen: Generation, on_progress: ProgressFn | None):
    if on_progress is not None:
        on_progress(0.0, 1.0)
    study = step_study(s, gen)
    st = s.workload.step
    out = step_parts(study, run_study(study), st.steps, None if st.trace is None else str(st.trace))
    if on_progress is not None:
        on_progress(1.0, 1.0)
    return out


def run_scenario(scenario: Scenario, on_progress: ProgressFn | None = None, *,
                 cpsat_workers_cap: int | None = None) -> RunResult:
    r"""Run one scenario: a job stream through the cluster simulation or a step study on the
    engine, with cost, energy, targets, references and its spine or scaling study; no I/O
    besides reading the files it names.

    Parameters
    ----------
    scenario : Scenario
        A validated scenario (`load_scenario`).
    on_progress : callable, optional
        on_progress(done, total): simulated seconds of the horizon for a job stream, 0..1 for
        a step study.
    cpsat_workers_cap : int, optional
        At most this many CP-SAT workers (sweeps pass 1 per worker).

    Returns
    -------
    RunResult
        `metrics` (names and units from `podsim.metrics`), `tables`, `topology`, `cost`,
        `targets`, `references`; `summary()` is what `podsim run --json` prints.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from podsim import load_scenario, run_scenario
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "step.yaml"
    >>> _ = path.write_text("name: l2\ntopology: {generation: tpu-v4}\nworkload: {step: {model: llama2-70b, "
    ...                     "slice: 4x4x4, parallelism: 'fsdp=16,tensor=4', model_overrides: {n_layers: 2, global_batch: 32}}}")
    >>> r = run_scenario(load_scenario(path))
    >>> r.kind, round(r.metrics["step_time_s"], 4), r.metrics["parallelism"]
    ('step', 0.1237, 'fsdp=16,tensor=4')
    """
    t0 = time.perf_counter()
    gen = check_scenario(scenario)
    intervals: dict[str, dict] = {}
    if scenario.kind == "cluster" and scenario.replicates > 1:
        metrics, topo, cost, tables, intervals = _run_replicates(scenario, gen, on_progress, cpsat_workers_cap)
    elif scenario.kind == "cluster":
        metrics, topo, cost, tables = _run_cluster(scenario, gen, on_progress, cpsat_workers_cap)
    elif scenario.kind == "serving":  # a serving fleet (podsim.scenario.serving)
        from podsim.scenario.serving import run_serving

        metrics, topo, cost, tables, intervals = run_serving(scenario.workload.serving, gen, scenario.seed,
                                                             scenario.replicates, on_progress, dcn=scenario.dcn.spec())
    else:
        metrics, topo, cost, tables = _run_step(scenario, gen, on_progress)
    if scenario.spine is not None:  # spine economics: EPS against OCS over the fleet's life
        spine_m, spine_t = spine_study(scenario, gen, lambda s2, g2: _run_step(s2, g2, None)[0])
        metrics.update(spine_m)
        tables.update({name: normalise_table(name, cols) for name, cols in spine_t.items()})
    if scenario.scaling is not None:  # weak scaling: the same step on 1, 2, 4, ... slices
        scaling_m, scaling_t = scenario_scaling(scenario, gen)
        metrics.update(scaling_m)
        tables["scaling"] = normalise_table("scaling", {k: v for k, v in scaling_t.items() if k != "tiers"})
        tables["scaling_tiers"] = normalise_table("scaling_tiers", scaling_t["tiers"])
    if scenario.plan is not None:  # plan search (and time to train): podsim.scenario.plan
        from podsim.scenario.plan import scenario_plan

        plan_m, plan_t = scenario_plan(scenario, gen)
        metrics.update(plan_m)
        tables["plan"] = normalise_table("plan", plan_t)
    return RunResult(
        name=scenario.name, kind=scenario.kind, scenario=scenario.model_dump(mode="json"), metrics=metrics,
        topology=topo, cost=cost, targets=_targets(scenario, metrics, intervals),
        references=_references(scenario, metrics), tables=tables, wall_s=time.perf_counter() - t0, intervals=intervals)
