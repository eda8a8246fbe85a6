"""podsim's native trace format: round trips, the documented example, one-line errors, atomic writes."""

from __future__ import annotations

import json
import os

import pytest

from podsim.errors import PodsimError
from podsim.trace import StepTrace, generate_trace, load_trace, save_trace
from podsim.trace.model import AxisGroup, Collective, Compute, SendRecv, parse_group
from podsim.trace.native import dumps_trace, trace_from_dict

README_EXAMPLE = """\
podsim_trace: 1
name: two-layer example
ops:
  - {id: fwd, kind: compute, flops: 2.4e12, hbm_bytes: 3GiB}
  - {id: tp, kind: all_reduce, bytes: 64MiB, group: "x", deps: [fwd]}
  - {id: bwd, kind: compute, flops: 4.8e12, hbm_bytes: 6GiB, deps: [tp]}
  - {id: grads, kind: all_reduce, bytes: 1.5GiB, group: "y,z", deps: [bwd], layer: L0}
  - {id: stage, kind: send_recv, bytes: 32MiB, axis: "z:4", shift: 1, deps: [bwd]}
  - {id: step, kind: compute, duration_s: 0.002, deps: [grads, stage], name: optimizer}
"""


def test_readme_example_loads_with_units_and_defaults(tmp_path):
    """The README's example: sizes with units, groups, a send_recv, a fixed-duration op."""
    path = tmp_path / "example.yaml"
    path.write_text(README_EXAMPLE)
    t = load_trace(path, shape=(4, 4, 8))
    ops = t.by_id()
    assert ops["fwd"] == Compute("fwd", flops=2.4e12, hbm_bytes=3 * 2**30)
    assert ops["tp"] == Collective("tp", "all_reduce", 64 * 2**20, parse_group("x"), deps=("fwd",))
    assert ops["grads"].group == parse_group("y,z") and ops["grads"].layer == "L0"
    assert ops["stage"] == SendRecv("stage", 32 * 2**20, parse_group("z:4")[0], 1, deps=("bwd",))
    assert ops["step"].duration_s == 0.002 and ops["step"].name == "optimizer"
    assert [op.id for op in t.topological_order()][-1] == "step"


@pytest.mark.parametrize("suffix", [".json", ".yaml", ".yml"])
def test_generated_trace_round_trips(tmp_path, suffix):
    """save -> load gives back the same ops (ids, sizes, groups, deps, bubble flags) and meta."""
    t = generate_trace("gpt3-175b", "4x4x4", "data=2,pipeline=4,tensor=8", overrides={"n_layers": 8, "global_batch": 16})
    path = save_trace(t, tmp_path / f"t{suffix}")
    back = load_trace(path)
    assert back.ops == t.ops
    assert back.meta["mesh"] == t.meta["mesh"] and back.name == t.name
    assert any(op.bubble for op in back.ops if isinstance(op, Compute))
    if suffix == ".json":
        assert json.loads(path.read_text())["podsim_trace"] == 1


def _err(data: dict) -> str:
    with pytest.raises(PodsimError) as exc:
        trace_from_dict(data)
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


