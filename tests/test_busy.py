"""'Busy' means one thing everywhere (issue 25): the time at least one op is in flight, overlaps
counted once, so a collective kind's busy time is at most the step's communication busy time;
the ops' summed durations are `op_s`."""

from __future__ import annotations

import pytest

from podsim.engine import simulate_step, step_summary
from podsim.topology import build_slice
from podsim.trace import StepTrace
from podsim.trace.model import Collective, Compute, parse_group

MiB = 2**20


def test_overlapping_ops_of_one_kind_count_once():
    """Two all-reduces on different axes at once, then a third: all_reduce busy = the union of
    their intervals <= comm_s, while op_s adds the three durations."""
    trace = StepTrace((
        Compute("c", 1e-4),
        Collective("a", "all_reduce", 256 * MiB, parse_group("x"), deps=("c",)),
        Collective("b", "all_reduce", 256 * MiB, parse_group("y"), deps=("c",)),
        Collective("d", "all_reduce", 64 * MiB, parse_group("z"), deps=("a", "b")),
    ), name="overlap")
    r = simulate_step(trace, build_slice("tpu-v4", "4x4x4"))
    s = step_summary(r, trace)
    ar = s["collectives"]["all_reduce"]
    spans = {t.id: (t.start_s, t.end_s) for t in r.timeline}
    (a0, a1), (b0, b1), (d0, d1) = spans["a"], spans["b"], spans["d"]
    assert a0 == b0 and d0 >= max(a1, b1)  # a and b overlap; d follows them
    union = max(a1, b1) - a0 + (d1 - d0)
    assert ar["busy_s"] == pytest.approx(union, rel=1e-12) and ar["busy_s"] == pytest.approx(s["comm_s"], rel=1e-12)
    assert ar["op_s"] == pytest.approx((a1 - a0) + (b1 - b0) + (d1 - d0), rel=1e-12)
    assert ar["op_s"] > 1.5 * ar["busy_s"] * 0.9
    assert all(k["busy_s"] <= s["comm_s"] * (1 + 1e-12) for k in s["collectives"].values())
