"""The hosts' input pipeline: a step waits for its input when the hosts feed slower than the
chips run, and says so. (The named jpeg pipeline has no rate with a basis on any generation at
present, podsim.perf.chips.V3_HOST_JPEG_IMAGES_PER_S, so these tests give the rate.)"""

from __future__ import annotations

import json

import pytest

from podsim.engine import simulate_step, step_summary
from podsim.engine.timeline import build_timeline
from podsim.errors import PodsimError
from podsim.perf import chips
from podsim.topology import build_slice, get_generation
from podsim.trace import generate_trace
from podsim.trace.chakra_export import export_chakra
from podsim.trace.generate import GenerateOptions
from podsim.trace.model import Compute
from podsim.trace.native import trace_from_dict, trace_to_dict

# ResNet-50 data parallel on 16 TPU v3 chips (2 hosts of 8, hardware.md v3.6), 256 images per chip
RESNET = dict(model="resnet50", slice_shape="4x4", parallelism="data=16", generation="tpu-v3", overrides={"global_batch": 4096})
RATE = 5000.0  # images per second per host: slower than the chips (2048 images per host in 0.41 s)


def _run(**opts):
    trace = generate_trace(**RESNET, options=GenerateOptions(**opts))
    result = simulate_step(trace, build_slice("tpu-v3", "4x4"))
    return trace, result, step_summary(result, trace)


def test_an_input_bound_resnet_step_says_so_and_takes_the_input_rate_bound():
    """Feeding at RATE, each v3 host feeds its 8 chips' 2048 images in 2048 / rate; the chips
    alone would take less, so the step is exactly that and input-bound."""
    _, _, chips_only = _run()
    trace, result, s = _run(input_rate_per_host=RATE)
    bound = 4096 / 2 / RATE
    assert chips_only["step_time_s"] < bound
    assert s["input_bound"] and s["step_time_s"] == pytest.approx(bound, rel=1e-12)
    assert s["input_s"] == pytest.approx(bound, rel=1e-12)
    assert s["input_wait_s"] == pytest.approx(bound - chips_only["step_time_s"], rel=1e-9)
    # the chips' own work is unchanged: compute and exposed communication as without the hosts
    assert s["compute_s"] == pytest.approx(chips_only["compute_s"], rel=1e-12)
    assert s["exposed_comm_s"] == pytest.approx(chips_only["exposed_comm_s"], rel=1e-9)
    assert "input" not in s["collectives"]
    meta = trace.meta["host_input"]
    assert meta["items_per_host"] == 2048 and meta["unit"] == "images" and meta["source"] == "input_rate_per_host"


def test_hosts_faster_than_the_chips_leave_the_step_alone():
    _, _, chips_only = _run()
    _, _, s = _run(input_rate_per_host=1e7)
    assert not s["input_bound"] and s["input_wait_s"] == 0
    assert s["step_time_s"] == pytest.approx(chips_only["step_time_s"], rel=1e-12)
    assert s["input_s"] == pytest.approx(2048 / 1e7)


def test_a_transformer_takes_tokens_per_host():
    """gpt3-175b (4 layers) with fsdp over 64 v4 chips (16 hosts of 4, v4.12): each host feeds
    the tokens of its chips' sequences."""
    opts = GenerateOptions(input_rate_per_host=1e4)
    t = generate_trace("gpt3-175b", "4x4x4", "fsdp=64", generation="tpu-v4", overrides={"n_layers": 4, "global_batch": 64}, options=opts)
    tokens = 64 * 2048 / 16
    assert t.meta["host_input"]["items_per_host"] == tokens and t.meta["host_input"]["unit"] == "tokens"
    s = step_summary(simulate_step(t, build_slice("tpu-v4", "4x4x4")), t)
    assert s["input_bound"] and s["step_time_s"] == pytest.approx(tokens / 1e4, rel=1e-12)


