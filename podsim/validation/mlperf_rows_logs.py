"""Step times from MLPerf Training result logs, as measurements.md's method section derives them
(podsim.validation.mlperf_rows cites the figures; benchmarks/mlperf_rows.py prints them for a
checkout of a results repository).

A result file is one run's MLLOG lines: `:::MLLOG {json}` from round 0.7 on, `:::MLL <time> key:
{json}` in round 0.6. Two derivations, both pooled over the runs of one result folder:

- `eval_intervals`: the intervals between consecutive eval points (`eval_accuracy`), the first of
  each run left out (warm-up); each holds the training steps between two evals and one eval pass;
- `training_blocks`: `block_start` -> `block_stop` durations where the log times eval apart from
  training blocks, the first of each run left out; a block opened twice (a restart) is dropped.

The row's step is the median divided by the steps per interval (or block) the run states.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

_MLLOG = re.compile(r":::MLLOG (\{.*\})\s*$")
_MLL = re.compile(r":::MLL ([\d.]+) (\w+): (\{.*\})\s*$")


@dataclass(frozen=True)
class Event:
    time_s: float
    key: str
    value: object
    metadata: dict


def events(text: str) -> list[Event]:
    """The MLLOG events of one result file, in order (lines of either format; others skipped)."""
    out = []
    for line in text.splitlines():
        if m := _MLLOG.search(line):
            try:
                d = json.loads(m.group(1))
            except json.JSONDecodeError:
                continue
            out.append(Event(d["time_ms"] / 1e3, d["key"], d.get("value"), d.get("metadata") or {}))
        elif m := _MLL.search(line):
            d = json.loads(m.group(3))
            out.append(Event(float(m.group(1)), m.group(2), d.get("value"), d.get("metadata") or {}))
    return out


def eval_intervals(runs: Iterable[str], key: str = "eval_accuracy") -> list[float]:
    """Seconds between consecutive `key` events of each run (its first interval left out), pooled."""
    pooled: list[float] = []
    for text in runs:
        t = [e.time_s for e in events(text) if e.key == key]
        pooled += [b - a for a, b in zip(t, t[1:], strict=False)][1:]
    return pooled


def training_blocks(runs: Iterable[str]) -> list[float]:
    """Seconds from each block_start to its block_stop (each run's first block left out; a block
    opened again before it stops, a restart, dropped), pooled."""
    pooled: list[float] = []
    for text in runs:
        spans, start = [], None
        for e in events(text):
            if e.key == "block_start":
                start = None if start is not None else e.time_s
            elif e.key == "block_stop" and start is not None:
                spans.append(e.time_s - start)
                start = None
        pooled += spans[1:]
    return pooled


@dataclass(frozen=True)
class Pooled:
    """The median of pooled durations, how many, and their quartiles."""

    median_s: float
    n: int
    q1_s: float
    q3_s: float

    def step_s(self, steps: int) -> float:
        """The step time: the median over the steps per interval (or block)."""
        return self.median_s / steps


def pooled(durations: list[float]) -> Pooled:
    """Median, count and quartiles (statistics.quantiles, exclusive method) of the durations."""
    if len(durations) < 2:
        raise ValueError(f"{len(durations)} intervals: need at least 2 to pool")
    q1, _, q3 = statistics.quantiles(durations, n=4)
    return Pooled(statistics.median(durations), len(durations), q1, q3)
