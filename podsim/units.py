"""Parse and convert quantities with units: sizes ('1GiB'), rates ('400Gbit/s'), durations ('3h').

Base units: bytes, bytes/s, seconds, FLOP/s, watts, USD/h.
"""

from __future__ import annotations

import math
import re
from typing import Any

from podsim.errors import PodsimError

_SIZE = {
    "": 1, "b": 1, "B": 1,
    "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "PB": 1e15,
    "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50,
    "kB": 1e3, "K": 2**10, "M": 2**20, "G": 2**30,
}
_RATE = {
    "B/s": 1, "KB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9, "TB/s": 1e12, "PB/s": 1e15,
    "GiB/s": 2**30, "TiB/s": 2**40,
    "bit/s": 1 / 8, "Kbit/s": 1e3 / 8, "Mbit/s": 1e6 / 8, "Gbit/s": 1e9 / 8, "Tbit/s": 1e12 / 8,
    "Gbps": 1e9 / 8, "Tbps": 1e12 / 8, "Mbps": 1e6 / 8,
}
_TIME = {
    "ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0,
    "min": 60.0, "m": 60.0, "h": 3600.0, "hr": 3600.0, "d": 86400.0, "day": 86400.0,
    "days": 86400.0, "w": 604800.0, "week": 604800.0, "weeks": 604800.0,
}
_FLOPS = {"FLOP/s": 1, "GFLOP/s": 1e9, "TFLOP/s": 1e12, "PFLOP/s": 1e15, "EFLOP/s": 1e18}
# Counts and units already in base form.
_PLAIN = ("chips", "links", "ports", "ocs", "cubes", "nics", "hosts", "W", "USD/h")

UNIT_SCALE: dict[str, float] = {**_SIZE, **_RATE, **_TIME, **_FLOPS, **{u: 1.0 for u in _PLAIN}}

_NUM = r"[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?"  # an unsigned decimal number
_NUMBER = rf"(?P<num>{_NUM})"


def is_rate_unit(unit: str) -> bool:
    """Bytes/s, bits/s or FLOP/s: a figure that divides work, so it must be > 0."""
    return unit in _RATE or unit in _FLOPS


def to_si(value: float, unit: str) -> float:
    """Convert `value` in `unit` to podsim's base unit (bytes, bytes/s, s, FLOP/s, W, USD/h)."""
    try:
        return float(value) * UNIT_SCALE[unit]
    except KeyError:
        raise PodsimError(f"unknown unit {unit!r}; known: {', '.join(sorted(UNIT_SCALE))}") from None


def _parse(text: str | float | int, table: dict[str, float], what: str, example: str) -> float:
    if isinstance(text, bool):
        raise PodsimError(f"{what} {text!r} is not a number; use e.g. {example}")
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        m = re.fullmatch(_NUMBER + r"\s*(?P<unit>[A-Za-zµ/]*)", str(text).strip())
        if not m or m.group("unit") not in table:
            units = ", ".join(k for k in table if k)
            raise PodsimError(f"{what} {text!r} is not understood; use a number with one of: {units} (e.g. {example})")
        value = float(m.group("num")) * table[m.group("unit")]
    if not math.isfinite(value):
        raise PodsimError(f"{what} {text!r} is not a finite number; use e.g. {example}")
    if value < 0:
        raise PodsimError(f"{what} {text!r} is negative; it must be >= 0")
    return value


def parse_bytes(text: str | float | int) -> float:
    """'1GiB' -> 1073741824.0; '256MB' -> 2.56e8; '4096' -> 4096.0."""
    return _parse(text, _SIZE, "size", "1GiB, 256MB, 4096")


def parse_duration(text: str | float | int) -> float:
    """'3h' -> 10800.0; '90s' -> 90.0; '2d' -> 172800.0; a bare number is seconds."""
    return _parse(text, {"": 1, **_TIME}, "duration", "90s, 3h, 30d")


def format_bytes(n: float) -> str:
    """Human-readable binary size: 1073741824 -> '1 GiB'."""
    for unit, scale in (("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            return f"{n / scale:.4g} {unit}"
    return f"{n:.4g} B"


def format_rate(bps: float) -> str:
    """Decimal bandwidth: 4.5e10 -> '45 GB/s'."""
    for unit, scale in (("PB/s", 1e15), ("TB/s", 1e12), ("GB/s", 1e9), ("MB/s", 1e6), ("KB/s", 1e3)):
        if abs(bps) >= scale:
            return f"{bps / scale:.4g} {unit}"
    return f"{bps:.4g} B/s"


def format_seconds(s: float) -> str:
    """Time with a sensible unit: 0.0012 -> '1.2 ms'."""
    for unit, scale in (("d", 86400.0), ("h", 3600.0), ("min", 60.0), ("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(s) >= scale:
            return f"{s / scale:.4g} {unit}"
    return f"{s / 1e-9:.4g} ns"


def is_missing(v) -> bool:
    """None or NaN: a figure that was not computed or is not published."""
    return v is None or (isinstance(v, float) and math.isnan(v))


def format_percent(v) -> str:
    """0.953 -> '95.3%'; 'n/a' for a missing figure."""
    return "n/a" if is_missing(v) else f"{v:.1%}"


def format_duration(v) -> str:
    """Like format_seconds, with '0 s' for zero and 'n/a' for a missing figure."""
    return "n/a" if is_missing(v) else "0 s" if v == 0 else format_seconds(v)


# Unit-carrying user input: the one parser each for durations >= 0, arrival rates and fractions.
# arrivals per <unit> -> arrivals per hour
_PER = {"s": 3600.0, "sec": 3600.0, "min": 60.0, "h": 1.0, "hr": 1.0, "hour": 1.0, "d": 1 / 24, "day": 1 / 24,
        "w": 1 / 168, "week": 1 / 168}


def finite_number(value: Any, what: str) -> float:
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
        rate = finite_number(value, "rate")
    else:
        m = re.fullmatch(rf"\s*(-?{_NUM})\s*(?:/\s*([a-z]+))?\s*", str(value))
        if not m or (m.group(2) or "h") not in _PER:
            raise PodsimError(f"rate {value!r} is not understood; use arrivals per hour, day or week, e.g. 2/h, 48/d, 5/w or a bare number per hour")
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
        x = finite_number(value, "fraction")
    if not 0.0 <= x <= 1.0:
        raise PodsimError(f"{value!r} is outside [0, 1]; use e.g. 0.995 or 99.5%")
    return x