def test_input_errors_name_the_field(monkeypatch):
    assert chips.V3_HOST_JPEG_IMAGES_PER_S is None  # no basis: asked for by name, the pipeline is refused
    with pytest.raises(PodsimError, match=r"input_pipeline 'jpeg' on tpu-v3: the hosts' rate has no basis .* give the rate instead"):
        generate_trace(**RESNET, options=GenerateOptions(input_pipeline="jpeg"))
    with pytest.raises(PodsimError, match="no published or calibrated rate for tpu-v4 hosts"):
        generate_trace("resnet50", "2x2x2", "data=8", generation="tpu-v4", options=GenerateOptions(input_pipeline="jpeg"))
    monkeypatch.setattr(chips, "V3_HOST_JPEG_IMAGES_PER_S", RATE)  # were there a rate: it is in images, a transformer takes tokens
    with pytest.raises(PodsimError, match="feeds images; gpt3-175b takes tokens"):
        generate_trace("gpt3-175b", "4x4", "fsdp=16", generation="tpu-v3", overrides={"n_layers": 2, "global_batch": 16},
                       options=GenerateOptions(input_pipeline="jpeg"))
    monkeypatch.undo()
    with pytest.raises(PodsimError, match="input_rate_per_host -5 must be a positive number of images"):
        generate_trace(**RESNET, options=GenerateOptions(input_rate_per_host=-5))
    with pytest.raises(PodsimError, match="input_pipeline 'png' is not known"):
        generate_trace(**RESNET, options=GenerateOptions(input_pipeline="png"))


def test_the_input_op_survives_files_and_shows_on_its_own_track():
    trace, result, _ = _run(input_rate_per_host=RATE)
    host = [op for op in trace.ops if isinstance(op, Compute) and op.host]
    assert len(host) == 1 and not host[0].deps
    back = trace_from_dict(trace_to_dict(trace))
    assert [op for op in back.ops if isinstance(op, Compute) and op.host] == host
    events = build_timeline(result)["traceEvents"]
    assert any(e.get("args", {}).get("name") == "host input 0" for e in events if e["ph"] == "M")
    node = next(n for n in export_chakra(trace, (4, 4))[0][1:] if n.name == host[0].name)
    assert next(a.bool_val for a in node.attr if a.name == "is_cpu_op")
    assert get_generation("tpu-v3").chips_per_host.value == 8


def test_steptime_says_input_bound(capsys, tmp_path):
    """The CLI's step breakdown names the wait: `podsim steptime` on an input-bound trace."""
    from helpers import run_podsim

    path = tmp_path / "t.json"
    code, _, err = run_podsim(capsys, "trace", "generate", "resnet50", "--slice", "4x4", "-p", "data=16", "-g", "tpu-v3",
                              "--set", "global_batch=4096", "--input-rate", str(RATE), "-o", str(path))
    assert code == 0, err
    code, out, err = run_podsim(capsys, "steptime", "--trace", str(path), "--generation", "tpu-v3", "--slice", "4x4")
    assert code == 0, err
    assert "host input" in out and "input-bound:" in out  # the row, however the table wraps it
    code, out, _ = run_podsim(capsys, "steptime", "--trace", str(path), "--generation", "tpu-v3", "--slice", "4x4", "--json")
    s = json.loads(out)["metrics"]
    assert s["input_bound"] and s["step_time_s"] == pytest.approx(4096 / 2 / RATE, rel=1e-9)
    code, _, err = run_podsim(capsys, "trace", "generate", "resnet50", "--slice", "4x4", "-p", "data=16", "-g", "tpu-v3",
                              "--input-rate", "0", "-o", str(path))
    assert code == 2 and "--input-rate" in err and len(err.strip().splitlines()) == 1


def test_a_host_rate_has_a_basis_exactly_when_host_input_rate_gives_it(monkeypatch):
    """host_input_has_basis and host_input_rate read one lookup (chips._host_input): a named
    pipeline's rate has a basis exactly when host_input_rate returns it (read when called, as
    calibration sets it), and both refuse a generation or pipeline with no entry alike."""
    assert not chips.host_input_has_basis("tpu-v3", "jpeg")
    with pytest.raises(PodsimError, match="has no basis"):
        chips.host_input_rate("tpu-v3", "jpeg")
    monkeypatch.setattr(chips, "V3_HOST_JPEG_IMAGES_PER_S", RATE)
    assert chips.host_input_has_basis("tpu-v3", "jpeg") and chips.host_input_rate("tpu-v3", "jpeg") == (RATE, "images")
    for face in (chips.host_input_has_basis, chips.host_input_rate):
        with pytest.raises(PodsimError, match="no published or calibrated rate for tpu-v4 hosts"):
            face("tpu-v4", "jpeg")
        with pytest.raises(PodsimError, match="input_pipeline 'none' has no rate"):
            face("tpu-v3", "none")
