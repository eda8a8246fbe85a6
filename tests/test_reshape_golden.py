"""Golden test of the worked reshaping scenario (scenarios/j_reshape.yaml, issue 27): the same
odd-shape stream on a generic torus and a TPU v4 pod, placed with exact shapes, with folds and
splits, and with Hilbert allocation on static wiring. Its key figures (utilisation, p95 JCT, the
wait split, jobs placed and the slowdown charged per placement class) must equal
scenarios/expected/j_reshape.json within a relative tolerance of 1e-3 (integers exactly), hold on
their own terms, and the report's placement-modes section must show every point.

Regenerate after a deliberate model change with
    PODSIM_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_reshape_golden.py
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from podsim.report import render_report
from podsim.report.reshape import reshape_details
from podsim.store import load_run
from podsim.sweep import load_sweep, open_executor, run_sweep
from tests.helpers import check_golden

ROOT = Path(__file__).resolve().parent.parent / "scenarios"
EXPECTED = ROOT / "expected" / "j_reshape.json"
pytestmark = pytest.mark.golden


@pytest.fixture(scope="module")
def outcome(tmp_path_factory):
    store = tmp_path_factory.mktemp("reshape") / "results.duckdb"
    sweep = load_sweep(ROOT / "j_reshape.yaml")
    with open_executor("process", workers=2) as handle:
        out = run_sweep(sweep, handle, store)
    runs = {r["label"]: load_run(store, r["run_id"]) for r in out.points}
    return sweep, out, runs


@pytest.fixture(scope="module")
def points(outcome):
    sweep, out, _ = outcome
    return {r["label"]: {k: _json(r["metrics"].get(k)) for k in sweep.spec.show} for r in out.points if r["status"] == "ok"}


def _json(v):
    """A figure as the golden file holds it: NaN (no run of that class) as null."""
    return None if isinstance(v, float) and math.isnan(v) else v


def test_matches_expected(outcome, points):
    sweep, out, _ = outcome
    assert out.failed == 0 and len(points) == 8
    check_golden({"sweep": sweep.spec.sweep, "points": points}, EXPECTED, "j_reshape", rel_tol=1e-3, abs_tol=1e-12)


def test_reshaping_places_what_exact_shapes_cannot(points):
    for pod in ("torus", "v4"):
        exact, fold = points[f"{pod} OCS, exact shapes"], points[f"{pod} OCS, fold and split"]
        assert fold["jobs_unplaceable"] == 0 < exact["jobs_unplaceable"]
        assert fold["utilisation"] > exact["utilisation"] and fold["runs_fold"] > 0 and fold["runs_split"] > 0
        hilbert = points[f"{pod} static, Hilbert"]
        assert hilbert["jobs_unplaceable"] == 0 and hilbert["runs_scatter"] > 0


def test_what_each_mode_costs(points):
    """Folds and splits keep every logical ring on one cable or circuit at full link speed, so the
    engine charges them nothing; a scattered ring's neighbours are hops apart and share links, so
    Hilbert allocation costs its jobs time."""
    for pod in ("torus", "v4"):
        fold = points[f"{pod} OCS, fold and split"]
        assert fold["slowdown_fold_mean"] == pytest.approx(1.0) and fold["slowdown_split_mean"] == pytest.approx(1.0)
        hilbert = points[f"{pod} static, Hilbert"]
        assert hilbert["slowdown_scatter_mean"] > 1.0 and hilbert["slowdown_charged_max"] > hilbert["slowdown_scatter_mean"]


def test_the_report_section_shows_every_mode(outcome):
    _, _, runs = outcome
    labels = list(runs)
    d = reshape_details(list(runs.values()), labels)
    assert [row[0] for row in d["rows"]] == labels
    html = render_report(list(runs.values()), labels=labels)
    assert 'id="reshape"' in html and "Hilbert curve (any free chips)" in html and "timed alone" in html
