"""The CLI as a user meets it: exit codes, one-line errors, JSON keys."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def podsim(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "podsim", *args], capture_output=True, text=True, timeout=120)


def test_help_lists_commands():
    r = podsim("--help")
    assert r.returncode == 0
    assert "topology" in r.stdout and "demo" in r.stdout


def test_topology_json_keys_pod():
    r = podsim("topology", "tpu-v4", "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    for key in ("generation", "chips", "hosts", "cubes", "ocs", "ici_links", "bisection_bytes_per_s",
                "allreduce_bytes_per_s", "diameter_hops"):
        assert key in s
    assert (s["chips"], s["hosts"], s["cubes"], s["ocs"], s["ici_links"], s["diameter_hops"]) == (4096, 1024, 64, 48, 12288, 24)


def test_topology_json_slice_twisted():
    s = json.loads(podsim("topology", "tpu-v4", "--slice", "4x4x8", "--twisted", "--json").stdout)
    assert (s["chips"], s["cubes"], s["topology"], s["diameter_hops"]) == (128, 2, "twisted torus", 6)


def test_topology_detail_lists_ids():
    s = json.loads(podsim("topology", "tpu-v4", "--json", "--detail").stdout)
    d = s["detail"]
    assert len(d["hosts"]) == 1024 and len(d["cubes"]) == 64 and len(d["ocs"]) == 48
    assert d["hosts"][17]["cube"] == 1 and len(d["hosts"][17]["chips"]) == 4


@pytest.mark.parametrize("args,needle", [
    (("topology", "tpu-v9"), "unknown generation 'tpu-v9'; known:"),
    (("topology", "tpu-v4", "--slice", "4x4x6"), "multiple of 4"),
    (("topology", "tpu-v5e", "--slice", "4x4", "--twisted"), "no twisted tori"),
])
def test_bad_input_is_one_line_exit_2(args, needle):
    r = podsim(*args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in r.stderr


def test_demo_writes_output(tmp_path):
    """`make demo` runs the demo scenario end to end; its last line is the report's path."""
    r = podsim("demo", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    last = r.stdout.strip().splitlines()[-1]
    assert last == f"demo report: {(tmp_path / 'report.html').resolve()}"
    assert (tmp_path / "report.html").stat().st_size > 1_000_000  # plotly.js inlined
    assert (tmp_path / "results.duckdb").exists() and (tmp_path / "timeseries.parquet").exists()
