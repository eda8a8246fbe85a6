"""Exact slice shapes in replayed traces (issue 27, item 1): a `shape` / `twisted` column gives
each job the slice it asked for; a count without a shape is mapped to the ladder, and a run
says how many were (and how many rounded up to more chips) in its metrics and one warning line."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
from helpers import run_podsim as podsim

from podsim.errors import PodsimError
from podsim.workload import load_trace_csv
from podsim.workload.popularity import V4_SLICE_POPULARITY
from podsim.workload.replay import TraceColumns

TABLE2 = Path(__file__).resolve().parent.parent / "scenarios" / "data" / "tpu_v4_table2_sample.csv"


def _csv(tmp_path, text: str) -> Path:
    f = tmp_path / "t.csv"
    f.write_text(text)
    return f


def test_shape_and_twist_columns_give_exact_slices(tmp_path):
    f = _csv(tmp_path, "job_id,submission_time,duration,shape,twisted,num_gpu\n"
                       "a,0,10,12x16x16,,3072\nb,5,10,4x4x8_T,,128\nc,6,10,4x8x8,true,\nd,7,10,,,96\ne,8,1,2x2x6,no,\n")
    jobs = {j.id: j for j in load_trace_csv(f, "tpu-v4")}
    assert (jobs["a"].shape, jobs["a"].twisted, jobs["a"].accelerators) == ((12, 16, 16), False, None)
    assert (jobs["b"].shape, jobs["b"].twisted) == ((4, 4, 8), True)
    assert (jobs["c"].shape, jobs["c"].twisted) == ((4, 8, 8), True)
    assert (jobs["d"].shape, jobs["d"].accelerators) == ((4, 4, 8), 96)  # no shape: the ladder, rounded up
    assert jobs["e"].shape == (2, 2, 6)  # not a v4 shape: the scheduler reports it unplaceable (or reshapes it)


@pytest.mark.parametrize("row,match", [
    ("a,0,10,4x4x8,,64", "has 128 chips but num_gpu says 64"),
    ("a,0,10,4x4x8_X,,", "may end in _T"),
    ("a,0,10,4x4,,", "has 2 dimension"),
    ("a,0,10,4x4x8_T,false,", "disagree"),
    ("a,0,10,4x4x8,maybe,", "use true or false"),
    ("a,0,10,,true,8", "a twist needs a shape"),
    ("a,0,10,,,", "neither shape nor num_gpu"),
    ("a,0,10,,,2.5", "whole number"),
])
def test_bad_shape_rows_name_the_line(tmp_path, row, match):
    f = _csv(tmp_path, "job_id,submission_time,duration,shape,twisted,num_gpu\n" + row + "\n")
    with pytest.raises(PodsimError, match=f"t.csv line 2: .*{match}"):
        load_trace_csv(f, "tpu-v4")


def test_renamed_shape_column_and_no_count_column(tmp_path):
    f = _csv(tmp_path, "id,t,len,slice\nx,0,60,2x2x4\n")
    cols = TraceColumns.parse("id=id,submit=t,duration=len,shape=slice")
    (job,) = load_trace_csv(f, "tpu-v4", cols)
    assert job.shape == (2, 2, 4) and job.accelerators is None
    g = _csv(tmp_path, "job_id,submission_time,duration,twisted\nx,0,60,true\n")
    with pytest.raises(PodsimError, match="column 'num_gpu' not found"):
        load_trace_csv(g, "tpu-v4")


def test_the_table2_sample_is_the_papers_mix():
    """The shipped sample: Table 2 shapes (each a row of V4_SLICE_POPULARITY) and a chip count
    equal to the shape's, durations and arrivals from ElasticFlow (scenarios/data/README.md)."""
    rows = list(csv.DictReader(TABLE2.open()))
    names = {n.removesuffix("_NT") for n in V4_SLICE_POPULARITY}
    assert len(rows) == 120 and {r["shape"] for r in rows} <= names
    assert all(int(r["num_gpu"]) == math.prod(int(v) for v in r["shape"].removesuffix("_T").split("x")) for r in rows)
    assert any(r["shape"].endswith("_T") for r in rows) and any(r["shape"] == "12x16x16" for r in rows)


def test_table2_trace_replays_exactly_through_the_cli(capsys):
    """Must show: the v4 Table-2 trace replays through `podsim cluster` with exact shapes on one
    v4 pod: every job done, no shape inferred or rounded, and the useful chip-hours are the
    trace's own (chips x duration summed)."""
    rows = list(csv.DictReader(TABLE2.open()))
    trace_chip_h = sum(int(r["num_gpu"]) * float(r["duration"]) for r in rows) / 3600
    code, out, err = podsim(capsys, "cluster", "-g", "tpu-v4", "--trace", str(TABLE2), "--policy", "fifo",
                            "--horizon", "30d", "--json")
    assert code == 0, err
    m = json.loads(out)["metrics"]
    assert m["jobs_completed"] == m["jobs_total"] == 120 and m["jobs_unplaceable"] == 0
    assert m["jobs_shape_inferred"] == 0 == m["jobs_rounded"] and "warning" not in err
    assert m["useful_chip_h"] == pytest.approx(trace_chip_h, rel=1e-9)
    assert m["jobs_untwisted"] == 0


def test_a_count_only_trace_warns_once_with_the_rounding(capsys, tmp_path):
    f = _csv(tmp_path, "job_id,submission_time,duration,num_gpu\na,0,3600,96\nb,10,3600,64\nc,20,3600,3\n")
    code, out, err = podsim(capsys, "cluster", "-g", "tpu-v4", "--trace", str(f), "--horizon", "1d", "--json")
    assert code == 0, err
    m = json.loads(out)["metrics"]
    assert (m["jobs_shape_inferred"], m["jobs_rounded"]) == (3, 2)
    assert m["rounded_extra_chip_h"] == pytest.approx(32 + 1)  # 96 -> 128 and 3 -> 4 chips, one hour each
    lines = [ln for ln in err.splitlines() if ln.startswith("warning")]
    assert len(lines) == 1 and "3 of 3 trace jobs have no shape" in lines[0] and "2 rounded up" in lines[0]
