"""The serving rows of the validation table (podsim.validation.serving): MLPerf Inference GPT-J
on TPU v5e, batched as the submissions' Saxml classes and Saxml's batcher do, each batch costed
as praxis runs it. Each row's error is pinned so fidelity can only go up; the offline rows'
batches are length-sorted, padded to their own bucket (CNN/DailyMail's published median and
90th percentile); at the costliest shape (1,919 tokens, 128 steps) they must not be faster than
the run, nor the fastest Server request faster than one batch. The Server rows are
MLPerf's own Server result (scheduled samples/s within p99 <= 20 s), from a rate search run here
with fewer seeds and a coarser bracket than the benchmark's (TEST_REPLICATES, TEST_TOLERANCE)."""

from __future__ import annotations

import pytest

from podsim.trace.configs import TransformerConfig
from podsim.validation.serving import (
    GPTJ_DIMS,
    ROWS,
    SERVER_BOUND_S,
    row_config,
    run_table,
    summarise,
)

# the errors as they stand (predicted / measured - 1); a change that moves a row away fails. I4
# (round 4.0's batch of 36) runs since the Saxml fit counts the prefill's activations beside the
# prompts' KV only (praxis's program order); None would pin a refused row
# praxis's costs (dense prefill attention, static beam buffers and their reorder) moved every batch
# from 3.25 s to 4.03 s, and round 3.1's three cached states per token (pre-rotary keys kept) to 4.23 s:
# the Server rows from -59% to -40% / -47%, the Offline rows from +3% to +32% / +28%
# the Server rows were scored as p99 latency at the run's rate (-39.5% / -47.3%) until they took MLPerf's
# own Server metric, the highest scheduled rate VALID within the 20 s bound: +7.2% / +13.5% (8 seeds, 0.01/s)
# the Offline rows were scored as if every batch padded to 1,919 (+32.4% / +27.7%) until their batches were the
# harness's length-sorted ones, each at its own bucket, from CNN/DailyMail's published median and 90th percentile
# issue 32 replaced the v4-fitted shared matmul fraction (0.752) with v5e's sourced one (0.923, eff.2: an XLA bf16
# matmul on a v5e chip): a batch is shorter on the chips, the Offline rows faster (-0.9% / -11.7% -> -7.4% / -17.8%),
# the Server rows' highest valid rate higher (+7.2% / +13.5% -> +15.4% / +23.1%); the median over the four 16.5%
PINNED = {"I1": -0.074, "I2": -0.178, "I3": 0.154, "I4": 0.231}  # at issue 32's per-generation constants
TEST_REPLICATES, TEST_TOLERANCE = 2, 0.05  # the Server rows' rate search here (the benchmark's: 8 seeds, 0.01/s)
# podsim's scheduled samples/s within p99 <= 20 s at TEST_REPLICATES / TEST_TOLERANCE, and how far they may move
SERVER_RATES, RATE_BAND = {"I3": 8.22, "I4": 8.91}, 0.10  # 7.64 and 8.21 at the shared 0.752 before issue 32


@pytest.fixture(scope="module")
def table():
    return run_table(replicates=TEST_REPLICATES, tolerance_rps=TEST_TOLERANCE)


