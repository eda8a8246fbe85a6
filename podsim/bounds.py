"""The bounds every number podsim reads must meet, in one place: finite, positive where a zero
means nothing, and below limits past which a run would exhaust memory or never end. The
scenario schema, the cluster and workload models, the file loaders and the CLI options all use
these types and checks, so `podsim validate` refuses what `podsim run` would.

Each limit says why it is where it is; a value past one is refused up front with the estimate.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import Field

from podsim.errors import PodsimError

MAX_SEED = 2**63 - 1  # numpy's SeedSequence takes any int; CP-SAT's random_seed and DuckDB's BIGINT take int64
MAX_PRIORITY = 1000  # ranks, not weights: a request's CP-SAT weight is chips x (1 + priority) in int64
MAX_JOBS = 1_000_000  # a job stream of a million jobs is ~1 GB of scheduler state; past any public trace
MAX_FLEET_CHIPS = 2**22  # 4.2 M chips (1,024 v4 pods): state arrays per chip and per link stay under ~1 GB
MAX_HORIZON_S = 100 * 365.25 * 86400.0  # a century: past any capacity plan
MAX_SAMPLES = 1_000_000  # time-series points over the horizon (each samples every pod)
MAX_SWEEP_POINTS = 100_000  # points of one sweep: each is a scenario run and a store row

Seed = Annotated[int, Field(ge=0, le=MAX_SEED, description="random seed in [0, 2^63)")]
Priority = Annotated[int, Field(ge=0, le=MAX_PRIORITY, description=f"0 = normal, at most {MAX_PRIORITY}")]
JobCount = Annotated[int, Field(ge=1, le=MAX_JOBS, description=f"at most {MAX_JOBS:,} jobs")]
Horizon = Annotated[float, Field(gt=0, le=MAX_HORIZON_S, allow_inf_nan=False)]


def finite(value: float, name: str, *, low: float | None = None, high: float | None = None,
           low_open: bool = False) -> float:
    """`value` if it is a finite number in the range; else one line naming `name`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise PodsimError(f"{name} {value!r} must be a finite number")
    below = low is not None and (value <= low if low_open else value < low)
    if below or (high is not None and value > high):
        lo = "" if low is None else f"{'>' if low_open else '>='} {low:g}"
        hi = "" if high is None else f"<= {high:g}"
        raise PodsimError(f"{name} {value!r} must be {' and '.join(x for x in (lo, hi) if x)}")
    return value


def count(value: int, name: str, low: int = 1, high: int | None = None, why: str = "") -> int:
    """An integer in [low, high]; the message says why the upper bound is there."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise PodsimError(f"{name} {value!r} must be a whole number")
    if value < low:
        raise PodsimError(f"{name} {value} must be >= {low}")
    if high is not None and value > high:
        raise PodsimError(f"{name} {value:,} is more than {high:,}" + (f" ({why})" if why else ""))
    return value


def check_seed(value: int, name: str = "seed") -> int:
    return count(value, name, 0, MAX_SEED, "seeds are 64-bit: 0 .. 2^63-1")


# CLI option callbacks: typer calls them with the parsed value; a PodsimError is one line, exit 2.
def opt_finite(flag: str, **bounds: Any):
    def check(value: float | None) -> float | None:
        return None if value is None else finite(value, flag, **bounds)
    return check


def opt_count(flag: str, low: int = 1, high: int | None = None, why: str = ""):
    def check(value: int | None) -> int | None:
        return None if value is None else count(value, flag, low, high, why)
    return check


def opt_seed(flag: str = "--seed"):
    def check(value: int | None) -> int | None:
        return None if value is None else check_seed(value, flag)
    return check


def check_fleet(pods: int, chips_per_pod: int, name: str = "pods") -> None:
    """Refuse a fleet too large to hold in memory, with its chip count."""
    chips = pods * chips_per_pod
    if chips > MAX_FLEET_CHIPS:
        raise PodsimError(f"{name} {pods:,} x {chips_per_pod:,} chips = {chips:,} chips; podsim simulates fleets of at most "
                          f"{MAX_FLEET_CHIPS:,} chips (state arrays per chip and link)")


def check_samples(horizon_s: float, sample_s: float, name: str = "sample interval") -> None:
    """Refuse a time series with more than MAX_SAMPLES points, with the estimate."""
    n = horizon_s / sample_s
    if n > MAX_SAMPLES:
        raise PodsimError(f"{name} {sample_s:g} s over a {horizon_s:g} s horizon is {n:.3g} samples; at most "
                          f"{MAX_SAMPLES:,} (each samples every pod): use a longer interval")
