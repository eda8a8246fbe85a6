"""A step result as one flat dict: the figures `podsim steptime --trace` prints and reports use."""

from __future__ import annotations

import numpy as np

from podsim.engine.results import StepResult
from podsim.perf.efficiency import HBM, MATMUL, basis_rows, basis_text, constant_name
from podsim.topology.slices import SliceView
from podsim.trace.memory import fits_hbm
from podsim.trace.model import Compute, StepTrace


def step_summary(result: StepResult, trace: StepTrace | None = None) -> dict:
    """Step time, its breakdown (compute, exposed communication, and the wait for the hosts'
    input when they feed slower than the chips run: `input_bound`), per-kind totals per step
    (count, bytes, busy seconds: the time an op of the kind is in flight, overlaps counted once,
    as comm_s; op seconds: their summed durations; closed-form seconds), busy and exposed time
    per network level (`ici_busy_s`, `dcn_exposed_s`, ...) and per DCN tier (`tiers`;
    `tier_spine_busy_s`, `tier_tor_link_busy_s`, ...: StepResult.tiers) and,
    when the trace knows its chips, the FLOPs utilisations against the bf16 peak: `mfu` (model
    FLOPs, when the trace knows them) and `hfu` (hardware FLOPs: every compute op's FLOPs,
    recomputation included, bubbles left out). `trace` defaults to the result's own."""
    trace = result.trace if trace is None else trace
    gen = result.fabric.generation
    per_kind = {kind: {"ops": t["count"], "bytes": t["bytes"], "busy_s": t["busy_s"], "op_s": t["time_s"],
                       "closed_form_s": t["closed_form_s"],
                       "algorithms": t["algorithms"]}
                for kind, t in result.totals.items() if kind not in ("compute", "input")}
    out = {
        "step_time_s": result.step_time_s,
        "compute_s": result.compute_s,
        "comm_s": result.comm_s,
        "exposed_comm_s": result.exposed_comm_s,
        "overlapped_comm_s": result.comm_s - result.exposed_comm_s,
        # the hosts' input pipeline (the next step's batch, beside the chips): busy per step, and
        # the part of the step the chips wait for it; waiting at all makes the step input-bound
        "input_s": result.input_s,
        "input_wait_s": result.input_wait_s,
        "input_bound": result.input_wait_s > 0,
        "slices": result.slices,
        "levels": result.levels,
        **{f"{lv}_{k}": v for lv, d in result.levels.items() for k, v in d.items()},
        "tiers": result.tiers,
        **{f"tier_{t}_{k}": v for t, d in result.tiers.items() for k, v in d.items() if k != "links"},
        # what a study added for running on several slices (podsim.study.multislice; {} from the engine alone)
        "multislice": result.multislice,
        **{k: result.multislice.get(k, 0.0) for k in ("dcn_tail_s", "straggler_wait_s", "ecmp_collision_s")},
        "multislice_added_s": result.multislice.get("added_s", 0.0),
        "collectives": per_kind,
        "engine_wall_s": result.engine_wall_s,
        "events": result.events,
        "flows": result.flows,
        "flows_simulated": result.flows_simulated,
        "fold": result.fold,
        "algorithm_choices": result.algorithm_choices,
        "link_peak_utilisation_max": float(result.link_peak_utilisation.max(initial=0.0)),
        "generation": gen.id,
    }
    out.update(flops_utilisation(result, trace))
    hbm = (trace.meta if trace is not None else {}).get("hbm_footprint")
    if hbm:
        out["hbm_bytes_per_chip"] = float(hbm["total_bytes"])
        out["hbm_capacity_bytes"] = gen.hbm_per_chip.si  # the chip simulated, which may not be the trace's
        out["hbm_fits"] = fits_hbm(out["hbm_bytes_per_chip"], out["hbm_capacity_bytes"])
    return out


