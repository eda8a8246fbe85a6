"""Issue 32's multislice sweep: MaxText's v5e 16B and 128B dense decoders (MaxText/configs/v5e/16b.sh
and 128b.sh at AI-Hypercomputer/maxtext@76bd53b: the presets maxtext-16b and maxtext-128b,
per_device_batch_size 6 and 1, FSDP 256 / FSDP 16 x tensor 16 in each v5e-256 slice, and the
validation table's E-rows' own options: remat full, flash attention, the DCN all-reduce pipelined
under backward as the scripts' XLA flags ask, bf16 gradients on the wire) on 1..32 slices, as
`podsim scaling` runs them: per-chip throughput against one slice, each term of what the slices
add (podsim.study.multislice), and beside it what MaxText's v5e README measured (TFLOP/s per chip
against one slice). `--grad-bytes 4` reduces fp32 gradients instead; `--no-dcn-overlap` runs the
cross-slice all-reduce after the backward pass, exposed: the counterfactual the scripts' flags rule
out (docs/multislice.md).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_multislice_loss.py [--dcn-tiers SPEC] [--grad-bytes 4] [--no-dcn-overlap]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

from podsim.study import StepStudy
from podsim.study.scaling import scaling_study
from podsim.topology import DcnSpec
from podsim.trace.configs import get_model
from podsim.validation.maxtext_rows import MAXTEXT_ROWS, V5E, V5E_SLICES, V5E_TFLOPS

SLICES = V5E_SLICES
# MaxText/configs/v5e/README.md (maxtext@76bd53b), as the validation rows hold it: TFLOP/s per chip on
# 1, 2, 4, 8, 16, 32 x v5e-256, and each scale's per_device_batch_size and in-slice plan
MEASURED = {f"{scale}B": V5E_TFLOPS[scale] for scale in (16, 128)}
CASES = {f"{scale}B": (scale, *V5E[scale][:2]) for scale in (16, 128)}
# E16x1, E128x1: the one-slice rows' options and model overrides (the attention their measuring code ran:
# podsim.validation.maxtext_rows), held fixed over the slice counts
ROW_OPTIONS = {r.id: r.options for r in MAXTEXT_ROWS}
ROW_MODEL = {r.id: {k: v for k, v in r.overrides.items() if k != "global_batch"} for r in MAXTEXT_ROWS}
PLANNER_TIERS = "tor=48x200/2,aggregation=64x400/3,spine=256x400*8"  # docs/multislice.md's planner DCN


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dcn-tiers", default=PLANNER_TIERS, help="the DCN (a tiers spec, or 'flat' for the default leaf-spine)")
    ap.add_argument("--grad-bytes", type=int, choices=(2, 4), default=None, help="bytes per gradient element on the wire (default: the rows', 2)")
    ap.add_argument("--no-dcn-overlap", action="store_true", help="the cross-slice all-reduce after backward, exposed (a counterfactual)")
    args = ap.parse_args()
    dcn = DcnSpec() if args.dcn_tiers == "flat" else DcnSpec(tiers=args.dcn_tiers)
    print(f"DCN: {dcn.tiers.describe() if dcn.tiers else 'leaf-spine, 16 hosts per leaf, 8 spines, 1:1'}")
    for name, (scale, per_chip, plan) in CASES.items():
        cfg = get_model(f"maxtext-{scale}b", {"global_batch": per_chip * 256, **ROW_MODEL[f"E{scale}x1"]})  # the table's rows' presets
        opts = ROW_OPTIONS[f"E{scale}x1"]
        opts = replace(opts, grad_bytes=args.grad_bytes or opts.grad_bytes, overlap_dcn=opts.overlap_dcn and not args.no_dcn_overlap)
        base = StepStudy("tpu-v5e", "16x16", model=cfg, plan=plan, dcn=dcn, options=opts)
        t0 = time.process_time()
        out = scaling_study(base, SLICES, per_chip * 256)
        cpu = time.process_time() - t0
        print(f"\n{name} ({cfg.params / 1e9:.1f}B params, {plan}, {per_chip} sequences per chip, {8 * opts.grad_bytes}-bit gradients, "
              f"DCN all-reduce {'under backward' if opts.overlap_dcn else 'after backward, exposed'}); {cpu:.1f} s of CPU for the sweep")
        print(f"{'slices':>6} {'step':>9} {'per-chip':>8} {'MaxText':>8} {'loss':>9} {'DCN busy':>9} {'DCN tail':>9} {'straggler':>9} {'ECMP':>9} {'sum':>9}")
        for i, n in enumerate(SLICES):
            step = out["step_time_s"][i]
            terms = (out["dcn_tail_s"][i], out["straggler_wait_s"][i], out["ecmp_collision_s"][i])
            print(f"{n:>6} {step:>8.3f}s {out['step_time_s'][0] / step:>8.4f} {MEASURED[name][i] / MEASURED[name][0]:>8.3f} "
                  f"{step - out['step_time_s'][0]:>8.4f}s {out['dcn_busy_s'][i]:>8.4f}s " + " ".join(f"{t:>8.4f}s" for t in terms) + f" {sum(terms):>8.4f}s")


if __name__ == "__main__":
    main()
