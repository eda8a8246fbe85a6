"""Independent replicates of one run, for every kind of scenario that repeats (job streams,
serving fleets): seeds from numpy's SeedSequence (podsim.stats.replicate_seeds), progress over
all of them, and the metrics pooled as means with 95% Student-t intervals beside a `replicates`
table of every replicate's figures."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TypeVar

from podsim.metrics import units as metric_units
from podsim.scenario.result import normalise_table
from podsim.stats import metric_intervals, replicate_seeds

T = TypeVar("T")
ProgressFn = Callable[[float, float], None]


def run_replicates(seed: int, n: int, run: Callable[[int, ProgressFn | None], T],
                   on_progress: ProgressFn | None = None) -> tuple[tuple[int, ...], list[T]]:
    """(seeds, results) of `run(seed, progress)` once per replicate: `n` seeds spawned from
    `seed` (`seed` itself when n is 1); `on_progress(done, total)` sees the replicates' progress
    one after another, as one run's."""
    seeds = replicate_seeds(seed, n) if n > 1 else (seed,)
    out = []
    for k, s in enumerate(seeds):
        def progress(done: float, total: float, k: int = k) -> None:
            on_progress(k * total + done, len(seeds) * total)

        out.append(run(s, progress if on_progress else None))
    return seeds, out


def pool_replicates(each: Sequence[Mapping], seeds: Sequence[int], seed: int,
                    not_averaged: Collection[str]) -> tuple[dict, dict[str, dict], dict]:
    """(metrics, intervals, replicates table) of replicates' metrics `each` (run with `seeds`
    from the root `seed`): every numeric metric outside `not_averaged` (settings and counters,
    the same in each replicate or not a result: the first's is kept) is the mean, its interval
    cut to the metric's range; the table has a row per replicate and metric that has a value."""
    names = [k for k, v in each[0].items() if k not in not_averaged and isinstance(v, (int, float)) and not isinstance(v, bool)]
    ivs = metric_intervals(each, names, units=metric_units())
    metrics = {**each[0], **{k: iv.mean for k, iv in ivs.items()}, "seed": seed, "replicates": len(each),
               "engine_wall_s": sum(m["engine_wall_s"] for m in each)}
    rows = [(k, s, name, float(m[name])) for k, (s, m) in enumerate(zip(seeds, each, strict=True)) for name in names
            if m.get(name) is not None and not (isinstance(m[name], float) and math.isnan(m[name]))]
    table = normalise_table("replicates", {"replicate": [r[0] for r in rows], "seed": [r[1] for r in rows],
                                           "metric": [r[2] for r in rows], "value": [r[3] for r in rows]})
    return metrics, {k: iv.to_dict() for k, iv in ivs.items()}, table
