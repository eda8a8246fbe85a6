"""Step traces from files run on the engine: ASTRA-sim microbenchmarks, generated models, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_podsim

from podsim.engine import simulate_step, step_summary
from podsim.errors import PodsimError
from podsim.topology import build_slice, get_generation
from podsim.trace import generate_trace, load_trace
from podsim.trace.astra_network import network_generation
from podsim.trace.model import Compute

DATA = Path(__file__).parent / "data" / "astra-sim"
RING8 = DATA / "configs" / "inputs_network_tpu_v3_8.yml"
MIB = 2**20


def _ranks(kind: str) -> list[Path]:
    files = sorted((DATA / "microbench-8npu-1MB" / "et").glob(f"{kind}.*.et"))
    assert len(files) == 8
    return files


# Textbook costs on a bidirectional ring of p = 8 (hardware.md col.1, col.11, col.21):
# alpha = 1 us per hop, each direction of a link 80 GB/s, n = 1 MiB.
P, ALPHA, B = 8, 1e-6, 80e9
EXPECTED_S = {
    "all_reduce": 2 * (P - 1) * ALPHA + 2 * (P - 1) / P * MIB / (2 * B),
    "all_gather": (P - 1) * ALPHA + (P - 1) / P * MIB / (2 * B),
    "reduce_scatter": (P - 1) * ALPHA + (P - 1) / P * MIB / (2 * B),
}


@pytest.mark.parametrize("kind", ["all_reduce", "all_gather", "reduce_scatter", "all_to_all"])
def test_astra_microbenchmarks_on_their_ring(kind):
    """The 8-NPU 1 MiB Chakra microbenchmarks on ASTRA-sim's 8-ring (80 GB/s, 1 us links):
    simulated = the engine's closed form, and = the bidirectional-ring textbook cost."""
    gen = network_generation(RING8)
    assert (gen.pod_shape, gen.link_bytes_per_s, gen.hop_latency_s) == ((8, 1), 80e9, 1e-6)
    trace = load_trace(_ranks(kind), shape=gen.pod_shape)
    result = simulate_step(trace, build_slice(gen))
    s = step_summary(result, trace)
    (only,) = s["collectives"].values()
    assert only["bytes"] == MIB
    assert s["step_time_s"] == pytest.approx(only["closed_form_s"], rel=0.01)
    if kind in EXPECTED_S:
        assert s["step_time_s"] == pytest.approx(EXPECTED_S[kind], rel=0.01)
    else:
        # direct all-to-all on a bidirectional 8-ring: the busiest link carries 1+2+3+2 = 8
        # pieces of n/8 (dimension order, antipode split both ways); latency of 4 hops
        assert s["step_time_s"] == pytest.approx(4 * ALPHA + 8 * (MIB / 8) / B, rel=0.01)


def test_generated_trace_step_and_mfu():
    """A generated GPT-3 step on a 4x4x8 slice: the compute stream takes exactly the roofline
    time of its ops (FLOPs at 60% of peak, or HBM traffic, op by op, one after another), the
    tensor-parallel all-reduces are partly exposed, and the model FLOPs utilisation is what
    that step time gives."""
    trace = generate_trace("gpt3-175b", "4x4x8", "fsdp=32,tensor=4", generation="tpu-v4",
                           overrides={"n_layers": 4, "global_batch": 32})
    gen = get_generation("tpu-v4")
    result = simulate_step(trace, build_slice("tpu-v4", "4x4x8"), compute_efficiency=0.6)
    s = step_summary(result, trace)
    roofline = sum(max(op.flops / (gen.peak_flops_per_s * 0.6), op.hbm_bytes / gen.hbm_bytes_per_s)
                   for op in trace.ops if isinstance(op, Compute))
    assert s["compute_s"] == pytest.approx(roofline, rel=1e-9)
    assert s["exposed_comm_s"] > 0.01 * s["step_time_s"]
    chips = 128
    assert s["mfu"] == pytest.approx(trace.meta["model_flops_per_step"] / (chips * gen.peak_flops_per_s * s["step_time_s"]))
    assert set(s["collectives"]) >= {"all_gather", "reduce_scatter", "all_reduce"}


def test_cli_steptime_trace_json(tmp_path, capsys):
    out = tmp_path / "t.json"
    r = run_podsim(capsys, "trace", "generate", "gpt3-175b", "--slice", "4x4x8", "--parallelism", "fsdp=32,tensor=4", "-o", str(out))
    assert r.code == 0, r.err
    r = run_podsim(capsys, "steptime", "--trace", str(out), "--generation", "tpu-v4", "--slice", "4x4x8", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    for key in ("step_time_s", "compute_s", "exposed_comm_s", "mfu"):
        assert key in doc["metrics"]
    # 96 layers' FSDP gathers and reduce-scatters, and the tensor-parallel all-gathers and reduce-scatters
    # decomposed by default (podsim.trace.defaults: collective matmul on TPUs): 3 shard permutes each on tensor=4
    kinds = dict(zip(doc["tables"]["step_kinds"]["kind"], doc["tables"]["step_kinds"]["ops"], strict=True))
    assert sum(kinds.values()) == 2599 and kinds["send_recv"] == 2304 and doc["metrics"]["step_time_error_text"]


def test_cli_steptime_chakra_pattern(capsys):
    r = run_podsim(capsys, "steptime", "--trace", str(DATA / "microbench-8npu-1MB" / "et" / "all_gather.*.et"), "--network", str(RING8), "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["metrics"]["step_time_s"] == pytest.approx(EXPECTED_S["all_gather"], rel=0.01)


@pytest.mark.parametrize("args,needle", [
    (("steptime", "--trace", "missing.json", "--generation", "tpu-v4"), "missing.json"),
    (("steptime", "--trace", "x.json"), "give --generation GEN"),
    (("steptime", "--trace", str(DATA / "text-workloads" / "microAllReduce.txt"), "--generation", "tpu-v4", "--slice", "4x4x6"), "multiple of 4"),
])
def test_cli_steptime_trace_errors(capsys, args, needle):
    r = run_podsim(capsys, *args)
    assert r.code == 2 and needle in r.err and "Traceback" not in r.err
    assert len(r.err.strip().splitlines()) == 1


def test_network_config_errors(tmp_path):
    f = tmp_path / "n.yml"
    f.write_text("topology: [FullyConnected]\nnpus_count: [8]\nbandwidth: [50]\nlatency: [500]\n")
    with pytest.raises(PodsimError, match="not supported"):
        network_generation(f)
    f.write_text("topology: [Ring, Ring]\nnpus_count: [4, 8]\nbandwidth: [50, 0]\nlatency: [500, 500]\n")
    with pytest.raises(PodsimError, match=r"bandwidth 0 GB/s is out of range: a link bandwidth is \(0 GB/s, "):
        network_generation(f)
    # dimensions with their own bandwidths are read now (tests/test_astra_configs.py)
