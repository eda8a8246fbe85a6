"""Build 5 of issue 34: is the plan search's analytic ranking right where it is used?

For each point of a matrix (dense and MoE presets, 256 to 16,384 chips, three generations) the
search ranks every plan analytically and runs its best K on the engine. Two checks per point:

- the engine's best of those K is among the analytic top 5 (strict: by the engine's step, ties
  broken by the analytic rank; `tie` also counts an engine-best within 0.1% of the top-5's best);
- the analytic estimate is within 10% of the engine for every confirmed plan (max |error|).

Every row is printed as it finishes, then a summary; the exit code is 1 when a point misses either
check or could not be run. Usage:

    PYTHONPATH=$PWD nice -n 10 .venv/bin/python benchmarks/bench_plan_ranking.py [--k 10] [--quick] [--only MODEL]

`--quick` runs the three smallest points. Timings are wall seconds on this machine with the load
average beside them (the machine is shared).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from podsim.plan.search import PlanQuery, search

MATRIX = [
    # (model, generation, chips)
    ("mixtral-8x7b", "tpu-v5p", 256),
    ("mixtral-8x7b", "tpu-v5e", 256),
    ("llama2-70b", "tpu-v5e", 256),
    ("mixtral-8x7b", "tpu-v4", 512),
    ("llama2-70b", "tpu-v5p", 1024),
    ("llama2-70b", "tpu-v4", 1024),
    ("gpt3-175b", "tpu-v5p", 1024),
    ("gpt3-175b", "tpu-v5e", 1024),
    ("gpt3-175b", "tpu-v4", 4096),
    ("palm-540b", "tpu-v4", 4096),
    ("palm-540b", "tpu-v5p", 6144),
    ("llama2-70b", "tpu-v5p", 16384),
    ("gpt3-175b", "tpu-v4", 16384),
]
MAXTEXT = [("maxtext-16b", "tpu-v5e", 256), ("maxtext-32b", "tpu-v5p", 512), ("maxtext-64b", "tpu-v5p", 1024),
           ("maxtext-128b", "tpu-v4", 4096)]


def _presets() -> set[str]:
    from podsim.trace.configs import PRESETS

    return set(PRESETS)


def run_point(model: str, gen: str, chips: int, k: int) -> dict:
    t0 = time.perf_counter()
    s = search(PlanQuery(model, gen, chips=chips, top=k))
    wall = time.perf_counter() - t0
    row = {"model": model, "generation": gen, "chips": chips, "enumerated": s.counts.enumerated, "ranked": s.counts.ranked,
           "analytic_s": s.wall_s["prune"] + s.wall_s["rank"], "engine_s": s.wall_s["confirm"], "wall_s": wall,
           "load": os.getloadavg()[0], "confirmed": len(s.confirmed)}
    if not s.confirmed:
        row["note"] = "no plan fits" if not s.ranked else "engine refused every plan"
        return row
    rank = {id(a): i for i, a in enumerate(s.ranked)}
    best = min(s.confirmed, key=lambda c: (c.step_s, rank[id(c.assessed)]))
    top5 = [c for c in s.confirmed if rank[id(c.assessed)] < 5]
    errs = [c.estimate_error for c in s.confirmed]
    row.update({
        "engine_best": best.assessed.candidate.label(), "engine_best_step_s": best.step_s,
        "engine_best_rank": rank[id(best.assessed)] + 1, "in_top5": rank[id(best.assessed)] < 5,
        "in_top5_tie": bool(top5) and min(c.step_s for c in top5) <= best.step_s * 1.001,
        "max_abs_error": max(abs(e) for e in errs), "mean_error": sum(errs) / len(errs),
        "errors": [round(e, 4) for e in errs],
    })
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=10, help="plans confirmed per point (more than 5, or the check is trivial)")
    ap.add_argument("--quick", action="store_true", help="the three smallest points only")
    ap.add_argument("--only", default=None, help="only points of this model")
    args = ap.parse_args()
    points = MATRIX + [p for p in MAXTEXT if p[0] in _presets()]
    if args.quick:
        points = points[:3]
    if args.only:
        points = [p for p in points if p[0] == args.only]
    print(f"{'model':<14} {'gen':<8} {'chips':>6} {'enum':>7} {'ranked':>6} {'analytic':>9} {'engine':>8} {'load':>5} "
          f"{'best(engine)':<48} {'rank':>4} {'top5':>5} {'tie':>4} {'max|err|':>8} {'mean':>7}", flush=True)
    rows = []
    for model, gen, chips in points:
        try:
            r = run_point(model, gen, chips, args.k)
        except Exception as exc:  # noqa: BLE001 - a point that fails is a row that says why
            r = {"model": model, "generation": gen, "chips": chips, "note": f"{type(exc).__name__}: {exc}"}
        rows.append(r)
        if "engine_best" in r:
            print(f"{model:<14} {gen:<8} {chips:>6} {r['enumerated']:>7,} {r['ranked']:>6} {r['analytic_s']:>8.1f}s "
                  f"{r['engine_s']:>7.0f}s {r['load']:>5.1f} {r['engine_best']:<48} {r['engine_best_rank']:>4} "
                  f"{'yes' if r['in_top5'] else 'NO':>5} {'yes' if r['in_top5_tie'] else 'NO':>4} {r['max_abs_error']:>8.1%} "
                  f"{r['mean_error']:>+7.1%}  errors {r['errors']}", flush=True)
        else:
            print(f"{model:<14} {gen:<8} {chips:>6}  {r.get('note')}", flush=True)
    done = [r for r in rows if "engine_best" in r]
    if done:
        worst = max(r["max_abs_error"] for r in done)
        print(f"\n{len(done)} of {len(rows)} points confirmed; engine's best in the analytic top 5: "
              f"{sum(r['in_top5'] for r in done)}/{len(done)} (within 0.1%: {sum(r['in_top5_tie'] for r in done)}/{len(done)}); "
              f"estimate within 10% on every confirmed plan: {sum(r['max_abs_error'] <= 0.10 for r in done)}/{len(done)} "
              f"points (worst {worst:.1%})")
    missed = [r for r in done if not r["in_top5"] or r["max_abs_error"] > 0.10]
    sys.exit(1 if missed or len(done) < len(rows) else 0)


if __name__ == "__main__":
    main()