def test_rows_hold_their_fidelity(table):
    by_id = {r["id"]: r for r in table}
    assert set(by_id) == set(PINNED) == {r.id for r in ROWS}
    for rid, err in PINNED.items():
        if err is None:  # refused: when podsim can run it, pin its error here
            assert by_id[rid]["error"] is None and "KV tokens" in by_id[rid]["refused"], by_id[rid]
            continue
        assert abs(by_id[rid]["error"]) <= abs(err) + 0.01, (rid, by_id[rid]["error"])
    for r in table:
        if r["scenario"] == "offline":  # every batch at 1,919, the costliest the harness can form: an upper bound
            longest = r["bucket_batch_s"][max(r["bucket_batch_s"])]
            assert longest > r["measured"] > r["bucket_batch_s"][512], r
            assert r["predicted"] == pytest.approx(sum(r["bucket_shares"][b] * t for b, t in r["bucket_batch_s"].items()))
    s = summarise(table)
    assert s["median_abs_error"] == pytest.approx(0.165, abs=0.01)  # over issue 28's 15% since v5e's sourced fraction
    assert not any(r["calibration"] for r in table)
    assert s["refused"] == sum(e is None for e in PINNED.values())  # a refused row counts as a full miss
    # the diagnostics at the run's scheduled rate: one batch's time bounds the fastest request from below, podsim's
    # 14% / 19% under the run's (3.94 s against 4.58 s; 4.09 s against 5.02 s); the p99 8.33 s / 8.27 s (10.77 s /
    # 9.93 s at the shared 0.752 before issue 32)
    for rid in ("I3", "I4"):
        r = by_id[rid]
        assert r["predicted_min_s"] < r["measured_min_s"], r
        assert r["predicted_p99_s"] == pytest.approx({"I3": 8.33, "I4": 8.27}[rid], abs=0.02), r
        assert r["measured_p99_s"] < SERVER_BOUND_S


def test_server_rows_are_mlperfs_rate_within_the_p99_bound(table):
    """A Server row's figure is the highest rate whose runs are VALID on the seeds' mean (p99 and
    its early-stopping estimate within 20 s): pinned within RATE_BAND samples/s; the bracket's
    lower end meets (mean <= 20 s) and is
    within the tolerance of a rate that misses; the figure is that rate's scheduled samples/s
    (within 3% of the Poisson rate: ~4,600 arrivals per seed); the measured rate is MLPerf's."""
    by_id = {r["id"]: r for r in table}
    for rid, want in SERVER_RATES.items():
        r = by_id[rid]
        assert r["metric"] == "samples/s, p99 <= 20 s" and r["measured"] == next(x.rate_per_s for x in ROWS if x.id == rid)
        assert r["predicted"] == pytest.approx(want, abs=RATE_BAND), r
        assert r["error"] == pytest.approx(r["predicted"] / r["measured"] - 1)
        assert r["rate_p99_s"] <= SERVER_BOUND_S and 0 < r["rate_missed_rps"] - r["rate_rps"] <= TEST_TOLERANCE
        assert r["predicted"] == pytest.approx(r["rate_rps"], rel=0.03)
        assert (r["rate_replicates"], r["rate_tolerance_rps"]) == (TEST_REPLICATES, TEST_TOLERANCE) and r["rate_probes"] <= 12


def test_the_rate_is_well_conditioned_in_the_batch_time():
    """The what-if that motivates the metric: one I3 batch 14% longer (3.94 s -> 4.50 s) multiplies
    the p99 at the run's rate by 2.7 (8.33 s -> 22.08 s) but lowers the rate within the bound by about
    as much as the batch grew (8.22/s -> 7.19/s at 2 seeds): elasticity ~0.9 against ~12. (At the
    shared 0.752 before issue 32 the batch was 4.23 s: 6% longer doubled the p99.)"""
    from podsim.validation.serving import batch_time_sensitivity

    base, slow = batch_time_sensitivity(ROWS[2], (4.5,), rate_replicates=TEST_REPLICATES, tolerance_rps=TEST_TOLERANCE)
    grew = slow["batch_s"] / base["batch_s"] - 1
    assert 0.12 < grew < 0.16
    assert slow["p99_s"] / base["p99_s"] - 1 > 10 * grew  # the p99: ill-conditioned near saturation
    assert 0.5 * grew < 1 - slow["max_rps"] / base["max_rps"] < 1.5 * grew  # the rate: about proportional


