"""The inference step model (podsim.serving): per-chip costs, the step timer against the engine,
and the bounds a decode step and a prefill must respect."""

from __future__ import annotations

import math

import pytest

from podsim.engine import simulate_collective
from podsim.errors import PodsimError
from podsim.perf import chip_compute
from podsim.serving.costs import InferencePrecision, InferenceShard, Seq
from podsim.serving.kvcache import kv_budget, kv_fraction_reserve
from podsim.serving.steptime import ONCHIP_MEMORY, StepTimer
from podsim.serving.trace import serving_step_study
from podsim.study import run_study
from podsim.topology import get_generation
from podsim.trace.configs import get_model

INT8 = InferencePrecision(weights="int8")


def _engine_s(timer: StepTimer, tokens: int, sampled: int, load) -> float:
    """The same step as a step study on the engine (the one way podsim simulates a step)."""
    study = serving_step_study(timer.shard, timer.generation, timer.shape, tokens, sampled, load, timer.onchip_bytes,
                               on=timer.built)
    return run_study(study).step_time_s


@pytest.mark.parametrize(("gen", "shape", "precision"), [("tpu-v5e", (2, 4), INT8), ("tpu-v6e", (2, 4), InferencePrecision())])
def test_batch1_decode_of_70b_on_8_chips_is_within_15pct_of_its_hbm_bound(gen, shape, precision):
    """A batch-1 decode step reads every weight once: it can be no faster than the weight bytes
    per chip over HBM bandwidth, and with the per-layer all-reduces hidden behind the next
    weights' prefetch it is within 15% of that bound (the rest: HBM's achievable fraction, the
    KV cache of a 1k-token context, norms, the latency the prefetch does not cover)."""
    sh = InferenceShard(get_model("llama2-70b"), tensor=8, precision=precision)
    timer = StepTimer(sh, gen, shape)
    g = get_generation(gen)
    bound = sh.weight_bytes() / g.hbm_bytes_per_s
    assert timer.hbm_bound_s() == pytest.approx(bound)
    load = sh.attention_load([Seq(1, 1024)])
    step = timer.step_s(1, 1, load)
    assert bound <= step <= 1.15 * bound, (step, bound)
    assert step == pytest.approx(_engine_s(timer, 1, 1, load), rel=1e-12)  # the engine runs the same DAG
    # the weights per chip are the model's parameters at their precision over 8 chips, give or
    # take the K/V projections (8 KV heads split 8 ways: nothing replicated) and bf16 norms
    cfg = sh.cfg
    assert sh.weight_bytes() * 8 == pytest.approx(cfg.params * precision.weight_bytes, rel=0.01)


def test_decode_collectives_are_exposed_without_prefetch():
    """With no on-chip memory to prefetch into, every all-reduce of a batch-1 decode step is on
    the critical path: the step is the prefetching step plus (nearly all) the collectives'
    latency."""
    sh = InferenceShard(get_model("llama2-70b"), tensor=8, precision=INT8)
    load = sh.attention_load([Seq(1, 1024)])
    hidden = StepTimer(sh, "tpu-v5e", (2, 4))
    exposed = StepTimer(sh, "tpu-v5e", (2, 4), onchip_bytes=0.0)
    b_hidden, b_exposed = hidden.breakdown(1, 1, load), exposed.breakdown(1, 1, load)
    ar = simulate_collective(exposed.built, "all_reduce", 8192 * 2, "all").simulated_s
    n_ar = 2 * sh.cfg.n_layers + 2  # two per layer, the embedding's, the sampling's (other sizes)
    assert b_exposed.comm_exposed_s == pytest.approx(ar * (n_ar - 1) + exposed.collective_s(
        next(o for o in _ops(exposed) if o.name == "sample.ar"), 1, 8), rel=1e-9)
    assert b_hidden.comm_exposed_s < 0.02 * b_exposed.comm_exposed_s
    # what the prefetch hides is the collectives' latency, less the matmuls' MXU time that the
    # roofline hid under their weight reads and that now follows the prefetch (a few percent)
    hidden_s = b_exposed.comm_exposed_s - b_hidden.comm_exposed_s
    assert 0.95 * hidden_s <= b_exposed.step_s - b_hidden.step_s <= hidden_s
    assert _engine_s(exposed, 1, 1, load) == pytest.approx(b_exposed.step_s, rel=1e-12)
    assert ONCHIP_MEMORY["tpu-v5e"][0] == 48 * 2**20


def _ops(timer):
    return timer._ops3(1, 1)[0]


