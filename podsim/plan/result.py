"""A search's and a time-to-train answer's figures as plain rows and dicts: what the CLI prints
and `--json` emits, the scenario's plan table and metrics, the dashboard's and the report's
tables. No I/O."""

from __future__ import annotations

import math

from podsim.plan.explain import why_loses
from podsim.plan.search import PlanSearch
from podsim.plan.train import Ranged, TrainPlan
from podsim.topology import format_shape

PLAN_COLUMNS = ("rank", "plan", "slices", "slice", "parallelism", "microbatches", "recompute", "sequence_parallel",
                "collective_matmul", "step_time_s", "estimate_s", "estimate_error", "mfu", "hbm_bytes_per_chip",
                "tokens_per_s", "engine_wall_s", "why", "hfu")
"""Columns of the plan table (one row per confirmed plan, best first)."""


def plan_rows(s: PlanSearch) -> list[dict]:
    """One row per confirmed plan, best first (engine step), with why each loses to the best."""
    rows = []
    best = s.best
    for i, c in enumerate(s.confirmed):
        cand = c.assessed.candidate
        rows.append({
            "rank": i + 1, "plan": cand.label(), "slices": cand.slices, "slice": format_shape(cand.shape),
            "parallelism": cand.parallelism, "microbatches": cand.microbatches, "recompute": cand.recompute,
            "sequence_parallel": c.assessed.sequence_parallel, "collective_matmul": c.assessed.collective_matmul,
            "step_time_s": c.step_s, "estimate_s": c.assessed.estimate.step_s, "estimate_error": c.estimate_error,
            "mfu": c.mfu, "hfu": c.hfu, "hbm_bytes_per_chip": c.hbm_bytes, "tokens_per_s": c.tokens_per_s, "engine_wall_s": c.wall_s,
            "why": why_loses(c.assessed, best.assessed, c.step_s, best.step_s),
        })
    return rows


def ranked_rows(s: PlanSearch, n: int = 20) -> list[dict]:
    """The first `n` plans by the analytic estimate (confirmed or not), with why each loses."""
    if not s.ranked:
        return []
    top = s.ranked[0]
    return [{"rank": i + 1, "plan": a.candidate.label(), "estimate_s": a.estimate.step_s,
             "hbm_bytes_per_chip": a.hbm_bytes, "why": why_loses(a, top)} for i, a in enumerate(s.ranked[:n])]


def steptime_command(s: PlanSearch) -> str:
    """The `podsim steptime` command that times the best plan (the same StepStudy)."""
    c = s.best.assessed.candidate
    q = s.query
    parts = ["podsim steptime", f"--model {q.model}", f"--generation {s.context.generation.id}",
             f"--slice {format_shape(c.shape)}", f"-p {c.parallelism}"]
    if c.slices > 1:
        parts.append(f"--slices {c.slices}")
    parts += [f"--set {k}={v}" for k, v in q.model_overrides.items()]
    parts += [f"--option {o}" for o in c.option_args()]
    return " ".join(parts)


def search_summary(s: PlanSearch) -> dict:
    """Everything a search found, JSON-ready."""
    best = s.best
    out = {
        "model": s.query.model, "generation": s.context.generation.id, "chips": s.chips,
        "global_batch": s.context.cfg.global_batch, "tokens_per_step": s.context.cfg.tokens_per_step,
        "layouts": [{"slices": n, "slice": format_shape(shape)} for n, shape in s.layouts],
        "counts": dict(vars(s.counts)), "wall_s": s.wall_s,
        "hbm_capacity_bytes": s.context.hbm_capacity_bytes,
        "plans": plan_rows(s), "ranked": ranked_rows(s),
        "refusals": [{"reason": r, "plans": n} for r, n in s.refusals.most_common(10)],
        "engine_refused": [{"plan": a.candidate.label(), "reason": why} for a, why in s.engine_refused],
    }
    if best is not None:
        out["best"] = {"plan": best.assessed.candidate.label(), "step_time_s": best.step_s, "mfu": best.mfu, "hfu": best.hfu,
                       "tokens_per_s": best.tokens_per_s, "steptime_command": steptime_command(s),
                       "mesh": best.assessed.estimate.mesh}
    return out


def _ranged(r: Ranged) -> dict:
    return {"value": r.value, "low": r.low, "high": r.high}


def train_summary(t: TrainPlan) -> dict:
    """A time-to-train answer, JSON-ready: chips, plan, days, chip-hours, cost, energy (each with
    its range), goodput, the step's error band, the prices and powers with their sources."""
    best = t.search.best
    c = best.assessed.candidate
    return {
        "tokens": t.query.tokens, "deadline_days": t.query.days, "meets_deadline": t.meets_deadline,
        "chips": c.chips, "slices": c.slices, "slice": format_shape(c.shape), "plan": c.label(),
        "step_time_s": t.step_s, "step_error": t.band.as_dict(), "step_error_text": t.band.text(),
        "steps": t.steps, "tokens_per_step": t.tokens_per_step,
        "goodput": t.goodput.as_dict(), "days": _ranged(t.days), "chip_hours": _ranged(t.chip_hours),
        "cost_usd": _ranged(t.cost_usd), "energy_mwh": _ranged(t.energy_mwh),
        "price_per_chip_hour": vars(t.price) | {"text": t.price.text()},
        "power_per_chip": vars(t.power) | {"text": t.power.text()},
        "chip_counts_tried": t.tried, "search": search_summary(t.search),
    }


def ranged_text(r: Ranged, fmt: str, unit: str = "") -> str:
    """'29.3 days (28.9-29.8)' style: the value and its range."""
    if r.value is None:
        return "-"
    text = f"{r.value:{fmt}}{unit}"
    if r.low is not None and r.high is not None and not (math.isclose(r.low, r.value) and math.isclose(r.high, r.value)):
        text += f" ({r.low:{fmt}}-{r.high:{fmt}})"
    return text
