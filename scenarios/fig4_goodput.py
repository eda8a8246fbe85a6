"""The TPU v4 paper's Fig. 4: goodput versus slice size for host availability 99.0%, 99.5% and
99.9%, with and without OCS, all slice requests equal ([ISCA23] §2.3, hardware.md av.1-av.8).

    .venv/bin/python scenarios/fig4_goodput.py                 # both tables, ~20 s
    .venv/bin/python scenarios/fig4_goodput.py --trials 2000 --no-sim

1. Snapshot (the paper's question): each of the pod's 1024 hosts is down independently with
   probability 1 - A; how much of the pod can equal slices use? A Monte Carlo over failed-host
   patterns with exact slice counts (podsim.cluster.goodput).
2. In time (what a fleet delivers): the cluster simulation with a full queue of equal 2-day
   jobs, host failures with that availability (MTTR 4 h), hourly checkpoints and a 5 min
   restart; work since the last checkpoint is lost at each failure.
"""

from __future__ import annotations

import argparse
import time

from podsim.cli.common import progress_reporter
from podsim.cluster import ClusterConfig, FailureModel, simulate
from podsim.cluster.failures import FailureProcess
from podsim.cluster.goodput import FIG4_AVAILABILITY, PAPER_POINTS, fig4_goodput, goodput_table
from podsim.workload import SyntheticSpec, generate_jobs
from podsim.workload.synthetic import ArrivalSpec, DurationSpec

SIM_SHAPES = ("8x8x16", "8x16x16", "12x16x16")


def markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def snapshot(trials: int, seed: int) -> str:
    with progress_reporter("Fig. 4 snapshot") as update:
        points = fig4_goodput("tpu-v4", trials=trials, seed=seed,
                              on_progress=lambda d, t: update(d, t, f"{d:.0f} of {t:.0f} failure patterns"))
    g = {(p.shape, p.availability, p.ocs): p for p in points}
    out = [f"## Snapshot: share of a v4 pod that equal slices can use ({trials} failure patterns per availability, seed {seed})", ""]
    out.append(markdown(*goodput_table(points)))
    worst = max(p.stderr for p in points)
    out += ["", f"(largest standard error of a cell: {worst:.1%})", "", "## Beside the paper's stated points", ""]
    rows = []
    for row_id, text in PAPER_POINTS:
        if row_id == "av.5":
            ours = ", ".join(f"{g[('8x8x16', a, True)].goodput:.1%} at {a:.1%}" for a in (0.99, 0.995))
        elif row_id == "av.6":
            ours = ", ".join(f"{g[('8x16x16', a, True)].goodput:.1%} at {a:.1%}" for a in (0.99, 0.995))
        elif row_id == "av.7":
            ours = ", ".join(f"{g[('12x16x16', a, True)].goodput:.1%} at {a:.1%}" for a in (0.99, 0.995))
        elif row_id == "av.3":
            ours = "static 1K-chip slices: " + ", ".join(f"{g[('8x8x16', a, False)].goodput:.1%} at {a:.1%}" for a in FIG4_AVAILABILITY)
        else:
            ok = [p for p in points if p.ocs and p.availability < 0.999 and p.chips <= 1024]
            ours = f"OCS, slices up to 1K chips at 99.0-99.5%: {min(p.goodput for p in ok):.1%} to {max(p.goodput for p in ok):.1%}"
        rows.append([row_id, text, ours])
    out.append(markdown(["row", "paper", "podsim"], rows))
    return "\n".join(out)


def in_time(days: float, seed: int) -> str:
    with progress_reporter("Fig. 4 in time") as update:
        return _in_time(days, seed, update)


def _in_time(days: float, seed: int, update) -> str:
    rows = []
    total, done = len(SIM_SHAPES) * len(FIG4_AVAILABILITY) * 2, 0
    for shape in SIM_SHAPES:
        jobs = generate_jobs(SyntheticSpec(generation="tpu-v4", jobs=100, slice_mix={shape: 1},
                                           arrival=ArrivalSpec(kind="given", gaps_s=(0.0,)),
                                           duration=DurationSpec(kind="fixed", median_s=2 * 86400)), seed)
        for a in FIG4_AVAILABILITY:
            cells = []
            for ocs in (True, False):
                cfg = ClusterConfig(generation="tpu-v4", ocs=ocs, policy="fifo", horizon_s=days * 86400,
                                    fragmentation=False, failures=FailureModel(host=FailureProcess.from_availability(a, mttr_s=4 * 3600)))
                m = simulate(cfg, jobs, seed=seed).metrics
                done += 1
                update(done, total, f"{done} of {total} runs ({shape}, {a:.1%}, {'OCS' if ocs else 'static'})")
                busy = m["busy_chip_h"] / m["fleet_chip_h"]
                cells.append(f"{busy:.1%} / {m['fleet_goodput']:.1%} ({m['job_interruptions']})")
            rows.append([shape, f"{a:.1%}", *cells])
    head = ["slice", "host availability", "OCS: held / useful (interruptions)", "static: held / useful (interruptions)"]
    return "\n".join([f"## In time: {days:g} days of a full queue of equal 2-day jobs (MTTR 4 h, checkpoint 1 h, restart 5 min, seed {seed})",
                      "", "held = chip-hours held by jobs / the pod's; useful = chip-hours of work kept / the pod's", "",
                      markdown(head, rows)])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=400, help="failure patterns per availability")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--days", type=float, default=14.0, help="simulated days per time-based run")
    ap.add_argument("--no-sim", action="store_true", help="skip the time-based simulation")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    print(snapshot(args.trials, args.seed))
    if not args.no_sim:
        print()
        print(in_time(args.days, args.seed))
    print(f"\n(wall time {time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
