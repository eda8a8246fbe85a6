"""The MLPerf rows of the validation table (podsim/validation/mlperf_rows.py): check they run, and
re-derive their step times from the results repositories.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/mlperf_rows.py check
        each row's study builds (no engine run): recompute policy, HBM per chip against the chip,
        whether its plan fits HBM under podsim's memory model (a row that does not may validate,
        never calibrate)
    PYTHONPATH=$PWD .venv/bin/python benchmarks/mlperf_rows.py intervals DIR [STEPS] [--blocks]
        DIR: a result folder of a checkout of mlcommons/training_results_vX.Y at the commit a row
        cites (e.g. .../Google/results/tpu-v4-128-TF/resnet); prints the median interval between
        eval points (--blocks: training-only blocks), its count and quartiles, and / STEPS

Example: R07-resnet-64 is `intervals <v0.7 checkout>/Google/results/tpu-v4-128-TF/resnet 625`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from podsim.study.study import study_trace
from podsim.topology import get_generation
from podsim.trace.memory import fits_hbm
from podsim.validation.mlperf_rows import MLPERF_ROWS
from podsim.validation.mlperf_rows_logs import eval_intervals, pooled, training_blocks
from podsim.validation.row import row_chips
from podsim.validation.table import fitting_study


def check() -> None:
    print(f"{'row':22} {'chips':>6} {'plan':26} {'recompute':9} {'HBM/chip':>10} {'of':>8}  fits")
    over = []
    for row in MLPERF_ROWS:
        trace = study_trace(fitting_study(row))
        need = trace.meta["hbm_footprint"]["total_bytes"]
        cap = get_generation(row.generation).hbm_per_chip.si
        fits = fits_hbm(need, cap)
        over += [] if fits else [row.id]
        print(f"{row.id:22} {row_chips(row):>6} {row.plan:26} {trace.meta['recompute']:9} {need / 2**30:7.1f} GiB {cap / 2**30:5.1f} GiB  {'yes' if fits else 'NO'}")
    print(f"{len(MLPERF_ROWS)} rows build; over HBM under podsim's memory model: {', '.join(over) or 'none'}")


def intervals(folder: Path, steps: int | None, blocks: bool) -> None:
    files = sorted(folder.glob("result_*.txt"))
    if not files:
        sys.exit(f"no result_*.txt in {folder}")
    texts = [f.read_text() for f in files]
    p = pooled(training_blocks(texts) if blocks else eval_intervals(texts))
    what = "training blocks" if blocks else "intervals between eval points"
    print(f"{folder}: {len(files)} runs; median {p.median_s:.4f} s over {p.n} {what} (IQR {p.q1_s:.4f}-{p.q3_s:.4f} s)"
          + (f"; / {steps} steps = {p.step_s(steps):.6g} s per step" if steps else ""))


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if args[:1] == ["check"]:
        check()
    elif args[:1] == ["intervals"] and len(args) in (2, 3):
        intervals(Path(args[1]), int(args[2]) if len(args) == 3 else None, "--blocks" in sys.argv)
    else:
        sys.exit(__doc__)
