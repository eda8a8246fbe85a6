"""Golden tests of the worked examples in scenarios/: each sweep runs (all five on one pool of
two worker processes) and its key figures — the sweep's `show` metrics per point, and a
capacity sweep's answer — must equal scenarios/expected/<sweep>.json within a relative
tolerance of 1e-3 (integers exactly). Each scenario's answer is also checked on its own terms
(OCS beats static wiring, the engineered OCS DCN is no slower than a 1:1 spine, ...).

Regenerate the expected files after a deliberate model change with
    PODSIM_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_scenarios_golden.py
and say why in the commit.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from podsim.sweep import load_sweep, open_executor, run_sweep
from tests.helpers import check_golden

ROOT = Path(__file__).resolve().parent.parent / "scenarios"
EXPECTED = ROOT / "expected"
SWEEPS = ("a_ocs_vs_static", "b_twisted_moe", "c_v5p_fleet", "d_multislice_dcn", "e_resnet50_mlperf")
REL = 1e-3
pytestmark = pytest.mark.golden  # the whole module: five sweeps on a process pool (see `make test`)


def key_figures(sweep, outcome) -> dict:
    show = list(sweep.spec.show)
    points = {r["label"]: {k: r["metrics"].get(k) for k in show} for r in outcome.points if r["status"] in ("ok", "skipped")}
    out = {"sweep": sweep.spec.sweep, "failed": outcome.failed, "points": points}
    if outcome.capacity:
        out["capacity"] = [{"cell": c["cell"], "answer": c["answer"],
                            "met": {k: v["met"] for k, v in c["evaluated"].items()}} for c in outcome.capacity]
    return out


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    store = tmp_path_factory.mktemp("golden") / "results.duckdb"
    out = {}
    with open_executor("process", workers=2) as handle:
        for name in SWEEPS:
            sweep = load_sweep(ROOT / f"{name}.yaml")
            out[name] = key_figures(sweep, run_sweep(sweep, handle, store))
    return out


@pytest.mark.parametrize("name", SWEEPS)
def test_matches_expected(results, name):
    check_golden(results[name], EXPECTED / f"{name}.json", name, rel_tol=REL, abs_tol=1e-12)


def test_a_ocs_runs_more_useful_work_than_static(results):
    p = results["a_ocs_vs_static"]["points"]
    for a in ("99.9%", "99.5%", "99%"):
        ocs, static = p[f"wiring=ocs, availability={a}"], p[f"wiring=static, availability={a}"]
        assert ocs["fleet_goodput"] > static["fleet_goodput"] and ocs["utilisation"] > static["utilisation"]
        assert ocs["jobs_unplaceable"] == 0 < static["jobs_unplaceable"]  # the largest v4 shapes need OCS


def test_b_twisted_all_to_all_is_faster(results):
    p = results["b_twisted_moe"]["points"]
    for plan in ("fsdp=16,expert=8", "data=4,expert=8,tensor=4"):
        for routing in ("dimension_order", "adaptive"):
            plain, twisted = (p[f"parallelism={plan}, twisted={tw}, routing={routing}"] for tw in (False, True))
            assert twisted["all_to_all_busy_s"] < plain["all_to_all_busy_s"]
        dor, adaptive = (p[f"parallelism={plan}, twisted=True, routing={r}"] for r in ("dimension_order", "adaptive"))
        assert adaptive["all_to_all_busy_s"] <= dor["all_to_all_busy_s"] * (1 + REL)  # equal up to tie splits


def test_c_smallest_fleet_is_bracketed(results):
    (cell,) = results["c_v5p_fleet"]["capacity"]
    n = cell["answer"]
    assert n is not None and cell["met"][str(n)] and not cell["met"][str(n - 1)]


def test_d_dcn_ordering(results):
    p = {k: v["step_time_s"] for k, v in results["d_multislice_dcn"]["points"].items()}
    assert p["EPS 1:1"] < p["EPS 2:1"] < p["EPS 4:1"] < p["OCS uniform mesh"]
    assert p["OCS engineered for the job"] <= p["EPS 1:1"] * 1.01


def test_e_podsim_is_faster_than_mlperf(results):
    """podsim's ResNet-50 step is shorter than the MLPerf v0.6 steady state (ml.11, ml.12): its
    per-op compute model reaches ~40% MFU there and it models no input pipeline (README, scenario e)."""
    p = results["e_resnet50_mlperf"]["points"]
    pod, quarter = p["v3 pod, 1024 chips, batch 32768"], p["v3, 256 chips, batch 32768"]
    assert 0.3 < pod["step_time_s"] / 0.025 < 1.0 and 0.3 < quarter["step_time_s"] / 0.0927 < 1.0
