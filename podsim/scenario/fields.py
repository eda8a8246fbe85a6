"""Targets of a scenario file ('<= 1h', '>= 95%') and the metrics they may name. The unit types
(durations '3h', rates '2/h', fractions '95%') live in podsim.quantities and podsim.units, shared
with the library's own config models."""

from __future__ import annotations

import math
import re
from typing import Any

from podsim.errors import PodsimError
from podsim.metrics import METRICS, target_metrics
from podsim.units import duration_s, finite_number, fraction

# Metrics a target may name, with how its threshold is written: from the metric registry.
TARGET_UNITS: dict[str, str] = {n: METRICS[n].threshold for n in dict.fromkeys(
    target_metrics("cluster") + target_metrics("step") + target_metrics("serving"))}
STEP_TARGETS = target_metrics("step")


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
