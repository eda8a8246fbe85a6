"""A multislice scaling study: one model's step on 1, 2, 4, ... slices (weak scaling: the
batch per slice fixed), with step time, MFU, the DCN / WAN busy and exposed time, and the
parallel efficiency step(1 slice) / step(N slices)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from podsim.engine import build_job, simulate_step, step_summary
from podsim.errors import PodsimError
from podsim.topology import DcnSpec, get_generation
from podsim.trace import generate_trace

COLUMNS = ("slices", "chips", "global_batch", "step_time_s", "mfu", "parallel_efficiency", "compute_s",
           "exposed_comm_s", "ici_exposed_s", "dcn_busy_s", "dcn_exposed_s", "wan_busy_s", "wan_exposed_s",
           "engine_wall_s")


def scaling_study(model: str, generation: str, shape: str, plan: str, slices: Sequence[int], batch_per_slice: int, *,
                  dcn: DcnSpec | None = None, overrides: Mapping[str, object] | None = None,
                  compute_efficiency: float | None = None) -> dict[str, list]:
    """One row per slice count (a column table, COLUMNS). `plan` is the parallelism inside a
    slice (no dcn: the study adds dcn=N). With `dcn.sites` > 1, counts below the site count
    are skipped."""
    if re.search(r"\bdcn\b|\bslices\b", plan):
        raise PodsimError(f"parallelism {plan!r}: leave dcn out; the study sets dcn to each slice count")
    counts = sorted({int(n) for n in slices})
    if not counts or counts[0] < 1:
        raise PodsimError(f"slice counts {list(slices)}: give whole numbers >= 1, e.g. 1,2,4,8")
    if batch_per_slice < 1:
        raise PodsimError(f"batch per slice {batch_per_slice}: give a whole number >= 1")
    gen = get_generation(generation)
    sites = dcn.sites if dcn is not None else 1
    kw = {} if compute_efficiency is None else {"compute_efficiency": compute_efficiency}
    rows: list[dict] = []
    for n in counts:
        if n < sites or n % sites:
            continue
        over = {**dict(overrides or {}), "global_batch": batch_per_slice * n}
        trace = generate_trace(model, shape, f"{plan},dcn={n}", generation=gen, overrides=over)
        job = build_job(trace, gen, shape, n, dcn=dcn)
        r = simulate_step(None, job, **kw)
        s = step_summary(r, trace)
        rows.append({"slices": n, "chips": int(trace.meta["chips"]), "global_batch": batch_per_slice * n,
                     **{c: s.get(c, float("nan")) for c in COLUMNS if c not in ("slices", "chips", "global_batch", "parallel_efficiency")}})
    if not rows:
        raise PodsimError(f"no slice count in {counts} splits evenly over {sites} sites")
    base = rows[0]["step_time_s"]
    for row in rows:  # weak scaling: ideal is the smallest count's step time
        row["parallel_efficiency"] = base / row["step_time_s"] if row["step_time_s"] > 0 else float("nan")
    return {c: [row[c] for row in rows] for c in COLUMNS}
