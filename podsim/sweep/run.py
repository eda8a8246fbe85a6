"""Run a sweep: points go to an executor, each result is stored (from this process) as soon as
it comes back, a failed point is stored with its error, and `resume` skips stored points.

Grid mode runs every point. Capacity mode bisects the capacity field of each grid cell for the
smallest value whose run meets every target: it assumes more capacity never misses a target
that less capacity meets, evaluates `high` first (if it misses, no size in the range will do)
and, with spare slots, probes several sizes per round (k-section instead of bisection).

An interrupt (SIGINT) is held off while a point is being stored, so the store never holds half
a point; then in-flight points are abandoned and KeyboardInterrupt goes on to the caller.
"""

from __future__ import annotations

import dataclasses
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from podsim.bounds import Budget, budget, budgets
from podsim.errors import PodsimError
from podsim.metrics import units as metric_units
from podsim.scenario.fields import parse_target, target_met
from podsim.scenario.result import RunResult
from podsim.scenario.run import run_scenario
from podsim.stats import metric_intervals
from podsim.store import (
    delete_sweep_points,
    save_sweep,
    set_sweep_result,
    store_point,
    stored_points,
)
from podsim.sweep.executors import ExecutorHandle
from podsim.sweep.spec import Point, Sweep, point_scenario

PointFn = Callable[[dict], None]


@dataclass(frozen=True)
class PointFailure:
    """A point that raised: its error as one line (stored with the point)."""

    error: str


def run_point(base: dict, base_dir: str | None, overrides: dict, seed: int,
              limits: Budget | None = None) -> RunResult | PointFailure:
    """Worker side: validate and run one point with CP-SAT capped at one worker, under the work
    budgets of the sweep's command (`limits`: a worker process does not inherit them). Errors
    come back as a PointFailure, so one bad point never stops a sweep."""
    try:
        with budgets(**dataclasses.asdict(limits or budget())):
            scenario = point_scenario(base, overrides, seed, base_dir)
            return run_scenario(scenario, cpsat_workers_cap=1)
    except Exception as exc:  # noqa: BLE001 - stored with the point
        return PointFailure(f"{type(exc).__name__}: {' '.join(str(exc).split())}" if not isinstance(exc, PodsimError)
                            else " ".join(str(exc).split()))


@dataclass
class SweepOutcome:
    sweep_id: str
    store: str
    mode: str
    total: int = 0
    ran: int = 0
    skipped: int = 0
    failed: int = 0
    points: list[dict] = field(default_factory=list)  # one per point: key, label, status, run_id, metrics, targets_met
    capacity: list[dict] = field(default_factory=list)  # capacity mode: one per cell

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("sweep_id", "store", "mode", "total", "ran", "skipped", "failed", "points", "capacity")}


