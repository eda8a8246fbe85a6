"""Golden test of the worked serving scenario (scenarios/i_serving_capacity.yaml): a serving fleet
run end to end to its report - TTFT and TPOT percentiles, cost per million tokens and the
capacity answer - must equal scenarios/expected/i_serving_capacity.json within a relative
tolerance of 1e-3 (integers and the answer exactly), and hold on its own terms.

Regenerate after a deliberate model change with
    PODSIM_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_serving_golden.py
"""

from __future__ import annotations

from pathlib import Path

import pytest

from podsim.report import render_report
from podsim.scenario import load_scenario, run_scenario
from tests.helpers import check_golden

ROOT = Path(__file__).resolve().parent.parent / "scenarios"
EXPECTED = ROOT / "expected" / "i_serving_capacity.json"
KEY = ("requests", "requests_completed", "ttft_p50_s", "ttft_p95_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "e2e_p99_s",
       "slo_attainment", "goodput_rps", "tokens_per_s_per_chip", "cost_per_million_tokens_usd", "kv_cache_tokens",
       "kv_peak_fraction", "chips", "capacity_chips", "capacity_replicas", "capacity_slice", "capacity_ttft_p99_s",
       "capacity_tpot_p99_s", "capacity_cost_per_million_tokens_usd")
pytestmark = pytest.mark.golden


@pytest.fixture(scope="module")
def result():
    return run_scenario(load_scenario(ROOT / "i_serving_capacity.yaml"))


def key_figures(r) -> dict:
    t = r.table("serving_capacity")
    probes = [{"slice": str(t["slice"][i]), "replicas": int(t["replicas"][i]), "met": bool(t["met"][i]),
               "ttft_p99_mean": float(t["ttft_p99_mean"][i])} for i in range(len(t["slice"]))]
    return {"metrics": {k: r.metrics.get(k) for k in KEY}, "intervals": {k: r.intervals[k] for k in ("ttft_p99_s", "tpot_p99_s")},
            "probes": probes, "targets": {x["metric"]: x["met"] for x in r.targets}}


def test_matches_expected(result):
    check_golden(key_figures(result), EXPECTED, "i_serving_capacity", rel_tol=1e-3, abs_tol=1e-12)


def test_answer_holds(result):
    """The answer is the fewest chips among what the search ran: every smaller size it probed
    missed, the answer met, and the fleet the report describes meets its targets."""
    m, t = result.metrics, result.table("serving_capacity")
    assert m["capacity_met"] and all(x["met"] for x in result.targets)
    met = [int(t["chips"][i]) for i in range(len(t["chips"])) if t["met"][i]]
    missed = [int(t["chips"][i]) for i in range(len(t["chips"])) if not t["met"][i]]
    assert m["capacity_chips"] == min(met) and all(c < m["capacity_chips"] for c in missed)
    for shape in set(t["slice"]):  # per shape: one size below its best missed (or the range started there)
        sizes = sorted(int(t["replicas"][i]) for i in range(len(t["slice"])) if t["slice"][i] == shape and t["met"][i])
        below = [int(t["replicas"][i]) for i in range(len(t["slice"])) if t["slice"][i] == shape and not t["met"][i]]
        assert not sizes or sizes[0] == 1 or sizes[0] - 1 in below
    assert m["requests_completed"] == m["requests"] and m["kv_preemptions"] == 0
    assert m["ttft_p50_s"] <= m["ttft_p95_s"] <= m["ttft_p99_s"] <= 2.0
    # each replicate: the fleet's chips over the counted 2 minutes at v5e's 1.20 USD per chip-hour (pr.5)
    rep = result.table("replicates")
    per = {(int(k), str(n)): float(v) for k, n, v in zip(rep["replicate"], rep["metric"], rep["value"], strict=True)}
    for k in range(3):
        cost = m["chips"] * 120 / 3600 * 1.20
        assert per[(k, "cost_per_million_tokens_usd")] == pytest.approx(cost / (per[(k, "output_tokens")] / 1e6), rel=1e-9)


def test_report_has_the_serving_section(result):
    html = render_report(result)
    assert '<section id="serving">' in html and "<b>Capacity:</b> fewest chips for 6 requests/s" in html
    for name in ("TTFT CDF", "TPOT CDF", "Serving over time", "Serving capacity"):
        assert f'data-name="{name}"' in html
    assert "TTFT p50 / p95 / p99" in html and "cost per million output tokens" in html
