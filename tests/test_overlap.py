"""XLA-style overlap switches: flipping each moves the step time in the direction and by the
amount the DAG implies.

Turning an overlap off puts every op it governs on the critical path, so the step grows by
at most their busy time and by at least that busy time less whatever was already exposed
with the overlap on (the whole exposed communication bounds it).
"""

from __future__ import annotations

import pytest

from podsim.engine import simulate_step, step_summary
from podsim.engine.core import simulate_jobs
from podsim.engine.jobs import Job, place_slices
from podsim.topology import build_slice
from podsim.trace import generate_trace
from podsim.trace.generate import GenerateOptions

MODEL = {"n_layers": 4, "global_batch": 512, "seq_len": 1024}
TOL = 1e-6


def _run(plan: str, slices: int = 1, shape: str = "4x4x4", **switches):
    t = generate_trace("gpt3-175b", shape, plan, generation="tpu-v4", overrides=MODEL, options=GenerateOptions(**switches))
    if slices > 1:
        fabric, sl = place_slices("tpu-v4", shape, slices)
        r = simulate_jobs([Job(t, fabric, sl)])[0]
    else:
        r = simulate_step(t, build_slice("tpu-v4", shape))
    return r, step_summary(r, t)


def _busy(result, pick) -> float:
    return sum(op.duration_s for op in result.timeline if op.step == 0 and op.kind != "compute" and pick(op))


def _union(intervals):
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def _exposed(result, pick) -> float:
    """Wall time during which some picked op runs and no other op does, compute or
    communication (step 0): the picked ops' own share of the critical path. A picked op that
    runs beside a blocking collective is not on the path by itself: serialising it adds its
    whole time."""
    ops = [op for op in result.timeline if op.step == 0]
    comp = _union((op.start_s, op.end_s) for op in ops if op.kind == "compute" or not pick(op))
    total = 0.0
    for s, e in _union((op.start_s, op.end_s) for op in ops if op.kind != "compute" and pick(op)):
        total += (e - s) - sum(max(0.0, min(e, ce) - max(s, cs)) for cs, ce in comp)
    return total


def _check_growth(on, off, pick):
    r_on, s_on = on
    r_off, _ = off
    growth = r_off.step_time_s - r_on.step_time_s
    busy = _busy(r_off, pick)
    assert busy > 0
    assert busy - s_on["exposed_comm_s"] - TOL <= growth <= busy + TOL
    return growth, busy


def test_dcn_overlap_off_grows_the_step_by_the_dcn_busy_time():
    """Other things equal (in-slice reductions blocking in both runs), switching DCN overlap off
    adds the DCN all-reduces to the critical path."""
    on = _run("fsdp=64,dcn=2", slices=2, overlap_grad_reduce=False)
    off = _run("fsdp=64,dcn=2", slices=2, overlap_grad_reduce=False, overlap_dcn=False)
    dcn = lambda op: "dcn" in op.group.split(",")  # noqa: E731
    growth, busy = _check_growth(on, off, dcn)
    # the busy time less the part already alone on the critical path (the last layers'
    # reductions); 2% for overlapped reductions that ran together and shared the DCN links
    assert growth == pytest.approx(busy - _exposed(on[0], dcn), rel=0.02)


def test_fsdp_prefetch_off_exposes_the_gathers():
    growth, busy = _check_growth(_run("fsdp=64"), _run("fsdp=64", overlap_fsdp_prefetch=False),
                                 lambda op: op.name.startswith("FSDP gather"))
    assert growth > 0.5 * busy


def test_grad_reduce_overlap_off_exposes_the_reduce_scatters():
    growth, busy = _check_growth(_run("fsdp=64"), _run("fsdp=64", overlap_grad_reduce=False),
                                 lambda op: op.kind == "reduce_scatter")
    assert growth > 0.5 * busy


def test_hidden_collective_matmul_bound_hides_tensor_parallel_collectives():
    """The ideal extreme: each tensor-parallel collective beside the next compute op (a Megatron
    all-reduce program, so the tensor-parallel ops are the only ones that move)."""
    r_off, _ = _run("fsdp=16,tensor=4", collective_matmul="exposed", sequence_parallel=False)
    r_on, _ = _run("fsdp=16,tensor=4", collective_matmul="hidden", sequence_parallel=False)
    tp_busy = _busy(r_off, lambda op: op.name.startswith("tensor-parallel"))
    saved = r_off.step_time_s - r_on.step_time_s
    assert 0.5 * tp_busy < saved <= tp_busy + TOL
