"""Benchmark: an hour of serving traffic at 10 requests/s on one slice, for a matrix of models,
slices and batch policies; wall time of each simulation (target: under 30 s each).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_serving.py             # every row
    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_serving.py --rows 0 2  # some rows
    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_serving.py --duration 600 --profile

Prompt and output lengths are resampled from the shipped Azure conversation trace (mean 1,033
prompt and 246 output tokens in its first ten minutes), arrivals Poisson at 10/s (seed 1). Each
row prints the simulation's wall time (the step timer's engine runs included: they are part of
a cold run), the steps it simulated and its key figures, so a row that is fast because it
simulated little shows it.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time

from podsim.serving import ServingConfig, simulate_serving

TARGET_S = 30.0
LLAMA3_8B = {"name": "llama3-8b", "n_layers": 32, "d_model": 4096, "n_heads": 32, "n_kv_heads": 8, "d_ff": 14336,
             "vocab": 128256, "seq_len": 8192}  # Meta's released config.json for Llama-3-8B
LLAMA32_1B = {"name": "llama3.2-1b", "n_layers": 16, "d_model": 2048, "n_heads": 32, "n_kv_heads": 8, "d_ff": 8192,
              "vocab": 128256, "seq_len": 8192, "tied_embeddings": True}  # Meta's released config.json for Llama-3.2-1B

ROWS = (
    ("llama2-70b bf16, v6e 2x4, chunked", "tpu-v6e", "2x4", {"model": "llama2-70b"}, {}),
    ("llama2-70b int8, v5e 4x4, chunked", "tpu-v5e", "4x4", {"model": "llama2-70b", "precision": {"weights": "int8"}}, {}),
    ("llama2-70b bf16, v6e 2x4, separate prefill", "tpu-v6e", "2x4", {"model": "llama2-70b"}, {"prefill": "separate"}),
    ("llama2-70b bf16, v6e 2x4, paged 4k budget", "tpu-v6e", "2x4", {"model": "llama2-70b"}, {"token_budget": 4096, "max_seqs": 512}),
    ("mixtral-8x7b bf16, v5e 2x4 (expert 8)", "tpu-v5e", "2x4", {"model": "mixtral-8x7b", "expert": 8, "tensor": 1}, {}),
    ("llama3-8b dims bf16, v5e 2x2, chunked", "tpu-v5e", "2x2", {"dims": LLAMA3_8B}, {}),
    ("llama3-8b dims bf16, v5e 2x2, static 8", "tpu-v5e", "2x2", {"dims": LLAMA3_8B}, {"kind": "static", "max_batch": 8, "max_wait": 0.5, "kv": "reserve"}),
    # Saxml's dense prefill holds a layer's logits for the batch at its longest prompt (Azure's reach ~7,900 tokens):
    # 8 such prompts need 28 GB a chip of a 16 GB v5e, so the batch is 2
    ("llama3-8b dims bf16, v5e 2x2, saxml 2", "tpu-v5e", "2x2", {"dims": LLAMA3_8B},
     {"kind": "static", "batcher": "saxml", "max_batch": 2, "batch_sizes": [2], "max_wait": 0.5, "max_live_batches": 6, "kv": "reserve"}),
    ("llama3.2-1b dims bf16, v5e 1x1, chunked", "tpu-v5e", "1x1", {"dims": LLAMA32_1B}, {}),
)


def config(row, duration: float) -> ServingConfig:
    _, gen, shape, model, batch = row
    return ServingConfig.model_validate({
        "generation": gen, "slice": shape, "model": model, "batch": batch, "duration": duration, "seed": 1,
        "requests": {"arrivals": {"kind": "poisson", "rate": "10/s"}, "trace": "azure-conv",
                     "prompt": {"kind": "trace"}, "output": {"kind": "trace"}}})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="*", default=None)
    ap.add_argument("--duration", type=float, default=3600.0, help="seconds of traffic (default an hour)")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args(argv)
    rows = [ROWS[i] for i in args.rows] if args.rows else list(ROWS)
    print(f"{'row':46} {'wall':>7} {'steps':>8} {'reqs':>7} {'done':>7} {'TTFT p99':>9} {'TPOT p99':>9} {'tok/s/chip':>10}")
    worst = 0.0
    for row in rows:
        cfg = config(row, args.duration)
        prof = cProfile.Profile() if args.profile else None
        t0 = time.perf_counter()
        if prof:
            prof.enable()
        r = simulate_serving(cfg)
        if prof:
            prof.disable()
        wall = time.perf_counter() - t0
        worst = max(worst, wall)
        m = r.metrics
        print(f"{row[0]:46} {wall:6.1f}s {m['serving_steps']:8,} {m['requests']:7,} {m['requests_completed']:7,} "
              f"{m['ttft_p99_s']:8.3g}s {m['tpot_p99_s']:8.3g}s {m['tokens_per_s_per_chip']:10.1f}", flush=True)
        if prof:
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(15)
            print(out.getvalue())
    print(f"\nslowest row {worst:.1f} s (target {TARGET_S:.0f} s); machine shared with other work")
    return 0 if worst <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
