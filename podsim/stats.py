"""Replicates and their confidence intervals: the one piece every face reads them through.

A replicated run (a scenario's `replicates: N`, a sweep's replicates of one point, a serving
study's seeds) repeats the same question with independent seeds; its figure is the mean over
the replicates with a two-sided Student-t confidence interval (95% by default):

    mean ± t(1 - (1 - c) / 2, n - 1) x sd / sqrt(n),   sd the sample standard deviation (ddof 1)

    iv = mean_interval([0.91, 0.88, 0.93])             # Interval(mean=0.9067, low=0.8446, high=0.9687, n=3, ...)
    ivs = metric_intervals([run.metrics for run in replicates])   # metric -> Interval
    seeds = replicate_seeds(7, 5)                       # the seeds of 5 replicates of seed 7

Replicate seeds come from `numpy.random.SeedSequence(root).spawn(n)` (independent streams, the
same for the same root). A replicate whose figure is not a finite number (NaN: no job started,
so no wait percentile) is left out of that figure's interval, and `n` says how many counted.
With one replicate (or one finite value) there is no interval: `low` and `high` are NaN.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Interval:
    """A mean over replicates with its two-sided Student-t confidence interval."""

    mean: float
    low: float
    high: float
    n: int  # replicates with a finite value (the ones the mean and interval are over)
    sd: float  # sample standard deviation (ddof 1); NaN below two values
    confidence: float = CONFIDENCE
    replicates: int = 0  # replicates asked for (>= n); 0: same as n

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2 if self.n > 1 else math.nan

    def contains(self, value: float) -> bool:
        return self.n > 1 and self.low <= value <= self.high

    def to_dict(self) -> dict:
        return {"mean": self.mean, "low": self.low, "high": self.high, "n": self.n, "sd": self.sd,
                "confidence": self.confidence, "replicates": self.replicates or self.n}

    @classmethod
    def from_dict(cls, d: Mapping) -> Interval:
        nan = math.nan
        f = lambda k: nan if d.get(k) is None else float(d[k])  # noqa: E731 - JSON null is NaN
        return cls(f("mean"), f("low"), f("high"), int(d.get("n") or 0), f("sd"),
                   float(d.get("confidence") or CONFIDENCE), int(d.get("replicates") or 0))


def percentile(values: Sequence[float] | np.ndarray, q: float) -> float:
    """The q-th percentile of the values (numpy's linear interpolation); NaN when there are none."""
    return float(np.percentile(values, q)) if len(values) else math.nan


def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t distribution with df degrees of freedom (scipy)."""
    # lazy: scipy.special loads in ~0.2 s; only runs with replicates pay it
    from scipy.special import stdtrit

    return float(stdtrit(df, p))


def mean_interval(values: Iterable[float], confidence: float = CONFIDENCE) -> Interval:
    """Mean and two-sided Student-t interval of the finite values (see the module docstring)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence {confidence} must be in (0, 1)")
    raw = [math.nan if v is None else float(v) for v in values if not isinstance(v, bool)]
    x = np.array([v for v in raw if math.isfinite(v)], float)
    n = len(x)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0, math.nan, confidence, len(raw))
    mean = float(x.mean())
    if n == 1:
        return Interval(mean, math.nan, math.nan, 1, math.nan, confidence, len(raw))
    sd = float(x.std(ddof=1))
    half = t_quantile(1 - (1 - confidence) / 2, n - 1) * sd / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, n, sd, confidence, len(raw))


def _numeric(v: object) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


_NONNEGATIVE = ("s", "count", "chip_h", "usd", "kwh", "bytes", "flops", "ratio")


def clip_to_range(iv: Interval, unit: str | None) -> Interval:
    """The interval cut to the values its metric can take (a fraction in [0, 1]; a duration,
    count, cost ... at least 0): the t-interval is symmetric, the quantity is not."""
    lo, hi = (0.0, 1.0) if unit == "fraction" else (0.0, math.inf) if unit in _NONNEGATIVE else (-math.inf, math.inf)
    if iv.n < 2:
        return iv
    return replace(iv, low=min(max(iv.low, lo), hi), high=max(min(iv.high, hi), lo))


def metric_intervals(metrics: Sequence[Mapping], names: Iterable[str] | None = None,
                     confidence: float = CONFIDENCE, units: Mapping[str, str] | None = None) -> dict[str, Interval]:
    """Per metric, the interval over the replicates' values (`metrics`: one dict per replicate),
    cut to the metric's range by its unit (`units`: metric -> unit, e.g. podsim.metrics.units();
    clip_to_range). `names`: the metrics to summarise (default: every numeric metric the first
    replicate has)."""
    units = units or {}
    if not metrics:
        return {}
    keys = list(names) if names is not None else [k for k, v in metrics[0].items() if _numeric(v)]
    out = {}
    for k in keys:
        vals = [m.get(k) for m in metrics]
        if all(v is None or _numeric(v) for v in vals) and any(v is not None for v in vals):
            out[k] = clip_to_range(mean_interval([math.nan if v is None else v for v in vals], confidence), units.get(k))
    return out


def replicate_seeds(root: int, n: int) -> tuple[int, ...]:
    """The seeds of n replicates of `root`: numpy SeedSequence(root).spawn(n), one 32-bit state each."""
    return tuple(int(c.generate_state(1, np.uint32)[0]) for c in np.random.SeedSequence(int(root)).spawn(int(n)))


def interval_text(iv: Interval | Mapping | None, fmt=lambda v: f"{v:.4g}") -> str:
    """`mean ± half-width (95% CI, n=5)` as people read it; the mean alone without an interval."""
    if iv is None:
        return ""
    if isinstance(iv, Mapping):
        iv = Interval.from_dict(iv)
    if math.isnan(iv.mean):
        return "n/a"
    if iv.n < 2:
        return f"{fmt(iv.mean)} (n={iv.n}, no interval)"
    lost = f" of {iv.replicates}" if iv.replicates and iv.replicates != iv.n else ""
    return f"{fmt(iv.mean)} [{fmt(iv.low)}, {fmt(iv.high)}] ({round(iv.confidence * 100):g}% CI, n={iv.n}{lost})"
