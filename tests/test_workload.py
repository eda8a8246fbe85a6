"""Job streams: seeded synthetic draws and CSV replay with accelerator-count mapping."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import shared_data

from podsim.errors import PodsimError
from podsim.topology import get_generation
from podsim.workload import SyntheticSpec, generate_jobs, load_trace_csv
from podsim.workload.popularity import V4_SLICE_POPULARITY
from podsim.workload.replay import TraceColumns, shape_for_count
from podsim.workload.synthetic import ArrivalSpec, DurationSpec

ELASTICFLOW = shared_data("traces", "elasticflow", "cluster01.csv")
SAMPLE = Path(__file__).parent / "data" / "elasticflow_sample.csv"


def test_same_seed_same_jobs_other_seed_other_jobs():
    spec = SyntheticSpec(jobs=50)
    assert generate_jobs(spec, 7) == generate_jobs(spec, 7)
    assert generate_jobs(spec, 7) != generate_jobs(spec, 8)


def test_poisson_rate_and_mix_follow_the_spec():
    """Mean gap ~ 1/rate and the slice mix ~ the v4 popularity table over many draws."""
    spec = SyntheticSpec(jobs=20000, arrival=ArrivalSpec(rate_per_h=10))
    jobs = generate_jobs(spec, 3)
    gaps = np.diff([0.0] + [j.submit_s for j in jobs])
    assert abs(gaps.mean() - 360.0) / 360.0 < 0.03
    share_444 = np.mean([j.shape == (4, 4, 4) for j in jobs])
    expected = V4_SLICE_POPULARITY["4x4x4"] / sum(V4_SLICE_POPULARITY.values())
    assert abs(share_444 - expected) < 0.01
    twisted = np.mean([j.twisted for j in jobs if j.shape == (4, 4, 8)])
    assert abs(twisted - 16.0 / 17.5) < 0.03


def test_durations_and_priorities():
    spec = SyntheticSpec(jobs=5000, duration=DurationSpec(kind="fixed", median_s=100.0), priorities={0: 3, 5: 1})
    jobs = generate_jobs(spec, 0)
    assert {j.duration_s for j in jobs} == {100.0}
    assert abs(np.mean([j.priority == 5 for j in jobs]) - 0.25) < 0.02


def test_bad_specs_say_what_is_wrong():
    with pytest.raises(PodsimError, match="not a tpu-v5e shape"):
        generate_jobs(SyntheticSpec(generation="tpu-v5e", slice_mix={"4x16": 1}), 0)
    with pytest.raises(PodsimError, match="_T \\(twisted\\)"):
        generate_jobs(SyntheticSpec(slice_mix={"4x4x8_X": 1}), 0)
    with pytest.raises(ValueError, match="poisson arrivals need rate_per_h"):
        ArrivalSpec(kind="poisson")


@pytest.mark.parametrize("gen,n,shape", [
    ("tpu-v4", 1, (1, 1, 1)), ("tpu-v4", 64, (4, 4, 4)), ("tpu-v4", 65, (4, 4, 8)), ("tpu-v4", 3, (1, 2, 2)),
    ("tpu-v5e", 2, (2, 2)), ("tpu-v5e", 64, (8, 8)), ("gpu-h100", 12, (16,)), ("tpu-v3", 1024, (32, 32)),
])
def test_counts_round_up_to_valid_shapes(gen, n, shape):
    assert shape_for_count(get_generation(gen), n) == shape


def test_count_too_large_is_an_error():
    with pytest.raises(PodsimError, match="no tpu-v5e slice has 512 chips"):
        shape_for_count(get_generation("tpu-v5e"), 512)


# The whole cluster01.csv where the shared data folder sits beside the project (as on our
# machines); the in-repo sample of its rows wherever the project is cloned alone.
@pytest.mark.parametrize("path", [SAMPLE] + ([ELASTICFLOW] if ELASTICFLOW.exists() else []), ids=str)
def test_replay_elasticflow(path):
    """Real trace rows become jobs sorted by submission, starting at t=0, shapes rounded up."""
    jobs = load_trace_csv(path, "tpu-v4")
    assert jobs[0].submit_s == 0.0
    assert all(a.submit_s <= b.submit_s for a, b in zip(jobs, jobs[1:], strict=False))
    assert all(j.chips >= j.accelerators for j in jobs)
    assert {j.accelerators for j in jobs} >= {1, 64}


def test_replay_column_mapping_and_errors(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("name,t_min,len_min,chips\na,2,10,8\nb,1,5,4\n")
    cols = TraceColumns.parse("id=name,submit=t_min,duration=len_min,accelerators=chips,time_scale=60")
    jobs = load_trace_csv(f, "tpu-v4", cols)
    assert [(j.id, j.submit_s, j.duration_s, j.shape) for j in jobs] == [("b", 0.0, 300.0, (1, 2, 2)), ("a", 60.0, 600.0, (2, 2, 2))]
    with pytest.raises(PodsimError, match="column 'job_id' not found"):
        load_trace_csv(f, "tpu-v4")
    with pytest.raises(PodsimError, match="use key=column"):
        TraceColumns.parse("bogus=1")
    with pytest.raises(PodsimError, match="time_scale='abc': Input should be a valid number"):
        TraceColumns.parse("time_scale=abc")
    with pytest.raises(PodsimError, match="an arrival-time scale is"):
        TraceColumns.parse("time_scale=0")
    g = tmp_path / "bad.csv"
    g.write_text("job_id,submission_time,duration,num_gpu\na,1,x,4\n")
    with pytest.raises(PodsimError, match="line 2"):
        load_trace_csv(g, "tpu-v4")
