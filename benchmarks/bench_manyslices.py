"""Many small slices: the weak-scaling step of issue 13 (Llama-2-70B, 4 of 80 layers, fsdp=16 x
tensor=4 per 4x4x4 v4 slice, 16 sequences per slice) on 1..32 slices, per ECMP model of the EPS
DCN: step time, DCN busy, flows simulated of all, engine wall. Prints figures, asserts nothing.

Under `hash` (one spine per NIC pair) the DCN fold only merges the chips of a host: 16 N (N - 1)
classes, each finishing at its own time, so the engine grows about as N^4 (343 s at 32). Under
`split` (the default) the slices stay alike and the fold keeps a few classes at any N.
Run: .venv/bin/python benchmarks/bench_manyslices.py [--slices 1,2,4,8,16,32] [--hash-max 8]
"""

from __future__ import annotations

import argparse
import time

from podsim.engine import build_job, simulate_step
from podsim.topology import DcnSpec, get_generation
from podsim.trace import generate_trace


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--slices", default="1,2,4,8,16,32")
    ap.add_argument("--hash-max", type=int, default=8, help="largest slice count run under the hash (16: ~30 s, 32: minutes)")
    args = ap.parse_args()
    gen = get_generation("tpu-v4")
    print(f"{'ecmp':>5} {'slices':>6} {'step':>9} {'DCN busy':>9} {'flows simulated':>22} {'events':>7} {'engine':>8}")
    for ecmp in ("split", "hash"):
        for n in (int(v) for v in args.slices.split(",")):
            if ecmp == "hash" and n > args.hash_max:
                continue
            trace = generate_trace("llama2-70b", "4x4x4", f"fsdp=16,tensor=4,dcn={n}", generation=gen,
                                   overrides={"n_layers": 4, "global_batch": 16 * n})
            job = build_job(trace, gen, "4x4x4", n, dcn=DcnSpec(ecmp=ecmp))
            t = time.perf_counter()
            r = simulate_step(None, job)
            wall = time.perf_counter() - t
            print(f"{ecmp:>5} {n:>6} {r.step_time_s * 1e3:>7.1f}ms {r.levels['dcn']['busy_s'] * 1e3:>7.1f}ms "
                  f"{r.flows_simulated:>9,} of {r.flows:>9,} {r.events:>7,} {wall:>7.2f}s", flush=True)


if __name__ == "__main__":
    main()
