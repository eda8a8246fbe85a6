"""`podsim place` and its files as a user meets them: JSON keys, one-line errors, exit 2."""

from __future__ import annotations

import json

import pytest
from helpers import run_podsim

from podsim.errors import PodsimError
from podsim.placement.failures import load_failures
from podsim.placement.requests import load_requests
from podsim.topology import PodLayout, get_generation

REQUESTS = """\
- {id: train-a, shape: 4x4x8, twisted: true, priority: 1}
- {id: train-b, shape: 8x8x8}
- {id: dev-1, shape: 2x2x1}
- id: big
  shape: 8x8x16
  twisted: true
"""
FAILURES = """\
hosts: [17, 300]
cubes: [5]
ocs: []
ocs_ports: ["12:6"]
"""


def podsim(capsys, *args: str) -> tuple[int, str, str]:
    return run_podsim(capsys, *args)


@pytest.fixture
def files(tmp_path):
    req = tmp_path / "requests.yaml"
    req.write_text(REQUESTS)
    fail = tmp_path / "failed.yaml"
    fail.write_text(FAILURES)
    return tmp_path, req, fail


def test_place_json_keys_and_values(files, capsys):
    _, req, fail = files
    code, out, err = podsim(capsys, "place", "--generation", "tpu-v4", "--requests", str(req), "--failed", str(fail),
                            "--time-limit", "0.5", "--seed", "3", "--json")
    assert code == 0, err
    doc = json.loads(out)
    rows = {r["id"]: r for r in doc["requests"]}
    for r in rows.values():
        assert {"id", "placed", "cubes", "chips", "ocs_circuits", "reason", "topology", "bisection_bytes_per_s"} <= set(r)
    a = rows["train-a"]
    assert a["placed"] and a["topology"] == "twisted torus" and len(a["chips"]) == 128 and len(a["cubes"]) == 2
    assert len(a["ocs_circuits"]) == 2 * 48 and all(len(c) == 3 for c in a["ocs_circuits"])
    assert 5 not in a["cubes"] + rows["train-b"]["cubes"]  # the failed cube
    assert rows["dev-1"]["topology"] == "mesh" and rows["dev-1"]["ocs_circuits"] == []
    s = doc["summary"]
    assert {"placed_chips", "utilisation", "solve_s"} <= set(s)
    assert s["placed_chips"] == sum(len(r["chips"]) for r in rows.values())
    assert s["utilisation"] == pytest.approx(s["placed_chips"] / 4096)


def test_place_greedy_table_output(files, capsys):
    _, req, _ = files
    code, out, err = podsim(capsys, "place", "-g", "tpu-v4", "-r", str(req), "--solver", "greedy")
    assert code == 0, err
    assert "train-a" in out and "twisted" in out and "greedy-best" in out


@pytest.mark.parametrize("text,needle", [
    ("- {id: a, shape: 4x4x6}", "request 'a' (entry 1) field 'shape'"),
    ("- {id: a, shape: 4x4x4}\n- {id: b}", "request 'b' (entry 2) field 'shape'"),
    ("- {id: a, shape: 4x4x4, priority: -1}", "request 'a' (entry 1) field 'priority'"),
    ("- {id: a, shape: 4x4x4, colour: red}", "field 'colour' = 'red': unknown field"),
    ("- {id: a, shape: 4x4x4}\n- {id: a, shape: 2x2x1}", "request 'a' (entry 2) field 'id'"),
    ("- {id: a, shape: 4x4x12, twisted: true}", "request 'a' (entry 1) field 'twisted'"),
    ("- {shape: 4x4x4}", "request entry 1 field 'id'"),
    ("id: a", "expected a YAML list"),
    ("- [unclosed", "not valid YAML"),
])
def test_bad_requests_file_is_one_line_exit_2(tmp_path, capsys, text, needle):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    code, _, err = podsim(capsys, "place", "-g", "tpu-v4", "-r", str(path))
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and needle in lines[0], err


@pytest.mark.parametrize("text,needle", [
    ("hosts: [5000]", "failures field 'hosts': id 5000 does not exist; hosts are 0..1023"),
    ('ocs_ports: ["12-6"]', 'failures field \'ocs_ports\': OCS port \'12-6\' is not of the form "OCS:PORT"'),
    ('ocs_ports: ["12:999"]', 'port "12:999" does not exist'),
    ("racks: [1]", "unknown field"),
])
def test_bad_failures_file_is_one_line_exit_2(files, capsys, text, needle):
    tmp, req, _ = files
    path = tmp / "bad-failures.yaml"
    path.write_text(text)
    code, _, err = podsim(capsys, "place", "-g", "tpu-v4", "-r", str(req), "-f", str(path))
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and needle in lines[0], err


def test_unknown_solver_and_static_failure_fields(files, capsys):
    _, req, fail = files
    code, _, err = podsim(capsys, "place", "-g", "tpu-v4", "-r", str(req), "--solver", "milp")
    assert code == 2 and "solver 'milp' is not known" in err
    fail.write_text('hosts: [3]\nocs_ports: ["1:2"]')
    with pytest.raises(PodsimError, match="this tpu-v5e pod has no OCS"):
        load_failures(fail, PodLayout(get_generation("tpu-v5e")))


def test_request_file_defaults(files):
    _, req, _ = files
    reqs = load_requests(req, get_generation("tpu-v4"))
    assert [(r.id, r.priority, r.twisted, r.arrival_s) for r in reqs][1] == ("train-b", 0, False, 0.0)
