"""The dashboard's capacity page shows a run's spine economics (issue 17): the headline, the
table by year and the assumptions with their sources, and the report's spine plots."""

from __future__ import annotations

from pathlib import Path

from test_dashboard import chart, numbers, ok, open_page

from podsim.scenario import load_scenario, run_scenario
from podsim.store import append_run, load_run

ROOT = Path(__file__).resolve().parents[1]


def test_capacity_page_shows_the_spine(tmp_path):
    store = tmp_path / "results.duckdb"
    result = run_scenario(load_scenario(ROOT / "scenarios" / "f_spine_economics.yaml"))
    run_id = append_run(store, result)
    back = load_run(store, run_id)  # the spine tables survive the store
    assert list(back.table("spine_years")["capex_usd"]) == list(result.table("spine_years")["capex_usd"])
    assert list(back.table("spine_assumptions")["source"]) == list(result.table("spine_assumptions")["source"])

    at = ok(open_page("capacity", store=str(store)))
    frames = [d.value for d in at.dataframe]
    headline = next(f for f in frames if "EPS / OCS" in f.columns).set_index("figure")
    assert "EPS spine re-bought" in headline.index and headline.loc["EPS spine re-bought", "EPS / OCS"] == "1 time(s)"
    years = next(f for f in frames if "bought" in f.columns)
    assert len(years) == 12 and list(years.loc[years["bought"] != "", "year"]) == [3]
    assumptions = next(f for f in frames if "assumed" in f.columns)
    assert set(assumptions.loc[~assumptions["assumed"], "source"]) >= {"eps.2", "eps.17", "apo.7", "ocs.4", "ib.4"}
    cum = chart(at, "runs-Spine cumulative cost")
    lines = {t["name"]: numbers(t["y"]) for t in cum["data"]}
    assert lines["OCS DCN"][-1] < lines["EPS Clos"][-1]