@pytest.mark.parametrize(("model", "gen", "shape", "kw"), [
    ("llama2-70b", "tpu-v5e", (2, 4), {"tensor": 8, "precision": INT8}),
    ("mixtral-8x7b", "tpu-v5e", (2, 4), {"tensor": 2, "expert": 4}),
    ("gpt3-175b", "tpu-v5p", (2, 2, 4), {"tensor": 16}),
])
def test_prefill_is_at_or_above_its_flops_bound(model, gen, shape, kw):
    """A prefill of 2048 tokens does the model's forward FLOPs on them: at least FLOPs per chip
    over the matmul precision's peak."""
    sh = InferenceShard(get_model(model, {"n_layers": 8}), **kw)
    timer = StepTimer(sh, gen, shape)
    cfg, n = sh.cfg, 2048
    flops = 2.0 * n * (cfg.active_params - cfg.vocab * cfg.d_model * (0 if cfg.tied_embeddings else 1))  # linear layers
    flops += 2.0 * n * cfg.d_model * cfg.vocab / n  # the LM head on the one sampled position
    flops += cfg.n_layers * 4 * cfg.n_heads * cfg.d_head * n * (n + 1) / 2  # causal attention
    load = sh.attention_load([Seq(n, 0)])
    step = timer.step_s(n, 1, load)
    bound = flops / math.prod(shape) / chip_compute(gen).peak_for("bf16")
    assert step >= bound
    assert step == pytest.approx(_engine_s(timer, n, 1, load), rel=1e-12)


@pytest.mark.parametrize(("model", "gen", "shape", "kw"), [
    ("llama2-70b", "tpu-v4", (2, 2, 2), {"tensor": 8}),
    ("mixtral-8x7b", "tpu-v5e", (2, 4), {"tensor": 1, "expert": 8}),
    ("mixtral-8x7b", "tpu-v5e", (2, 4), {"tensor": 2, "expert": 4}),
])
def test_step_timer_equals_the_engine_on_the_step_trace(model, gen, shape, kw):
    """The timer's closed forms and the engine's run of the same ops agree, for decode batches,
    mixed steps and prompts, with and without sampling; between grid points the collectives are
    interpolated (and agree to the interpolation). Six layers: the timer times the first, one
    middle and the last layer and counts the middle one n - 2 times."""
    sh = InferenceShard(get_model(model, {"n_layers": 6}), **kw)
    timer = StepTimer(sh, gen, shape)
    for tokens, sampled, seqs in ((1, 1, [Seq(1, 500)]), (64, 64, [Seq(1, 900)] * 64), (513, 17, [Seq(1, 300)] * 16 + [Seq(497, 0)]),
                                  (2048, 0, [Seq(2048, 4096)])):
        load = sh.attention_load(seqs)
        fast = timer.step_s(tokens, sampled, load)
        exact = timer._body_exact_s(tokens, sampled)[0] + timer.attention_s(load)
        assert fast == pytest.approx(exact, rel=1e-12)
        assert fast == pytest.approx(_engine_s(timer, tokens, sampled, load), rel=2e-3)


def test_collective_table_interpolates_within_a_percent():
    sh = InferenceShard(get_model("llama2-70b"), tensor=8)
    timer = StepTimer(sh, "tpu-v6e", (2, 4))
    op = next(o for o in _ops(timer) if o.name == "embed.ar")
    for units in (5, 7, 9, 33, 77, 150, 700, 1500):
        exact = simulate_collective(timer.built, "all_reduce", units * op.nbytes, timer.groups["tensor"]).simulated_s
        assert timer.collective_s(op, units, op.nbytes) == pytest.approx(exact, rel=0.01)


def test_moe_decode_reads_only_the_experts_its_tokens_reach():
    """A batch-1 decode of Mixtral routes its token to 2 of 8 experts: it reads 2/8 of the
    experts' weights (each chip holding one expert: a chip's expert is reached with 2/8)."""
    sh = InferenceShard(get_model("mixtral-8x7b"), tensor=1, expert=8)
    assert sh.active_experts(1) == pytest.approx(2 / 8)
    assert sh.active_experts(10_000) == pytest.approx(1.0)
    one, many = sh.experts(1), sh.experts(512)
    expert_bytes = sh.mlp_params() * 2
    assert one.hbm == pytest.approx(2 / 8 * expert_bytes, rel=0.01)
    assert many.hbm >= expert_bytes


