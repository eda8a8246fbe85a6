"""Multislice steps at fleet scale: engine wall time and peak memory, folded vs full.

1. One training step of GPT-3 175B (a dense 175B-class model) on 4 v4 pods in one data centre
   (4 slices of 16x16x16, 16,384 chips; targets: <= 5 s engine wall) and on 16 pods split over
   two sites 1 ms apart (65,536 chips; <= 30 s), data parallel across slices over the DCN.
2. Folded (identical slices folded onto the first, translations inside it) against every flow
   simulated, on the largest size the full simulation does quickly.

Peak memory is the process's peak resident set (ru_maxrss) after each case, so it only grows.
`cpu s` is the process CPU time of the simulation: on a shared machine the engine wall time
also counts the time other jobs held the cores.
With --full-fleet, also the 4-pod step with every flow simulated (minutes), against the folded one.
Run: .venv/bin/python benchmarks/bench_fleet.py [--layers N] [--full-fleet]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

from podsim.engine import build_job, simulate_step, step_summary
from podsim.topology import DcnSpec
from podsim.trace import generate_trace


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def step(model: str, shape: str, plan: str, slices: int, dcn: DcnSpec, layers: int | None, batch: int, fast: bool = True):
    overrides = {"global_batch": batch, **({"n_layers": layers} if layers else {})}
    t0 = time.perf_counter()
    trace = generate_trace(model, shape, plan, generation="tpu-v4", overrides=overrides)
    job = build_job(trace, "tpu-v4", shape, slices, dcn=dcn)
    c0 = time.process_time()
    r = simulate_step(None, job, fast_path=fast)
    cpu = time.process_time() - c0
    return r, step_summary(r, trace), time.perf_counter() - t0, cpu


def fleet(layers: int | None) -> tuple[dict, list[str]]:
    """Prints the fleet steps; (results by slice count, the targets missed)."""
    print("1. GPT-3 175B, one step, fsdp=256 x tensor=16 in each 4096-chip slice, dcn across slices")
    print(f"{'case':34} {'chips':>7} {'step s':>8} {'MFU':>6} {'DCN busy s':>10} {'WAN busy s':>10} "
          f"{'engine s':>9} {'cpu s':>6} {'total s':>8} {'flows sim.':>11} {'peak MB':>8} {'target':>7}")
    out, missed = {}, []
    for name, slices, dcn, target in (
        ("4 pods, one data centre", 4, DcnSpec(), 5.0),
        ("16 pods, two sites 1 ms apart", 16, DcnSpec(sites=2, wan_latency_s=1e-3), 30.0),
    ):
        r, s, total, cpu = step("gpt3-175b", "16x16x16", f"fsdp=256,tensor=16,dcn={slices}", slices, dcn, layers, 256 * slices)
        print(f"{name:34} {4096 * slices:>7,} {r.step_time_s:>8.3f} {s.get('mfu', float('nan')):>6.1%} "
              f"{s['dcn_busy_s']:>10.4f} {s['wan_busy_s']:>10.4f} {r.engine_wall_s:>9.2f} {cpu:>6.2f} {total:>8.2f} "
              f"{r.flows_simulated:>11,} {peak_rss_mb():>8.0f} {'<= ' + format(target, 'g'):>7}")
        out[slices] = r
        if r.engine_wall_s > target:
            missed.append(f"{name}: engine {r.engine_wall_s:.2f} s > {target:g} s")
    return out, missed


def full_fleet(folded, layers: int | None) -> None:
    print("\n1b. The 4-pod step with every flow simulated")
    r, _, _, _ = step("gpt3-175b", "16x16x16", "fsdp=256,tensor=16,dcn=4", 4, DcnSpec(), layers, 1024, fast=False)
    print(f"  full: step {r.step_time_s:.6f} s, engine {r.engine_wall_s:.2f} s, {r.flows_simulated:,} flows, "
          f"peak {peak_rss_mb():.0f} MB; folded / full - 1 = {folded.step_time_s / r.step_time_s - 1:+.2e}")


def folded_vs_full() -> None:
    print("\n2. Folded vs full: Llama-2-70B (4 layers), 8 slices of 8x8x8 (4,096 chips), two sites")
    out = {}
    for fast in (True, False):
        r, _, _, cpu = step("llama2-70b", "8x8x8", "fsdp=128,tensor=4,dcn=8", 8, DcnSpec(sites=2), 4, 1024, fast)
        out[fast] = r
        print(f"  {'folded' if fast else 'full  '}: step {r.step_time_s:.6f} s, engine {r.engine_wall_s:.2f} s (cpu {cpu:.2f} s), "
              f"{r.flows_simulated:,} of {r.flows:,} flows simulated")
    print(f"  step time folded / full - 1 = {out[True].step_time_s / out[False].step_time_s - 1:+.2e}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=None, help="simulate only this many layers (default: all 96)")
    ap.add_argument("--full-fleet", action="store_true", help="also simulate the 4-pod step in full (minutes)")
    args = ap.parse_args()
    res, missed = fleet(args.layers)
    if args.full_fleet:
        full_fleet(res[4], args.layers)
    folded_vs_full()
    print("targets: " + ("met" if not missed else "MISSED: " + "; ".join(missed)))
    sys.exit(1 if missed else 0)
