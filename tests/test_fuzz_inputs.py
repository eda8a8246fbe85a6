"""The fuzz tier: Hypothesis generates scenario, request, trace and CSV files (valid and broken)
and the CLI or loader must answer with exit 0 or 2 (a PodsimError), never a traceback, never a
NaN or infinity in its output. Fixed seed (derandomize) and bounded example counts keep it a
few seconds in CI; the sizes are in FUZZ_EXAMPLES."""

from __future__ import annotations

import json
import math
import os

import pytest
import yaml
from helpers import run_podsim
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from podsim.errors import PodsimError

FUZZ_EXAMPLES = int(os.environ.get("PODSIM_FUZZ_EXAMPLES", "40"))  # per strategy (5); raise it for a longer hunt
FUZZ = settings(max_examples=FUZZ_EXAMPLES, derandomize=True, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 1e30, 1e300, 2**63 - 1, 2**63, 0.5]),
)
SCALARS = st.one_of(NUMBERS, st.text(max_size=12), st.booleans(), st.none(),
                    st.sampled_from(["3h", "1e309s", "-2h", "2/h", "99.5%", "nan", "4x4", "2x2x2", "all", "z"]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                      max_leaves=8)

SCENARIO = {"name": "fuzz", "topology": {"generation": "tpu-v5e", "wiring": "static", "pods": 1},
            "workload": {"synthetic": {"jobs": 5, "rate": "2/h", "mix": {"2x2": 1}}}, "horizon": "6h", "seed": 1}
FIELDS = ["name", "seed", "horizon", "samples", "topology.pods", "topology.generation", "workload.synthetic.jobs",
          "workload.synthetic.rate", "workload.synthetic.mix", "workload.synthetic.priorities",
          "workload.synthetic.duration", "failures.host", "failures.host.mtbf", "policy.checkpoint_interval",
          "solver.decision_time_limit", "targets", "topology.overrides"]


def _set(raw: dict, dotted: str, value) -> dict:
    node = raw
    *head, last = dotted.split(".")
    for k in head:
        node = node.setdefault(k, {}) if isinstance(node.get(k, {}), dict) else {}
    node[last] = value
    return raw


def _no_nonfinite(text: str) -> bool:
    return not any(tok in text for tok in ("NaN", "Infinity"))


def _exit_ok(code: int, err: str) -> None:
    assert code in (0, 2), err
    assert "Traceback" not in err and "internal error" not in err
    if code == 2:
        assert len(err.strip().splitlines()) == 1 and err.startswith("error: ")


@FUZZ
@given(changes=st.lists(st.tuples(st.sampled_from(FIELDS), VALUES), min_size=1, max_size=3))
def test_fuzzed_scenarios_validate_or_fail_in_one_line(changes, tmp_path, capsys):
    raw = json.loads(json.dumps(SCENARIO))
    for dotted, value in changes:
        _set(raw, dotted, value)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(raw))
    code, out, err = run_podsim(capsys, "validate", str(path), "--json")
    _exit_ok(code, err)
    assert _no_nonfinite(out)


@FUZZ
@given(entries=st.lists(st.dictionaries(st.sampled_from(["id", "shape", "priority", "twisted", "arrival_s", "x"]),
                                        SCALARS, max_size=5), max_size=4))
def test_fuzzed_requests_place_or_fail_in_one_line(entries, tmp_path, capsys):
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(entries))
    code, out, err = run_podsim(capsys, "place", "-g", "tpu-v4", "-r", str(path), "--solver", "greedy", "--json")
    _exit_ok(code, err)
    assert _no_nonfinite(out)


OP = st.fixed_dictionaries({"id": st.sampled_from(["a", "b", "c"]),
                            "kind": st.sampled_from(["compute", "all_reduce", "send_recv", "bogus"])},
                           optional={"duration_s": NUMBERS, "flops": NUMBERS, "bytes": st.one_of(NUMBERS, st.text(max_size=6)),
                                     "group": st.sampled_from(["x", "x,y", "all", "z:3", "dcn", "q"]), "axis": st.sampled_from(["x", "y"]),
                                     "deps": st.lists(st.sampled_from(["a", "b", "c"]), max_size=2), "efficiency": NUMBERS})


@FUZZ
@given(ops=st.lists(OP, max_size=4), as_json=st.booleans())
def test_fuzzed_traces_show_or_fail_in_one_line(ops, as_json, tmp_path, capsys):
    data = {"podsim_trace": 1, "ops": ops}
    path = tmp_path / ("t.json" if as_json else "t.yaml")
    path.write_text(json.dumps(data) if as_json else yaml.safe_dump(data))
    code, out, err = run_podsim(capsys, "trace", "show", str(path), "--generation", "tpu-v4", "--json")
    _exit_ok(code, err)
    assert _no_nonfinite(out)


CELL = st.one_of(st.integers(-5, 10**6).map(str), st.floats(allow_nan=True, allow_infinity=True).map(repr),
                 st.text(alphabet="abc,\"\n 0123456789.-e", max_size=6))


@FUZZ
@given(rows=st.lists(st.lists(CELL, min_size=0, max_size=5), max_size=5), failures=st.booleans())
def test_fuzzed_csv_files_load_or_fail_in_one_line(rows, failures, tmp_path):
    import csv
    import io

    from podsim.cluster import load_failure_trace
    from podsim.workload import load_trace_csv

    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["time_s", "component", "id", "repair_s"] if failures else ["job_id", "submission_time", "duration", "num_gpu"])
    writer.writerows(rows)
    path = tmp_path / "f.csv"
    path.write_text(buf.getvalue())
    try:
        loaded = load_failure_trace(path) if failures else load_trace_csv(path, "tpu-v5e")
    except PodsimError as exc:
        assert "\n" not in str(exc)
        return
    for item in loaded:
        values = (item.time_s, item.repair_s) if failures else (item.submit_s, item.duration_s)
        assert all(math.isfinite(v) for v in values)


@FUZZ
@given(data=st.binary(max_size=200))
def test_fuzzed_bytes_are_refused_in_one_line(data, tmp_path, capsys):
    path = tmp_path / "b.yaml"
    path.write_bytes(data)
    code, _, err = run_podsim(capsys, "validate", str(path))
    _exit_ok(code, err)


@pytest.mark.parametrize("text", ["a: [1, 2", "{x: 1e400}", "- !!python/object:os.system ls"])
def test_corpus_yaml(text, tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    code, _, err = run_podsim(capsys, "validate", str(path))
    assert code == 2 and len(err.strip().splitlines()) == 1
