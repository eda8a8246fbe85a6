"""Where a serving-table row's time goes, and how H100 all-reduces compare with the measured profile.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/serving_decompose.py [sv.21 sv.29 ...]   # default: sv.21 sv.29 sv.37 sv.38
    PYTHONPATH=$PWD .venv/bin/python benchmarks/serving_decompose.py --all-reduce      # engine vs profile, 2/4/8 H100s
    PYTHONPATH=$PWD .venv/bin/python benchmarks/serving_decompose.py --derive all_reduce.csv   # the profile's points

A row: every step of its simulation (under the serving rule's calibration) split into the weight
matmuls and other ops, attention (decode KV reads and prefill attention), the tensor all-reduces and
the engine's host time, each as a mean per step; beside it the mean step the measured throughput
implies (podsim's steps scaled by podsim / measured: the same steps, each slower or faster) and the
gap per step and per layer. `--derive` takes vidur's all_reduce.csv
(microsoft/vidur@7d47513:data/profiling/network/h100_dgx/all_reduce.csv) and prints the half-octave
band medians `podsim.serving.nccl_profile` stores.
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
from collections import defaultdict

from podsim.engine import simulate_collective
from podsim.serving.costs import InferenceShard
from podsim.serving.nccl_profile import all_reduce_s
from podsim.serving.result import serving_metrics
from podsim.serving.simulate import ServingSim
from podsim.serving.spec import ServingConfig
from podsim.serving.steptime import StepTimer
from podsim.trace.configs import get_model
from podsim.trace.model import busbw_factor
from podsim.validation.serving_rows import ALL_ROWS
from podsim.validation.serving_table import calibrate, engine_for

HEAD = (f"{'row':6} {'TP':>2} {'measured':>9} {'podsim':>9} {'error':>7} {'seqs':>5} {'tok/step':>8} {'AR MB':>6} | "
        f"{'step ms':>7} {'matmul+':>7} {'attn':>6} {'AR':>6} {'host':>6} | {'implied':>7} {'gap':>7} {'gap/layer':>9}")


def decompose(row, values) -> str:
    """One row's line: mean per step of each part (ms), and the step the measurement implies."""
    sim = ServingSim(ServingConfig.model_validate(row.config), engine=engine_for(row, values))
    m, _ = serving_metrics(sim, sim.run())
    pred = m["tokens_per_s"] * row.replicas
    t, lin = sim.timer, sim.timer._linear
    layers = sim.shard.cfg.n_layers
    cache: dict[int, float] = {}

    def reduces_s(n: int) -> float:
        if n not in cache:
            c = sum(w * sum(t.collective_s(op, n, op.nbytes) for op in ops) for w, ops, _ in lin.runs)
            cache[n] = c + (t.collective_s(lin.sample_op, n, lin.sample_op.nbytes) if lin.sample_op else 0.0)
        return cache[n]

    part = dict.fromkeys(("step", "mm", "attn", "ar", "host"), 0.0)
    steps = seqs = tokens = 0
    for rep in sim.replicas:
        cols = [rep.steps.column(c) for c in ("tokens", "decode_tokens", "seqs", "dt_s")]
        for n, d, s, dt in zip(*cols, strict=True):
            n, d = int(n), int(d)
            host, body, ar = sim.engine.host_s(d, layers), t._body_s(n, d), reduces_s(n)
            part["step"] += dt
            part["host"] += host
            part["ar"] += ar
            part["mm"] += body - ar
            part["attn"] += dt - body - host
            steps, seqs, tokens = steps + 1, seqs + s, tokens + n
    ms = {k: v * 1e3 / steps for k, v in part.items()}
    implied = ms["step"] * pred / row.measured
    ar_mb = sim.shard.tensor_reduce_bytes(tokens / steps) / 1e6 if sim.shard.tensor > 1 else 0.0
    return (f"{row.id:6} {sim.shard.tensor:2d} {row.measured:9,.0f} {pred:9,.0f} {pred / row.measured - 1:+7.1%} "
            f"{seqs / steps:5.0f} {tokens / steps:8.0f} {ar_mb:6.2f} | {ms['step']:7.2f} {ms['mm']:7.2f} {ms['attn']:6.2f} "
            f"{ms['ar']:6.2f} {ms['host']:6.2f} | {implied:7.2f} {implied - ms['step']:+7.2f} "
            f"{(implied - ms['step']) / layers * 1e3:+7.0f} us")


def all_reduce_table() -> None:
    """The flow engine's all-reduce on gpu-h100 (with NCCL's collective_latency) against the profile."""
    for gpus in (2, 4, 8):
        timer = StepTimer(InferenceShard(get_model("llama2-70b"), tensor=gpus), "gpu-h100", str(gpus))
        print(f"{gpus} GPUs: size, engine us, profile us, engine / profile, bus bandwidth engine / profile GB/s")
        for mib in (0.0625, 0.25, 1, 2, 4, 8, 16, 32, 64, 128, 256):
            b = mib * 2**20
            eng = simulate_collective(timer.built, "all_reduce", b, timer.groups["tensor"]).simulated_s
            prof = all_reduce_s("gpu-h100", gpus, b)
            bus = busbw_factor("all_reduce", gpus) * b / 1e9
            print(f"  {mib:8.4g} MiB {eng * 1e6:8.1f} {prof * 1e6:8.1f}   x{eng / prof:4.2f}   {bus / eng:5.0f} / {bus / prof:5.0f}")


def derive(path: str) -> None:
    """vidur's all_reduce.csv as the profile's points: per GPU count, each half-octave band's median
    size (bytes) and median time (us)."""
    bands: dict[int, dict[int, list[tuple[int, float]]]] = defaultdict(lambda: defaultdict(list))
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            size = int(r["size"])  # bytes (vidur's collectives_wrapper.py: size * 2 for fp16)
            bands[int(r["num_workers"])][math.floor(2 * math.log2(size))].append(
                (size, float(r["time_stats.all_reduce.median"]) * 1e3))  # ms -> us
    for gpus in sorted(bands):
        pts = [(statistics.median(s for s, _ in v), statistics.median(t for _, t in v)) for _, v in sorted(bands[gpus].items())]
        print(f"    {gpus}: (" + ", ".join(f"({s:.0f}, {t:.1f})" for s, t in pts) + "),")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rows", nargs="*", default=["sv.21", "sv.29", "sv.37", "sv.38"])
    ap.add_argument("--all-reduce", action="store_true", help="compare the engine's H100 all-reduce with the profile")
    ap.add_argument("--derive", metavar="CSV", help="print the profile's points from vidur's all_reduce.csv")
    args = ap.parse_args()
    if args.derive:
        derive(args.derive)
        return
    if args.all_reduce:
        all_reduce_table()
        return
    by_id = {r.id: r for r in ALL_ROWS}
    unknown = [r for r in args.rows if r not in by_id]
    if unknown:
        ap.error(f"rows {', '.join(unknown)} are not serving-table rows; known: {', '.join(by_id)}")
    values = calibrate(ALL_ROWS)
    print(HEAD)
    for rid in args.rows:
        print(decompose(by_id[rid], values), flush=True)


if __name__ == "__main__":
    main()
