"""The analytic estimate against the engine it stands in for, and its closed-form collectives
against podsim.collectives' own: the plan search trusts the ranking where these hold."""

from __future__ import annotations

import pytest

from podsim.collectives import plan_collective
from podsim.collectives.groups import group_layout
from podsim.plan.candidate import Candidate, assess, context
from podsim.plan.overlap import Flight, Job
from podsim.plan.pricing import pricer
from podsim.study import StepStudy, run_study
from podsim.topology import DcnSpec
from podsim.trace.model import parse_group

C = Candidate


@pytest.mark.parametrize(("gen", "shape", "slices", "group"), [
    ("tpu-v5p", (4, 4, 8), 1, "x:2:2,y,z"), ("tpu-v5p", (4, 4, 8), 1, "z"), ("tpu-v4", (4, 4, 4), 2, "dcn"),
    ("tpu-v5e", (8, 8), 2, "x,y"),
])
def test_pricer_is_the_closed_form_auto_takes(gen, shape, slices, group):
    """Affine per algorithm, mirrored kinds (all-gather = reduce-scatter, all-reduce = 2x): the
    pricer's time is plan_collective('auto')'s closed form within 2% at any size (exact on rings
    and direct patterns; torus_all_links' phases are affine only per slowest flow)."""
    p = pricer(gen, shape, slices, DcnSpec())
    p.time_s("reduce_scatter", group, 1.0)  # builds the placement
    layout = group_layout(p._views, parse_group(group))
    for kind in ("reduce_scatter", "all_gather", "all_reduce"):
        for nbytes in (3e5, 4e7, 7e8):
            ref = plan_collective(kind, layout, nbytes, "auto", p._pool).closed_form_s
            assert p.time_s(kind, group, nbytes) == pytest.approx(ref, rel=0.02), (kind, nbytes)


def test_flight_shares_axes_equally():
    """Three collectives starting together on one axis each run at a third of it until the first
    ends (a chain collective of 1 s with two 3 s ones beside it ends at 3 s; they, halving the
    axis from then, at 7 s)."""
    f = Flight()
    a, b = Job(frozenset("x"), 3.0, "fsdp"), Job(frozenset("x"), 3.0, "fsdp")
    f.start(a, 0.0)
    f.start(b, 0.0)
    assert f.run_chain(frozenset("x"), 1.0, 0.0) == pytest.approx(3.0)
    assert f.wait(a) == pytest.approx(7.0) and f.wait(b) == pytest.approx(7.0)  # 1 s done by 3 s, then halves
    assert f.run_chain(frozenset("y"), 1.0, 5.0) == pytest.approx(6.0)  # alone on its axis


ENGINE_CASES = [
    ("llama2-70b", "tpu-v5p", C((4, 4, 8), 1, fsdp=32, tensor=4, sequence_parallel=True, collective_matmul="all_gather")),
    ("llama2-70b", "tpu-v5p", C((4, 4, 8), 1, fsdp=64, tensor=2, microbatches=2)),
    ("mixtral-8x7b", "tpu-v4", C((4, 4, 4), 1, fsdp=8, expert=8)),
    ("gpt3-175b", "tpu-v4", C((4, 4, 4), 2, data=4, fsdp=16, recompute="full")),
]


@pytest.mark.parametrize(("model", "gen", "cand"), ENGINE_CASES, ids=[c[2].label() for c in ENGINE_CASES])
def test_estimate_within_10_percent_of_the_engine(model, gen, cand):
    """Build 5's bound on confirmed plans, on small steps of each kind: tensor parallelism under
    FSDP gathers (axes shared), micro-batches, experts' all-to-all, slices over the DCN. The
    compute is the engine's exactly; the estimate's step is within 10% (measured: within 3%)."""
    overrides = {"n_layers": 4, "global_batch": 128}
    ctx = context(model, gen, overrides=overrides)
    a = assess(ctx, cand)
    assert a.estimate is not None, a.refused
    r = run_study(StepStudy(gen, cand.shape, model=model, model_overrides=overrides, plan=cand.parallelism,
                            slices=cand.slices, options=cand.options(ctx.base)))
    assert a.estimate.compute_s == pytest.approx(r.compute_s, rel=1e-6)
    assert a.estimate.step_s == pytest.approx(r.step_time_s, rel=0.10)
    assert a.estimate.step_s >= a.estimate.compute_s
