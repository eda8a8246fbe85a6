"""Golden test of the worked scaling scenario (scenarios/h_multislice_scaling.yaml): its scaling
table and `scaling_*` figures must equal scenarios/expected/h_multislice_scaling.json within a
relative tolerance of 1e-3, and its answer must hold on its own terms (the 4-slice row is the
step study; more slices only add DCN time; efficiency is step(1) / step(N)).

Regenerate after a deliberate model change with
    PODSIM_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_scaling_golden.py
"""

from __future__ import annotations

from pathlib import Path

import pytest

from podsim.scenario import load_scenario, run_scenario
from tests.helpers import check_golden

ROOT = Path(__file__).resolve().parent.parent / "scenarios"
EXPECTED = ROOT / "expected" / "h_multislice_scaling.json"
COLUMNS = ("slices", "chips", "global_batch", "step_time_s", "mfu", "parallel_efficiency", "compute_s", "exposed_comm_s",
           "dcn_busy_s", "dcn_exposed_s", "wan_busy_s")
pytestmark = pytest.mark.golden


@pytest.fixture(scope="module")
def result():
    return run_scenario(load_scenario(ROOT / "h_multislice_scaling.yaml"))


def key_figures(r) -> dict:
    t = r.table("scaling")
    return {"metrics": {k: v for k, v in r.metrics.items() if k.startswith("scaling_")},
            "rows": [{c: t[c][i].item() for c in COLUMNS} for i in range(len(t["slices"]))]}


def test_matches_expected(result):
    check_golden(key_figures(result), EXPECTED, "h_multislice_scaling", rel_tol=1e-3, abs_tol=1e-12)


def test_answer_holds(result):
    t = result.table("scaling")
    assert list(t["slices"]) == [1, 2, 4, 8]
    assert t["step_time_s"][2] == pytest.approx(result.metrics["step_time_s"], rel=1e-9)  # the step study's job
    assert t["compute_s"] == pytest.approx([t["compute_s"][0]] * 4)
    assert t["dcn_busy_s"][0] == 0 and (t["dcn_busy_s"][1:] > 0).all()
    assert (t["step_time_s"][1:] > t["step_time_s"][0]).all()
    assert t["parallel_efficiency"] == pytest.approx(t["step_time_s"][0] / t["step_time_s"])
    # falls with every doubling, and stays high: 4 layers of compute (per-op model, v4's calibrated
    # fraction) against the DCN all-reduce's exposed part, the straggler wait and ECMP collisions
    assert all(a > b for a, b in zip(t["parallel_efficiency"], t["parallel_efficiency"][1:], strict=False))
    assert 0.75 < result.metrics["scaling_parallel_efficiency"] < 1
