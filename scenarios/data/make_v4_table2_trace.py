"""Build the TPU v4 Table-2 sample trace: the v4 paper's slice mix with public job durations.

    .venv/bin/python scenarios/data/make_v4_table2_trace.py [ELASTICFLOW_CSV] [--jobs N] [--seed S]

Shapes: drawn (numpy default_rng(seed)) from the slice popularity of [ISCA23] Table 2
(`podsim.workload.popularity.V4_SLICE_POPULARITY`, hardware.md slc.4-slc.7; `_T` twisted, `_NT` the same
shape plain). Submission times and durations: the first N jobs, in submission order, of
microsoft/elasticflow-traces cluster01.csv (MIT licence, LICENSE.elasticflow beside this file),
as shipped in the team's shared data folder. `num_gpu` is the chip count of the drawn shape (so
the replay checks the two agree), not ElasticFlow's GPU count. Writes the CSV to stdout.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from pathlib import Path

import numpy as np

from podsim.workload.popularity import V4_SLICE_POPULARITY

_PARTS = ("shared", "data", "traces", "elasticflow", "cluster01.csv")
DEFAULT = next((p.joinpath(*_PARTS) for p in Path(__file__).resolve().parents if p.joinpath(*_PARTS).exists()),
               Path("..").joinpath(*_PARTS))  # the nearest ancestor's shared/data (a worktree sits one level deeper)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", nargs="?", type=Path, default=DEFAULT)
    ap.add_argument("--jobs", type=int, default=120)
    ap.add_argument("--seed", type=int, default=2023)
    args = ap.parse_args()
    with args.trace.open(newline="") as f:
        rows = sorted(csv.DictReader(f), key=lambda r: (float(r["submission_time"]), r["job_id"]))[: args.jobs]
    names = list(V4_SLICE_POPULARITY)
    p = np.array([V4_SLICE_POPULARITY[n] for n in names])
    rng = np.random.default_rng(args.seed)
    drawn = rng.choice(len(names), size=len(rows), p=p / p.sum())
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(["job_id", "submission_time", "duration", "shape", "num_gpu"])
    for k, (row, i) in enumerate(zip(rows, drawn, strict=True)):
        name = names[i].removesuffix("_NT")
        chips = math.prod(int(v) for v in name.removesuffix("_T").split("x"))
        out.writerow([f"v4-{k:04d}", row["submission_time"], row["duration"], name, chips])


if __name__ == "__main__":
    main()
