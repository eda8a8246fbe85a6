"""A scenario's `plan` section: the plan search (podsim.plan) on the scenario's generation, with
its figure overrides, over its DCN; with `tokens`, time to train (host failures: the scenario's
`failures.host`). `check_plan` refuses at load what the search would refuse at run time."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from podsim.errors import PodsimError
from podsim.topology import Generation, parse_shape

if TYPE_CHECKING:
    from podsim.plan.search import PlanQuery
    from podsim.plan.train import TrainQuery
    from podsim.scenario.schema import Scenario

PLAN_METRICS = ("plan_best_step_time_s", "plan_best_mfu", "plan_best_tokens_per_s", "plan_best_parallelism", "plan_best_chips",
                "plan_best_slices", "plan_best_hbm_bytes_per_chip", "plan_plans_enumerated", "plan_plans_ranked",
                "plan_estimate_error_max")
TRAIN_METRICS = ("plan_train_chips", "plan_train_time_s", "plan_train_chip_hours", "plan_train_cost_usd", "plan_train_energy_kwh",
                 "plan_train_goodput")


def plan_query(s: Scenario, gen: Generation) -> PlanQuery:
    from podsim.plan.search import PlanQuery

    p = s.plan
    return PlanQuery(p.model, gen, chips=p.chips, slice=parse_shape(p.slice, gen.dims) if p.slice else None, slices=p.slices,
                     model_overrides=dict(p.model_overrides), options=p.options, dcn=s.dcn.spec(),
                     **({"recompute": tuple(p.recompute)} if p.recompute else {}),
                     microbatches=tuple(p.microbatches) if p.microbatches else None, tensor_modes=tuple(p.collective_matmul),
                     top=p.top)


def train_query(s: Scenario, gen: Generation) -> TrainQuery | None:
    from podsim.plan.train import TrainQuery, parse_tokens

    p = s.plan
    if p.tokens is None:
        return None
    q = plan_query(s, gen)
    return TrainQuery(q, parse_tokens(p.tokens), days=p.days, failures=s.failures.host,
                      checkpoint_interval_s=p.checkpoint_interval, restart_s=p.restart_overhead,
                      price_per_chip_hour=p.price_per_chip_hour, power_per_chip_w=p.power_per_chip, max_chips=p.max_chips)


def check_plan(s: Scenario, gen: Generation) -> None:
    """The section's cross-field rules (raised as PodsimError; the caller names the field)."""
    from podsim.plan.candidate import context
    from podsim.plan.space import job_layouts

    p = s.plan
    if p.days is not None and p.tokens is None:
        raise PodsimError("days: a deadline needs tokens (how many to train)")
    if p.days is not None and (p.chips is not None or p.slice is not None or p.slices is not None):
        raise PodsimError("days finds the chips itself: leave chips, slice and slices out")
    if p.days is None and p.chips is None and p.slice is None:
        raise PodsimError("give chips (a budget) or slice (a shape), or tokens with days")
    if s.failures.trace is not None or s.failures.ocs is not None or s.failures.link is not None:
        if p.tokens is not None:
            raise PodsimError("time to train models host failures only (failures.host); leave failures.trace, ocs and link out")
    if s.failures.host is not None and s.failures.host.distribution != "exponential":
        raise PodsimError("time to train's goodput is the closed form for exponential host failures; leave distribution out")
    context(p.model, gen, options=p.options, overrides=dict(p.model_overrides))
    if p.days is None:
        job_layouts(gen, p.chips, parse_shape(p.slice, gen.dims) if p.slice else None, p.slices)
    train_query(s, gen) if p.tokens is not None else plan_query(s, gen)


def scenario_plan(s: Scenario, gen: Generation) -> tuple[dict, dict[str, list]]:
    """The `plan_*` key figures and the `plan` table (one row per confirmed plan)."""
    from podsim.plan.result import plan_rows
    from podsim.plan.search import no_fit_advice, search
    from podsim.plan.train import time_to_train

    tq = train_query(s, gen)
    if tq is not None:
        t = time_to_train(tq)
        found = t.search
    else:
        found = search(plan_query(s, gen))
        if not found.confirmed:
            raise PodsimError(f"plan: {no_fit_advice(found)}")
    best = found.best
    c = best.assessed.candidate
    metrics = {"plan_best_step_time_s": best.step_s, "plan_best_mfu": math.nan if best.mfu is None else best.mfu, "plan_best_tokens_per_s": best.tokens_per_s,
               "plan_best_parallelism": c.label(), "plan_best_chips": c.chips, "plan_best_slices": c.slices,
               "plan_best_hbm_bytes_per_chip": best.hbm_bytes, "plan_plans_enumerated": found.counts.enumerated,
               "plan_plans_ranked": found.counts.ranked,
               "plan_estimate_error_max": max(abs(x.estimate_error) for x in found.confirmed)}
    if tq is not None:
        missing = math.nan  # a price or power the generation does not publish
        metrics.update({"plan_train_chips": t.chips, "plan_train_time_s": t.days.value * 86400, "plan_train_chip_hours": t.chip_hours.value,
                        "plan_train_cost_usd": missing if t.cost_usd.value is None else t.cost_usd.value,
                        "plan_train_energy_kwh": missing if t.energy_mwh.value is None else t.energy_mwh.value * 1000,
                        "plan_train_goodput": t.goodput.goodput})
    rows = plan_rows(found)
    table = {k: [r[k] for r in rows] for k in rows[0]} if rows else {}
    return metrics, table
