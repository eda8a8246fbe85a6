"""Why a plan loses to the best: the part of the step where it spends most more time.

Both plans' analytic estimates are split the same way (`Estimate.components`: matmul compute,
memory-bound compute, recomputation, each logical axis's exposed communication with its level),
and the largest difference is named with its size; plans within TIE of the best are said to tie.
"""

from __future__ import annotations

from podsim.plan.candidate import Assessed
from podsim.units import format_seconds

TIE = 0.001
"""Plans whose steps differ by less than this fraction are said to tie (the estimate's own
resolution is coarser: docs/plan.md gives its measured error)."""

_AXIS = {"tensor": "tensor-parallel", "fsdp": "FSDP", "data": "data-parallel", "expert": "expert (all-to-all)",
         "dcn": "across-slice (DCN)"}


def axis_words(label: str, level: str) -> str:
    """'data+dcn', 'dcn' -> 'data-parallel + across-slice (DCN) communication'."""
    words = " + ".join(_AXIS.get(a, a) for a in label.split("+"))
    if level == "dcn" and "DCN" not in words:
        words += " (DCN)"
    return f"{words} communication"


def components(a: Assessed) -> dict[str, float]:
    """The estimate's parts, communication named by axis and level."""
    e = a.estimate
    out = {"matmul compute": max(e.compute_s - e.recompute_s - e.memory_bound_s, 0.0),
           "memory-bound compute": e.memory_bound_s, "recomputation": e.recompute_s}
    for label, sec in e.exposed_s.items():
        out["exposed " + axis_words(label, e.label_level.get(label, "ici"))] = sec
    if e.straggler_s:
        out["waiting for the slowest slice"] = e.straggler_s
    return out


def why_loses(a: Assessed, best: Assessed, step_s: float | None = None, best_step_s: float | None = None) -> str:
    """One line: how much slower `a` is than `best` and the part that makes most of it (`step_s`,
    `best_step_s`: the engine's steps when both were confirmed; else the estimates)."""
    if a is best:
        return "best"
    s, b = (step_s, best_step_s) if step_s is not None and best_step_s is not None else (a.estimate.step_s, best.estimate.step_s)
    if s <= b * (1 + TIE):
        return "ties the best (within 0.1%)"
    ca, cb = components(a), components(best)
    diff = {k: ca.get(k, 0.0) - cb.get(k, 0.0) for k in ca.keys() | cb.keys()}
    part, d = max(diff.items(), key=lambda kv: kv[1])
    what = part
    if part == "recomputation":
        what = f"recomputation (remat {a.candidate.recompute})"
    elif part == "matmul compute" and a.candidate.tensor != best.candidate.tensor:
        what = "matmul compute (smaller, tile-padded matmuls)"
    return f"+{format_seconds(s - b)} ({s / b - 1:+.1%}): most of it {what}, +{format_seconds(d)}"
