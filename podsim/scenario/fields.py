"""Field types of a scenario file that carry units: durations ('3h'), rates ('2/h'), fractions
('95%'), targets ('<= 1h'). Each parses once, at validation, into podsim's base units and says
what is allowed when it cannot."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import BeforeValidator

from podsim.errors import PodsimError
from podsim.metrics import METRICS, target_metrics
from podsim.units import parse_duration

_NUM = r"[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?"
_PER = {"s": 3600.0, "sec": 3600.0, "min": 60.0, "h": 1.0, "hr": 1.0, "hour": 1.0, "d": 1 / 24, "day": 1 / 24,
        "w": 1 / 168, "week": 1 / 168}


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PodsimError(f"{what} {value!r} is not a number")
    if not math.isfinite(value):
        raise PodsimError(f"{what} {value!r} must be finite")
    return float(value)


def duration_s(value: Any) -> float:
    """'3h', '90s', '2d', '500ns' or a bare number of seconds -> seconds (>= 0)."""
    if isinstance(value, str) and value.strip().startswith("-"):
        raise PodsimError(f"duration {value!r} is negative; it must be >= 0 (e.g. 90s, 3h, 30d)")
    return parse_duration(value)


def rate_per_h(value: Any) -> float:
    """'2/h', '48/d', '0.5/min' or a bare number per hour -> arrivals per hour (> 0)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        rate = _number(value, "rate")
    else:
        m = re.fullmatch(rf"\s*(-?{_NUM})\s*(?:/\s*([a-z]+))?\s*", str(value))
        if not m or (m.group(2) or "h") not in _PER:
            raise PodsimError(f"rate {value!r} is not understood; use arrivals per hour or per day, e.g. 2/h, 48/d, 2")
        rate = float(m.group(1)) * _PER[m.group(2) or "h"]
    if rate <= 0:
        raise PodsimError(f"rate {value!r} must be > 0 arrivals per hour")
    return rate


def fraction(value: Any) -> float:
    """'95%', '99.5 %' or a number in [0, 1] -> a fraction."""
    if isinstance(value, str):
        m = re.fullmatch(rf"\s*(-?{_NUM})\s*(%?)\s*", value)
        if not m:
            raise PodsimError(f"{value!r} is not a fraction; use a number in [0, 1] or a percentage, e.g. 0.995 or 99.5%")
        x = float(m.group(1)) / (100.0 if m.group(2) else 1.0)
    else:
        x = _number(value, "fraction")
    if not 0.0 <= x <= 1.0:
        raise PodsimError(f"{value!r} is outside [0, 1]; use e.g. 0.995 or 99.5%")
    return x


Duration = Annotated[float, BeforeValidator(duration_s)]
Rate = Annotated[float, BeforeValidator(rate_per_h)]
Fraction = Annotated[float, BeforeValidator(fraction)]

# Metrics a target may name, with how its threshold is written: from the metric registry.
TARGET_UNITS: dict[str, str] = {n: METRICS[n].threshold for n in dict.fromkeys(target_metrics("cluster") + target_metrics("step"))}
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
    return _number(value, metric)


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
