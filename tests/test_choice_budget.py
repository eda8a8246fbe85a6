"""`auto` never takes an algorithm the engine cannot then simulate.

Pricing folds a candidate by its own patterns' symmetry; the step's router folds only by what
every pattern of the step shares. On a tpu-v5e 8x16 slice (x an open line, y a ring of 16), a
small all-reduce over x,y picks `direct` (its 16,256 all-pairs flows priced as 2,032 under y's
translations), but a snake ring in the same step (or the fast path off) leaves the step no
translation, so the engine would route all 16,256 at once. Under a 10,000-flow budget the
collective must fall back to the fastest candidate that fits, say so, and simulate exactly as
that algorithm asked by name; with none left, the budget error stands."""

from __future__ import annotations

import numpy as np
import pytest

from podsim.bounds import budgets
from podsim.collectives import ALGORITHMS, plan_collective
from podsim.collectives.fabricroutes import Placement
from podsim.collectives.groups import group_layout
from podsim.collectives.patterns import xor_pattern
from podsim.collectives.routes import RouterPool
from podsim.engine import simulate_step
from podsim.errors import PodsimError
from podsim.topology import build_slice
from podsim.trace import StepTrace
from podsim.trace.model import Collective, Compute, parse_group

SMALL = 8 * 1024
BUDGET = 10_000


@pytest.fixture(scope="module")
def built():
    return build_slice("tpu-v5e", "8x16")


def _trace(small: str = "auto", breaker: str | None = "ring") -> StepTrace:
    """A small all-reduce over x,y and (unless None) a 1 MiB one asked as `breaker`."""
    ops = [Compute("fwd", flops=1e9), Collective("small", "all_reduce", SMALL, parse_group("x,y"), small, deps=("fwd",))]
    if breaker is not None:
        ops.append(Collective("big", "all_reduce", 2**20, parse_group("x,y"), breaker, deps=("fwd",)))
    return StepTrace(tuple(ops))


def _algorithm(result, op: str) -> str:
    return next(t.algorithm for t in result.timeline if t.id == op)


def _fallback(built) -> str:
    """The fastest candidate but `direct` by the closed forms `auto` prices (ties: ALGORITHMS order)."""
    pool = RouterPool(Placement(built.fabric, (built.view,), "dimension_order"))
    plan = plan_collective("all_reduce", group_layout((built.view,), parse_group("x,y")), SMALL, "auto", pool)
    assert plan.schedule.algorithm == "direct"  # the premise: direct wins when simulable
    rest = {a: t for a, t in plan.candidates_s.items() if a != "direct"}
    return min(rest, key=lambda a: (rest[a], ALGORITHMS.index(a)))


@pytest.mark.parametrize("breaker, fast_path", [("ring", True), (None, False)])
def test_auto_falls_back_to_the_fastest_candidate_the_step_can_route(built, breaker, fast_path):
    with budgets(flows=10**6):
        free = simulate_step(_trace(breaker=breaker), built, fast_path=fast_path)
    assert _algorithm(free, "small") == "direct"  # within the budget nothing changes
    expected = _fallback(built)
    with budgets(flows=BUDGET):
        r = simulate_step(_trace(breaker=breaker), built, fast_path=fast_path)
        asked = simulate_step(_trace(small=expected, breaker=breaker), built, fast_path=fast_path)
    assert _algorithm(r, "small") == expected
    why = next(w for k, w in r.algorithm_choices.items() if k.startswith("all_reduce x,y 8 KiB"))
    assert why.startswith(f"{expected}: fastest by closed form of those this step can simulate")
    assert "direct (" in why and "all pairs: 16,256 flows > 10,000" in why and "\n" not in why
    assert r.step_time_s == asked.step_time_s  # the fallback is that algorithm, simulated as asked


def test_a_named_algorithm_or_no_candidate_left_keeps_the_budget_error(built):
    with budgets(flows=BUDGET), pytest.raises(PodsimError, match=r"^all pairs on group x,y: 16,256 flows, over the budget"):
        simulate_step(_trace(small="direct"), built)
    # unfolded, every all-reduce pattern over the 128 chips has 128 flows or more: none fits 127,
    # so the engine's error for the first choice stands (one line)
    with budgets(flows=127), pytest.raises(PodsimError, match=r"^[^\n]* on group x,y: 128 flows, over the budget of 127 "
                                                               r"flows [^\n]*--max-flows N$"):
        simulate_step(_trace(breaker=None), built, fast_path=False)


def test_the_top_bit_exchange_of_a_ring_axis_keeps_every_translation(built):
    """r XOR g/2 along an axis of g ranks is r + g/2 mod g: every shift keeps it, so a step of
    halving-doubling on the 16-ring still folds (periods x 8 (a line), y 8: bit 5's 8), and the
    folded step agrees with every flow simulated."""
    lay = group_layout((built.view,), parse_group("x,y"))
    top = xor_pattern(lay, 6)  # x holds bits 0-2, y bits 3-6
    assert top.periods == (1, 1)
    idx = lay.rank_index()
    idx[:, 1] = (idx[:, 1] + 1) % 16
    moved = lay.rank_of(idx)
    src, dst = np.arange(lay.p), np.arange(lay.p) ^ (1 << 6)
    assert set(zip(moved[src].tolist(), moved[dst].tolist(), strict=True)) == set(zip(src.tolist(), dst.tolist(), strict=True))
    tr = StepTrace((Collective("hd", "all_reduce", 2**20, parse_group("x,y"), "halving_doubling"),
                    Collective("y", "all_reduce", 2**18, parse_group("y"), "ring")))
    fast, full = simulate_step(tr, built), simulate_step(tr, built, fast_path=False)
    assert fast.flows_simulated * 2 == full.flows_simulated  # 16 / 8: two translates of y
    np.testing.assert_allclose([t.end_s for t in fast.timeline], [t.end_s for t in full.timeline], rtol=1e-9)
    np.testing.assert_allclose(fast.link_bytes, full.link_bytes, rtol=1e-9)
