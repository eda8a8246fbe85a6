"""`--synthetic SPEC`: KEY=VALUE pairs and YAML files; step-based jobs; trace load scaling."""

from __future__ import annotations

import numpy as np
import pytest

from podsim.errors import PodsimError
from podsim.workload import generate_jobs, load_trace_csv, parse_synthetic

SAMPLE = __import__("pathlib").Path(__file__).parent / "data" / "elasticflow_sample.csv"


def test_pairs_set_every_part_of_the_spec():
    spec = parse_synthetic("jobs=500,rate=48/d,duration=uniform,low=10min,high=2h,max=90min,"
                           "mix=4x4x4:2;4x4x8_T:1,priorities=0:3;2:1", "tpu-v4")
    assert spec.jobs == 500 and spec.arrival.rate_per_h == 2.0
    assert (spec.duration.kind, spec.duration.low_s, spec.duration.high_s, spec.duration.max_s) == ("uniform", 600, 7200, 5400)
    assert spec.slice_mix == {"4x4x4": 2.0, "4x4x8_T": 1.0} and spec.priorities == {0: 3.0, 2: 1.0}
    jobs = generate_jobs(spec, 1)
    assert max(j.duration_s for j in jobs) <= 5400 and {j.priority for j in jobs} == {0, 2}
    assert {j.shape_name for j in jobs} == {"4x4x4", "4x4x8_T"}


def test_given_gaps_and_the_v4_default_mix():
    spec = parse_synthetic("jobs=4,gaps=1h;30min,mix=v4", "tpu-v4")
    assert [j.submit_s for j in generate_jobs(spec, 0)] == [3600, 5400, 9000, 10800]
    assert "12x16x16" in spec.slice_mix


def test_step_based_jobs_carry_a_model_and_steps():
    spec = parse_synthetic("jobs=2000,rate=6,models=gpt3-175b:1;llama2-70b:3,steps=5000,steps_sigma=0.2", "tpu-v4")
    jobs = generate_jobs(spec, 2)
    assert all(j.duration_s is None and j.steps >= 1 for j in jobs)
    share = np.mean([j.model == "llama2-70b" for j in jobs])
    assert abs(share - 0.75) < 0.03
    assert abs(np.median([j.steps for j in jobs]) - 5000) / 5000 < 0.03
    # the same seed gives the same stream; the time draws are unchanged by the model draws
    assert generate_jobs(spec, 2) == jobs
    plain = generate_jobs(parse_synthetic("jobs=2000,rate=6", "tpu-v4"), 2)
    assert [j.submit_s for j in plain] == [j.submit_s for j in jobs]


def test_yaml_file(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("jobs: 7\narrival: {kind: poisson, rate_per_h: 3}\nduration: {kind: fixed, median_s: 60}\n")
    with pytest.raises(PodsimError, match="no tpu-v5e shapes; give one"):
        generate_jobs(parse_synthetic(str(f), "tpu-v5e"), 0)
    f.write_text("jobs: 7\nslice_mix: {2x2: 1, 4x8: 1}\nduration: {kind: fixed, median_s: 60}\n")
    spec = parse_synthetic(str(f), "tpu-v5e")
    assert spec.generation == "tpu-v5e" and {j.shape for j in generate_jobs(spec, 0)} == {(2, 2), (4, 8)}
    f.write_text("jobs: 7\nbogus: 1\n")
    with pytest.raises(PodsimError, match="field 'bogus': unknown field"):
        parse_synthetic(str(f), "tpu-v4")


@pytest.mark.parametrize("text,match", [
    ("jobs", "not KEY=VALUE"),
    ("color=red", "key 'color' is not known"),
    ("rate=fast", "rate='fast'"),
    ("rate=1,gaps=1h", "not both"),
    ("mix=4x4x4", "NAME:WEIGHT"),
    ("steps=100", "steps need models"),
    ("models=gpt9:1", "unknown model 'gpt9'"),
    ("duration=weird", "field 'duration.kind'"),
    ("jobs=0", "field 'jobs'"),
])
def test_bad_specs_say_what_is_wrong(text, match):
    with pytest.raises(PodsimError, match=match):
        generate_jobs(parse_synthetic(text, "tpu-v4"), 0)


def test_arrival_scale_compresses_submissions_only():
    base = load_trace_csv(SAMPLE, "tpu-v4")
    fast = load_trace_csv(SAMPLE, "tpu-v4", arrival_scale=0.5)
    assert [j.submit_s / 2 for j in base] == [j.submit_s for j in fast]
    assert [j.duration_s for j in base] == [j.duration_s for j in fast]
    with pytest.raises(PodsimError, match="arrival_scale 0"):
        load_trace_csv(SAMPLE, "tpu-v4", arrival_scale=0)
