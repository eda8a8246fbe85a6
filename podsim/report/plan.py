"""The report's plan section: per run with a plan search (a scenario's `plan` section), the
confirmed plans best first, why each loses to the best, and the time to train when asked. The
HTML report shows it; the figures are the run's `plan` table and `plan_*` metrics."""

from __future__ import annotations

import math
from collections.abc import Sequence

from podsim.scenario.result import RunResult
from podsim.units import format_bytes
from podsim.units import format_duration as sec
from podsim.units import format_percent as pct

HEADER = ("#", "plan", "step", "estimate", "MFU", "HBM per chip", "tokens/s", "why it loses")


def has_plan(r: RunResult) -> bool:
    return "plan_best_step_time_s" in r.metrics


def plan_rows(r: RunResult) -> list[list[str]]:
    t = r.table("plan")
    return [[f"{int(t['rank'][i])}", str(t["plan"][i]), sec(float(t["step_time_s"][i])),
             f"{sec(float(t['estimate_s'][i]))} ({float(t['estimate_error'][i]):+.1%})", pct(float(t["mfu"][i])),
             format_bytes(float(t["hbm_bytes_per_chip"][i])), f"{float(t['tokens_per_s'][i]):,.0f}", str(t["why"][i])]
            for i in range(len(t["rank"]))]


def _num(v, fmt: str, unit: str = "") -> str:
    return "not published" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:{fmt}}{unit}"


def train_rows(r: RunResult) -> list[tuple[str, str]]:
    """Time to train: chips, days, chip-hours, cost, energy, goodput (empty when not asked)."""
    m = r.metrics
    if "plan_train_chips" not in m:
        return []
    p = r.scenario.get("plan") or {}
    return [("tokens", str(p.get("tokens"))), ("deadline", f"{p['days']:g} days" if p.get("days") else "none (the chip budget)"),
            ("chips", f"{int(m['plan_train_chips']):,}"), ("days", f"{m['plan_train_time_s'] / 86400:.1f}"),
            ("chip-hours", f"{m['plan_train_chip_hours']:,.0f}"), ("cost", _num(m["plan_train_cost_usd"], ",.0f", " USD")),
            ("energy", _num(m["plan_train_energy_kwh"], ",.0f", " kWh")), ("goodput", pct(m["plan_train_goodput"]))]


def plan_details(runs: Sequence[RunResult], labels: Sequence[str]) -> list[dict]:
    """One entry per run with a plan search: label, title, header, rows, time-to-train rows."""
    out = []
    for label, r in zip(labels, runs, strict=True):
        if not has_plan(r):
            continue
        p = r.scenario.get("plan") or {}
        gen = (r.scenario.get("topology") or {}).get("generation", "")
        m = r.metrics
        title = (f"{p.get('model', '')} on {int(m['plan_best_chips']):,} {gen} chips: {int(m['plan_plans_enumerated']):,} plans "
                 f"enumerated, {int(m['plan_plans_ranked']):,} ranked by the estimate; the best run on the engine "
                 f"(the estimate within {m['plan_estimate_error_max']:.1%} of it)")
        out.append({"label": label, "title": title, "header": list(HEADER), "rows": plan_rows(r), "train": train_rows(r)})
    return out