def flops_utilisation(result: StepResult, trace: StepTrace | None = None) -> dict:
    """The step's FLOPs utilisations against the bf16 peak of the generation simulated, where the
    trace knows its chips: `mfu` (model FLOPs per step, where the trace knows them) and `hfu`
    (hardware FLOPs: every compute op's, recomputation included, bubbles left out), each beside
    the FLOPs it divides. FLOPs / (chips x peak x step time): the one formula step_summary and
    the plan search both report. `trace` defaults to the result's own."""
    trace = result.trace if trace is None else trace
    meta = trace.meta if trace is not None else {}
    chips, step_s = meta.get("chips"), result.step_time_s
    peak = result.fabric.generation.peak_flops_per_s
    out = {}
    model_flops = meta.get("model_flops_per_step")
    if model_flops and chips and step_s > 0:
        out["model_flops_per_step"] = float(model_flops)
        out["mfu"] = float(model_flops) / (chips * peak * step_s)
    hw_flops = meta.get("hardware_flops_per_step")
    if hw_flops is None and chips and trace is not None:
        hw_flops = chips * sum(op.flops for op in trace.ops if isinstance(op, Compute) and not op.bubble)
    if hw_flops and chips and step_s > 0:
        out["hardware_flops_per_step"] = float(hw_flops)
        out["hfu"] = float(hw_flops) / (chips * peak * step_s)
    return out


def compute_constants(result: StepResult, efficiency: float | None = None) -> tuple[str, ...]:
    """The efficiency constants (podsim.perf.efficiency names) the per-op model read to time the
    step's chip compute on the generation simulated: the matmul fraction of each precision its ops
    run at, then the HBM fraction. None under a flat `efficiency` (the study's compute_efficiency),
    nor for ops with a fixed duration or their own efficiency, nor for the hosts' input op."""
    trace = result.trace
    if efficiency is not None or trace is None:
        return ()
    ops = [op for op in trace.ops if isinstance(op, Compute) and not op.host and op.duration_s is None and op.efficiency is None]
    chip = result.fabric.generation.chip_id
    names = [constant_name(chip, MATMUL, p) for p in sorted({op.precision for op in ops if op.flops > 0})]
    return (*names, constant_name(chip, HBM)) if any(op.hbm_bytes > 0 for op in ops) else tuple(names)


def compute_constants_text(result: StepResult, efficiency: float | None = None) -> str:
    """`compute_constants` on one line with each value and basis ('' where the step read none):
    what `podsim steptime` and the dashboard's step page say beside a step time."""
    return basis_text(compute_constants(result, efficiency))


def compute_constants_rows(result: StepResult, efficiency: float | None = None) -> list[dict]:
    """`compute_constants_text` as records (name, value, basis, source, why): a step result's
    `compute_constants` table (podsim.scenario.run.step_parts), in `podsim steptime` and `podsim run`'s JSON."""
    return basis_rows(compute_constants(result, efficiency))


def port_utilisation(result: StepResult, view: SliceView) -> dict:
    """Per chip of the slice and per ICI port (x+, x-, y+, ...): how busy its outgoing link was.

    `mean`: this job's bytes on the link per step / (capacity x step time), the link's average
    utilisation over the step; `peak`: the highest load / capacity the link saw while the
    simulation ran. Both (chips, 2 x dims), NaN where the port has no link inside the slice.
    `ports` names the columns; rows follow the slice's chips (`coords`, row-major).
    """
    fab = result.fabric
    link = view.port_link.reshape(view.n, -1)
    has = link >= 0
    safe = np.where(has, link, 0)
    mean = np.where(has, result.link_bytes[safe] / (fab.link_capacity_bytes_per_s[safe] * max(result.step_time_s, 1e-300)), np.nan)
    peak = np.where(has, result.link_peak_utilisation[safe], np.nan)
    dims = view.port_link.shape[1]
    return {"ports": [f"{'xyz'[d]}{s}" for d in range(dims) for s in "+-"], "coords": view.coords,
            "mean": mean, "peak": peak}
