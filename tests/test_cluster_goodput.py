"""The v4 paper's Fig. 4: exact slice counts, a closed form for OCS, and the paper's points."""

from __future__ import annotations

import math

import numpy as np
import pytest

from podsim.cluster import goodput as gp
from podsim.cluster.goodput import FIG4_SHAPES, fig4_goodput, fitting_slices, goodput_table
from podsim.errors import PodsimError
from podsim.placement import PodState, SolverParams
from podsim.placement.place import count_fitting


def failed_state(ocs: bool, hosts) -> PodState:
    state = PodState.empty("tpu-v4", ocs=ocs)
    state.fail(hosts=hosts)
    return state


@pytest.mark.parametrize("ocs", [True, False])
def test_exact_counts_match_the_placement_solvers(ocs):
    """Every Fig. 4 shape, on random failed-host patterns: the fast exact counts equal the
    placement package's count_fitting (CP-SAT packings for static boxes, greedy for the aligned
    sub-cube positions that tile a cube)."""
    rng = np.random.default_rng(11)
    for p in (0.005, 0.01, 0.02, 0.04):
        state = failed_state(ocs, np.flatnonzero(rng.random(1024) < p))
        for shape in FIG4_SHAPES:
            sub = math.prod(int(v) for v in shape.split("x")) < 64
            ref = count_fitting(state, shape, solver="greedy" if sub else "cpsat", params=SolverParams(time_limit=20))
            assert fitting_slices(state, shape) == ref, (ocs, p, shape)


def test_branch_and_bound_falls_back_to_cpsat(monkeypatch):
    state = failed_state(False, [16 * 21, 16 * 42, 16 * 5])
    exact = fitting_slices(state, "4x8x8")
    monkeypatch.setattr(gp, "NODE_BUDGET", 3)
    assert fitting_slices(state, "4x8x8") == exact == count_fitting(state, "4x8x8")


def test_ocs_goodput_matches_the_binomial_closed_form():
    """With OCS a cube-level slice needs any k healthy cubes; a cube is healthy when its 16 hosts
    are: E[goodput] = E[floor(X / k)] k / 64 with X ~ Binomial(64, A^16)."""
    trials = 300
    pts = fig4_goodput(shapes=("8x8x8", "8x8x16", "12x16x16"), availabilities=(0.99, 0.999), trials=trials,
                       seed=3, wiring=(True,))
    for p in pts:
        q = p.availability ** 16
        k = p.chips // 64
        expected = sum(math.comb(64, x) * q**x * (1 - q) ** (64 - x) * (x // k) for x in range(65)) * k / 64
        assert abs(p.goodput - expected) <= 4 * p.stderr + 1e-3, p


@pytest.mark.slow  # Monte Carlo over every Fig. 4 shape: in make test, not make check
def test_fig4_reproduces_the_papers_points():
    pts = fig4_goodput(trials=120, seed=0)
    g = {(p.shape, p.availability, p.ocs): p.goodput for p in pts}
    for a in (0.99, 0.995):  # av.5-av.7: 1K about 75%, one 2K slice 50%, one 3K slice 75%
        assert 0.72 <= g[("8x8x16", a, True)] <= 0.77
        assert g[("8x16x16", a, True)] == pytest.approx(0.50, abs=0.005)
        assert 0.72 <= g[("12x16x16", a, True)] <= 0.76
    # av.3: without OCS, 99.9% host availability is needed for reasonable goodput
    assert g[("8x8x16", 0.99, False)] < 0.3 and g[("12x16x16", 0.995, False)] < 0.1
    assert all(g[(s, 0.999, False)] > 0.8 for s in ("4x4x4", "4x8x8", "8x8x8", "8x8x16"))
    # OCS is never worse than static wiring, and both equal for slices inside a cube
    assert all(g[(s, a, True)] >= g[(s, a, False)] - 1e-12 for s, a, _ in g)
    assert all(g[("2x2x4", a, True)] == g[("2x2x4", a, False)] for a in (0.99, 0.995, 0.999))
    assert fig4_goodput(trials=120, seed=0) == pts
    header, rows = goodput_table(pts)
    assert header[:3] == ["slice", "chips", "99.0% OCS"] and len(rows) == len(FIG4_SHAPES)


def test_bad_inputs():
    with pytest.raises(PodsimError, match="has no OCS"):
        fig4_goodput("tpu-v5e")
    with pytest.raises(PodsimError, match="trials 0"):
        fig4_goodput(trials=0)
    with pytest.raises(PodsimError, match="availability 1.5"):
        fig4_goodput(availabilities=(1.5,))


@pytest.mark.slow  # Monte Carlo over every Fig. 4 shape: in make test, not make check
def test_fig4_script_prints_its_stored_output(capsys):
    """scenarios/fig4_goodput.py, small and seeded, prints exactly the stored tables."""
    import runpy
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    script = runpy.run_path(str(root / "scenarios" / "fig4_goodput.py"))
    script["main"](["--trials", "40", "--days", "2"])
    out = [line for line in capsys.readouterr().out.splitlines() if not line.startswith("(wall time")]
    assert out == (root / "tests" / "data" / "fig4_goodput_quick.md").read_text().splitlines()
