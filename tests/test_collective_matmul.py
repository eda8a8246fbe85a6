"""Collective matmul as a chunk schedule (XLA's windowed einsum, Wang et al. ASPLOS 2023), and
sequence parallelism's sharded norm and residual traffic.

The small case is 2 layers of a GPT-style decoder (d_model 4096) with tensor=4 along a 4-chip
line of TPU v4 chips and no other parallelism, so every compute op chains on one stream and
the only communication is tensor-parallel: the step is the compute plus what the communication
leaves exposed, and each decomposed matmul's exposure can be computed by hand from its parts.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

import pytest

from podsim.engine import simulate_step
from podsim.errors import PodsimError
from podsim.perf import chip_compute
from podsim.perf.opmodel import op_timer
from podsim.topology import build_slice, get_generation
from podsim.trace import generate_trace
from podsim.trace.chakra_export import export_chakra
from podsim.trace.generate import GenerateOptions
from podsim.trace.model import Compute, SendRecv
from podsim.trace.native import trace_from_dict, trace_to_dict

GEN = "tpu-v4"
SHAPE = "4x1x1"  # a 4-chip line: tensor on x, no wraparound
D = 4096
SMALL = {"n_layers": 2, "global_batch": 8, "seq_len": 1024, "d_model": D, "n_heads": 16, "n_kv_heads": 16, "d_ff": 4 * D}


def _step(mode: str, **opts):
    trace = generate_trace("gpt3-175b", SHAPE, "tensor=4", generation=GEN, overrides=SMALL,
                           options=GenerateOptions(collective_matmul=mode, sequence_parallel=True, **opts))
    return trace, simulate_step(trace, build_slice(GEN, SHAPE))


def _compute_s(trace) -> float:
    g = get_generation(GEN)
    duration = op_timer(g, chip_compute(g))
    return sum(duration(op) for op in trace.ops if isinstance(op, Compute))


@pytest.fixture(scope="module")
def runs():
    return {mode: _step(mode) for mode in ("exposed", "chunked", "hidden")}


def test_exposed_tensor_parallel_time_lies_strictly_between_the_extremes(runs):
    """With only tensor-parallel communication, what the step spends beyond its compute is the
    exposed tensor-parallel time: the chunk schedule leaves less than every collective on the
    critical path and more than perfect overlap."""
    exposed = {mode: result.step_time_s - _compute_s(trace) for mode, (trace, result) in runs.items()}
    assert _compute_s(runs["chunked"][0]) == pytest.approx(_compute_s(runs["exposed"][0]), rel=1e-12)  # the same work, split
    assert exposed["exposed"] > exposed["chunked"] > exposed["hidden"] > 0
    assert exposed["chunked"] < 0.5 * exposed["exposed"]


def test_chunk_schedule_equals_the_hand_computed_one(runs):
    """Each decomposed matmul: t = 4 partial matmuls and t - 1 = 3 permutes of one shard; each
    iteration takes max(part, permute), so a loop exposes 3 x max(0, permute - part). The permute
    of one [b, s/4, d] shard runs at one link's rate plus the hop latency of the longest path
    round the 4-chip line (3 hops back from its end). Step = compute + those loops + the
    collectives no matmul absorbs (embedding, LM head, loss), within 1%."""
    trace, result = runs["chunked"]
    g = get_generation(GEN)
    duration = op_timer(g, chip_compute(g))
    shard = 8 * 1024 * D * 2 / 4  # bf16 activations of the 8 sequences, one of 4 shards
    permute_s = shard / g.link_bytes_per_s + 3 * g.hop_latency_s
    sends = [op for op in trace.ops if isinstance(op, SendRecv)]
    assert sends and all(op.bytes == shard for op in sends)
    parts = defaultdict(list)
    for op in trace.ops:
        if isinstance(op, Compute) and ".part" in op.id:
            parts[op.id.rsplit(".part", 1)[0]].append(duration(op))
    assert len(parts) == 2 * 8 and all(len(p) == 4 for p in parts.values())  # 4 per layer forward, 4 backward
    loops = sum(3 * max(0.0, permute_s - p[0]) for p in parts.values())
    assert 0 < loops
    tp_ids = {op.id for op in trace.ops if not isinstance(op, Compute | SendRecv)}
    others = sum(t.duration_s for t in result.timeline if t.id in tp_ids)  # blocking, alone on the links
    expected = _compute_s(trace) + loops + others
    assert result.step_time_s == pytest.approx(expected, rel=0.01)
    # and loop by loop: its span less its parts is what the hand schedule says
    timing = {t.id: t for t in result.timeline}
    for loop, p in parts.items():
        ops = [timing[i] for i in timing if i.startswith(loop + ".")]
        span = max(t.end_s for t in ops) - min(t.start_s for t in ops)
        assert span - sum(p) == pytest.approx(3 * max(0.0, permute_s - p[0]), abs=2e-7), loop


def test_permutes_move_the_bytes_the_collectives_they_replace_move():
    """A decomposed all-gather or reduce-scatter moves (t - 1) / t of the buffer per chip as
    t - 1 shard permutes: the per-axis volume (bus-bandwidth convention) is unchanged."""
    exposed, _ = _step("exposed")
    chunked, _ = _step("chunked")
    assert chunked.meta["comm_bytes_per_axis"]["tensor"] == pytest.approx(exposed.meta["comm_bytes_per_axis"]["tensor"], rel=1e-12)


def test_all_gather_only_decomposes_the_gathers_into_matmuls():
    """The MLPerf v4.0-v4.1 MaxText GPT-3 scripts set --xla_tpu_decompose_all_gather_einsum and
    not its reduce-scatter counterpart: gathers (forward inputs, backward output gradients)
    become permutes beside partial matmuls; reduce-scatters stay on the critical path."""
    trace, result = _step("all_gather")
    loops = {op.id.rsplit(".permute", 1)[0] for op in trace.ops if isinstance(op, SendRecv)}
    assert loops and all(i.endswith((".in", ".out")) for i in loops)
    assert all(("fwd" in i) == i.endswith(".in") for i in loops)  # forward: into the block; backward: its output gradient
    kinds = {op.kind for op in trace.ops if hasattr(op, "kind")}
    assert "reduce_scatter" in kinds
    chunked = _step("chunked")[1].step_time_s
    assert chunked < result.step_time_s < _step("exposed")[1].step_time_s


def test_auto_is_the_compilers_default_per_chip_and_plan():
    """auto: TPUs decompose both sides (the TPU compiler windows tensor-parallel einsums unless
    told not to: MaxText's DISABLE_COLLECTIVE_MATMUL); GPUs stay exposed below XLA's GPU threshold
    (100000 MiB); a Megatron all-reduce program (sequence_parallel=false) has nothing to
    decompose. The trace's meta says which and why."""
    def mode(generation=GEN, shape=SHAPE, plan="tensor=4", **opts):
        t = generate_trace("gpt3-175b", shape, plan, generation=generation, overrides=SMALL, options=GenerateOptions(**opts))
        return t.meta["collective_matmul"]["mode"], t.meta["collective_matmul"]["why"], t
    for gen, shape in ((GEN, SHAPE), ("tpu-v5p", "2x2x1"), ("tpu-v5e", "2x2")):
        m, why, t = mode(gen, shape)
        assert m == "chunked" and "xla_flags_library.py" in why and t.meta["overlap"]["collective_matmul"] == "chunked"
        assert t.meta["sequence_parallel"] and "base.yml" in t.meta["sequence_parallel_why"]
        assert any(isinstance(op, SendRecv) for op in t.ops)
    m, why, t = mode(sequence_parallel=False)  # Megatron all-reduces
    assert m == "exposed" and "Megatron" in why and not any(isinstance(op, SendRecv) for op in t.ops)
    m, why, _ = mode("gpu-h100", "8", "tensor=4,data=2")
    assert m == "exposed" and "100000 MiB" in why
    assert mode(collective_matmul=True)[0] == "chunked" and mode(collective_matmul=False)[0] == "exposed"
    assert mode(collective_matmul=True)[2].meta["sequence_parallel"]  # decomposing needs the sharded layout
    assert mode(plan="data=4", collective_matmul="chunked")[:2] == ("exposed", "no tensor parallelism")
    with pytest.raises(PodsimError, match="cannot run with sequence_parallel=false"):
        mode(collective_matmul="chunked", sequence_parallel=False)


def test_collective_matmul_round_a_ring_over_two_axes():
    """tensor=4 laid on a 2x2 plane: the permutes shift round the group's rank order (x fastest),
    so two of the four hops cross two links; the engine runs them and the bytes match."""
    t = generate_trace("gpt3-175b", "2x2x1", "tensor=4", generation=GEN, overrides=SMALL, options=GenerateOptions(collective_matmul="chunked"))
    sends = [op for op in t.ops if isinstance(op, SendRecv)]
    assert sends and all(len(op.group) == 2 for op in sends)
    r = simulate_step(t, build_slice(GEN, "2x2x1"))
    timing = {x.id: x for x in r.timeline}
    g = get_generation(GEN)
    assert timing[sends[0].id].duration_s == pytest.approx(sends[0].bytes / g.link_bytes_per_s + 2 * g.hop_latency_s, rel=1e-6)
    assert trace_from_dict(trace_to_dict(t)).ops == t.ops  # the file format keeps the two-axis group
    with pytest.raises(PodsimError, match="round a ring over several axes .x,y. has no Chakra form"):
        export_chakra(t, (2, 2, 1))


def test_collective_matmul_errors_name_the_value():
    with pytest.raises(PodsimError, match="collective_matmul 'sometimes' is not known; use one of: auto, exposed, chunked"):
        generate_trace("gpt3-175b", SHAPE, "tensor=4", generation=GEN, overrides=SMALL, options=GenerateOptions(collective_matmul="sometimes"))
    with pytest.raises(PodsimError, match="tensor=4 must divide the sequence length 1022 or the width 4094"):
        generate_trace("gpt3-175b", SHAPE, "tensor=4", generation=GEN, overrides={**SMALL, "seq_len": 1022, "d_model": 4094, "head_dim": 256},
                       options=GenerateOptions(collective_matmul="chunked"))


# Sequence parallelism (Korthikanti et al. 2022) -----------------------------------------------

def test_sequence_parallel_norm_and_residual_bytes_fall_by_the_tensor_degree():
    """Each block's norm (read and write its input) and residual add (two reads, one write) run on
    a 1/t slice of the sequence: the per-chip norm/residual bytes of the step fall by t = 4, and
    they are the only compute bytes that change."""
    def step(sp: bool, mode: str):
        return generate_trace("gpt3-175b", SHAPE, "tensor=4", generation=GEN, overrides=SMALL,
                              options=GenerateOptions(sequence_parallel=sp, collective_matmul=mode))
    chunked = step(True, "chunked")  # the norms and residual adds are their own ops here
    nr = [op for op in chunked.ops if isinstance(op, Compute) and op.name.endswith((": norm", ": residual add"))]
    act = 8 * 1024 * D * 2
    per_chip_sp = sum(op.hbm_bytes for op in nr)
    blocks = 2 * SMALL["n_layers"]  # attention and MLP per layer; forward once, backward twice the bytes
    full = blocks * 5 * act * 3
    assert per_chip_sp == pytest.approx(full / 4, rel=1e-12)
    hbm = {sp: sum(op.hbm_bytes for op in step(sp, "exposed").ops if isinstance(op, Compute)) for sp in (False, True)}
    final_norm = 2 * act * 3  # the LM head's norm, forward and backward
    assert hbm[False] - hbm[True] == pytest.approx((full + final_norm) * (1 - 1 / 4), rel=1e-9)


def test_sequence_parallel_shortens_the_step_by_the_saved_norm_traffic():
    """In time: the saved bytes at the HBM rate the per-op model uses (the collectives carry the
    same bytes either way, all-gather + reduce-scatter instead of all-reduce)."""
    g = get_generation(GEN)
    chip = chip_compute(g)
    comp = {}
    for sp in (False, True):
        t = generate_trace("gpt3-175b", SHAPE, "tensor=4", generation=GEN, overrides=SMALL,
                           options=GenerateOptions(sequence_parallel=sp, collective_matmul="exposed"))
        comp[sp] = (_compute_s(t), sum(op.hbm_bytes for op in t.ops if isinstance(op, Compute)))
    saved_bytes = comp[False][1] - comp[True][1]
    assert comp[False][0] - comp[True][0] == pytest.approx(saved_bytes / (g.hbm_bytes_per_s * chip.hbm_fraction), rel=1e-6)


def test_options_reach_the_trace_meta():
    t = generate_trace("gpt3-175b", SHAPE, "tensor=4", generation=GEN, overrides=SMALL,
                       options=replace(GenerateOptions(), collective_matmul="hidden"))
    assert t.meta["overlap"]["collective_matmul"] == "hidden" and t.meta["collective_matmul"]["why"] == "as asked"
