"""The dashboard's capacity page shows a run's scaling study (issue 13 item 3): the same table
by slice count and the same figure as the HTML report (podsim.report.scaling)."""

from __future__ import annotations

from pathlib import Path

from test_dashboard import chart, numbers, ok, open_page

from podsim.scenario import load_scenario, run_scenario
from podsim.store import append_run

DATA = Path(__file__).parent / "data" / "scenarios"


def test_capacity_page_shows_the_scaling_study(tmp_path):
    store = tmp_path / "results.duckdb"
    result = run_scenario(load_scenario(DATA / "tiny_scaling.yaml"))
    append_run(store, result)
    at = ok(open_page("capacity", store=str(store)))
    table = next(d.value for d in at.dataframe if "parallel efficiency" in d.value.columns)
    assert list(table["slices"]) == ["1", "2", "4"] and list(table["chips"]) == ["64", "128", "256"]
    assert table["parallel efficiency"][0] == "100.0%"
    fig = chart(at, "runs-scaling-plot-tiny-scaling")
    lines = {t["name"]: numbers(t["y"]) for t in fig["data"]}
    assert list(lines["parallel efficiency"]) == list(result.table("scaling")["parallel_efficiency"])
    assert list(lines["step time (s)"]) == list(result.table("scaling")["step_time_s"])
    assert any("Scaling" in m.value for m in at.markdown)
