"""Targets of a scenario file ('<= 1h', '>= 95%') and the metrics they may name. The unit types
(durations '3h', rates '2/h', fractions '95%') live in podsim.quantities and podsim.units, shared
with the library's own config models."""

from __future__ import annotations

import math
import re
from typing import Any

from podsim.errors import PodsimError
from podsim.quantities import Duration, Fraction, Rate  # noqa: F401  (the scenario's unit types, defined once)
from podsim.units import duration_s, finite_number, fraction, rate_per_h  # noqa: F401

# Metrics a target may name, with how its threshold is written.
TARGET_UNITS: dict[str, str] = {
    # job streams (podsim.cluster metrics)
    "wait_p50_s": "duration", "wait_p95_s": "duration", "wait_p99_s": "duration", "wait_mean_s": "duration",
    "wait_p95_with_queued_s": "duration", "wait_p99_with_queued_s": "duration",
    "goodput": "fraction", "fleet_goodput": "fraction", "utilisation": "fraction", "availability": "fraction",
    "slowdown_p95": "number", "slowdown_mean": "number", "jobs_queued": "number", "jobs_unplaceable": "number",
    "fragmentation_mean": "fraction", "cost_usd": "number", "cost_per_useful_chip_h_usd": "number",
    # step studies
    "step_time_s": "duration", "exposed_comm_s": "duration", "time_to_train_s": "duration", "mfu": "fraction",
}
STEP_TARGETS = ("step_time_s", "exposed_comm_s", "time_to_train_s", "mfu", "cost_usd")


def parse_threshold(metric: str, value: Any) -> float:
    unit = TARGET_UNITS[metric]
    if unit == "duration":
        return duration_s(value)
    if unit == "fraction":
        return fraction(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            raise PodsimError(f"{value!r} is not a number") from None
    return finite_number(value, metric)


def parse_target(metric: str, value: Any) -> tuple[str, float]:
    """'<= 1h' / '>= 95%' / {max: 1h} / {min: 0.95} -> (operator, threshold in base units)."""
    if isinstance(value, dict):
        if set(value) not in ({"max"}, {"min"}):
            raise PodsimError(f"a target is '<= VALUE', '>= VALUE', {{max: VALUE}} or {{min: VALUE}}; got keys {sorted(value)}")
        op = "<=" if "max" in value else ">="
        return op, parse_threshold(metric, next(iter(value.values())))
    m = re.fullmatch(r"\s*(<=|>=|<|>|≤|≥)\s*(.+?)\s*", str(value))
    if not m:
        raise PodsimError(f"target {value!r} is not understood; write '<= 1h' or '>= 95%' (operators <=, >=, <, >)")
    op = {"≤": "<=", "≥": ">="}.get(m.group(1), m.group(1))
    return op, parse_threshold(metric, m.group(2))


def target_met(op: str, value: float | None, threshold: float) -> bool:
    """Whether `value op threshold` holds; no value (NaN, None) never meets a target."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return False
    return {"<=": value <= threshold, ">=": value >= threshold, "<": value < threshold, ">": value > threshold}[op]
