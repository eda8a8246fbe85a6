"""The v4 paper's Fig. 4 setting rerun with OCS-unit and OCS-port failures: fleet goodput with
and without degraded placement and spare-port remapping (issue 12, item 3).

    .venv/bin/python scenarios/fig4_ocs_failures.py            # ~100 s on one core
    .venv/bin/python scenarios/fig4_ocs_failures.py --days 7 --shapes 8x8x16

Setting (as fig4_goodput.py's "in time" table): one v4 pod with OCS, a full queue of equal
2-day jobs, FIFO, hourly checkpoints, 5 min restart, 10 s OCS reconfiguration (ocs.17); hosts at
99.5% availability (the middle of Fig. 4's axis, av.2), MTTR 4 h. Added: each of the pod's 48
OCS units down with probability 1 - A_ocs (A_ocs 99.0% or 99.9%, MTTR 4 h) and each ICI cable
with availability 99.99% (MTTR 4 h; an optical cable takes its OCS port, a copper one its two
chips). No OCS or port failure rate is published: these are planning assumptions, the same
range as the paper's host axis, not fitted to anything.

Variants: none (a down OCS unit blocks every cube-level slice of the pod, a failed port its
cube); degraded (every job may run on a torus whose circuits on down OCS units are dark);
spare (a cube's fiber moves off a failed port onto one of the OCS's 8 spares at once, ocs.4);
both. A degraded slice's run time is x1 (compute-bound job) or x the engine's slowdown of a
1 GiB all-reduce on that slice with one OCS unit down (dimension-order routing; an
all-reduce-bound job): the two ends of what degradation can cost.
"""

from __future__ import annotations

import argparse
import time

from fig4_goodput import markdown  # the sibling script (its folder is on the path when run)

from podsim.cli.common import progress_reporter
from podsim.cluster import ClusterConfig, FailureModel, simulate
from podsim.cluster.failures import FailureProcess
from podsim.engine import simulate_collective
from podsim.topology import build_slice
from podsim.topology.degraded import ocs_failed_links
from podsim.workload import SyntheticSpec, generate_jobs
from podsim.workload.synthetic import ArrivalSpec, DurationSpec

SHAPES = ("8x8x16", "8x16x16", "12x16x16")
OCS_AVAILABILITY = (0.99, 0.999)
HOST_AVAILABILITY = 0.995
LINK_AVAILABILITY = 0.9999
MTTR_S = 4 * 3600
VARIANTS = {"none": ("off", False), "degraded": ("all", False), "spare": ("off", True), "both": ("all", True)}


def allreduce_slowdown(shape: str) -> float:
    """Engine time of a 1 GiB all-reduce on `shape` with OCS unit 16 down / healthy."""
    built = build_slice("tpu-v4", shape)
    healthy = simulate_collective(built, "all_reduce", 2**30).simulated_s
    failed = ocs_failed_links(built.fabric, ocs=[16])
    return simulate_collective(built, "all_reduce", 2**30, failed_links=failed).simulated_s / healthy


def run(shape: str, ocs_a: float, variant: str, slowdown: float, days: float, seed: int) -> dict:
    jobs = generate_jobs(SyntheticSpec(generation="tpu-v4", jobs=100, slice_mix={shape: 1},
                                       arrival=ArrivalSpec(kind="given", gaps_s=(0.0,)),
                                       duration=DurationSpec(kind="fixed", median_s=2 * 86400)), seed)
    mode, spare = VARIANTS[variant]
    failures = FailureModel(host=FailureProcess.from_availability(HOST_AVAILABILITY, mttr_s=MTTR_S),
                            ocs=FailureProcess.from_availability(ocs_a, mttr_s=MTTR_S),
                            link=FailureProcess.from_availability(LINK_AVAILABILITY, mttr_s=MTTR_S))
    cfg = ClusterConfig(generation="tpu-v4", policy="fifo", horizon_s=days * 86400, fragmentation=False,
                        failures=failures, degraded_placement=mode, spare_ports=spare, degraded_slowdown=slowdown)
    return simulate(cfg, jobs, seed=seed).metrics


def table(shapes, days: float, seed: int) -> str:
    with progress_reporter("Fig. 4 with OCS failures") as update:
        return _table(shapes, days, seed, update)


def _table(shapes, days: float, seed: int, update) -> str:
    rows = []
    total, done = len(shapes) * len(OCS_AVAILABILITY) * (len(VARIANTS) + 1), 0
    for shape in shapes:
        update(done, total, f"{shape}: a 1 GiB all-reduce with OCS unit 16 down")
        slow = allreduce_slowdown(shape)
        for a in OCS_AVAILABILITY:
            cells, extra = [], ""
            for variant in VARIANTS:
                m = run(shape, a, variant, 1.0, days, seed)
                done += 1
                update(done, total, f"{done} of {total} runs ({shape}, OCS {a:.1%}, {variant})")
                cells.append(f"{m['fleet_goodput']:.1%}")
                if variant == "both":
                    extra = f"{m['degraded_starts']} / {m['spare_remaps']}"
            m = run(shape, a, "both", slow, days, seed)
            done += 1
            update(done, total, f"{done} of {total} runs ({shape}, OCS {a:.1%}, both at x{slow:.2f})")
            rows.append([shape, f"{a:.1%}", *cells, f"{m['fleet_goodput']:.1%} (x{slow:.2f})", extra])
    head = ["slice", "OCS unit availability", "none", "degraded", "spare", "both",
            "both, all-reduce-bound", "degraded starts / spare remaps (both)"]
    return "\n".join([
        f"## Fleet goodput with OCS-unit and OCS-port failures: {days:g} days, full queue of equal 2-day jobs, "
        f"hosts {HOST_AVAILABILITY:.1%}, cables {LINK_AVAILABILITY:.2%}, MTTR 4 h, seed {seed}", "",
        "goodput = chip-hours of work kept (in healthy-slice time) / the pod's chip-hours", "",
        markdown(head, rows)])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--days", type=float, default=14.0, help="simulated days per run")
    ap.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated cube-level slice shapes")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    print(table(args.shapes.split(","), args.days, args.seed))
    print(f"\n(wall time {time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
