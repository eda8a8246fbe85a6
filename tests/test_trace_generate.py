"""The trace generator against closed forms: FLOPs vs 6·N·T, bytes per parallelism, the 1F1B
bubble on the critical path, gradient overlap, and the jax mesh mapping."""

from __future__ import annotations

import math

import pytest

from podsim.errors import PodsimError
from podsim.trace import PRESETS, GenerateOptions, generate_trace
from podsim.trace.configs import get_model
from podsim.trace.mesh import ParallelPlan, map_mesh
from podsim.trace.model import Collective, Compute, SendRecv, format_group


def useful_flops(trace) -> float:
    return sum(op.flops for op in trace.ops if isinstance(op, Compute) and not op.bubble)


def coll_bytes(trace, kind: str, group: str | None = None) -> float:
    return sum(op.bytes for op in trace.ops if isinstance(op, Collective) and op.kind == kind and (group is None or format_group(op.group) == group))


def kinds(trace) -> set[str]:
    return {op.kind for op in trace.ops if isinstance(op, Collective)} | ({"send_recv"} if any(isinstance(op, SendRecv) for op in trace.ops) else set())


# --- model presets against published figures ----------------------------------------------


def test_preset_sizes_match_published_counts():
    """Parameter counts from the shapes reproduce the published totals."""
    assert abs(PRESETS["gpt3-175b"].params / 175.0e9 - 1) < 0.005  # GPT-3 paper: 175.0B
    assert PRESETS["llama2-70b"].params == 68_976_648_192  # Llama-2-70b checkpoint
    mix = PRESETS["mixtral-8x7b"]
    assert round(mix.params / 1e9, 1) == 46.7 and round(mix.active_params / 1e9, 1) == 12.9  # Mixtral paper
    assert PRESETS["resnet50"].params == 25_557_032  # torchvision resnet50 (weights, BN, fc bias)


@pytest.mark.parametrize("model,shape,plan", [
    ("gpt3-175b", "8x16x16", "data=8,fsdp=16,tensor=16"),
    ("gpt3-175b", "16x16x16", "data=32,pipeline=16,tensor=8"),
    ("llama2-70b", "4x8x8", "data=32,tensor=8"),
    ("llama2-70b", "8x8x8", "fsdp=64,tensor=8"),
])
def test_dense_training_flops_within_5pct_of_6NT(model, shape, plan):
    """Per-step training FLOPs summed over chips (pipeline bubbles excluded) vs 6 x params x tokens."""
    t = generate_trace(model, shape, plan)
    cfg = PRESETS[model]
    ratio = useful_flops(t) * t.meta["chips"] / (6 * cfg.params * cfg.tokens_per_step)
    assert 0.95 <= ratio <= 1.05, ratio
    assert useful_flops(t) * t.meta["chips"] == pytest.approx(cfg.training_flops_per_step(), rel=1e-3)


def test_moe_flops_follow_active_params():
    t = generate_trace("mixtral-8x7b", "4x4x4", "data=8,expert=8")
    cfg = PRESETS["mixtral-8x7b"]
    ratio = useful_flops(t) * t.meta["chips"] / (6 * cfg.active_params * cfg.tokens_per_step)
    assert 0.95 <= ratio <= 1.05, ratio


# --- bytes per parallelism against the analytic formulas ----------------------------------


def test_data_parallel_all_reduce_is_all_gradients_once():
    """Data parallelism alone: one all-reduce per layer (+ embeddings), summing to N x 2 bytes."""
    t = generate_trace("llama2-70b", "4x4x4", "data=64")
    cfg = PRESETS["llama2-70b"]
    assert kinds(t) == {"all_reduce"}
    assert coll_bytes(t, "all_reduce", "x,y,z") == cfg.params * 2
    ars = [op for op in t.ops if isinstance(op, Collective)]
    assert len(ars) == cfg.n_layers + 1
    by_id = t.by_id()
    users = {op.id: [u.id for u in t.ops if op.id in u.deps] for op in ars}
    for ar in ars:  # each waits only for its own layer's backward; only the optimizer waits for it
        (dep,) = ar.deps
        assert isinstance(by_id[dep], Compute) and ".bwd." in dep and by_id[dep].layer == ar.layer
        assert users[ar.id] == ["optimizer"]