def test_the_rows_model_gptj_as_submitted():
    """GPT-J 6B from the submission's own Saxml config: 6.05B parameters; int8 weights on 4 v5e
    chips, 32 x 4 beams per static batch, prompts padded to 1,919 tokens, 128 output tokens."""
    cfg = TransformerConfig.model_validate({"source": "x", "global_batch": 1, **GPTJ_DIMS})
    assert cfg.params == pytest.approx(6.05e9, rel=0.01)
    c = row_config(ROWS[0])
    assert (c.generation, c.slice, c.model.precision.weights, c.batch.max_batch, c.requests.beams) == ("tpu-v5e", "2x2", "int8", 32, 4)
    assert c.batch.buckets == (512, 1024, 1919) and c.model.parallel_block
    assert (c.batch.batcher, c.batch.batch_sizes, c.batch.max_wait, c.batch.max_live_batches) == ("saxml", (32,), 0.2, 2)
    assert c.batch.batcher_depth == 2 and c.requests.clients == 200 and c.requests.requests == 24_576
    server = row_config(ROWS[3])
    assert server.requests.arrivals.rate_per_s == pytest.approx(7.25) and server.batch.max_wait == 4.0
    assert (server.batch.max_batch, server.batch.batch_sizes, server.batch.max_live_batches) == (36, (36,), 10)
    assert server.batch.buckets == (512, 1024, 1536, 1919) and server.requests.clients == 200


def test_a_saxml_batch_fits_in_two_phases():
    """praxis runs a Saxml batch as one program: the prompts' fprop beside their KV only, then the
    decode loop beside the whole cache. Round 3.1's Server batch (32 x 1,919 tokens, 4 beams,
    three cached states per token) fits both on a 16 GiB v5e; the same batch charged the
    prefill's activations beside the whole cache would not."""
    from podsim.serving.simulate import ServingSim

    sim = ServingSim(row_config(ROWS[2]))
    b, pt = sim.budget, 16
    assert b.hbm_bytes == 16 * 2**30 and b.kv_bytes_per_token == 28 * 3 * 4 * 256 * 2  # K, pre-rotary K, V; 4 heads x 256
    need = 32 * (120 + 4 * 8) * pt  # 120 prompt pages + 4 beams x 8 pages of 127 own tokens, per request
    assert b.tokens >= need
    prompts = 32 * 120 * pt * b.kv_bytes_per_token
    room = b.hbm_bytes - b.weight_bytes - sim.prefill_workspace_bytes
    assert prompts <= room < (need * b.kv_bytes_per_token)  # fits beside the prefill only for the prompts' KV
    assert b.workspace_bytes < 0.01 * sim.prefill_workspace_bytes  # a decode step's activations: 128 tokens


def test_a_saxml_batch_costs_what_praxis_runs():
    """A Saxml batch's time as praxis runs it, against closed forms: the prefill is dense
    attention (every query against all 1,919 keys) with its logits materialised (fp32 written
    and read, bf16 probs written and read: 12 bytes each, 28 layers x 4 heads per chip), and no
    LM head; then 128 extend steps, each attending to its segment's whole buffer (33, 65, 129)
    and reordering every beam's buffer (read and written: round 3.1's three states per token)."""
    from podsim.serving.simulate import ServingSim

    sim = ServingSim(row_config(ROWS[0]))
    t, sh, rep = sim.timer, sim.shard, sim.replicas[0]
    m, L, B = 32, 1919, 4
    assert sh.dense_logits_bytes(m * L * L) == 28 * 4 * m * L * L * 12
    assert sh.beam_reorder_bytes(m * B * 129) == 2 * m * B * 129 * 28 * 3 * 4 * 256 * 2  # K, pre-rotary K, V: bf16, 4 x 256
    prefill, decode = rep.batch_s(m, L, 127)
    assert prefill == pytest.approx(t.tokens_step_s(m * L, 0, m * L, m * L * L, 0, m * L) + 28 * 4 * m * L * L * 12 / t._hbm_rate)
    want = 0.0
    for k in range(1, 129):
        buf = (33 if k <= 32 else 65 if k <= 64 else 129)
        keys = m * B * (L + buf)
        want += (t.tokens_step_s(m * B, m * B, m * B, keys, m * L + m * B * buf, m * B)
                 + (sh.dense_logits_bytes(keys) + sh.beam_reorder_bytes(m * B * buf)) / t._hbm_rate)
    assert decode == pytest.approx(want, rel=1e-12)
    # finer segments (round 4.0's Server class) hold smaller buffers: never slower; one segment is the slowest
    fine = ServingSim(row_config(ROWS[0]).model_copy(update={"batch": row_config(ROWS[3]).batch.model_copy(
        update={"max_batch": 32, "batch_sizes": (32,)})})).replicas[0].batch_s(m, L, 127)[1]
    one = ServingSim(row_config(ROWS[0]).model_copy(update={"batch": row_config(ROWS[0]).batch.model_copy(
        update={"decode_segments": ()})})).replicas[0].batch_s(m, L, 127)[1]
    assert fine < decode < one