def test_beams_share_the_prompt_kv():
    """b beams of a request read its prompt's KV once and their own tokens each."""
    sh = InferenceShard(get_model("llama2-70b"), tensor=8)
    one = sh.attention_load([Seq(4, 1000 + 4 * 10, shared=1000, beams=4)])
    four = sh.attention_load([Seq(1, 1010)] * 4)
    kv = sh.kv_bytes_per_token_layer()
    assert one.kv_read_bytes == pytest.approx((1000 + 40) * kv)
    assert four.kv_read_bytes == pytest.approx(4 * 1010 * kv)
    assert one.flops == pytest.approx(four.flops)  # every beam attends to the whole prompt and its own tokens


def test_precision_rules():
    with pytest.raises(PodsimError, match="no published rate"):
        StepTimer(InferenceShard(get_model("llama2-70b"), tensor=8, precision=InferencePrecision(weights="fp8", matmul="fp8")), "tpu-v5e", (2, 4))
    with pytest.raises(ValueError, match="multiplies int8 weights"):
        InferencePrecision(matmul="int8")
    with pytest.raises(ValueError, match="int4"):
        InferencePrecision(weights="int4")
    cfg = get_model("llama2-70b", {"n_layers": 2})
    w8a8 = InferenceShard(cfg, precision=InferencePrecision(weights="int8", matmul="int8"))
    bf16 = InferenceShard(cfg, precision=INT8)
    t8, t16 = StepTimer(w8a8, "tpu-v5e", (1, 1)), StepTimer(bf16, "tpu-v5e", (1, 1))
    load = w8a8.attention_load([Seq(4096, 0)])
    # one chip, no collectives: a prefill's matmuls at the int8 rate, twice bf16's (393 vs 197 TOP/s, v5e.1)
    assert t8.step_s(4096, 1, load) < 0.6 * t16.step_s(4096, 1, load)


def test_slice_and_plan_must_agree():
    with pytest.raises(PodsimError, match="must be equal"):
        StepTimer(InferenceShard(get_model("llama2-70b"), tensor=4), "tpu-v5e", (2, 4))
    with pytest.raises(PodsimError, match="heads"):
        InferenceShard(get_model("llama2-70b"), tensor=3)
    with pytest.raises(PodsimError, match="dense"):
        InferenceShard(get_model("llama2-70b"), tensor=4, expert=2)