class _SigintGuard:
    """Holds SIGINT and SIGTERM off inside `held()` (main thread only) and delivers them after:
    to the handler that was in place (the CLI's SIGTERM handler says it was a SIGTERM), or as
    KeyboardInterrupt."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.pending: int | None = None

    @contextmanager
    def held(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        self.pending = None

        def hold(sig, _frame):
            self.pending = sig

        previous = {sig: signal.signal(sig, hold) for sig in self.SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if self.pending is not None:
            handler = previous[self.pending]
            if callable(handler) and handler is not signal.default_int_handler:
                handler(self.pending, None)
            raise KeyboardInterrupt


class SweepRunner:
    """One sweep on one executor and one store."""

    def __init__(self, sweep: Sweep, handle: ExecutorHandle, store: str | Path, resume: bool = False,
                 restart: bool = False, on_point: PointFn | None = None):
        self.sweep, self.handle, self.store, self.on_point = sweep, handle, str(store), on_point
        self.guard = _SigintGuard()
        self.outcome = SweepOutcome(sweep.sweep_id, self.store, sweep.mode)
        stored = stored_points(self.store, sweep.sweep_id)
        if stored and restart:
            delete_sweep_points(self.store, sweep.sweep_id)
            stored = {}
        elif stored and not resume:
            raise PodsimError(f"sweep {sweep.sweep_id} already has {len(stored)} point(s) in {self.store}; "
                              f"use --resume to skip them or --restart to run them again")
        self.stored = {k: v for k, v in stored.items() if v["status"] == "ok"}
        total = len(sweep.points) if sweep.mode == "grid" else 0
        save_sweep(self.store, sweep.sweep_id, sweep.spec.sweep, sweep.mode, total, sweep.source,
                   sweep.spec.model_dump(mode="json") | {"base": sweep.base})

    # one batch of points through the executor ------------------------------------------------
    def run_points(self, points: Sequence[Point]) -> dict[str, dict]:
        """Run the points not stored yet, `slots` at a time; store each as it finishes."""
        out: dict[str, dict] = {}
        todo = []
        for p in points:
            prev = self.stored.get(p.key)
            if prev is not None:
                row = self._row(p, "skipped", prev["run_id"], prev["metrics"], prev["targets_met"])
                out[p.key] = row
                self.outcome.skipped += 1
                self._emit(row)
            else:
                todo.append(p)
        inflight: dict[Future, tuple[Point, float]] = {}
        queue = list(reversed(todo))
        try:
            while queue or inflight:
                while queue and len(inflight) < self.handle.slots:
                    p = queue.pop()
                    t0 = time.perf_counter()
                    inflight[self._submit(p)] = (p, t0)
                done = self._wait(inflight)
                for fut in done:
                    p, t0 = inflight.pop(fut)
                    out[p.key] = self._finish(p, fut, time.perf_counter() - t0)
        except KeyboardInterrupt:
            for fut in inflight:
                fut.cancel()
            self.handle.abort()
            raise
        return out

    def _submit(self, p: Point) -> Future:
        """Hand a point to the executor. A pool's submit takes its locks: an interrupt raised while
        one is held would leave it held and hang the pool's shutdown, so SIGINT waits until it is
        out (the serial executor runs the point here, where an interrupt must stop it at once)."""
        args = (run_point, self.sweep.base, self.sweep.base_dir, p.overrides, p.seed, budget())
        if self.handle.kind == "serial":
            return self.handle.executor.submit(*args)
        with self.guard.held():
            return self.handle.executor.submit(*args)

    def _wait(self, inflight: dict[Future, tuple[Point, float]]) -> set[Future]:
        """The finished futures, waited for with SIGINT held (for the same reason as `_submit`),
        in slices of 0.1 s so an interrupt is acted on within one."""
        while True:
            with self.guard.held():
                done, _ = wait(list(inflight), timeout=0.1, return_when=FIRST_COMPLETED)
            if done:
                return done

    def _finish(self, p: Point, fut: Future, wall_s: float) -> dict:
        try:
            res = fut.result()
        except Exception as exc:  # noqa: BLE001 - a lost worker, a broken pool: stored as the point's error
            res = PointFailure(f"{type(exc).__name__}: {' '.join(str(exc).split())}")
        with self.guard.held():
            if isinstance(res, PointFailure):
                run_id = store_point(self.store, self.sweep.sweep_id, p.to_dict(), error=res.error, name=self.sweep.spec.sweep)
                row = self._row(p, "failed", run_id, {}, None, res.error)
                self.outcome.failed += 1
            else:
                run_id = store_point(self.store, self.sweep.sweep_id, p.to_dict(), result=res)
                row = self._row(p, "ok", run_id, res.metrics, res.targets_met)
                self.outcome.ran += 1
            row["wall_s"] = wall_s
            self._emit(row)
        return row

    def _row(self, p: Point, status: str, run_id: str, metrics: dict, met: bool | None, error: str | None = None) -> dict:
        return {"index": p.index, "key": p.key, "label": p.label, "status": status, "run_id": run_id, "seed": p.seed,
                "overrides": p.overrides, "metrics": metrics, "targets_met": met, "error": error}

    def _emit(self, row: dict) -> None:
        self.outcome.points.append(row)
        if self.on_point is not None:
            self.on_point({**row, "done": len(self.outcome.points), "total": self.outcome.total})

    # modes -----------------------------------------------------------------------------------
    def run(self) -> SweepOutcome:
        if self.sweep.mode == "grid":
            self.outcome.total = len(self.sweep.points)
            self.run_points(self.sweep.points)
            self.outcome.points.sort(key=lambda r: r["index"])
            result = {"points": self.outcome.total, "ok": sum(r["status"] in ("ok", "skipped") for r in self.outcome.points),
                      "failed": self.outcome.failed}
        else:
            result = {"cells": self._capacity()}
            self.outcome.capacity = result["cells"]
        with self.guard.held():
            set_sweep_result(self.store, self.sweep.sweep_id, result)
        return self.outcome

    def _capacity(self) -> list[dict]:
        """Bisect each grid cell's capacity field. A size is judged on all its replicates at once:
        each target on the replicates' mean (`capacity.judge: mean`) or on the whole 95%
        interval (`interval`: the bound on the target's wrong side must meet it too)."""
        cap = self.sweep.spec.capacity
        reps = self.sweep.spec.replicates
        cells = list(range(len(self.sweep.cells)))
        state = {c: {"lo": cap.low, "hi": cap.high, "hi_checked": False, "evaluated": {}} for c in cells}
        targets = {c: self._targets(c) for c in cells}
        counter = 0
        self.outcome.total = len(cells) * reps * (1 + max(1, (cap.high - cap.low).bit_length()))  # bisection's count; an estimate
        while True:
            probes: dict[int, list[int]] = {}
            active = [c for c, s in state.items() if s["lo"] < s["hi"] or not s["hi_checked"]]
            if not active:
                break
            per_cell = max(1, self.handle.slots // (len(active) * reps))
            for c in active:
                s = state[c]
                if not s["hi_checked"]:  # high first; spare slots probe below it at once
                    probes[c] = [s["hi"]] + (_probes(s["lo"], s["hi"], per_cell - 1) if per_cell > 1 and s["lo"] < s["hi"] else [])
                else:
                    probes[c] = _probes(s["lo"], s["hi"], per_cell)
            points: list[tuple[int, int, list[Point]]] = []
            for c, values in probes.items():
                for v in values:
                    pts = []
                    for r in range(reps):
                        pts.append(self.sweep.point(c, r, {cap.field: v}, index=counter))
                        counter += 1
                    points.append((c, v, pts))
            rows = self.run_points([p for _, _, pts in points for p in pts])
            for c, v, pts in points:
                state[c]["evaluated"][v] = judge_size([rows[p.key] for p in pts], targets[c], cap.judge)
            for c, values in probes.items():
                s = state[c]
                failed = [v for v in values if s["evaluated"][v]["status"] not in ("ok", "skipped")]
                if failed:  # a crashed point says nothing about the targets: stop this cell
                    s.update(lo=0, hi=0, hi_checked=True, failed=min(failed))
                    continue
                if not s["hi_checked"]:
                    s["hi_checked"] = True
                    if not s["evaluated"][s["hi"]]["met"]:
                        s.update(lo=0, hi=0, none=True)  # nothing in the range meets the targets
                        continue
                meeting = [v for v in values if s["evaluated"][v]["met"]]
                if meeting:
                    s["hi"] = min(meeting)
                missing = [v for v in values if not s["evaluated"][v]["met"] and v < s["hi"]]
                if missing:
                    s["lo"] = max(missing) + 1
        out = []
        for c, s in state.items():
            label = self.sweep.cells[c][0] or "base"
            answer = None if s.get("none") or "failed" in s else s["hi"]
            error = s["evaluated"][s["failed"]]["error"] if "failed" in s else None
            out.append({"cell": label, "field": cap.field, "low": cap.low, "high": cap.high, "replicates": reps,
                        "judge": cap.judge, "targets": [t[0] for t in targets[c]], "answer": answer, "error": error,
                        "evaluated": {str(k): v for k, v in sorted(s["evaluated"].items())}})
        return out

    def _targets(self, cell: int) -> list[tuple[str, str, float]]:
        """The cell's targets (metric, operator, threshold), as its scenario states them."""
        cap = self.sweep.spec.capacity
        p = self.sweep.point(cell, 0, {cap.field: cap.low})
        scenario = point_scenario(self.sweep.base, p.overrides, p.seed, self.sweep.base_dir)
        return [(metric, *parse_target(metric, text)) for metric, text in scenario.targets.items()]


def judge_size(rows: Sequence[dict], targets: Sequence[tuple[str, str, float]], judge: str = "mean") -> dict:
    """One capacity probe (a size) from its replicates' stored rows: status (failed if any
    replicate failed), met (every target on the mean, or on the interval's worse bound with
    judge='interval'), the mean of the headline metrics and the targets' 95% intervals."""
    failed = [r for r in rows if r["status"] not in ("ok", "skipped")]
    if failed:
        return {"met": False, "status": failed[0]["status"], "run_ids": [r["run_id"] for r in rows],
                "error": failed[0]["error"], "replicates": len(rows), "metrics": {}, "intervals": {}}
    ivs = metric_intervals([r["metrics"] for r in rows], [*_CAPACITY_METRICS, *(t[0] for t in targets)], units=metric_units())
    met = True
    for metric, op, threshold in targets:
        iv = ivs.get(metric)
        if iv is None:
            met = False
            continue
        value = iv.mean
        if judge == "interval" and len(rows) > 1:  # the bound on the side that would miss
            value = iv.high if op in ("<=", "<") else iv.low
        met &= target_met(op, value, threshold)
    return {"met": met, "status": "ok", "run_ids": [r["run_id"] for r in rows], "run_id": rows[0]["run_id"], "error": None,
            "replicates": len(rows), "metrics": {k: iv.mean for k, iv in ivs.items()},
            "intervals": {k: iv.to_dict() for k, iv in ivs.items() if len(rows) > 1}}


_CAPACITY_METRICS = ("wait_p95_s", "goodput", "utilisation", "jobs_completed", "jobs_queued", "cost_usd", "fleet_chip_h",
                     "useful_chip_h", "step_time_s")


def _probes(lo: int, hi: int, k: int) -> list[int]:
    """Up to k sizes in [lo, hi - 1] that split the interval evenly (k = 1: the midpoint)."""
    span = hi - lo
    k = min(k, span)
    return sorted({lo + (span * (i + 1)) // (k + 1) for i in range(k)} - {hi}) or [lo]


def run_sweep(sweep: Sweep, handle: ExecutorHandle, store: str | Path, *, resume: bool = False, restart: bool = False,
              on_point: PointFn | None = None) -> SweepOutcome:
    """Run every point of `sweep` (or bisect its capacity field) on `handle`'s executor and
    store each point in `store` as it finishes. See the module docstring."""
    return SweepRunner(sweep, handle, store, resume, restart, on_point).run()


def probe_text(evaluated: dict) -> str:
    """One capacity probe's outcome: met, missed, or failed (a crashed point judges nothing)."""
    if evaluated["status"] not in ("ok", "skipped"):
        return "failed"
    return "met" if evaluated["met"] else "missed"


def answer_text(cell: dict) -> str:
    """A capacity cell's answer as people read it (CLI, report, dashboard), with how many
    replicates judged each size."""
    reps = int(cell.get("replicates") or 1)
    how = "one seed" if reps == 1 else f"{reps} replicates, targets on the {'95% interval' if cell.get('judge') == 'interval' else 'mean'}"
    if cell.get("error"):
        return f"no answer: a point failed ({cell['error']})"
    if cell["answer"] is None:
        return f"none in {cell['low']}..{cell['high']} ({how})"
    return f"{cell['answer']} ({how})"