def test_gradient_reduction_overlaps_the_rest_of_backward():
    """The last layer's all-reduce can start before the first layer's backward has run."""
    t = generate_trace("gpt3-175b", "4x4x4", "data=64", overrides={"n_layers": 4, "global_batch": 64})
    order = [op.id for op in t.ops]
    ar_last = order.index("L3.grad.ar")
    assert order.index("mb0.bwd.L0.attn") > ar_last  # issued in program order before layer 0's backward
    assert t.by_id()["L3.grad.ar"].deps == ("mb0.bwd.L3.attn",)


@pytest.mark.parametrize("m", [1, 2])
def test_fsdp_gathers_twice_and_reduce_scatters_once_per_microbatch(m):
    """ZeRO-3: weights gathered before forward and backward, gradients reduce-scattered, per micro-batch."""
    t = generate_trace("llama2-70b", "4x4x4", "fsdp=64", options=GenerateOptions(microbatches=m))
    cfg = PRESETS["llama2-70b"]
    emb, layer = cfg.embedding_params, cfg.layer_params
    assert kinds(t) == {"all_gather", "reduce_scatter"}
    assert coll_bytes(t, "all_gather", "x,y,z") == m * 2 * (emb + 2 * cfg.n_layers * layer)
    assert coll_bytes(t, "reduce_scatter", "x,y,z") == m * 2 * (emb + cfg.n_layers * layer)


def test_fsdp_gathers_run_one_layer_ahead():
    t = generate_trace("llama2-70b", "4x4x4", "fsdp=64", overrides={"n_layers": 3})
    ops = t.by_id()
    assert set(ops["mb0.L2.fwd.gather"].deps) == {"mb0.L1.fwd.gather", "mb0.fwd.L0.mlp"}  # after layer 0 ends, during layer 1
    assert "mb0.L2.fwd.gather" in ops["mb0.fwd.L2.attn"].deps


@pytest.mark.parametrize("sp,recompute", [(False, False), (True, False), (False, True)])
def test_tensor_parallel_collectives_per_layer(sp, recompute):
    """Megatron: 2 all-reduces of [b, s, d] per layer forward and 2 backward, plus the embedding
    output, the head's input gradient and the vocab-parallel loss (3 fp32 values per token);
    sequence parallelism turns each into an all-gather and a reduce-scatter of the same size."""
    opts = GenerateOptions(sequence_parallel=sp, recompute=recompute, collective_matmul="exposed")
    t = generate_trace("gpt3-175b", "4x4x4", "data=8,tensor=8", options=opts)
    cfg = PRESETS["gpt3-175b"]
    tensor = t.meta["mesh"]["tensor"]
    b = cfg.global_batch // 8
    act = b * cfg.seq_len * cfg.d_model * 2
    n_act = 4 * cfg.n_layers + 2 + (2 * cfg.n_layers if recompute else 0)
    loss = 3 * b * cfg.seq_len * 4
    if sp:
        assert coll_bytes(t, "all_gather", tensor) == n_act * act
        assert coll_bytes(t, "reduce_scatter", tensor) == n_act * act
        assert coll_bytes(t, "all_reduce", tensor) == loss
    else:
        assert coll_bytes(t, "all_reduce", tensor) == n_act * act + loss
        assert kinds(t) == {"all_reduce"}
    # the data-parallel reduction carries each chip's 1/8 tensor shard of the weights
    per_chip = sum(op.bytes for op in t.ops if isinstance(op, Collective) and op.id.endswith("grad.ar"))
    assert per_chip == pytest.approx(cfg.params * 2 / 8, rel=0.002)


def _longest_path(trace, weight) -> float:
    best: dict[str, float] = {}
    for op in trace.topological_order():
        best[op.id] = weight(op) + max((best[d] for d in op.deps), default=0.0)
    return max(best.values())


