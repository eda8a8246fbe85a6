"""Golden test of the worked spine-economics scenario (scenarios/f_spine_economics.yaml): its
key figures must equal scenarios/expected/f_spine_economics.json within a relative tolerance
of 1e-3, and its answer must hold on its own terms (the EPS spine re-bought once, when the
speed doubles; the OCS DCN cheaper and lower-power; the ratios beside Jupiter's). The report
and the CLI show its spine section.

Regenerate after a deliberate model change with
    PODSIM_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_spine_golden.py
"""

from __future__ import annotations

from pathlib import Path

import pytest

from podsim.report import render_report
from podsim.scenario import load_scenario, run_scenario
from tests.helpers import check_golden

ROOT = Path(__file__).resolve().parent.parent / "scenarios"
EXPECTED = ROOT / "expected" / "f_spine_economics.json"
YEAR_COLUMNS = ("year", "spine", "link_gbps", "spine_rebought", "leaf_switches", "spine_switches", "ocs", "transceivers",
                "capex_usd", "power_w", "energy_kwh", "cumulative_usd", "step_time_s", "exposed_comm_s", "dcn_algbw_bytes_per_s",
                "lifetime_usd_per_useful_chip_h")


@pytest.fixture(scope="module")
def result():
    return run_scenario(load_scenario(ROOT / "f_spine_economics.yaml"))


def key_figures(r) -> dict:
    t = r.table("spine_years")
    rows = [{c: (v.item() if hasattr(v, "item") else v) for c in YEAR_COLUMNS for v in [t[c][i]]} for i in range(len(t["year"]))]
    return {"metrics": {k: v for k, v in r.metrics.items() if k.startswith("spine_")}, "years": rows}


def test_matches_expected(result):
    check_golden(key_figures(result), EXPECTED, "f_spine_economics", rel_tol=1e-3, abs_tol=1e-9)


def test_answer_holds(result):
    m = result.metrics
    t = result.table("spine_years")
    eps = t["spine"] == "eps"
    assert list(t["year"][eps][t["spine_rebought"][eps]]) == [3] and m["spine_ocs_rebuys"] == 0
    assert m["spine_ocs_capex_usd"] < m["spine_eps_capex_usd"] and m["spine_ocs_energy_kwh"] < m["spine_eps_energy_kwh"]
    # engineered OCS circuits are no slower than the 1:1 Clos (scenario d), so a useful chip-hour costs less
    assert m["spine_ocs_usd_per_useful_chip_h"] < m["spine_eps_usd_per_useful_chip_h"]
    refs = {x["metric"]: x for x in result.references}
    assert refs["spine_capex_ratio"]["published"] == 0.70 and refs["spine_energy_ratio"]["published"] == 0.59
    assert refs["spine_capex_ratio"]["podsim"] == pytest.approx(m["spine_capex_ratio"])


def test_report_has_the_spine_section(result):
    html = render_report(result)
    assert '<section id="spine">' in html and "Assumptions and sources" in html
    for name in ("Spine cumulative cost", "Spine cumulative energy", "Spine cost per useful chip-hour"):
        assert f'data-name="{name}"' in html
    assert "eps.17" in html and "apo.7" in html and "(not published)" in html
