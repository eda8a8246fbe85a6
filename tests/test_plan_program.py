"""The plan search's step program (podsim.plan.program) against the generator it mirrors: the same
FLOPs, HBM bytes, bytes moved per logical axis and op count as a generated trace, and the same
mesh mapping, over plans that exercise every program path (sequence parallelism, each
collective-matmul mode, recomputation, micro-batches, experts, PaLM's parallel block, slices over
the DCN). A generator change the analytic model misses fails here."""

from __future__ import annotations

import pytest

from podsim.plan.candidate import Candidate, context, program_of
from podsim.plan.estimate import layout_for
from podsim.plan.pricing import pricer
from podsim.trace.generate import generate_trace
from podsim.trace.model import Compute

C = Candidate
CASES = [
    ("llama2-70b", "tpu-v5p", C((4, 4, 8), 1, fsdp=32, tensor=4, sequence_parallel=True, collective_matmul="chunked",
                                microbatches=2, recompute="minimal")),
    ("llama2-70b", "tpu-v5p", C((4, 4, 4), 2, data=2, fsdp=16, tensor=2, recompute="full")),
    ("mixtral-8x7b", "tpu-v4", C((4, 4, 4), 1, fsdp=8, expert=8, microbatches=2)),
    ("palm-540b", "tpu-v4", C((4, 4, 8), 1, fsdp=16, tensor=8, sequence_parallel=True, collective_matmul="hidden")),
    ("gpt3-175b", "tpu-v5e", C((8, 8), 2, fsdp=16, tensor=4, sequence_parallel=True, collective_matmul="all_gather")),
    ("gpt3-175b", "tpu-v4", C((4, 4, 4), 1, data=4, fsdp=4, tensor=4, sequence_parallel=True, collective_matmul="reduce_scatter")),
]


@pytest.mark.parametrize(("model", "gen", "cand"), CASES, ids=[c[2].label() for c in CASES])
def test_program_totals_equal_the_generated_trace(model, gen, cand):
    """Per step and chip: FLOPs and HBM bytes exactly, bytes moved per logical axis exactly (the
    volumes that order the mesh), the ops the budget counts, and the mesh mapping itself."""
    overrides = {"n_layers": 4}
    ctx = context(model, gen, overrides=overrides)
    prog, _ = program_of(ctx, cand)
    trace = generate_trace(model, cand.shape, str(cand.plan), generation=gen, overrides=overrides, options=cand.options(ctx.base))
    flops = sum(op.flops for op in trace.ops if isinstance(op, Compute) and not op.bubble)
    hbm = sum(op.hbm_bytes for op in trace.ops if isinstance(op, Compute))
    assert prog.flops == pytest.approx(flops, rel=1e-12)
    assert prog.hbm_bytes == pytest.approx(hbm, rel=1e-12)
    vol = {k: v for k, v in prog.volume_per_axis().items() if v}
    assert vol == pytest.approx(trace.meta["comm_bytes_per_axis"], rel=1e-12)
    assert prog.ops == len(trace.ops)
    layout = layout_for(prog, cand.plan, cand.shape, pricer(gen, cand.shape, cand.slices, ctx.dcn))
    assert layout.mapping.describe() == trace.meta["mesh"]


def test_compute_bound_is_the_trace_compute():
    """The search's bound (the step's compute on one stream) is what the engine's compute ops add up to."""
    from podsim.perf import chip_compute
    from podsim.perf.opmodel import op_time_s
    from podsim.topology import get_generation

    model, gen, cand = CASES[0]
    ctx = context(model, gen, overrides={"n_layers": 4})
    prog, _ = program_of(ctx, cand)
    trace = generate_trace(model, cand.shape, str(cand.plan), generation=gen, overrides={"n_layers": 4}, options=cand.options(ctx.base))
    g = get_generation(gen)
    total = sum(op_time_s(op, g, chip_compute(g)) for op in trace.ops if isinstance(op, Compute))
    assert prog.compute_s == pytest.approx(total, rel=1e-9)
