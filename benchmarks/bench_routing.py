"""Routing policies: engine wall time and what each policy gives.

1. Wall time per policy (target: multipath <= 3x dimension order): a 1 GiB all-reduce (auto)
   on a full v4 pod (16x16x16), fast path off and on, and a 1 GiB all-to-all on a 4x8x8 slice,
   plain and twisted. `cold` is the first run in a fresh cache of even splits (the 'auto'
   plan prices every candidate algorithm, and pricing `direct` on 4,096 chips routes 4,095
   flows over their whole minimal-path boxes, ~1.6 M link entries); `warm` the median of the
   next two (the even split per displacement class is cached per slice geometry).
2. Twisted vs plain all-to-all per policy beside [ISCA23] tw.1 / tw.2 and the even-split bound
   (podsim.collectives.bounds, every link equally busy on the twisted tori).
3. Degraded fabrics: a 1 GiB all-reduce with one failed ICI cable on a 4x4x4 torus (one the
   snake ring avoids), beside the closed form of the best algorithm whose healthy routes avoid
   it, and with one OCS unit down on a 4x4x8 slice and on a full v4 pod.
4. Without a symmetry fold: two multislice jobs (2 x 4x4x8 each, a DCN all-reduce and a
   whole-slice all-to-all per step) on one fabric.

Run: .venv/bin/python benchmarks/bench_routing.py
"""

from __future__ import annotations

import statistics
import sys

import numpy as np

from podsim.collectives import ALGORITHMS, plan_collective
from podsim.collectives.bounds import all_to_all_time_s
from podsim.collectives.fabricroutes import Placement
from podsim.collectives.groups import group_layout
from podsim.collectives.routes import RouterPool
from podsim.engine import simulate_collective
from podsim.engine.core import simulate_jobs
from podsim.engine.jobs import Job, place_slices
from podsim.topology import DcnSpec, build_slice, multipath
from podsim.topology.degraded import ocs_failed_links
from podsim.topology.multipath import ROUTING_POLICIES
from podsim.trace import StepTrace
from podsim.trace.model import Collective, Compute, parse_group

GiB = 2**30


def _clear_caches() -> None:
    multipath._EVEN.clear()
    multipath._box.cache_clear()


def wall() -> bool:
    """Prints the table; True when every multipath policy is within 3x dimension order (warm)."""
    ok = True
    print("1. Engine wall time per policy (s): cold / warm (median of 2), and warm / dimension-order warm")
    print(f"{'case':34} {'policy':16} {'cold':>7} {'warm':>7} {'x dor':>6} {'simulated ms':>13} {'algorithm':>16}")
    cases = (("v4 16x16x16 all_reduce, fast off", "16x16x16", False, "all_reduce", False),
             ("v4 16x16x16 all_reduce, fast on", "16x16x16", False, "all_reduce", True),
             ("v4 4x8x8 all_to_all", "4x8x8", False, "all_to_all", True),
             ("v4 4x8x8 twisted all_to_all", "4x8x8", True, "all_to_all", True))
    for label, shape, twisted, kind, fast in cases:
        built = build_slice("tpu-v4", shape, twisted=twisted)
        base = None
        for policy in ROUTING_POLICIES:
            _clear_caches()
            runs = [simulate_collective(built, kind, GiB, routing=policy, fast_path=fast) for _ in range(3)]
            warm = statistics.median(r.engine_wall_s for r in runs[1:])
            base = warm if base is None else base
            ok &= warm <= 3 * base
            r = runs[0]
            print(f"{label:34} {policy:16} {r.engine_wall_s:>7.3f} {warm:>7.3f} {warm / base:>5.2f}x "
                  f"{r.simulated_s * 1e3:>13.4f} {r.algorithm:>16}")
    print(f"target: multipath warm <= 3x dimension order: {'met' if ok else 'MISSED'}")
    return ok


