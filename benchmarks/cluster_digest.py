"""Digests of a matrix of small cluster simulations: equal digests from two checkouts mean a
change left every result alone, bit for bit (metrics but the timing counters, every job's
outcome, every time series, the never-placeable shapes).

    .venv/bin/python benchmarks/cluster_digest.py                 # one line per case
    .venv/bin/python benchmarks/cluster_digest.py --json out.json # and every figure, to diff two checkouts
    .venv/bin/python benchmarks/cluster_digest.py --only v4-backfill

The cases cover every policy, both solvers, OCS and static wiring, host, OCS and link failures,
degraded placement and spare ports, folds and splits, Hilbert allocation, multislice jobs over
sites, a warm-up with a drain, and step-based jobs; each runs in seconds.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time

# counters of the simulator's own work, not results: free to change with its speed
TIMING = ("engine_wall_s", "placement_s", "placement_calls", "cpsat_wall_capped", "step_time_evaluations")
NEW = ("sim_events", "runs_slowdown_not_charged")  # counters added with the fleet-scale work (issue 35)
H = 3600.0
TORUS = "torus-8x8x8-b4-p6-400gbps"


def _failures(host=None, ocs=None, link=None):
    from podsim.cluster import FailureModel
    from podsim.cluster.failures import FailureProcess

    def proc(a):
        return None if a is None else FailureProcess.from_availability(a, mttr_s=2 * H)

    return FailureModel(host=proc(host), ocs=proc(ocs), link=proc(link))


def _synthetic(gen="tpu-v4", jobs=300, rate=3.0, **kw):
    from podsim.workload import SyntheticSpec, generate_jobs

    def draw(seed):
        return generate_jobs(SyntheticSpec(generation=gen, jobs=jobs, arrival={"rate_per_h": rate}, **kw), seed)

    return draw


def _odd(jobs=150, max_chips=256, rate=40.0):
    from podsim.workload.odd import OddShapeSpec, odd_shape_jobs

    return lambda seed: odd_shape_jobs(OddShapeSpec(jobs=jobs, max_chips=max_chips, max_side=8, rate_per_h=rate, median_s=8 * H), seed)


def cases() -> dict[str, tuple[dict, object]]:
    """name -> (ClusterConfig fields, jobs(seed))."""
    v4 = {"generation": "tpu-v4"}
    week = 7 * 86400.0
    prio = {0: 2.0, 1: 1.0, 2: 0.5}
    return {
        "v4-backfill": ({**v4, "pods": 1, "policy": "backfill", "horizon_s": week, "failures": _failures(0.995)},
                        _synthetic()),
        "v4-fifo-all-failures": ({**v4, "pods": 2, "policy": "fifo", "horizon_s": week,
                                  "failures": _failures(0.995, 0.999, 0.9999)}, _synthetic(rate=6.0)),
        "v4-priority": ({**v4, "pods": 2, "policy": "priority", "horizon_s": week, "failures": _failures(0.995)},
                        _synthetic(rate=6.0, priorities=prio)),
        "v4-backfill-4pods-first": ({**v4, "pods": 4, "policy": "backfill", "placement": "first", "horizon_s": week,
                                     "failures": _failures(0.995)}, _synthetic(jobs=600, rate=12.0)),
        "v4-backfill-4pods": ({**v4, "pods": 4, "policy": "backfill", "horizon_s": 3 * 86400.0, "failures": _failures(0.99)},
                              _synthetic(jobs=600, rate=12.0)),
        "v4-static-backfill": ({**v4, "pods": 2, "ocs": False, "policy": "backfill", "horizon_s": week,
                                "failures": _failures(0.995)}, _synthetic(rate=6.0)),
        "v4-degraded-spares": ({**v4, "pods": 2, "policy": "backfill", "horizon_s": week, "degraded_placement": "all",
                                "spare_ports": True, "degraded_slowdown": 1.5,
                                "failures": _failures(0.995, 0.99, 0.9999)}, _synthetic(rate=6.0)),
        "v4-multislice-sites": ({**v4, "pods": 4, "sites": 2, "policy": "backfill", "horizon_s": 3 * 86400.0,
                                 "failures": _failures(0.995)},
                                _synthetic(jobs=100, rate=4.0, slices={1: 2.0, 2: 1.0, 3: 0.5}, span_sites=True)),
        "v4-priority-multislice": ({**v4, "pods": 2, "policy": "priority", "horizon_s": week, "failures": _failures(0.995)},
                                   _synthetic(jobs=150, rate=4.0, slices={1: 2.0, 2: 1.0}, priorities=prio)),
        "v4-cpsat": ({**v4, "pods": 1, "policy": "backfill", "solver": "cpsat", "decision_time_limit": 0.2,
                      "horizon_s": 2 * 86400.0, "failures": _failures(0.995)}, _synthetic(jobs=60, rate=3.0)),
        "v4-warmup-drain": ({**v4, "pods": 1, "policy": "backfill", "horizon_s": 4 * 86400.0, "warmup_s": 86400.0,
                             "drain": True, "failures": _failures(0.995)}, _synthetic(jobs=100)),
        "v4-steps": ({**v4, "pods": 1, "policy": "backfill", "horizon_s": 3 * 86400.0, "failures": _failures(0.995)},
                     _synthetic(jobs=80, rate=2.0, models={"bert-large": 1.0, "llama2-70b": 1.0})),
        "v5e-backfill": ({"generation": "tpu-v5e", "pods": 3, "policy": "backfill", "horizon_s": week,
                          "failures": _failures(0.995)},
                         _synthetic(gen="tpu-v5e", jobs=400, rate=8.0,
                                    slice_mix={"1x1": 1, "2x2": 2, "2x4": 2, "4x4": 2, "4x8": 1, "8x8": 1, "8x16": 0.5, "16x16": 0.2})),
        "v4-static-hilbert": ({**v4, "pods": 2, "ocs": False, "placement": "hilbert", "policy": "backfill",
                               "horizon_s": week, "failures": _failures(0.995)}, _synthetic(rate=6.0)),
        "torus-fold": ({"generation": TORUS, "pods": 2, "policy": "backfill", "fold": "allowed", "horizon_s": 2 * 86400.0,
                        "slowdown_model": "llama2-70b", "slowdown_overrides": {"n_layers": 1},
                        "failures": _failures(0.995)}, _odd()),
        "v4-fold": ({**v4, "pods": 2, "policy": "backfill", "fold": "allowed", "horizon_s": 2 * 86400.0,
                     "slowdown_model": "llama2-70b", "slowdown_overrides": {"n_layers": 1},
                     "failures": _failures(0.995)}, _odd(max_chips=512)),
    }


def digest(result) -> tuple[str, dict]:
    """A short hash of a ClusterResult's figures bit for bit, and the figures hashed."""
    figures = {
        "metrics": {k: repr(v) for k, v in sorted(result.metrics.items()) if k not in TIMING + NEW},
        "jobs": [repr(tuple(vars(o).values()) if hasattr(o, "__dict__") else o) for o in result.jobs],
        "timeseries": {k: [repr(float(x)) for x in v] for k, v in sorted(result.timeseries.items())},
        "unplaceable": repr(result.unplaceable),
    }
    return hashlib.sha1(json.dumps(figures, sort_keys=True).encode()).hexdigest()[:12], figures


def run_case(name: str, seed: int = 1):
    from podsim.cluster import ClusterConfig, simulate

    fields, jobs = cases()[name]
    cfg = ClusterConfig(**fields)
    t = time.process_time()
    result = simulate(cfg, jobs(seed), seed=seed)
    return result, time.process_time() - t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", default=None)
    ap.add_argument("--json", default=None, help="write every case's figures here (diff two checkouts' files)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    names = args.only or list(cases())
    out = {}
    for name in names:
        result, wall = run_case(name, args.seed)
        d, figures = digest(result)
        m = result.metrics
        out[name] = {"digest": d, **figures}
        print(f"{name:26} digest {d}  jobs {m['jobs_completed']:4d} done  util {m['utilisation']:.4f}  "
              f"goodput {m['goodput']:.4f}  {wall:6.2f} s CPU", flush=True)
        assert math.isfinite(wall)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
