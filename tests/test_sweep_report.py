"""A grid sweep's report (issue 25): the swept fields pivoted, replicates as mean and interval,
the ratio of each compared variant to the first, and sections shared by every point once."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from podsim.report import render_report
from podsim.report.pivot import sweep_pivot
from podsim.store import load_run, load_stored_sweep
from podsim.sweep import load_sweep, open_executor, run_sweep

DATA = Path(__file__).parent / "data" / "scenarios"


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    d = tmp_path_factory.mktemp("pivot")
    (d / "tiny.yaml").write_text((DATA / "tiny.yaml").read_text())
    (d / "sw.yaml").write_text("sweep: pivot\nbase: tiny.yaml\ncompare: failures.host.availability\n"
                               "grid:\n  workload.synthetic.rate: [1/h, 3/h]\n  failures.host.availability: [99%, 99.9%]\n"
                               "replicates: 2\nseed: 3\nshow: [goodput, wait_p95_s]\n")
    sweep = load_sweep(d / "sw.yaml")
    store = d / "r.duckdb"
    with open_executor("serial") as h:
        run_sweep(sweep, h, store)
    stored = load_stored_sweep(store, sweep.sweep_id)
    ok = [r for r in stored["runs"] if r["status"] == "ok"]
    return stored, ok, [load_run(store, r["run_id"]) for r in ok]


@pytest.mark.slow  # issue 24: the quick tier under 2 min of 2 cores; runs in make test
def test_pivot_groups_replicates_and_divides_by_the_first_variant(swept):
    stored, rows, runs = swept
    p = sweep_pivot(stored, runs)
    assert p["compare"] == "failures.host.availability" and p["fields"] == ["workload.synthetic.rate"]
    assert p["variants"] == ["99%", "99.9%"]
    goodput = next(t for t in p["tables"] if t["metric"] == "goodput")
    assert [key for key, _, _ in goodput["rows"]] == [("1/h",), ("3/h",)]
    for (rate,), cells, ratios in goodput["rows"]:
        for variant, cell in zip(p["variants"], cells, strict=True):
            vals = [r.metrics["goodput"] for r, m in zip(runs, rows, strict=True)
                    if str(m["point_overrides"]["workload.synthetic.rate"]) == rate
                    and str(m["point_overrides"]["failures.host.availability"]) == variant]
            assert len(vals) == 2 and cell["n"] == 2 and cell["mean"] == pytest.approx(np.mean(vals))
        assert ratios[0] == pytest.approx(1.0) and ratios[1] == pytest.approx(cells[1]["mean"] / cells[0]["mean"])


@pytest.mark.slow  # issue 24: the quick tier under 2 min of 2 cores; runs in make test
def test_report_shows_the_pivot_and_shared_sections_once(swept):
    stored, rows, runs = swept
    html = render_report(runs, labels=[r["point_label"] for r in rows], sweep=stored)
    assert "By failures.host.availability, for each workload.synthetic.rate" in html
    assert "99.9% / 99%" in html and "95% CI, n=2" in html
    topology = html[html.index('<section id="topology">'):html.index('<section id="runs">')]
    assert topology.count("<h3>") == 1 and "<h3>all 8 runs</h3>" in topology  # the same pod for every point: once
