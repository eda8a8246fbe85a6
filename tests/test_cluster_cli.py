"""`podsim cluster` as a user meets it: JSON keys, traces, failure options, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_podsim as podsim

SAMPLE = Path(__file__).parent / "data" / "elasticflow_sample.csv"
KEYS = ("jobs_total", "jobs_completed", "jobs_running", "jobs_queued", "jobs_unplaceable", "utilisation", "goodput",
        "wait_p50_s", "wait_p95_s", "wait_p99_s", "engine_wall_s")
RUN_KEYS = ("run_id", "name", "kind", "metrics", "cost", "targets", "targets_met", "references", "scenario_hash", "wall_s")


@pytest.mark.slow  # issue 24: the quick tier under 2 min of 2 cores; runs in make test
def test_synthetic_json_has_the_documented_keys(capsys):
    code, out, err = podsim(capsys, "cluster", "--generation", "tpu-v4", "--pods", "1", "--synthetic",
                            "jobs=60,rate=4/h,median=2h", "--policy", "backfill", "--host-availability", "0.995",
                            "--horizon", "2d", "--seed", "3", "--json")
    assert code == 0, err
    full = json.loads(out)
    assert set(RUN_KEYS) <= set(full) and full["kind"] == "cluster"  # the schema of `podsim run --json`
    d = full["metrics"]
    assert all(k in d for k in KEYS)
    assert d["jobs_total"] == 60 == d["jobs_completed"] + d["jobs_running"] + d["jobs_queued"] + d["jobs_unplaceable"] + d["jobs_not_arrived"]
    config = full["scenario"]["cluster"]
    assert d["failures_host"] > 0 and config["failures"]["host"]["mtbf_s"] == pytest.approx(3600 * 0.995 / 0.005)
    assert len(full["tables"]["timeseries"]["t_s"]) == 501 and d["unplaceable"] == []
    code2, out2, _ = podsim(capsys, "cluster", "--generation", "tpu-v4", "--pods", "1", "--synthetic",
                            "jobs=60,rate=4/h,median=2h", "--policy", "backfill", "--host-availability", "0.995",
                            "--horizon", "2d", "--seed", "3", "--json")
    d2 = json.loads(out2)["metrics"]
    assert {k: v for k, v in d2.items() if k not in ("engine_wall_s", "placement_s")} == \
           {k: v for k, v in d.items() if k not in ("engine_wall_s", "placement_s")}


def test_trace_replay_static_wiring_and_a_failure_trace(capsys, tmp_path):
    fails = tmp_path / "f.csv"
    fails.write_text("time_s,component,id,repair_s\n3600,host,0,7200\n7200,link,0,600\n")
    code, out, err = podsim(capsys, "cluster", "-g", "tpu-v5e", "--pods", "2", "--trace", str(SAMPLE),
                            "--policy", "fifo", "--failure-trace", str(fails), "--horizon", "30d", "--no-ocs", "--json")
    assert code == 0, err
    d = json.loads(out)["metrics"]
    assert d["failures_host"] == 1 and d["failures_link"] == 1 and d["ocs"] is False
    code, out, err = podsim(capsys, "cluster", "-g", "tpu-v4", "--trace", str(SAMPLE), "--policy", "priority",
                            "--mtbf", "500h", "--mttr", "2h", "--weibull-shape", "0.8", "--horizon", "30d")
    assert code == 0 and "utilisation" in out and "goodput" in out


@pytest.mark.parametrize("args,match", [
    (["--synthetic", "jobs=5"], "--horizon"),
    (["--horizon", "1d"], "exactly one job stream"),
    (["--horizon", "1d", "--synthetic", "jobs=5", "--trace", "x.csv"], "exactly one job stream"),
    (["--horizon", "1d", "--synthetic", "jobs=5", "--policy", "lifo"], "policy"),
    (["--horizon", "soon", "--synthetic", "jobs=5"], "duration 'soon'"),
    (["--horizon", "1d", "--synthetic", "jobs=5", "--host-availability", "1.5"], "an availability is (0, 1)"),
    (["--horizon", "1d", "--synthetic", "jobs=5", "--host-availability", "0.99", "--mtbf", "9h"], "not both"),
    (["--horizon", "1d", "--synthetic", "jobs=5", "--mttr", "9h"], "needs an MTBF"),
    (["--horizon", "1d", "--trace", "missing.csv"], "does not exist"),
    (["--horizon", "1d", "--synthetic", "jobs=5", "--columns", "id=x"], "there is no --trace"),
    (["--horizon", "1d", "--synthetic", "jobs=5", "--pods", "0"], "pods"),
    (["--horizon", "1d", "--synthetic", "jobs=5", "--no-ocs", "--ocs-mtbf", "100h"], "has no OCS"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, args, match):
    code, out, err = podsim(capsys, "cluster", "-g", "tpu-v4", *args)
    assert code == 2
    assert match in err and "Traceback" not in err


def test_the_table_says_where_the_goodput_gap_goes_and_what_was_not_charged(capsys):
    """Issue 35: the allocated chip-hours that were not useful, by cause and by shape; runs on
    scattered slices with no model to price them are said to be at factor 1."""
    code, out, err = podsim(capsys, "cluster", "--generation", "tpu-v4", "--no-ocs", "--placement", "hilbert",
                            "--synthetic", "jobs=40,rate=8/h,median=2h", "--host-availability", "0.99",
                            "--horizon", "1d", "--seed", "2")
    assert code == 0, err
    cells = [line.split("│")[1:3] for line in out.splitlines() if line.count("│") == 3]
    labels, values = (" ".join(" ".join(c[i].split()) for c in cells) for i in (0, 1))
    assert "allocated but not useful" in labels and "slowdown not charged" in labels
    assert "of the allocated chip-hours: lost to failures" in values and "most of it in" in values
    assert "ran at factor 1: jobs given in time need --slowdown-model" in values
