"""A multislice scaling study: one model's step on 1, 2, 4, ... slices (weak scaling: the batch per
slice fixed), with step time, MFU, the DCN / WAN busy and exposed time, and the parallel
efficiency step(fewest slices) / step(N slices). `podsim scaling` and a scenario's `scaling`
section (`scenario_scaling`: the `scaling` table and `scaling_*` metrics) run it."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from podsim.engine import build_job, simulate_step, step_summary
from podsim.errors import PodsimError
from podsim.topology import DcnSpec, Generation, get_generation, parse_shape
from podsim.trace import GenerateOptions, generate_trace
from podsim.trace.plans import resolve_plan

if TYPE_CHECKING:
    from podsim.scenario.schema import Scenario

COLUMNS = ("slices", "chips", "global_batch", "step_time_s", "mfu", "parallel_efficiency", "compute_s",
           "exposed_comm_s", "ici_exposed_s", "dcn_busy_s", "dcn_exposed_s", "wan_busy_s", "wan_exposed_s",
           "engine_wall_s")
_DCN_IN_PLAN = re.compile(r"\bdcn\b|\bslices\b")


def plan_error(plan: str) -> str | None:
    """Why a plan cannot be a study's plan inside a slice (it names dcn), or None."""
    if _DCN_IN_PLAN.search(plan):
        return f"parallelism {plan!r}: leave dcn out; the study sets dcn to each slice count"
    return None


def scaling_study(model: str, generation: str | Generation, shape: str, plan: str, slices: Sequence[int],
                  batch_per_slice: int, *, dcn: DcnSpec | None = None, overrides: Mapping[str, object] | None = None,
                  compute_efficiency: float | None = None, routing: str = "dimension_order", ocs: bool = True,
                  engineer_dcn: bool = False, options: GenerateOptions | None = None) -> dict[str, list]:
    """One row per slice count, fewest first (a column table, COLUMNS). `plan` is the parallelism
    inside a slice (no dcn: the study adds dcn=N). With `dcn.sites` > 1 every count must split
    evenly over the sites. `engineer_dcn`: an OCS DCN's circuits set for each job's blocks."""
    err = plan_error(plan)
    if err:
        raise PodsimError(err)
    counts = sorted({int(n) for n in slices})
    if not counts or counts[0] < 1:
        raise PodsimError(f"slice counts {list(slices)}: give whole numbers >= 1, e.g. 1,2,4,8")
    if batch_per_slice < 1:
        raise PodsimError(f"batch per slice {batch_per_slice}: give a whole number >= 1")
    gen = get_generation(generation)
    sites = dcn.sites if dcn is not None else 1
    uneven = [n for n in counts if n % sites]
    if uneven:
        raise PodsimError(f"slice count {uneven[0]} does not split evenly over {sites} sites; give multiples of {sites}")
    kw = {} if compute_efficiency is None else {"compute_efficiency": compute_efficiency}
    rows: list[dict] = []
    for n in counts:
        over = {**dict(overrides or {}), "global_batch": batch_per_slice * n}
        trace = generate_trace(model, shape, f"{plan},dcn={n}", generation=gen, overrides=over, options=options)
        job = build_job(trace, gen, shape, n, ocs=ocs, dcn=dcn, engineer_dcn=engineer_dcn and n > 1)
        r = simulate_step(None, job, routing=routing, **kw)
        s = step_summary(r, trace)
        rows.append({"slices": n, "chips": int(trace.meta["chips"]), "global_batch": batch_per_slice * n,
                     **{c: s.get(c, float("nan")) for c in COLUMNS if c not in ("slices", "chips", "global_batch", "parallel_efficiency")}})
    base = rows[0]["step_time_s"]
    for row in rows:  # weak scaling: ideal is the smallest count's step time
        row["parallel_efficiency"] = base / row["step_time_s"] if row["step_time_s"] > 0 else float("nan")
    return {c: [row[c] for row in rows] for c in COLUMNS}


def scenario_scaling(s: Scenario, gen: Generation, dcn: DcnSpec) -> tuple[dict, dict[str, list]]:
    """A scenario's `scaling` section on its generation (with overrides), wiring, routing and DCN:
    the `scaling_*` key figures (at the most slices) and the `scaling` table."""
    sc = s.scaling
    chips = math.prod(parse_shape(sc.slice))
    plan = resolve_plan(sc.parallelism, sc.model, chips)
    study = scaling_study(sc.model, gen, sc.slice, plan, sc.slices, sc.batch_per_slice, dcn=dcn,
                          overrides=dict(sc.model_overrides), compute_efficiency=sc.compute_efficiency,
                          routing=s.topology.routing, ocs=s.topology.wiring == "ocs",
                          engineer_dcn=s.dcn.ocs_groups == "job", options=sc.options.generate_options())
    metrics = {"scaling_slices_max": study["slices"][-1], "scaling_parallel_efficiency": study["parallel_efficiency"][-1],
               "scaling_mfu": study["mfu"][-1], "scaling_step_time_s": study["step_time_s"][-1],
               "scaling_parallelism": plan}
    return metrics, study