def test_each_praxis_cost_lengthens_a_batch_and_the_what_ifs_bound_it():
    """The ablation's cumulative subsets of praxis's costs each lengthen a 32 x 1,919 batch;
    the what-ifs: collectives hidden shortens it, int8 materialised lengthens it; an unknown
    cost is refused."""
    from podsim.errors import PodsimError
    from podsim.serving.simulate import ServingSim
    from podsim.validation.serving import ABLATION, praxis_engine

    def batch(costs):
        return sum(ServingSim(row_config(ROWS[0]), engine=praxis_engine(frozenset(costs))).replicas[0].batch_s(32, 1919, 127))

    times = [batch(c) for _, c in ABLATION]
    assert all(a < b for a, b in zip(times[:4], times[1:5], strict=True))
    assert times[5] < times[4] < times[6]
    assert times[4] == pytest.approx(sum(ServingSim(row_config(ROWS[0])).replicas[0].batch_s(32, 1919, 127)))
    with pytest.raises(PodsimError, match="praxis costs \\['flash'\\] are not known"):
        praxis_engine(frozenset({"flash"}))


def test_pre_rotary_keys_cost_cache_and_writes_not_reads():
    """kv_states 3 (praxis before be97eb5 kept GPT-J's keys before and after the rotary
    embedding): a token caches half again as many bytes and writes them, attention still reads
    K and V only; any other count is refused."""
    from podsim.errors import PodsimError
    from podsim.serving.costs import InferencePrecision, InferenceShard

    cfg = TransformerConfig.model_validate({"source": "x", "global_batch": 1, **GPTJ_DIMS})
    two, three = (InferenceShard(cfg, 4, precision=InferencePrecision(weights="int8"), kv_states=k) for k in (2, 3))
    assert three.kv_bytes_per_token() == 1.5 * two.kv_bytes_per_token() == 1.5 * 28 * 2 * 4 * 256 * 2
    a, b = two.load(128, 128 * 2000, 100_000, 128), three.load(128, 128 * 2000, 100_000, 128)
    assert a.kv_read_bytes == b.kv_read_bytes and b.kv_write_bytes == 1.5 * a.kv_write_bytes
    with pytest.raises(PodsimError, match="kv_states 4"):
        InferenceShard(cfg, 4, kv_states=4)
    assert row_config(ROWS[0]).model.kv_states == 3 and row_config(ROWS[1]).model.kv_states == 2


def test_max_rate_bisects_reproducibly_and_refuses_what_it_cannot_search():
    """podsim.serving.capacity.max_rate on round 3.1's Server setup: every probe at or under the
    answer meets and every one over it misses (the seeds are the same at every probe), the bracket
    is within the tolerance, a second call gives the same answer, a looser bound a higher rate;
    offline arrivals, an unknown metric, a non-positive tolerance are refused in one line."""
    from podsim.errors import PodsimError
    from podsim.serving.capacity import max_rate

    cfg = row_config(ROWS[2])
    a = max_rate(cfg, 20.0, replicates=1, tolerance_rps=0.1)
    assert a.rate_rps is not None and 0 < a.missed_rps - a.rate_rps <= 0.1
    assert all(p.met == (p.rate_rps <= a.rate_rps) for p in a.probes), [(p.rate_rps, p.met) for p in a.probes]
    assert a.at(a.rate_rps).interval["mean"] <= 20.0 < a.at(a.missed_rps).interval["mean"]
    assert max_rate(cfg, 20.0, replicates=1, tolerance_rps=0.1) == a
    assert max_rate(cfg, 30.0, replicates=1, tolerance_rps=0.1).rate_rps > a.rate_rps
    with pytest.raises(PodsimError, match="offline arrivals have none"):
        max_rate(row_config(ROWS[0]), 20.0)
    with pytest.raises(PodsimError, match="metric 'p99' is not a serving metric"):
        max_rate(cfg, 20.0, metric="p99", replicates=1)
    with pytest.raises(PodsimError, match="tolerance 0"):
        max_rate(cfg, 20.0, tolerance_rps=0)


