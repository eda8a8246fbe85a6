"""Placement benchmarks: CP-SAT against greedy, OCS against static wiring, the fast path.

(i)   A 64-cube TPU v4 pod with 10% of hosts failed and 200 pending requests drawn from the v4
      paper's slice-popularity table ([ISCA23] Table 2, rows slc.4-slc.7).
(ii)  A static 16x16 TPU v5e pod with 2 failed hosts and 60 mixed 2-D requests.
      For both: CP-SAT with a 1 s limit (1 worker; deterministic work units by default,
      --wall-clock for wall seconds) against greedy first and best fit:
      priority-weighted chips placed, utilisation, solve time. CP-SAT must place at least as
      much as greedy on every case.
(iii) OCS against no OCS on the same failed-host pattern: how many 4x4x4 ... 8x8x16 slices
      still fit at once (the mechanism behind the v4 paper's availability argument, av.2-av.4).
(iv)  The scheduler's fast path: place_one + allocate + release, fail + repair.

Request priorities are not published; draws use 0/1/2 with probabilities 0.7/0.2/0.1 and no
age (all requests arrive at time 0), so the admission weight is priority-weighted chips.
Run: .venv/bin/python benchmarks/bench_placement.py [--seeds 5] [--time-limit 1]
(exits 1 when CP-SAT places less than greedy on some case)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

from podsim.placement import PodState, SliceRequest, SolverParams, place, validate_placement
from podsim.placement.place import count_fitting, place_one
from podsim.topology import get_generation
from podsim.workload.popularity import V4_SLICE_POPULARITY, SliceMix

V5E_MIX = {  # a mixed 2-D request set (assumed shares; no published v5e popularity table)
    "1x1": 10.0, "2x2": 20.0, "2x4": 20.0, "4x4": 20.0, "4x8": 15.0, "8x8": 10.0, "8x16": 5.0,
}
OCS_SHAPES = ("4x4x4", "4x4x8", "4x8x8", "8x8x8", "8x8x16")


def draw_requests(rng: np.random.Generator, n: int, table: dict[str, float] = V4_SLICE_POPULARITY,
                  priorities: tuple[float, ...] = (0.7, 0.2, 0.1), generation: str = "tpu-v4") -> list[SliceRequest]:
    """`n` requests with shapes drawn from `table` ('AxBxC[_T|_NT]' -> share; the default is the
    TPU v4 paper's slice popularity, [ISCA23] Table 2, slc.4-slc.7, renormalised) and priorities
    0, 1, 2, ... with the given probabilities, all arriving at time 0."""
    shapes = SliceMix.from_table(get_generation(generation), dict(table)).sample(rng, n)
    prio = rng.choice(len(priorities), size=n, p=np.asarray(priorities) / np.sum(priorities))
    return [SliceRequest(f"job-{k}", shape, twisted, int(prio[k]), 0.0) for k, (shape, twisted) in enumerate(shapes)]


def compare(state: PodState, reqs: list[SliceRequest], time_limit: float, wall_clock: bool) -> dict[str, dict]:
    """Greedy first/best and CP-SAT on one case; every result validated."""
    out = {}
    runs = (("greedy-first", "greedy", "first"), ("greedy-best", "greedy", "best"), ("cpsat", "cpsat", "best"))
    for name, solver, policy in runs:
        params = SolverParams(time_limit=time_limit, num_workers=1, random_seed=0, deterministic=not wall_clock)
        t0 = time.perf_counter()
        result = place(state, reqs, solver=solver, policy=policy, params=params)
        wall = time.perf_counter() - t0
        validate_placement(state, result, reqs)
        out[name] = {"pwc": result.priority_weighted_chips, "util": result.utilisation, "placed": len(result.placed),
                     "s": wall, "status": result.stats.status, "objective": result.stats.objective,
                     "bound": result.stats.bound, "kept_hint": result.stats.kept_hint}
    return out


def report(title: str, cases: list[dict[str, dict]]) -> bool:
    print(f"\n{title}")
    print(f"{'seed':>4} {'solver':13} {'placed':>6} {'prio-wtd chips':>14} {'utilisation':>11} {'solve s':>8}  status")
    ok = True
    for seed, case in enumerate(cases):
        best_greedy = max(case["greedy-first"]["pwc"], case["greedy-best"]["pwc"])
        ok &= case["cpsat"]["pwc"] >= best_greedy
        for name, r in case.items():
            gap = ""
            if r["objective"] is not None and r["bound"]:
                gap = f" gap {abs(r['bound'] - r['objective']) / max(abs(r['bound']), 1):.2%}"
            print(f"{seed:>4} {name:13} {r['placed']:>6} {r['pwc']:>14} {r['util']:>11.1%} {r['s']:>8.3f}  {r['status']}{gap}")
    for name in cases[0]:
        pwc = statistics.mean(c[name]["pwc"] for c in cases)
        util = statistics.mean(c[name]["util"] for c in cases)
        s = statistics.mean(c[name]["s"] for c in cases)
        print(f"mean {name:13} {'':>6} {pwc:>14.1f} {util:>11.1%} {s:>8.3f}")
    print(f"CP-SAT places at least as many priority-weighted chips as greedy on every case: {'yes' if ok else 'NO'}")
    return ok


def bench_v4(seeds: int, time_limit: float, wall_clock: bool) -> bool:
    cases = []
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        state = PodState.empty("tpu-v4")
        state.fail(hosts=rng.choice(state.layout.n_hosts, round(0.10 * state.layout.n_hosts), replace=False).tolist())
        cases.append(compare(state, draw_requests(rng, 200), time_limit, wall_clock))
    return report("(i) tpu-v4, 64 cubes, 10% of hosts failed, 200 requests from the slc.4-slc.7 popularity table", cases)


def bench_v5e(seeds: int, time_limit: float, wall_clock: bool) -> bool:
    cases = []
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        state = PodState.empty("tpu-v5e")
        state.fail(hosts=rng.choice(state.layout.n_hosts, 2, replace=False).tolist())
        cases.append(compare(state, draw_requests(rng, 60, table=V5E_MIX, generation="tpu-v5e"), time_limit, wall_clock))
    return report("(ii) tpu-v5e static 16x16, 2 of 32 hosts failed, 60 mixed 2-D requests", cases)


def fit_count(state: PodState, shape: str, params: SolverParams) -> tuple[int, bool]:
    """Copies of `shape` that fit at once, and whether that number is proven the maximum."""
    if state.layout.ocs:
        return count_fitting(state, shape), True  # exact: any usable cubes will do
    copies = [SliceRequest(f"c{k}", shape) for k in range(state.n_free_chips // SliceRequest("x", shape).chips)]
    if not copies:
        return 0, True
    result = place(state, copies, params=params)
    validate_placement(state, result, copies)
    return len(result.placed), result.stats.status in ("OPTIMAL", "NO_REQUESTS") or len(result.placed) == len(copies)


def bench_ocs_vs_static(seeds: int) -> None:
    print("\n(iii) tpu-v4: slices that still fit at once, OCS vs static wiring, same failed hosts "
          f"(mean over {seeds} failure draws; no-OCS counts are CP-SAT packings, 2 s limit)")
    print(f"{'hosts failed':>12} {'wiring':7} {'usable cubes':>12} " + " ".join(f"{s:>8}" for s in OCS_SHAPES)
          + "   chips in 4x4x8 / 8x8x8 slices")
    params = SolverParams(time_limit=2.0)
    unproven = 0
    for frac in (0.005, 0.01, 0.02, 0.05, 0.10):
        rows = {True: [], False: []}
        usable = {True: [], False: []}
        for seed in range(seeds):
            rng = np.random.default_rng(1000 + seed)
            hosts = rng.choice(1024, round(frac * 1024), replace=False).tolist()
            for ocs in (True, False):
                state = PodState.empty("tpu-v4", ocs=ocs)
                state.fail(hosts=hosts)
                usable[ocs].append(int((~state.cube_failed & ~state.host_failed.reshape(64, 16).any(1)).sum()))
                counts = [fit_count(state, s, params) for s in OCS_SHAPES]
                unproven += sum(not proven for _, proven in counts)
                rows[ocs].append([n for n, _ in counts])
        for ocs in (True, False):
            mean = np.mean(rows[ocs], axis=0)
            frac_chips = (mean[1] * 128 / 4096, mean[3] * 512 / 4096)
            print(f"{frac:>12.1%} {'OCS' if ocs else 'static':7} {np.mean(usable[ocs]):>12.1f} "
                  + " ".join(f"{v:>8.1f}" for v in mean) + f"   {frac_chips[0]:.0%} / {frac_chips[1]:.0%}")
    print(f"counts not proven maximal by CP-SAT within the limit: {unproven} (static counts are then lower bounds)")


def bench_fast_path(n: int = 2000) -> None:
    rng = np.random.default_rng(0)
    state = PodState.empty("tpu-v4")
    reqs = draw_requests(rng, n)
    t_place = t_alloc = t_release = 0.0
    held: list[str] = []
    placed = 0
    for r in reqs:
        t0 = time.perf_counter()
        p = place_one(state, r)
        t1 = time.perf_counter()
        t_place += t1 - t0
        if p.placed:
            state.allocate(r.id, p)
            t_alloc += time.perf_counter() - t1
            held.append(r.id)
            placed += 1
        while held and (not p.placed or len(held) > 20):
            t2 = time.perf_counter()
            state.release(held.pop(int(rng.integers(len(held)))))
            t_release += time.perf_counter() - t2
            if p.placed:
                break
    t0 = time.perf_counter()
    for h in range(200):
        state.fail(hosts=[h])
        state.repair(hosts=[h])
    t_fail = (time.perf_counter() - t0) / 200
    print(f"\n(iv) fast path on tpu-v4 ({n} requests from the popularity table, {placed} placed):")
    print(f"  place_one {1e6 * t_place / n:.0f} us/request, allocate {1e6 * t_alloc / max(placed, 1):.0f} us, "
          f"release {1e6 * t_release / max(placed, 1):.0f} us, fail+repair of one host {1e6 * t_fail:.0f} us")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--time-limit", type=float, default=1.0, help="CP-SAT limit (deterministic work units)")
    ap.add_argument("--wall-clock", action="store_true", help="apply the limit as wall-clock seconds instead")
    args = ap.parse_args()
    mode = "wall-clock s" if args.wall_clock else "deterministic units"
    print(f"CP-SAT: {args.time_limit:g} {mode}, 1 worker, interleaved search, seed 0; solve s = wall time of the whole solver path")
    ok = bench_v4(args.seeds, args.time_limit, args.wall_clock)
    ok &= bench_v5e(args.seeds, args.time_limit, args.wall_clock)
    bench_ocs_vs_static(max(args.seeds, 10))
    bench_fast_path()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