def test_kv_budget_is_what_hbm_leaves():
    sh = InferenceShard(get_model("llama2-70b"), tensor=8, precision=INT8)
    b = kv_budget(sh, "tpu-v5e", 16, 2048, 256)
    hbm = get_generation("tpu-v5e").hbm_per_chip.si
    used = b.weight_bytes + b.workspace_bytes + (b.pages // sh.expert) * b.page_bytes
    assert used <= hbm < used + b.page_bytes
    assert b.kv_bytes_per_token == 80 * 2 * 1 * 128 * 2  # 80 layers, K and V, 1 KV head per chip, 128 wide, bf16
    with pytest.raises(PodsimError, match="no room for a KV cache"):
        kv_budget(InferenceShard(get_model("llama2-70b"), tensor=8), "tpu-v5e", 16, 2048, 256)  # bf16: 17 GB per chip


def test_a_kv_memory_fraction_is_that_share_of_what_weights_and_workspace_leave():
    """kv_fraction_reserve (TensorRT-LLM's kvcache_free_gpu_mem_frac): at the reserve it returns, the
    cache's bytes are the fraction of what the replica's weights and one step's workspace leave;
    the shard is the simulator's (ServedModel.shard)."""
    from podsim.serving.spec import ServingConfig

    body = {"generation": "gpu-h100", "slice": "2", "engine": "tensorrt-llm",
            "model": {"model": "llama2-70b", "precision": {"weights": "fp8", "kv_cache": "fp8", "matmul": "fp8"}},
            "batch": {"kind": "continuous", "max_seqs": 256, "token_budget": 16384, "prefill": "chunked", "kv": "paged"}}
    cfg = ServingConfig.model_validate(body)
    r = kv_fraction_reserve(cfg, 0.9)
    sh = cfg.model.shard(2)
    assert sh.tensor == 2  # the slice's chips, as the simulator shards it
    b = kv_budget(sh, "gpu-h100", cfg.batch.page_tokens, 16384, 256, r)
    left = b.hbm_bytes - b.weight_bytes - b.workspace_bytes
    assert b.hbm_bytes * (1 - r) - b.weight_bytes - b.workspace_bytes == pytest.approx(0.9 * left, rel=1e-12)
    assert kv_fraction_reserve(cfg, 1.0) == 0.0
    with pytest.raises(PodsimError, match=r"fraction 1.5 is not in \(0, 1\]"):
        kv_fraction_reserve(cfg, 1.5)
    static = ServingConfig.model_validate({**body, "batch": {"kind": "static", "max_batch": 8}})
    with pytest.raises(PodsimError, match="sizes a continuous batcher's cache"):
        kv_fraction_reserve(static, 0.9)


def test_a_continuous_step_workspace_is_the_padded_steps():
    """A continuous replica's workspace is its largest step as the engine pads it: the token
    budget plus the most `batch_sizes` pads the decode rows (33 sequences run as 96: 63 rows)
    and `buckets` pads its one prompt chunk (513 tokens run as 1,024: 511 rows); the simulator
    and kv_fraction_reserve size it the same way."""
    from podsim.serving.kvcache import step_workspace_shape
    from podsim.serving.simulate import ServingSim
    from podsim.serving.spec import ServingConfig

    batch = {"kind": "continuous", "max_seqs": 96, "token_budget": 2048, "prefill_seqs": 1, "batch_sizes": [32, 96],
             "buckets": [128, 512, 1024]}
    body = {"generation": "tpu-v5e", "slice": "2x4", "model": {"model": "llama2-7b"}, "batch": batch}
    cfg = ServingConfig.model_validate(body)
    assert step_workspace_shape(cfg.batch, 1, 4096) == (2048 + 63 + 511, 96 + 63)
    sim = ServingSim(cfg)
    assert sim.budget.workspace_bytes == sim.shard.workspace_bytes(2048 + 63 + 511, 96 + 63)
    unpadded = ServingConfig.model_validate({**body, "batch": {"kind": "continuous", "max_seqs": 96, "token_budget": 2048}})
    assert step_workspace_shape(unpadded.batch, 1, 4096) == (2048, 96)  # no padding: the budget and the slots
    assert step_workspace_shape(unpadded.batch, 4, 4096) == (2048, 384)  # each slot's beams sampled
    # any number of chunks (no prefill_seqs) under buckets (128, 1024): at most 256 chunks of 2,048 tokens
    # pad most as 242 one-token chunks (to 128) and 14 of 129 tokens (to 1,024), 43,264 rows of padding
    many = ServingConfig.model_validate({**body, "batch": {"kind": "continuous", "max_seqs": 256, "token_budget": 2048,
                                                          "buckets": [128, 1024]}})
    assert step_workspace_shape(many.batch, 1, 4096)[0] == 2048 + 242 * 127 + 14 * 895
    r = kv_fraction_reserve(cfg, 0.5)  # half of what the padded step's workspace leaves
    b = ServingSim(ServingConfig.model_validate({**body, "hbm_reserve": r})).budget
    assert b.hbm_bytes * (1 - r) - b.weight_bytes - b.workspace_bytes == pytest.approx(
        0.5 * (b.hbm_bytes - b.weight_bytes - b.workspace_bytes), rel=1e-12)


def test_attention_time_never_falls_when_a_step_gains_a_query_or_a_key():
    """The attention core pads the step's keys (summed over its queries) to the MXU tile once:
    a step with one more query (attending to at least one key), or one more key, never takes
    less time. Padding the average query's keys, as before, broke this (3 queries over 1,921
    keys took 11% longer than 4 over 1,922 on v5e's 128-wide tile)."""
    sh = InferenceShard(get_model("llama2-7b", {"n_layers": 2}), tensor=1)
    timer = StepTimer(sh, "tpu-v5e", (1, 1))
    tile = timer.chip.mxu_dim
    body = timer.tokens_device_s(4096, 0, 0.0, 0.0, 0.0, 0.0)

    def attn(q, keys):  # a prefill-like step: nothing read from the cache, q tokens written
        t = timer.tokens_device_s(4096, 0, float(q), float(keys), 0.0, float(q)) - body
        assert t == pytest.approx(timer.attention_s(sh.load(q, keys, 0.0, q)), rel=1e-12)
        return t

    assert attn(4, 1922) >= attn(3, 1921)
    for q in range(1, 40):
        for keys in range(q, 16 * tile, 13):
            a = attn(q, keys)
            assert attn(q, keys + 1) >= a
            assert attn(q + 1, keys + 1) >= a
    # at the MXU bound, the padded FLOPs of QK^T and AV: each head's d_head and the step's keys to whole tiles
    assert attn(5, 99_999) == pytest.approx(sh.cfg.n_layers * 2 * 2.0 * sh.heads * 128 * 100_096 / timer._attn_rate)