def test_early_stopping_is_loadgens():
    """loadgen's early stopping at p99, 99% confidence: with no query over the bound it needs
    ceil(log 0.01 / log 0.99) = 459 queries (loadgen's first bracket), so 458 give no estimate;
    with more, the estimate is the latency with t_max above it, t_max the most queries over the
    bound for which P(Binomial(n, 0.99) >= n - t) <= 1% (scipy.stats, independently); it is
    never below the plain p99, and an unfinished query counts as over any bound."""
    import numpy as np
    from scipy.stats import binom

    from podsim.serving.capacity import early_stopping_latency_s

    assert early_stopping_latency_s(np.ones(458)) == float("inf")
    assert early_stopping_latency_s(np.ones(459)) == 1.0
    lat = np.arange(1.0, 4601.0)
    t_max = max(t for t in range(200) if binom.sf(4600 - t - 1, 4600, 0.99) <= 0.01)
    assert early_stopping_latency_s(lat) == lat[4600 - 1 - t_max] < np.percentile(lat, 99.5)
    assert early_stopping_latency_s(lat) >= np.percentile(lat, 99)
    assert early_stopping_latency_s(np.concatenate([lat[:-1], [np.nan]])) == early_stopping_latency_s(lat)


def test_sorted_batches_follow_the_published_length_quantiles():
    """CNN/DailyMail's article lengths (BigBird's Table 19: median 777, 90th percentile 1,439
    tokens): both shapes pass through the two quantiles; a prompt is the article plus the
    template's 52 tokens, cut at 1,919, so round 3.1's buckets hold 13.8% / 54.1% / 32.1% of the
    sorted batches under the lognormal (29.6% / 32.2% / 38.2% piecewise-linear); longer articles
    (the tokenizer what-if) move batches to longer buckets; an unknown shape, a cap that is not
    the longest bucket are refused."""
    from podsim.errors import PodsimError
    from podsim.validation.serving import PROMPT_TEMPLATE_TOKENS, article_cdf, sorted_bucket_shares

    for shape in ("lognormal", "piecewise"):
        assert article_cdf(777, shape) == pytest.approx(0.5) and article_cdf(1439, shape) == pytest.approx(0.9)
        assert article_cdf(0, shape) == 0.0 and article_cdf(1e6, shape) == pytest.approx(1.0)
    assert PROMPT_TEMPLATE_TOKENS == 52
    logn = sorted_bucket_shares((512, 1024, 1919))
    assert [round(x, 3) for x in logn.values()] == [0.138, 0.541, 0.321]
    assert [round(x, 3) for x in sorted_bucket_shares((512, 1024, 1919), "piecewise").values()] == [0.296, 0.322, 0.382]
    four = sorted_bucket_shares((512, 1024, 1536, 1919))
    assert sum(four.values()) == pytest.approx(1.0) and four[1536] == pytest.approx(0.232, abs=0.001)
    assert sorted_bucket_shares((512, 1024, 1919), scale=1.1)[1919] > logn[1919]
    with pytest.raises(PodsimError, match="length shape 'uniform'"):
        article_cdf(500, "uniform")
    with pytest.raises(PodsimError, match="the prompts' cap 1919"):
        sorted_bucket_shares((512, 2048))