def twisted() -> None:
    print("\n2. All-to-all of 1 GiB per chip: plain / twisted time per policy ([ISCA23] tw.1, tw.2)")
    print(f"{'slice':7} {'policy':16} {'plain ms':>9} {'twisted ms':>11} {'gain':>7} {'bound':>7} {'paper':>6}")
    for shape, paper in (("4x4x8", 1.63), ("4x8x8", 1.31)):
        views = {tw: build_slice("tpu-v4", shape, twisted=tw) for tw in (False, True)}
        bound = {tw: all_to_all_time_s(views[tw].view, GiB, "ecmp") for tw in (False, True)}
        for policy in ROUTING_POLICIES:
            t = {tw: simulate_collective(views[tw], "all_to_all", GiB, algorithm="direct", routing=policy).simulated_s
                 for tw in (False, True)}
            print(f"{shape:7} {policy:16} {t[False] * 1e3:>9.3f} {t[True] * 1e3:>11.3f} {t[False] / t[True]:>6.3f}x "
                  f"{bound[False] / bound[True]:>6.3f}x {paper:>5}x")


def _avoiding_bound(built, cable: int) -> tuple[str, float]:
    """The best closed form among algorithms whose healthy (dimension-order) routes avoid `cable`."""
    v = built.view
    pool = RouterPool(Placement(built.fabric, (v,)))
    layout = group_layout((v,), ("x", "y", "z"))
    best = ("", float("inf"))
    for a in ALGORITHMS:
        if a == "hierarchical":
            continue
        plan = plan_collective("all_reduce", layout, GiB, a, pool)
        router = pool.router(plan.schedule.patterns(), fold=False)
        links = np.concatenate([router.routes(p).links for p in plan.schedule.patterns()])
        if not np.isin([cable, cable ^ 1], links).any() and plan.closed_form_s < best[1]:
            best = (a, plan.closed_form_s)
    return best


def degraded() -> None:
    print("\n3. 1 GiB all-reduce on degraded fabrics: healthy -> failed ms per policy (engine wall s)")
    b = build_slice("tpu-v4", "4x4x4")
    pool = RouterPool(Placement(b.fabric, (b.view,)))
    ring = plan_collective("all_reduce", group_layout((b.view,), ("x", "y", "z")), GiB, "ring", pool)
    used = np.concatenate([pool.router(ring.schedule.patterns(), fold=False).routes(p).links for p in ring.schedule.patterns()])
    cable = next(int(lk) for lk in b.view.port_link.reshape(-1) if lk >= 0 and not np.isin([lk, lk ^ 1], used).any())
    algo, bound = _avoiding_bound(b, cable)
    cases = [("4x4x4, one ICI cable", b, (cable,)),
             ("4x4x8, OCS unit 16 down", build_slice("tpu-v4", "4x4x8"), None),
             ("v4 pod, OCS unit 16 down", build_slice("tpu-v4", "16x16x16"), None)]
    for label, built, failed in cases:
        failed = failed if failed is not None else ocs_failed_links(built.fabric, ocs=[16])
        parts = []
        for policy in ROUTING_POLICIES:
            h = simulate_collective(built, "all_reduce", GiB, routing=policy)
            d = simulate_collective(built, "all_reduce", GiB, routing=policy, failed_links=failed)
            parts.append(f"{policy} {h.simulated_s * 1e3:.2f} -> {d.simulated_s * 1e3:.2f} ({d.engine_wall_s:.2f} s)")
        print(f"{label:26} {len({min(lk, lk ^ 1) for lk in failed})} cable(s): " + "; ".join(parts))
    print(f"{'':26} bound for the 4x4x4 cable: {algo} closed form {bound * 1e3:.2f} ms")


def unfolded() -> None:
    print("\n4. Two multislice jobs, 2 x 4x4x8 each, 2 steps (no fold): step ms, engine wall s")
    fab, sl = place_slices("tpu-v4", "4x4x8", 4, DcnSpec(hosts_per_leaf=64, spines=4, oversubscription=4.0))
    trace = StepTrace((Compute("f", flops=3.3e12), Collective("g", "all_reduce", 2 * GiB, parse_group("x,y,z,dcn"), deps=("f",)),
                       Collective("a", "all_to_all", GiB, parse_group("x,y,z"), deps=("g",))))
    for policy in ROUTING_POLICIES:
        jobs = [Job(trace, fab, (sl[0], sl[2]), name="A", steps=2), Job(trace, fab, (sl[1], sl[3]), name="B", steps=2)]
        res = simulate_jobs(jobs, routing=policy)
        print(f"{policy:16} {res[0].step_time_s * 1e3:>9.3f} {res[1].step_time_s * 1e3:>9.3f} {res[0].engine_wall_s:>7.2f}")


if __name__ == "__main__":
    met = wall()
    twisted()
    degraded()
    unfolded()
    sys.exit(0 if met else 1)