def test_pipeline_1f1b_sends_and_bubble_on_the_critical_path():
    """p stages, m micro-batches: m + p - 2 activation shifts (+1) and gradient shifts (-1) of
    [b, s, d]; 2(p - 1) bubble slots; the critical path holds (m + p - 1)(F + B)."""
    p, layers = 4, 16
    t = generate_trace("gpt3-175b", "4x4x4", "data=16,pipeline=4", overrides={"n_layers": layers})
    cfg = get_model("gpt3-175b", {"n_layers": layers})
    m, b = t.meta["microbatches"], t.meta["microbatch_sequences"]
    assert (m, b) == (16, 6)
    sends = [op for op in t.ops if isinstance(op, SendRecv)]
    act = b * cfg.seq_len * cfg.d_model * 2
    assert sum(op.bytes for op in sends) == 2 * (m + p - 2) * act
    assert sorted(op.shift for op in sends) == [-1] * (m + p - 2) + [1] * (m + p - 2)
    assert {str(op.axis) for op in sends} == {t.meta["mesh"]["pipeline"]}
    slot_f = sum(op.flops for op in t.ops if isinstance(op, Compute) and op.id.startswith("mb0.fwd."))
    slot_b = sum(op.flops for op in t.ops if isinstance(op, Compute) and op.id.startswith("mb0.bwd."))
    bubbles = [op for op in t.ops if isinstance(op, Compute) and op.bubble]
    assert sum(op.flops for op in bubbles) == pytest.approx((p - 1) * (slot_f + slot_b))
    optimizer = t.by_id()["optimizer"].flops
    critical = _longest_path(t, lambda op: op.flops if isinstance(op, Compute) else 0.0)
    assert critical == pytest.approx((m + p - 1) * (slot_f + slot_b) + optimizer, rel=1e-9)
    assert t.meta["pipeline_bubble_fraction"] == pytest.approx((p - 1) / (m + p - 1))
    # each chip holds layers / p layers
    assert {op.layer for op in t.ops if isinstance(op, Compute) and op.layer.startswith("L")} == {f"L{k}" for k in range(layers // p)}


def test_pipeline_permutes_are_on_the_path():
    """With a permute taking time c (less than a slot), the fill and drain hops add 2(p - 1)c to
    the critical path; the steady-state ones overlap the other direction's compute."""
    p, m = 4, 4
    t = generate_trace("gpt3-175b", "4x4x4", "data=16,pipeline=4", overrides={"n_layers": 8}, options=GenerateOptions(microbatches=m))
    slot_f = sum(op.flops for op in t.ops if isinstance(op, Compute) and op.id.startswith("mb0.fwd."))
    slot_b = sum(op.flops for op in t.ops if isinstance(op, Compute) and op.id.startswith("mb0.bwd."))
    c = 0.01 * slot_f
    path = _longest_path(t, lambda op: op.flops if isinstance(op, Compute) else c if isinstance(op, SendRecv) else 0.0)
    expected = (m + p - 1) * (slot_f + slot_b) + 2 * (p - 1) * c + t.by_id()["optimizer"].flops
    assert path == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("cf", [1.0, 1.25])
def test_expert_parallel_all_to_all_bytes(cf):
    """Per MoE layer: dispatch and combine all-to-alls forward and again backward, each of
    tokens x top_k x d_model x capacity_factor bf16 values."""
    t = generate_trace("mixtral-8x7b", "4x4x4", "data=8,expert=8", options=GenerateOptions(capacity_factor=cf))
    cfg = PRESETS["mixtral-8x7b"]
    tokens = cfg.global_batch // 64 * cfg.seq_len
    expert = t.meta["mesh"]["expert"]
    assert coll_bytes(t, "all_to_all", expert) == 4 * cfg.n_layers * tokens * cfg.top_k * cfg.d_model * 2 * cf
    assert coll_bytes(t, "all_to_all") == coll_bytes(t, "all_to_all", expert)
    # dense weights reduce over data x expert, each chip's experts over data only
    data = t.meta["mesh"]["data"]
    dense = cfg.n_layers * cfg.dense_layer_params + cfg.embedding_params
    experts = cfg.n_layers * (cfg.n_experts // 8) * cfg.expert_params
    assert coll_bytes(t, "all_reduce", data) == experts * 2
    assert sum(op.bytes for op in t.ops if isinstance(op, Collective) and op.kind == "all_reduce" and format_group(op.group) != data) == dense * 2


def test_resnet50_data_parallel():
    t = generate_trace("resnet50", "4x4x4", "data=64")
    cfg = PRESETS["resnet50"]
    assert coll_bytes(t, "all_reduce", "x,y,z") == cfg.params * 2
    assert useful_flops(t) * 64 == pytest.approx(cfg.training_flops_per_step(), rel=1e-3)
    assert 2 * cfg.forward_flops_per_image() / 2 == pytest.approx(4.09e9 * 2, rel=0.01)  # 4.09 GMACs (v1.5)


def test_multislice_data_parallel_spans_dcn():
    """Across slices the gradient all-reduce is hierarchical, as XLA runs it: reduce-scatter in
    the slice, all-reduce of the 1/64 shard over the DCN, all-gather in the slice, in the
    gradient's precision (fp32 here), each after the one before; the update waits for the last."""
    opts = GenerateOptions(combine_grad_reduce=True, grad_bytes=4)
    t = generate_trace("resnet50", "4x4x4", "data=64,dcn=4", overrides={"global_batch": 4096}, options=opts)
    coll = [op for op in t.ops if isinstance(op, Collective)]
    assert [(op.kind, format_group(op.group)) for op in coll] == [
        ("reduce_scatter", "x,y,z"), ("all_reduce", "dcn"), ("all_gather", "x,y,z")]
    rs, ar, ag = coll
    assert rs.bytes == ag.bytes == PRESETS["resnet50"].params * 4 and ar.bytes == rs.bytes / 64
    assert ar.deps == (rs.id,) and ag.deps == (ar.id,) and ag.id in t.by_id()["optimizer"].deps
    assert t.meta["chips"] == 256


# --- mesh mapping ------------------------------------------------------------------------

# Recorded from jax 0.10.2: jax._src.mesh_utils._create_device_mesh_for_nd_torus(
#   np.arange(N).reshape(shape), sizes in increasing intensity, allow_split_physical_axes=True),
# as (physical shape, plan, {logical axis: assignment column}).
JAX_CASES = [
    ((8, 16, 16), {"data": 8, "fsdp": 16, "tensor": 16}, {"data": [8, 1, 1], "fsdp": [1, 1, 16], "tensor": [1, 16, 1]}),
    ((4, 4, 16), {"data": 16, "tensor": 16}, {"data": [1, 1, 16], "tensor": [4, 4, 1]}),
    ((4, 4, 4), {"data": 4, "fsdp": 2, "tensor": 8}, {"data": [1, 1, 4], "fsdp": [1, 2, 1], "tensor": [4, 2, 1]}),
    ((4, 4, 8), {"data": 2, "tensor": 64}, {"data": [1, 2, 1], "tensor": [4, 2, 8]}),
    ((4, 8, 8), {"data": 16, "tensor": 16}, {"data": [2, 1, 8], "tensor": [2, 8, 1]}),
    ((16, 16, 16), {"data": 256, "tensor": 16}, {"data": [1, 16, 16], "tensor": [16, 1, 1]}),
    ((16, 16, 16), {"data": 64, "fsdp": 8, "tensor": 8}, {"data": [1, 4, 16], "fsdp": [2, 4, 1], "tensor": [8, 1, 1]}),
    ((4, 4, 4), {"data": 8, "tensor": 8}, {"data": [1, 2, 4], "tensor": [4, 2, 1]}),
    ((8, 8, 8), {"data": 4, "fsdp": 8, "tensor": 16}, {"data": [1, 4, 1], "fsdp": [1, 1, 8], "tensor": [8, 2, 1]}),
]


@pytest.mark.parametrize("shape,sizes,expected", JAX_CASES)
def test_mesh_mapping_matches_jax(shape, sizes, expected):
    m = map_mesh(shape, ParallelPlan(**sizes), ("tensor", "fsdp", "data"))
    for axis, column in expected.items():
        got = [1] * len(shape)
        for g in m.groups[axis]:
            i = "xyz".index(g.axis)
            got[i] = shape[i] if g.size is None else g.size
        assert got == column, (axis, m.describe())
        assert math.prod(got) == sizes[axis]


def test_split_axis_gives_the_heavier_axis_the_contiguous_block():
    m = map_mesh((16, 16, 16), ParallelPlan(data=64, fsdp=8, tensor=8), ("tensor", "fsdp", "data"))
    assert m.describe() == {"tensor": "x:8", "fsdp": "x:2:8,y:4", "data": "y:4:4,z"} and m.split


def test_measured_order_puts_tensor_on_whole_axes():
    """GPT-3 on 8x16x16: tensor moves the most bytes, so it is placed first."""
    t = generate_trace("gpt3-175b", "8x16x16", "data=8,fsdp=16,tensor=16")
    vol = t.meta["comm_bytes_per_axis"]
    assert t.meta["mesh_order"][:3] == sorted(("tensor", "fsdp", "data"), key=lambda a: -vol[a])
    assert t.meta["mesh"] == {"tensor": "y", "fsdp": "z", "data": "x"}


def test_explicit_mapping_and_order_override():
    opts = GenerateOptions(mesh={"tensor": "z", "fsdp": "y", "data": "x"})
    t = generate_trace("gpt3-175b", "8x16x16", "data=8,fsdp=16,tensor=16", options=opts)
    assert t.meta["mesh"] == {"tensor": "z", "fsdp": "y", "data": "x"}
    assert {format_group(op.group) for op in t.ops if isinstance(op, Collective | SendRecv) and ".attn.out" in op.id} == {"z"}
    t2 = generate_trace("gpt3-175b", "4x4x4", "data=8,tensor=8", options=GenerateOptions(mesh_order=("data", "tensor")))
    assert t2.meta["mesh"]["data"] == "x,y:2"


@pytest.mark.parametrize("mapping,needle", [
    ({"tensor": "x"}, "gives no group for data"),
    ({"tensor": "x,y", "data": "z:2,y:4"}, "spans 16 chips but tensor=8"),
    ({"tensor": "x:2,y", "data": "x:2,z"}, "does not tile the axis"),
])
def test_explicit_mapping_is_checked(mapping, needle):
    with pytest.raises(PodsimError, match=needle):
        map_mesh((4, 4, 4), ParallelPlan(data=8, tensor=8), explicit=mapping)


def test_all_reduce_over_non_adjacent_blocks_becomes_hierarchical():
    """Dense gradients reduce over data x expert; when those blocks of z are not adjacent (fsdp
    sits between them) the all-reduce becomes reduce-scatter (expert), all-reduce of the 1/2
    shard (data), all-gather (expert), and the optimizer waits for the last."""
    opts = GenerateOptions(mesh={"tensor": "x,y", "expert": "z:2", "fsdp": "z:2:2", "data": "z:2:4"})
    t = generate_trace("mixtral-8x7b", "4x4x8", "data=2,fsdp=2,tensor=16,expert=2", overrides={"n_layers": 2, "global_batch": 512}, options=opts)
    ops = t.by_id()
    rs, ar, ag = ops["L1.grad.ar.rs"], ops["L1.grad.ar.ar"], ops["L1.grad.ar.ag"]
    assert (rs.kind, format_group(rs.group)) == ("reduce_scatter", "z:2")
    assert (ar.kind, format_group(ar.group), ar.bytes) == ("all_reduce", "z:2:4", rs.bytes / 2)
    assert (ag.kind, ag.bytes, ag.deps, ar.deps) == ("all_gather", rs.bytes, (ar.id,), (rs.id,))
    assert "L1.grad.ar" not in ops and "L1.grad.ar.ag" in ops["optimizer"].deps


def test_pipeline_stays_on_one_physical_axis():
    m = map_mesh((4, 4, 8), ParallelPlan(pipeline=8, data=16), ("pipeline", "data"))
    assert m.describe()["pipeline"] == "z"
    with pytest.raises(PodsimError, match="pipeline axis must fit on one physical axis"):
        map_mesh((4, 4, 4), ParallelPlan(pipeline=16, data=4), ("pipeline", "data"))


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize("args,kwargs,needle", [
    (("gpt3-175b", "4x4x4", "data=32"), {}, "uses 32 chips per slice but slice 4x4x4 has 64"),
    (("gpt3-175b", "4x4x4", "tensor=64"), {}, "tensor=64 does not divide gpt3-175b's 96 attention heads"),
    (("llama2-70b", "16x16x16", "data=4096"), {}, "global batch of 1024 sequences does not split over data x fsdp x expert x dcn = 4096; use a multiple of 4096"),
    (("gpt3-175b", "16x16", "data=16,tensor=16"), {"generation": "tpu-v5e", "options": GenerateOptions(mesh={"tensor": "z", "data": "x"})}, "group axis 'z' is not an axis of this slice (x, y)"),
    (("resnet50", "4x4x4", "data=8,tensor=8"), {}, "resnet50 is generated data-parallel only; drop tensor=8"),
    (("gpt3-175b", "4x4x4", "data=64,expert=1"), {"overrides": {"n_layers": 0}}, "n_layers: 0 is out of range: a layer count is [1, 1,000]"),
    (("gpt3-175b", "4x4x4", "data=64"), {"overrides": {"depth": 3}}, "'depth' cannot be set"),
    (("llama2-70b", "4x4x4", "data=8,expert=8"), {}, "expert=8 needs a mixture-of-experts model"),
    (("mixtral-8x7b", "4x4x4", "data=64"), {"overrides": {"parallel_block": True}}, "parallel_block: mixtral-8x7b has experts"),
    (("gpt3-175b", "4x4x4", "data=64,warp=2"), {}, "parallelism axis 'warp' is not known"),
    (("gpt3-9t", "4x4x4", "data=64"), {}, "unknown model 'gpt3-9t'; presets: gpt3-175b"),
])
def test_bad_plans_are_one_line_errors(args, kwargs, needle):
    with pytest.raises(PodsimError) as exc:
        generate_trace(*args, **kwargs)
    assert needle in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize("sp", [False, True])
def test_a_parallel_block_reduces_once_per_layer_and_norms_once(sp):
    """PaLM's parallel layers (§2: y = x + MLP(LN(x)) + Attention(LN(x))): one tensor-parallel
    reduction per layer each way instead of two (half of Megatron's 4 per layer), one norm per
    layer instead of two, a residual add of three terms instead of two of two; FLOPs unchanged."""
    opts = GenerateOptions(sequence_parallel=sp, collective_matmul="exposed")
    serial_cfg = get_model("gpt3-175b", {"n_layers": 4})
    par_cfg = get_model("gpt3-175b", {"n_layers": 4, "parallel_block": True})
    serial = generate_trace(serial_cfg, "4x4x4", "data=8,tensor=8", options=opts)
    par = generate_trace(par_cfg, "4x4x4", "data=8,tensor=8", options=opts)
    tensor = par.meta["mesh"]["tensor"]
    b = serial_cfg.global_batch // 8
    act = b * serial_cfg.seq_len * serial_cfg.d_model * 2
    kind = "reduce_scatter" if sp else "all_reduce"
    loss = 0 if sp else 3 * b * serial_cfg.seq_len * 4
    assert coll_bytes(serial, kind, tensor) == (4 * 4 + 2) * act + loss
    assert coll_bytes(par, kind, tensor) == (2 * 4 + 2) * act + loss
    flops = [sum(op.flops for op in t.ops if isinstance(op, Compute)) for t in (serial, par)]
    assert flops[1] == pytest.approx(flops[0], rel=1e-12)
    hbm = [sum(op.hbm_bytes for op in t.ops if isinstance(op, Compute)) for t in (serial, par)]
    shard = act / (8 if sp else 1)  # norms and residual adds on a 1/t share under sequence parallelism
    # per layer forward: a norm (2 act) and a residual add (3 act -> 4 act for one of three terms) fewer; backward twice that
    assert hbm[0] - hbm[1] == pytest.approx(4 * 3 * (2 + 3 - 1) * shard, rel=1e-9)
    assert PRESETS["palm-540b"].parallel_block
