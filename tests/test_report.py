"""The HTML capacity-planning report: self-contained (plotly.js inlined, no external
resource), the sections and figures a planner needs, and it opens in a real browser with no
console errors (e2e: Debian's headless Chromium, screenshot kept in out/e2e/)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from helpers import run_podsim

from podsim.report import render_report
from podsim.report.figures import daily_goodput
from podsim.report.render import COMPARED, report_figures
from podsim.scenario import load_scenario, run_scenario
from podsim.store import append_run, list_runs

DATA = Path(__file__).parent / "data" / "scenarios"
SHOTS = Path(__file__).resolve().parent.parent / "out" / "e2e"


@pytest.fixture(scope="module")
def runs():
    return [run_scenario(load_scenario(DATA / name)) for name in ("tiny.yaml", "tiny_step.yaml")]


def _plot_names(html: str) -> list[str]:
    return re.findall(r'<div class="plot" data-name="([^"]+)">', html)


def test_single_cluster_report(runs):
    html = render_report(runs[0])
    assert html.count("<script") == 2 + len(_plot_names(html))  # plotly.js once, one per figure, the resize hook
    body = html.split("</script>", 1)[1]  # after plotly.js itself
    assert not re.search(r'(src|href)="(https?:)?//', body)  # nothing fetched from the network
    assert {"Utilisation", "Goodput", "Queue", "Wait over time", "Wait CDF", "Fragmentation"} <= set(_plot_names(html))
    for text in ("Cost and power", "pr.5", "$1.2 (source pr.5", "not published", "Topology", "16x16", "wait_p95_s"):
        assert text in html, text


def test_step_report_has_breakdown_and_timeline(runs):
    names = _plot_names(render_report(runs[1]))
    assert {"Step-time breakdown", "Collectives", "Timeline"} <= set(names)


def test_the_report_says_how_compute_was_timed(runs):
    """A step study that sets no efficiency is timed by the per-op model and its report says so;
    a flat efficiency is reported as the fraction of peak it is."""
    from podsim.perf.opmodel import compute_timing
    from podsim.report.render import key_rows

    assert runs[1].metrics["compute_efficiency"] is None
    assert dict(key_rows([runs[1]]))["compute timing"] == ["compute by the per-op model"]
    assert compute_timing(0.6) == "compute at 60% of peak" and compute_timing(0.555) == "compute at 55.5% of peak"


def test_the_report_says_whether_the_step_fits_hbm(runs):
    """A step study of a generated trace reports its HBM bytes per chip against the chip's, and a
    plan that cannot fit says so in its key figures (podsim.trace.memory)."""
    from podsim.report.render import key_rows

    m = runs[1].metrics
    assert m["hbm_fits"] and 0 < m["hbm_bytes_per_chip"] <= m["hbm_capacity_bytes"] == 32 * 2**30
    assert dict(key_rows([runs[1]]))["HBM per chip"][0].endswith("of 32 GiB")
    over = load_scenario(DATA / "tiny_step.yaml")
    step = over.workload.step.model_copy(update={"model_overrides": {"n_layers": 80, "global_batch": 1024}})
    r = run_scenario(over.model_copy(update={"workload": over.workload.model_copy(update={"step": step})}))
    assert not r.metrics["hbm_fits"]
    assert "DOES NOT FIT" in dict(key_rows([r]))["HBM per chip"][0]


def test_comparison_report(runs):
    html = render_report(runs, labels=["stream", "step"])
    assert "<th>stream</th><th>step</th>" in html
    names = _plot_names(html)
    assert "Cost by run (USD)" in names and "Utilisation" in names and "Step-time breakdown" in names
    assert "Step time by run (s)" not in names  # one run has a step time: nothing to compare


def test_daily_goodput_matches_the_window_definition(runs):
    ts = runs[0].tables["timeseries"]
    days, g = daily_goodput(ts)
    assert len(days) == 1 and days[0] == pytest.approx(0.5)  # 36 h: one whole day
    busy = ts["busy_chip_s"]
    wasted = ts["lost_chip_s"] + ts["overhead_chip_s"]
    k = int((ts["t_s"] <= 86400).sum()) - 1
    assert g[0] == pytest.approx(1 - wasted[k] / busy[k], abs=0.02)


def test_report_cli_compares_stored_runs(tmp_path, runs, capsys):
    store = tmp_path / "r.duckdb"
    ids = [append_run(store, r) for r in runs]
    out = tmp_path / "cmp.html"
    code, stdout, err = run_podsim(capsys, "report", "--store", str(store), "--runs", ",".join(ids), "-o", str(out))
    assert code == 0, err
    assert "report of 2 run(s)" in stdout and out.stat().st_size > 1_000_000
    code, stdout, _ = run_podsim(capsys, "report", "--store", str(store), "--list")
    assert code == 0 and all(i in stdout for i in ids)
    code, _, err = run_podsim(capsys, "report", "--store", str(tmp_path / "none.duckdb"), "-o", str(out))
    assert code == 2 and "does not exist" in err
    assert len(list_runs(store)) == 2


@pytest.mark.e2e
def test_report_opens_in_headless_chromium(tmp_path, runs):
    """Every plot is drawn, no console or page error, and a screenshot is saved."""
    from browser import chromium_page

    SHOTS.mkdir(parents=True, exist_ok=True)
    scaling = run_scenario(load_scenario(DATA / "tiny_scaling.yaml"))  # the scaling section's figure too
    cases = {"report-cluster": render_report(runs[0]), "report-compare": render_report(runs, labels=["stream", "step"]),
             "report-scaling": render_report(scaling)}
    for name, html in cases.items():
        path = tmp_path / f"{name}.html"
        path.write_text(html)
        with chromium_page() as (page, errors):
            remote: list[str] = []

            def note(request, remote=remote):
                if not request.url.startswith(("file:", "data:", "blob:")):
                    remote.append(request.url)
            page.on("request", note)
            page.goto(path.as_uri())
            page.wait_for_function(f"document.querySelectorAll('.js-plotly-plot .main-svg').length >= {len(_plot_names(html))}",
                                   timeout=30000)
            assert page.locator(".js-plotly-plot").count() == len(_plot_names(html))
            assert page.title().endswith("podsim capacity plan")
            shot = tmp_path / f"{name}.png"
            page.screenshot(path=str(shot), full_page=True)
            assert errors == [], errors
            assert remote == [], remote  # opens offline
        assert shot.stat().st_size > 50_000
        shutil.copy(shot, SHOTS / shot.name)


def test_a_comparison_shows_what_the_targets_judge(runs):
    """Several job-stream runs: one bar per run for every metric a target names (the queue
    -inclusive p95 wait a fleet is judged on included), before the shared plots; the dashboard
    draws this same list."""
    a = runs[0]
    b = run_scenario(load_scenario(DATA / "tiny.yaml").model_copy(update={"seed": 7}))
    names = [n for n, _ in report_figures([a, b], ["a", "b"])]
    assert names[:2] == ["Goodput by run", "Utilisation by run"]
    assert "p95 wait by run, still-queued jobs counted (s)" in names
    title_of = dict(COMPARED)
    for t in a.targets:
        assert title_of.get(t["metric"], f"{t['metric']} by run") in names, t["metric"]
    assert names.index("Utilisation") > names.index("Goodput by run")


def test_a_grid_sweep_report_renders(runs):
    """A grid sweep's stored result has point counts, no capacity cells: the report shows the
    sweep and its JSON without the capacity table (it used to raise on the missing `cells`)."""
    sweep = {"name": "grid", "mode": "grid", "points": 2, "sweep_id": "s1", "runs": runs,
             "result": {"points": 2, "ok": 2, "failed": 0}}
    html = render_report(runs, labels=["a", "b"], sweep=sweep)
    assert "<h2>Sweep grid</h2>" in html and "smallest meeting the targets" not in html and "&#34;ok&#34;: 2" in html