def test_errors_name_the_op_and_the_problem():
    """Each bad input gives one line naming the op (or the file-level field) and what is wrong."""
    ok = {"id": "a", "kind": "compute", "flops": 1.0}
    assert "op 'b': unknown op kind 'all_shuffle'; known: compute, all_reduce" in _err({"podsim_trace": 1, "ops": [ok, {"id": "b", "kind": "all_shuffle", "bytes": 1, "group": "x"}]})
    assert _err({"podsim_trace": 1, "ops": [{"id": "n", "kind": "all_gather", "bytes": -5, "group": "x"}]}) == "op 'n': bytes -5.0 is negative"
    assert _err({"podsim_trace": 1, "ops": [{"id": "n", "kind": "all_gather", "bytes": "-1MiB", "group": "x"}]}).startswith("op 'n': bytes -1048576.0 is negative")
    assert _err({"podsim_trace": 1, "ops": [{"id": "c", "kind": "compute", "duration_s": -1}]}) .startswith("op 'c': field 'duration_s': -1 s is out of range: an op's duration is [0 s, 7 d]")
    assert _err({"podsim_trace": 1, "ops": [{"id": "c", "kind": "compute", "flops": -1}]}) .startswith("op 'c': field 'flops': -1 is out of range")
    cycle = [{"id": "p", "kind": "compute", "deps": ["q"]}, {"id": "q", "kind": "all_reduce", "bytes": 8, "group": "x", "deps": ["p"]}]
    assert _err({"podsim_trace": 1, "ops": cycle}) == "the dependencies form a cycle through op 'p'"
    assert _err({"podsim_trace": 1, "ops": [{**ok, "deps": ["zz"]}]}) == "op 'a' depends on 'zz', which is not in the trace"
    assert "op 'a': field 'group': is not a field of this kind of op" in _err({"podsim_trace": 1, "ops": [{**ok, "group": "x"}]})
    assert "op 'g': group axis 'w' is not understood" in _err({"podsim_trace": 1, "ops": [{"id": "g", "kind": "all_reduce", "bytes": 8, "group": "w"}]})
    assert "names an axis twice" in _err({"podsim_trace": 1, "ops": [{"id": "s", "kind": "send_recv", "bytes": 8, "axis": "x,x"}]})
    two = trace_from_dict({"podsim_trace": 1, "ops": [{"id": "s", "kind": "send_recv", "bytes": 8, "axis": "x,y"}]})  # a ring over two axes
    assert two.ops[0].group == (AxisGroup("x"), AxisGroup("y"))
    assert "op 'a': field 'efficiency'" in _err({"podsim_trace": 1, "ops": [{**ok, "efficiency": 1.5}]})
    assert "version 2 is not supported" in _err({"podsim_trace": 2, "ops": []})
    assert "op #0 is not a mapping" in _err({"podsim_trace": 1, "ops": ["compute"]})
    assert "needs `podsim_trace: 1`" in _err({"ops": []})


def test_group_axis_the_slice_lacks(tmp_path):
    """A group on z is fine on a 3-D slice and an error on a 2-D one; blocks must tile their axis."""
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"podsim_trace": 1, "ops": [{"id": "r", "kind": "reduce_scatter", "bytes": 4096, "group": "x,z"}]}))
    load_trace(path, shape=(4, 4, 4))
    with pytest.raises(PodsimError, match=r"^op 'r': group axis 'z' is not an axis of this slice \(x, y\)$"):
        load_trace(path, shape=(16, 16))
    path.write_text(json.dumps({"podsim_trace": 1, "ops": [{"id": "r", "kind": "all_gather", "bytes": 64, "group": "x:4:4"}]}))
    with pytest.raises(PodsimError, match="group x:4:4 spans 16 chips along x but the slice has 8"):
        load_trace(path, shape=(8, 8))


def test_bad_json_and_yaml_say_where(tmp_path):
    (tmp_path / "a.json").write_text('{"podsim_trace": 1, "ops": [}')
    with pytest.raises(PodsimError, match=r"is not valid JSON: .* line 1 column"):
        load_trace(tmp_path / "a.json")
    (tmp_path / "b.yaml").write_text("podsim_trace: 1\nops: [\n")
    with pytest.raises(PodsimError, match="is not valid YAML at line"):
        load_trace(tmp_path / "b.yaml")


def test_failed_write_leaves_nothing(tmp_path, monkeypatch):
    """The file appears whole or not at all: a failure at the rename removes the temporary file."""
    t = StepTrace((Compute("a", flops=1.0),))
    with pytest.raises(PodsimError, match="must end in .json, .yaml or .yml"):
        save_trace(t, tmp_path / "t.txt")

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(PodsimError, match="cannot write .*t.json.*: disk full"):  # one line naming the path
        save_trace(t, tmp_path / "t.json")
    assert list(tmp_path.iterdir()) == []


def test_invalid_trace_is_not_written(tmp_path):
    bad = StepTrace((Compute("a", deps=("b",)), Compute("b", deps=("a",))))
    with pytest.raises(PodsimError, match="cycle"):
        save_trace(bad, tmp_path / "t.json")
    assert list(tmp_path.iterdir()) == []


def test_json_output_is_one_op_per_line():
    t = StepTrace((Compute("a", flops=1.0), Collective("b", "all_reduce", 2.0, parse_group("x"), deps=("a",))), name="n")
    text = dumps_trace(t)
    assert json.loads(text)["ops"][1] == {"id": "b", "kind": "all_reduce", "bytes": 2, "group": "x", "deps": ["a"]}
    assert len([line for line in text.splitlines() if '"id"' in line]) == 2
