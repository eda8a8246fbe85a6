"""Placement decisions per second with and without reshaping on a 4,096-chip pod (issue 27).

For each pod (TPU v4 16x16x16 with OCS; the generic torus torus-16x16x16-b4-p6-400gbps with
OCS; both statically wired for the Hilbert baseline) and each mode (fold none, fold allowed,
hilbert on the static pods), a stream of odd-shape requests (podsim.workload.odd_shape_jobs:
sizes from a truncated exponential, shapes their factorisations) is placed one at a time with
the scheduler's fast path (place_one, greedy best fit) on a pod kept about half full (each
placed slice is held, the oldest released when more than half the chips are busy): decisions
per second, share placed, and the share of placements that were folded, split or scattered.
Then one CP-SAT batch (32 requests, 1 s deterministic limit, 1 worker) against the greedy on the
same busy state: admitted weight of each.

Run: .venv/bin/python benchmarks/bench_reshape.py [--decisions 300] [--seed 0]
(the machine is shared: wall figures vary with load; rerun to compare)
"""

from __future__ import annotations

import argparse
import collections
import time

from podsim.placement import PodState, SliceRequest, SolverParams, place
from podsim.placement.place import place_one
from podsim.placement.problem import PlacementSettings
from podsim.topology import PodLayout, get_generation
from podsim.topology.torus import torus_id
from podsim.workload.odd import OddShapeSpec, odd_shape_jobs

TORUS = torus_id("16x16x16", 4, 6, 400)


def stream(n: int, seed: int) -> list[SliceRequest]:
    jobs = odd_shape_jobs(OddShapeSpec(jobs=n, max_chips=512), seed)
    return [SliceRequest(j.id, j.shape) for j in jobs]


def run_fast_path(gen: str, ocs: bool, mode: str, reqs: list[SliceRequest]) -> dict:
    state = PodState(PodLayout(get_generation(gen), ocs=ocs))
    settings = PlacementSettings(fold="allowed" if mode == "allowed" else "none")
    policy = "hilbert" if mode == "hilbert" else "best"
    held: collections.deque = collections.deque()
    forms: collections.Counter = collections.Counter()
    t0 = time.perf_counter()
    for r in reqs:
        p = place_one(state, r, policy=policy, settings=settings)
        if p.placed:
            state.allocate(r.id, p)
            held.append(r.id)
            forms[p.slice.form] += 1
        while state.n_busy_chips > state.layout.n_chips // 2:
            state.release(held.popleft())
    wall = time.perf_counter() - t0
    placed = sum(forms.values())
    return {"decisions_per_s": len(reqs) / wall, "placed": placed / len(reqs),
            "reshaped": (placed - forms["native"]) / max(placed, 1), "state": state}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--decisions", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    reqs = stream(args.decisions, args.seed)
    print(f"{args.decisions} odd-shape requests (<= 512 chips), pod kept about half full, place_one best fit")
    print(f"{'pod':<34} {'mode':<8} {'decisions/s':>12} {'placed':>8} {'reshaped':>9}")
    cases = [("tpu-v4", True, "none"), ("tpu-v4", True, "allowed"), (TORUS, True, "none"), (TORUS, True, "allowed"),
             ("tpu-v4", False, "none"), ("tpu-v4", False, "hilbert"), (TORUS, False, "none"), (TORUS, False, "hilbert")]
    states = {}
    for gen, ocs, mode in cases:
        r = run_fast_path(gen, ocs, mode, reqs)
        states[(gen, ocs, mode)] = r["state"]
        name = f"{gen} {'OCS' if ocs else 'static'}"
        print(f"{name:<34} {mode:<8} {r['decisions_per_s']:>12.0f} {r['placed']:>8.1%} {r['reshaped']:>9.1%}")
    print("\nCP-SAT batch of 32 (1 s deterministic, 1 worker) against greedy best fit, admitted weight")
    batch = [SliceRequest(f"batch-{r.id}", r.shape) for r in stream(32, args.seed + 1)]
    for gen in ("tpu-v4", TORUS):
        for mode in ("none", "allowed"):
            state = states[(gen, True, mode)]
            settings = PlacementSettings(fold=mode)
            g = place(state, batch, solver="greedy", settings=settings)
            t0 = time.perf_counter()
            c = place(state, batch, solver="cpsat", settings=settings, params=SolverParams(time_limit=1.0))
            wall = time.perf_counter() - t0
            print(f"{gen:<34} {mode:<8} greedy {g.stats.value:>8} cpsat {c.stats.value:>8} ({c.stats.status}, {wall:.1f} s)")


if __name__ == "__main__":
    main()
