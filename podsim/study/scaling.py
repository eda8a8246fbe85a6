"""A multislice scaling study: one step study on 1, 2, 4, ... slices (weak scaling: the batch per
slice fixed), with step time, MFU, the DCN / WAN busy and exposed time, and the parallel
efficiency step(fewest slices) / step(N slices), what the slices add (podsim.study.multislice: the
DCN tail, the straggler wait and ECMP collisions, which with the step's own time add up to it); and per DCN tier (`TIER_COLUMNS`, long form:
a row per slice count and tier) the busy and exposed time of the ops that climb to it and what
its busiest link needs, which say where the fall comes from. `podsim scaling` and a scenario's
`scaling` section (podsim.scenario.scaling: the `scaling` and `scaling_tiers` tables and
`scaling_*` metrics) run it."""

from __future__ import annotations

from collections.abc import Sequence

from podsim.engine import step_summary
from podsim.errors import PodsimError
from podsim.study.study import StepStudy, run_study
from podsim.trace.plans import names_dcn

COLUMNS = ("slices", "chips", "global_batch", "step_time_s", "mfu", "parallel_efficiency", "compute_s",
           "exposed_comm_s", "ici_exposed_s", "dcn_busy_s", "dcn_exposed_s", "wan_busy_s", "wan_exposed_s",
           "dcn_tail_s", "straggler_wait_s", "ecmp_collision_s", "multislice_added_s", "engine_wall_s")
TIER_COLUMNS = ("slices", "tier", "busy_s", "exposed_s", "link_busy_s", "ecmp_collision_s")


def plan_error(plan: str | None) -> str | None:
    """Why a plan cannot be a study's plan inside a slice (it names dcn), or None."""
    if plan and names_dcn(plan):
        return f"parallelism {plan!r}: leave dcn out; the study sets dcn to each slice count"
    return None


def scaling_study(base: StepStudy, slices: Sequence[int], batch_per_slice: int) -> dict[str, list]:
    """One row per slice count, fewest first (a column table, COLUMNS): `base` on each count of
    slices with a global batch of `batch_per_slice` x slices, and under "tiers" the per-tier
    table (TIER_COLUMNS: the tiers each count's fabric has). Its plan is the plan inside a slice
    (no dcn: the study adds dcn=N). With `base.dcn.sites` > 1 every count must split evenly over
    the sites."""
    err = plan_error(base.plan)
    if err:
        raise PodsimError(err)
    if base.model is None:
        raise PodsimError("a scaling study generates each step: give a model, not a trace")
    counts = sorted({int(n) for n in slices})
    if not counts or counts[0] < 1:
        raise PodsimError(f"slice counts {list(slices)}: give whole numbers >= 1, e.g. 1,2,4,8")
    if batch_per_slice < 1:
        raise PodsimError(f"batch per slice {batch_per_slice}: give a whole number >= 1")
    uneven = [n for n in counts if n % base.sites]
    if uneven:
        raise PodsimError(f"slice count {uneven[0]} does not split evenly over {base.sites} sites; give multiples of {base.sites}")
    rows: list[dict] = []
    tiers: dict[str, list] = {c: [] for c in TIER_COLUMNS}
    for n in counts:
        batch = batch_per_slice * n
        if isinstance(base.model, str):
            study = base.replace(slices=n, model_overrides={**base.model_overrides, "global_batch": batch})
        else:  # a config: its own field
            study = base.replace(slices=n, model=base.model.model_copy(update={"global_batch": batch}))
        r = run_study(study)
        s = step_summary(r)
        rows.append({"slices": n, "chips": int(r.trace.meta["chips"]), "global_batch": batch_per_slice * n,
                     **{c: s.get(c, float("nan")) for c in COLUMNS if c not in ("slices", "chips", "global_batch", "parallel_efficiency")}})
        for tier, d in r.tiers.items():
            for c, v in zip(TIER_COLUMNS, (n, tier, d["busy_s"], d["exposed_s"], d["link_busy_s"],
                                           d.get("ecmp_collision_s", 0.0)), strict=True):
                tiers[c].append(v)
    first = rows[0]["step_time_s"]
    for row in rows:  # weak scaling: ideal is the smallest count's step time
        row["parallel_efficiency"] = first / row["step_time_s"] if row["step_time_s"] > 0 else float("nan")
    return {**{c: [row[c] for row in rows] for c in COLUMNS}, "tiers": tiers}
