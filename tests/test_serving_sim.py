"""The serving simulation (podsim.serving.simulate): the KV-cache invariant, latencies against
closed forms, batch policies, disaggregation, request streams, reproducibility, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from podsim.errors import PodsimError
from podsim.serving import ServingConfig, simulate_serving
from podsim.serving.spec import RequestStream
from podsim.serving.workload import draw_requests, load_request_trace

SMALL = {"model": "llama2-70b", "overrides": {"n_layers": 8}, "precision": {"weights": "int8"}}


def config(**over) -> ServingConfig:
    """A small serving run on the chips alone (engine ideal: the simulation's mechanisms, not an engine's host time)."""
    body = {"generation": "tpu-v5e", "slice": "2x4", "model": SMALL, "duration": "60s", "seed": 3, "engine": "ideal",
            "requests": {"arrivals": {"kind": "poisson", "rate": "2/s"}, "prompt": {"kind": "lognormal", "mean": 600, "cv": 1},
                         "output": {"kind": "lognormal", "mean": 120, "cv": 1}}}
    for k, v in over.items():
        body[k] = {**body[k], **v} if isinstance(v, dict) and isinstance(body.get(k), dict) else v
    return ServingConfig.model_validate(body)


def overloaded(kv: str, **over) -> ServingConfig:
    """Long outputs on a cache of ~4,700 tokens (HBM cut to 6.05% of 16 GiB beside an 8-layer model): requests
    must wait and (paged) be preempted."""
    return config(batch={"kv": kv, "max_seqs": 128}, hbm_reserve=0.9395, duration="30s",
                  requests={"arrivals": {"kind": "poisson", "rate": "4/s"}, "prompt": {"kind": "uniform", "low": 200, "high": 1500},
                            "output": {"kind": "uniform", "low": 200, "high": 2000}}, **over)


@pytest.mark.parametrize("kv", ["paged", "reserve"])
def test_never_more_sequences_than_the_kv_cache_holds(kv):
    """The invariant, audited before every step: the pages the running sequences hold are the
    ledger's and never more than the cache has, and the tokens in the cache fit it. The load
    is far above what the cache holds, so the cache runs full (and under `paged`, sequences are
    preempted and recomputed)."""
    r = simulate_serving(overloaded(kv), audit=True)
    m = r.metrics
    assert m["kv_tokens_max"] <= m["kv_cache_tokens"]
    assert m["kv_peak_fraction"] <= 1.0
    assert m["kv_peak_fraction"] > 0.9  # the cache did run full
    if kv == "paged":
        assert m["kv_preemptions"] > 0
    else:
        assert m["kv_preemptions"] == 0
    assert np.nanmin(r.tables["serving_requests"]["ttft_s"]) > 0


def test_disaggregated_pools_keep_the_invariant():
    r = simulate_serving(overloaded("paged", disaggregated={"prefill": 1, "decode": 2}), audit=True)
    assert r.metrics["kv_tokens_max"] <= r.metrics["kv_cache_tokens"]
    assert r.metrics["requests_completed"] > 0


def test_one_request_is_one_prefill_then_decode_steps():
    """A lone request: TTFT is one prefill step of its prompt; each later token one batch-1
    decode step over its growing context (the step timer's times, added up)."""
    cfg = config(requests={"arrivals": {"kind": "offline"}, "requests": 1, "prompt": {"kind": "fixed", "mean": 700},
                           "output": {"kind": "fixed", "mean": 5}})
    from podsim.serving.simulate import ServingSim

    sim = ServingSim(cfg)
    t = sim.timer
    prefill = t.tokens_step_s(700, 1, 700, 700 * 701 / 2, 0, 700)
    decode = sum(t.tokens_step_s(1, 1, 1, 700 + g, 700 + g - 1, 1) for g in range(1, 5))
    r = simulate_serving(cfg, timer=t)
    row = r.tables["serving_requests"]
    assert row["ttft_s"][0] == pytest.approx(prefill, rel=1e-12)
    assert row["e2e_s"][0] == pytest.approx(prefill + decode, rel=1e-12)
    assert row["tpot_s"][0] == pytest.approx(decode / 4, rel=1e-12)


def test_static_batch_is_one_prefill_and_the_longest_output_in_steps():
    """Offline, a static batch of 8 identical requests padded to a 1024-token bucket: every
    request ends with the batch after its prefill, in steps of the token budget (2,048: two
    prompts a step, four steps), and 63 decode steps."""
    cfg = config(batch={"kind": "static", "max_batch": 8, "buckets": [512, 1024, 2048], "kv": "reserve"},
                 requests={"arrivals": {"kind": "offline"}, "requests": 8, "prompt": {"kind": "fixed", "mean": 900},
                           "output": {"kind": "fixed", "mean": 64}})
    r = simulate_serving(cfg)
    from podsim.serving.simulate import ServingSim

    t = ServingSim(cfg).timer
    L, n = 1024, 8
    expect = 4 * t.tokens_step_s(2 * L, 2, 2 * L, 2 * L * (L + 1) / 2, 0, 2 * L)
    expect += sum(t.tokens_step_s(n, n, n, n * (L + k), n * (L + k - 1), n) for k in range(1, 64))
    assert np.allclose(r.tables["serving_requests"]["e2e_s"], expect, rtol=1e-12)
    assert r.metrics["throughput_rps"] == pytest.approx(8 / expect)


def test_light_load_meets_the_slo_and_conserves_requests():
    r = simulate_serving(config())
    m = r.metrics
    assert m["requests_completed"] == m["requests"] > 80
    assert m["slo_attainment"] == 1.0 and m["goodput_rps"] == pytest.approx(m["throughput_rps"])
    req = r.requests
    assert m["output_tokens"] == req.output.sum()
    assert m["ttft_p50_s"] <= m["ttft_p95_s"] <= m["ttft_p99_s"]
    # cost per million output tokens from the v5e price (pr.5) and the window's chip-hours
    assert m["cost_per_million_tokens_usd"] == pytest.approx(8 * 60 / 3600 * 1.20 / (m["output_tokens"] / 1e6))
    assert m["energy_per_million_tokens_kwh"] is None  # v5e's power is not published


def test_more_replicas_lower_latency_under_load():
    loaded = {"arrivals": {"kind": "poisson", "rate": "6/s"}}
    one = simulate_serving(config(requests=loaded)).metrics
    two = simulate_serving(config(requests=loaded, replicas=2)).metrics
    assert two["ttft_p99_s"] < one["ttft_p99_s"]
    assert two["chips"] == 2 * one["chips"]


def test_same_seed_same_result_other_seed_other_result():
    a, b = simulate_serving(config()).metrics, simulate_serving(config()).metrics
    c = simulate_serving(config(seed=4)).metrics
    keys = [k for k in a if k not in ("engine_wall_s",)]
    assert all(a[k] == b[k] or (isinstance(a[k], float) and math.isnan(a[k]) and math.isnan(b[k])) for k in keys)
    assert a["ttft_p99_s"] != c["ttft_p99_s"]


def test_arrival_processes():
    poisson = draw_requests(RequestStream.model_validate({"arrivals": {"kind": "poisson", "rate": "10/s"}}), 2000.0, 1)
    gaps = np.diff(poisson.arrival_s)
    assert len(poisson) == pytest.approx(20_000, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.05)  # exponential gaps: cv 1
    bursty = draw_requests(RequestStream.model_validate({"arrivals": {"kind": "bursty", "rate": "10/s", "cv": 3}}), 2000.0, 1)
    g = np.diff(bursty.arrival_s)
    assert g.mean() == pytest.approx(0.1, rel=0.1) and g.std() / g.mean() == pytest.approx(3.0, rel=0.15)
    logn = draw_requests(RequestStream.model_validate({"prompt": {"kind": "lognormal", "mean": 800, "cv": 0.5}}), 3600.0, 1)
    assert logn.prompt.mean() == pytest.approx(800, rel=0.05)


def test_azure_trace_replay():
    """The shipped sample of Azure's 2023 conversation trace: its first ten minutes, in order,
    with their token counts; replayed, scaled in time, or as a length distribution."""
    t = load_request_trace("azure-conv")
    assert len(t.t_s) == 2867 and t.t_s[-1] < 600 and np.all(np.diff(t.t_s) >= 0)
    assert (t.prompt[0], t.output[0]) == (374, 44)
    replay = draw_requests(RequestStream.model_validate({"arrivals": {"kind": "trace"}, "trace": "azure-conv",
                                                         "prompt": {"kind": "trace"}, "output": {"kind": "trace"}}), 60.0, 0)
    assert np.array_equal(replay.arrival_s, t.t_s[t.t_s < 60])
    fast = draw_requests(RequestStream.model_validate({"arrivals": {"kind": "trace", "time_scale": 2}, "trace": "azure-conv",
                                                       "prompt": {"kind": "trace"}, "output": {"kind": "trace"}}), 60.0, 0)
    assert len(fast) == int((t.t_s / 2 < 60).sum())
    lengths = draw_requests(RequestStream.model_validate({"trace": "azure-code", "prompt": {"kind": "trace"}}), 600.0, 0)
    assert set(lengths.prompt) <= set(load_request_trace("azure-code").prompt)


def test_bad_trace_and_bad_config_are_one_line(tmp_path):
    bad = tmp_path / "t.csv"
    bad.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,12,x\n")
    with pytest.raises(PodsimError, match="line 2: GeneratedTokens 'x'"):
        load_request_trace(bad)
    missing = tmp_path / "m.csv"
    missing.write_text("when,prompt\n1,2\n")
    with pytest.raises(PodsimError, match="lacks column 'TIMESTAMP'"):
        load_request_trace(missing)
    with pytest.raises(ValueError, match="need a rate"):
        RequestStream.model_validate({"arrivals": {"kind": "poisson"}})
    with pytest.raises(ValueError, match="give trace"):
        RequestStream.model_validate({"prompt": {"kind": "trace"}})
    with pytest.raises(ValueError, match="use batch kv reserve"):
        config(requests={"beams": 4})
    with pytest.raises(ValueError, match="must be equal"):
        simulate_serving(config(model={**SMALL, "tensor": 4}))


def test_requests_bigger_than_the_cache_are_rejected():
    r = simulate_serving(config(hbm_reserve=0.9395, requests={"prompt": {"kind": "fixed", "mean": 9_000}}))
    assert r.metrics["requests_rejected"] == r.metrics["requests"] > 0
    assert r.metrics["slo_attainment"] == 0.0


def test_kv_transfer_over_dcn_and_ici():
    """The KV move of disaggregated serving, timed by the engine: over the DCN at the hosts'
    NICs shared by the slice's chips (v5e: 200 Gbit/s per host, v5e.10), over ICI (the halves of
    one 4x4 torus) faster; affine in the bytes."""
    from podsim.serving.transfer import KvTransfer
    from podsim.topology import build_slice

    dcn, ici = KvTransfer("tpu-v5e", (2, 4), "dcn"), KvTransfer("tpu-v5e", (2, 4), "ici")
    built = build_slice("tpu-v5e", (2, 4))
    hosts = len(set(built.fabric.layout.host_of_chip[built.slice.chips].tolist()))  # a 2x4 slice on 4x2 hosts: 2
    nic = 200e9 / 8 * hosts / 8  # bytes/s per chip: the hosts' NICs shared by the slice's 8 chips
    assert 1 / dcn.per_byte_s == pytest.approx(nic)  # 6.25 GB/s per chip
    assert ici.time_s(2**26) < dcn.time_s(2**26)
    assert dcn.time_s(2 * 2**26) - dcn.time_s(2**26) == pytest.approx(dcn.time_s(3 * 2**26) - dcn.time_s(2 * 2**26))
    assert "DCN" in dcn.path and "ICI" in ici.path


@pytest.mark.parametrize("case", ["light", "paged", "reserve", "replicas"])
def test_decode_runs_ahead_of_the_clock_with_the_same_result(case):
    """Decode steps nothing outside a replica can change are committed in one go: every request's
    times and every step are those of the step-by-step run."""
    cfg = {"light": config(), "paged": overloaded("paged"), "reserve": overloaded("reserve"),
           "replicas": config(replicas=3, router="round_robin", requests={"arrivals": {"kind": "poisson", "rate": "8/s"}})}[case]
    fast, slow = simulate_serving(cfg, audit=True), simulate_serving(cfg, run_ahead=False)
    for col in ("replica", "preemptions"):
        assert np.array_equal(fast.tables["serving_requests"][col], slow.tables["serving_requests"][col], equal_nan=True), col
    for col in ("ttft_s", "tpot_s", "e2e_s"):  # the same times, summed in another order (a few ulps)
        np.testing.assert_allclose(fast.tables["serving_requests"][col], slow.tables["serving_requests"][col], rtol=1e-12, atol=0,
                                   equal_nan=True, err_msg=col)
    keys = [k for k in fast.metrics if k != "engine_wall_s"]
    assert {k: fast.metrics[k] for k in keys} == pytest.approx({k: slow.metrics[k] for k in keys}, nan_ok=True)


def _saxml(**batch) -> ServingConfig:
    return config(batch={"kind": "static", "batcher": "saxml", "kv": "reserve", "max_batch": 2, "batch_sizes": [2],
                         "max_wait": "10s", **batch})


def test_saxml_batcher_pipelines_two_batches_and_starts_the_wait_at_the_take():
    """Saxml's batcher (google/saxml model_service_base.PerMethodBatcher, utils.RpcQueue): two
    batches live past the batcher, the third started only when the first returns, its wait
    clock started when it takes its first request, not at that request's arrival; every batch
    runs at its compiled size (2). Arrivals at 0, 0.1, 0.2, 0.3, 0.4 and 100 s."""
    from podsim.serving.simulate import ServingSim
    from podsim.serving.workload import Requests

    cfg = _saxml()
    sim = ServingSim(cfg, Requests(np.zeros(1), np.full(1, 1500), np.full(1, 40)))
    T = sum(sim.replicas[0].batch_s(2, 1500, 39))
    a = T / 8  # the fifth request arrives while the first batch runs
    req = Requests(np.array([0.0, a, 2 * a, 3 * a, 4 * a, 100.0]), np.full(6, 1500), np.full(6, 40))
    e2e = simulate_serving(cfg, requests=req).tables["serving_requests"]["e2e_s"]
    # batch 3 takes request 4 when batch 1 returns (a + T) and waits its 10 s from then; the last
    # request closes its batch at once (nothing more will arrive)
    end = np.array([a + T, a + T, a + 2 * T, a + 2 * T, a + 2 * T + 10.0, 100.0 + T])
    assert np.allclose(e2e, end - req.arrival_s, rtol=1e-12)
    # one batch live (Saxml since 2024 with MAX_LIVE_BATCHES <= 2): batch 3 is started only when batch 2 returns
    one = simulate_serving(_saxml(batcher_depth=1), requests=req).tables["serving_requests"]["e2e_s"]
    assert np.allclose(one[4] + req.arrival_s[4], a + 3 * T + 10.0, rtol=1e-12)
    assert np.allclose(one[:4], e2e[:4], rtol=1e-12)
    # the idle batcher (wait from the first request's arrival, one batch at a time) differs
    idle = simulate_serving(_saxml(batcher="idle"), requests=req).tables["serving_requests"]["e2e_s"]
    assert not np.allclose(idle, e2e)


def test_saxml_turns_away_requests_beyond_its_live_limit_and_the_client_retries():
    """At most max_batch x max_live_batches requests alive; the Sax client retries the rest with
    backoff, so every request still completes, later; a run's results are seeded."""
    from podsim.serving.simulate import ServingSim

    cfg = _saxml(max_live_batches=1, max_wait="0s")
    cfg = cfg.model_copy(update={"requests": RequestStream.model_validate(
        {"arrivals": {"kind": "offline"}, "requests": 12, "prompt": {"kind": "fixed", "mean": 300},
         "output": {"kind": "fixed", "mean": 8}})})
    sim = ServingSim(cfg)
    sim.run()
    assert sim.retries_total > 0 and not sim.retrying
    assert np.isfinite(sim.log.end_s).all() and not sim.log.rejected.any()
    again = ServingSim(cfg)
    again.run()
    assert np.array_equal(again.log.end_s, sim.log.end_s)
    # attempts that must fail (before a running batch returns) are counted without events: the same run
    polled = ServingSim(cfg, retry_skip=False)
    polled.run()
    assert np.array_equal(polled.log.end_s, sim.log.end_s) and polled.retries_total == sim.retries_total


def test_clients_bound_the_requests_outstanding():
    """One client: each request is sent when the previous one has returned."""
    cfg = config(requests={"arrivals": {"kind": "offline"}, "requests": 6, "clients": 1,
                           "prompt": {"kind": "fixed", "mean": 300}, "output": {"kind": "fixed", "mean": 6}})
    tab = simulate_serving(cfg).tables["serving_requests"]
    from podsim.serving.simulate import ServingSim

    sim = ServingSim(cfg)
    sim.run()
    first, end = sim.log.first_s, sim.log.end_s
    assert np.isfinite(end).all()
    assert (first[1:] > end[:-1] - 1e-12).all()
    assert tab["e2e_s"][-1] == pytest.approx(end[-1])


def test_saxml_refuses_a_batch_whose_cache_does_not_fit():
    with pytest.raises(PodsimError, match="a Saxml batch of 2 requests x 1 beams at 2048 prompt and 2000000 output"):
        simulate_serving(_saxml(buckets=[2048]).model_copy(update={"requests": RequestStream.model_validate(
            {"arrivals": {"kind": "poisson", "rate": "1/s"}, "prompt": {"kind": "fixed", "mean": 600},
             "output": {"kind": "fixed", "mean": 2_000_000, "high": 2_000_000}})}))
    with pytest.raises(ValueError, match="batcher is for static"):
        config(batch={"batcher": "saxml"})
    with pytest.raises(ValueError, match="the largest must hold max_seqs"):
        config(batch={"max_seqs": 64, "batch_sizes": [32]})
    with pytest.raises(ValueError, match="the largest must hold max_batch"):
        config(batch={"kind": "static", "max_batch": 8, "batch_sizes": [4]})


def test_sax_client_backoff_follows_cenkalti_backoff():
    """Attempt k of a request turned away at 0 falls within the backoff's +-50% of 10 ms x 1.5^j
    (capped at 60 s) summed; one slot at a time and all slots together draw the same times; the
    jitter is the seed's."""
    from podsim.serving.saxclient import SaxRetries

    one, many, other = SaxRetries(5), SaxRetries(5), SaxRetries(6)
    for q in (one, many, other):
        for rid in range(40):
            q.add(rid, 0.0)
    for i in range(40):
        one.fail_one(i, until=600.0)
    many.fail_before(600.0)
    other.fail_before(600.0)
    assert np.array_equal(one.t[:40], many.t[:40]) and np.array_equal(one.k[:40], many.k[:40])
    assert not np.array_equal(one.t[:40], other.t[:40])
    intervals = np.minimum(0.010 * 1.5 ** np.arange(200), 60.0)
    for i in range(40):
        k = int(one.k[i])  # attempts drawn: the last is the first at or after 600 s
        assert 0.5 * intervals[:k].sum() <= one.t[i] <= 1.5 * intervals[:k].sum()
        assert one.t[i] >= 600.0 and one.t[i] - 1.5 * intervals[k - 1] < 600.0
    assert one.failed == int(one.k[:40].sum()) - 40  # every attempt but each first drawn one failed


def _offline(n: int, prompt: int, output: int, **batch) -> ServingConfig:
    return config(batch=batch, requests={"arrivals": {"kind": "offline"}, "requests": n,
                                         "prompt": {"kind": "fixed", "mean": prompt}, "output": {"kind": "fixed", "mean": output}})


def test_one_prompt_per_step_as_jetstream_schedules_it():
    """prefill_seqs 1 (JetStream's one prefill per call, ov.19): no step prefills two prompts, so
    20 prompts of 100 tokens take 20 steps that prefill, each exactly one prompt."""
    from podsim.serving.simulate import ServingSim

    sim = ServingSim(_offline(20, 100, 5, max_seqs=8, token_budget=2048, prefill_seqs=1))
    sim.run()
    steps = sim.replicas[0].steps
    prefill = steps.column("tokens") - steps.column("decode_tokens")
    assert set(prefill.tolist()) == {0.0, 100.0} and int((prefill == 100).sum()) == 20
    free = ServingSim(_offline(20, 100, 5, max_seqs=8, token_budget=2048))
    free.run()
    assert len(free.replicas[0].steps) < len(steps)  # without the cap, a step prefills up to 8 prompts


def test_padded_chunks_and_decode_rows_cost_their_padded_shape():
    """buckets pad a prompt chunk, batch_sizes the decoding rows: a one-step request of 100 prompt
    tokens under buckets (128,) costs the timer's 128-row step with 100 tokens written to the
    cache; padding never makes a run cheaper."""
    from podsim.serving.simulate import ServingSim

    sim = ServingSim(_offline(1, 100, 1, buckets=[128]))
    sim.run()
    m = 128
    want = sim.timer.tokens_step_s(m, 1, float(m), m * (m + 1) / 2.0, 0.0, 100.0)
    assert sim.replicas[0].busy_s == pytest.approx(want, rel=1e-12)
    assert sim.replicas[0].steps.column("tokens").tolist() == [100.0]  # the log keeps the real tokens
    busy = {}
    for name, batch in (("plain", {}), ("buckets", {"buckets": [128, 1024]}), ("rows", {"batch_sizes": [64]})):
        s = ServingSim(_offline(40, 100, 30, max_seqs=64, **batch))
        s.run()
        busy[name] = s.replicas[0].busy_s
    assert busy["buckets"] > busy["plain"] and busy["rows"] > busy["plain"]
    with pytest.raises(ValueError, match="prefill_seqs does not apply"):
        config(batch={"kind": "static", "prefill_seqs": 1})
    with pytest.raises(ValueError, match="batch policy prefill_seqs 9 is more than max_seqs 8"):
        config(batch={"max_seqs": 8, "prefill_seqs": 9})
    assert config(batch={"max_seqs": 8, "prefill_seqs": 8}).batch.prefill_seqs == 8


def test_a_prompt_past_the_largest_bucket_is_split_into_chunks_of_it():
    """A 2,500-token prompt under buckets (512, 1024) prefills as JetStream's chunked prefill runs it:
    chunks of the largest bucket over steps (1,024, 1,024, then 452 padded to 512), never one chunk
    past the largest bucket (it ran as one 2,500-token step of 3,072 rows); in separate prefill too.
    A static batch's prompt past the largest bucket is refused in one line (engines truncate it)."""
    from podsim.errors import PodsimError
    from podsim.serving.simulate import ServingSim

    for prefill in ("chunked", "separate"):
        sim = ServingSim(_offline(1, 2500, 2, token_budget=4096, prefill_seqs=1, buckets=[512, 1024], prefill=prefill))
        sim.run()
        steps = sim.replicas[0].steps
        assert (steps.column("tokens") - steps.column("decode_tokens")).tolist() == [1024.0, 1024.0, 452.0, 0.0]
        want = sum(sim.timer.tokens_step_s(m, int(last), float(m), m * (done + (m + 1) / 2.0), float(done), float(n))
                   for m, n, done, last in ((1024, 1024, 0, False), (1024, 1024, 1024, False), (512, 452, 2048, True)))
        assert float(steps.column("dt_s")[:3].sum()) == pytest.approx(want, rel=1e-12)
    with pytest.raises(PodsimError, match="a prompt of 2500 tokens is longer than the largest bucket 1024"):
        ServingSim(_offline(1, 2500, 2, kind="static", max_batch=1, buckets=[512, 1024]))


def test_split_prompts_conserve_their_tokens_and_pages():
    """Prompts past the largest bucket split over steps lose and repeat nothing: over 12 prompts
    of 100-1,800 tokens (half past the 512 bucket), two in prefill at once, chunked and separate,
    the steps prefill exactly the prompts' tokens (no preemption) and decode each request's output
    less its first token, no step prefills more than two chunks of the bucket, every request ends
    after its first token, the KV cache audited every step and every page given back at the end."""
    from podsim.serving.simulate import ServingSim

    for prefill in ("chunked", "separate"):
        cfg = config(batch={"max_seqs": 8, "token_budget": 1536, "prefill_seqs": 2, "buckets": [256, 512], "prefill": prefill},
                     requests={"arrivals": {"kind": "offline"}, "requests": 12, "prompt": {"kind": "uniform", "low": 100, "high": 1800},
                               "output": {"kind": "uniform", "low": 2, "high": 40}})
        sim = ServingSim(cfg, audit=True)
        sim.run()
        rep, req = sim.replicas[0], sim.req
        steps = rep.steps
        prefilled = steps.column("tokens") - steps.column("decode_tokens")
        assert int((req.prompt > 512).sum()) >= 4 and rep.preempted == 0, prefill
        assert prefilled.sum() == req.prompt.sum() and prefilled.max() <= 2 * 512, prefill
        assert steps.column("decode_tokens").sum() == req.output.sum() - len(req), prefill
        assert np.isfinite(sim.log.first_s).all() and (sim.log.first_s <= sim.log.end_s).all(), prefill
        assert rep.ledger.used == 0, prefill


def test_a_served_model_is_a_parallel_block_as_its_preset_is():
    """GPT-J's and PaLM's presets are parallel blocks: served as one unless the configuration says
    otherwise (before, the serving model's own default, sequential, silently won)."""
    from podsim.serving.spec import ServedModel

    assert ServedModel(model="gptj-6b").parallel() and ServedModel(model="palm-540b").parallel()
    assert not ServedModel(model="gptj-6b", parallel_block=False).parallel()
    assert not ServedModel(model="llama2-70b").parallel() and ServedModel(model="llama2-70b", parallel_block=True).parallel()
    body = {"generation": "gpu-h100", "slice": "1", "engine": "ideal", "duration": "5s",
            "requests": {"arrivals": {"kind": "offline"}, "requests": 4, "prompt": {"kind": "fixed", "mean": 128},
                         "output": {"kind": "fixed", "mean": 8}}}
    busy = {}
    for name, model in (("preset", {"model": "gptj-6b"}), ("explicit", {"model": "gptj-6b", "parallel_block": True}),
                        ("sequential", {"model": "gptj-6b", "parallel_block": False})):
        r = simulate_serving(ServingConfig.model_validate({**body, "model": model}))
        busy[name] = r.metrics["tokens_per_s"]
    assert busy["preset"] == busy["explicit"] != busy["sequential"]


def test_a_kernel_that_reads_whole_blocks_reads_each_sequence_to_its_block_end():
    """An engine whose decode kernel copies kv_read_block_pages pages per grid step (JetStream's
    experimental engine: 8) reads each sequence's KV to the end of its last block: a 100-token
    prompt with 16-token pages and blocks of 8 pages reads 128 tokens a decode step (127 cached and
    the new one), where the tokens it holds are 101 and 102; the cache itself holds the real ones."""
    from dataclasses import replace

    from podsim.serving.engines import ENGINES, Sourced
    from podsim.serving.simulate import ServingSim

    cfg = _offline(1, 100, 3, max_seqs=8, page_tokens=16)
    blocked = replace(ENGINES["ideal"]["any"], kv_read_block_pages=Sourced(8, "test"))
    busy = {}
    for name, engine in (("plain", None), ("blocked", blocked)):
        sim = ServingSim(cfg, engine=engine)
        sim.run()
        busy[name] = (sim, sim.replicas[0].busy_s)
    step = busy["blocked"][0].timer.tokens_step_s
    prefill = step(100, 1, 100.0, 100 * 101 / 2.0, 0.0, 100.0)
    assert busy["blocked"][1] == pytest.approx(prefill + 2 * step(1, 1, 1.0, 128.0, 127.0, 1.0), rel=1e-12)
    assert busy["plain"][1] == pytest.approx(prefill + step(1, 1, 1.0, 101.0, 100.0, 1.0) + step(1, 1, 1.0, 102.0, 101.0, 1.0),
                                             rel=1e-12)
    assert busy["blocked"][0].kv_tokens_max == busy["plain"][0].kv_tokens_max
    with pytest.raises(PodsimError, match="beam search"):
        ServingSim(config(requests={"beams": 2}, batch={"kv": "reserve"}), engine=blocked)
    with pytest.raises(PodsimError, match="kv_read_block_pages"):  # static buffers: the blocks would be ignored
        replace(blocked, kv_buffers="static")


def test_block_padding_counted_from_residues_matches_each_sequence_summed(monkeypatch):
    """Replica.block_pad (the blocked kernel's extra reads from counts of sequences by residue) equals
    the sum over every decoding sequence of its reads rounded up to a whole block, at every decode
    step, planned one at a time or run ahead; and both paths give the same steps."""
    from dataclasses import replace

    from podsim.serving.engines import ENGINES, Sourced
    from podsim.serving.replica import Replica
    from podsim.serving.simulate import ServingSim

    counted = Replica.block_pad
    calls = []

    def checked(self):
        pad = counted(self)
        brute = sum((-(q.prompt - q.s0 + self.s + 1)) % self.kv_block for q in self.seqs.values())
        assert pad == brute
        calls.append(pad)
        return pad

    monkeypatch.setattr(Replica, "block_pad", checked)
    blocked = replace(ENGINES["ideal"]["any"], kv_read_block_pages=Sourced(2, "test"))
    cfg = config(batch={"max_seqs": 16, "page_tokens": 16})
    busy = []
    for run_ahead in (True, False):
        sim = ServingSim(cfg, engine=blocked, run_ahead=run_ahead, audit=True)
        sim.run()
        busy.append(sum(r.busy_s for r in sim.replicas))
    assert len(calls) > 100 and len(set(calls)) > 10  # many steps, many different paddings
    assert busy[0] == pytest.approx(busy[1], rel=1e-12)


def test_padded_decode_rows_cost_their_batch_size_on_both_paths():
    """batch_sizes pad the decoding rows: one sequence under batch_sizes (4,) costs the timer's 4-row
    decode step (4 sampled rows; attention and KV traffic of the one real row), planned one step at a
    time or run ahead alike."""
    from podsim.serving.simulate import ServingSim

    cfg = _offline(1, 100, 3, max_seqs=4, batch_sizes=[4])
    busy = []
    for run_ahead in (True, False):
        sim = ServingSim(cfg, run_ahead=run_ahead)
        sim.run()
        busy.append(sim.replicas[0].busy_s)
    step = sim.timer.tokens_step_s
    want = step(100, 1, 100.0, 100 * 101 / 2.0, 0.0, 100.0) + step(4, 4, 1.0, 101.0, 100.0, 1.0) + step(4, 4, 1.0, 102.0, 101.0, 1.0)
    assert busy == pytest.approx([want, want], rel=1e-12)


def test_a_dense_prefill_holds_its_logits_beside_the_cache():
    """An engine whose prefill materialises dense logits (praxis's, the saxml engine) holds one
    layer's fp32 logits and bf16 probabilities for the whole batch: with Saxml's batcher beside the
    prompts' KV only (the two-phase check); a what-if engine with praxis's prefill under the idle
    batcher (the saxml engine itself refuses it) beside the whole cache."""
    from podsim.serving.engines import ENGINES
    from podsim.serving.simulate import ServingSim

    idle = config(batch={"kind": "static", "max_batch": 4, "buckets": [1024], "kv": "reserve"},
                  requests={"prompt": {"kind": "fixed", "mean": 900}, "output": {"kind": "fixed", "mean": 16}})
    sim = ServingSim(idle, engine=ENGINES["saxml"]["tpu"])
    sh = sim.shard
    logits = sh.dense_logits_live_bytes(4 * 1024 * 1024)
    assert logits == sh.heads * 4 * 1024 * 1024 * 6 / sh.expert  # fp32 logits and bf16 probabilities
    assert sim.prefill_workspace_bytes == pytest.approx(sh.workspace_bytes(4 * 1024, 4) + logits)
    assert sim.budget.workspace_bytes == pytest.approx(sh.workspace_bytes(4 * 1024, 4) + logits)
