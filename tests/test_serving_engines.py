"""The serving engine model (podsim.serving.engines), low-precision peaks and small collectives on
GPUs: what an engine adds to the chips' time, which parameters `engine:` picks, the configurations
published engines ran that podsim now runs, and NCCL's measured small all-reduce."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
from helpers import run_podsim

from podsim.engine import simulate_collective
from podsim.errors import PodsimError
from podsim.serving import ServingConfig, simulate_serving
from podsim.serving.costs import InferencePrecision, InferenceShard, Seq
from podsim.serving.engines import ENGINES, EngineModel, Sourced, resolve_engine
from podsim.serving.steptime import StepTimer
from podsim.serving.trace import serving_step_study
from podsim.study import run_study
from podsim.topology import build_slice, get_generation
from podsim.trace.configs import get_model

FP8 = {"weights": "fp8", "kv_cache": "fp8", "matmul": "fp8"}


def _config(generation: str, slice_: str, model: dict, batch: dict, requests: dict, engine: str = "auto") -> ServingConfig:
    return ServingConfig.model_validate({"generation": generation, "slice": slice_, "engine": engine, "model": model,
                                         "batch": batch, "requests": requests})


def _offline(n: int, prompt: int, output: int) -> dict:
    return {"arrivals": {"kind": "offline"}, "requests": n, "prompt": {"kind": "fixed", "mean": prompt},
            "output": {"kind": "fixed", "mean": output}}


def test_fp8_serving_on_h100_runs_at_the_fp8_rate_and_says_its_source(capsys):
    """`podsim serve -g gpu-h100 --matmul fp8`: refused before (no FP8 rate on gpu-h100); now its
    weight matmuls run at the dense FP8 peak, 1,979 TFLOP/s (lp.1), twice bf16's, the output names
    the rate and its source id, and a prefill-heavy run is faster than the same run in bf16."""
    flags = ["serve", "-g", "gpu-h100", "--slice", "2", "--model", "llama2-70b", "--weights", "fp8", "--kv-cache", "fp8",
             "--rate", "2/s", "--duration", "20s", "--prompt", "fixed:2048", "--output", "fixed:16"]
    code, out, err = run_podsim(capsys, *flags, "--matmul", "fp8", "--json")
    assert code == 0, err
    m = json.loads(out)["metrics"]
    assert m["matmul_peak_flops_per_s"] == pytest.approx(1979e12)
    assert "fp8 1,979 TFLOP/s (lp.1" in m["matmul_peak_source"] and m["engine"] == "tensorrt-llm"
    code, text, err = run_podsim(capsys, *flags, "--matmul", "fp8")
    assert code == 0 and "weight matmuls at fp8 1,979 TFLOP/s (lp.1" in text.replace("\n", " ").replace("│", " ").replace("  ", " ")
    code, out16, _ = run_podsim(capsys, *flags, "--json")  # weight-only fp8: bf16 matmuls
    m16 = json.loads(out16)["metrics"]
    assert m16["matmul_peak_flops_per_s"] == pytest.approx(989e12) and "NV-H100" in m16["matmul_peak_source"]
    assert m["ttft_mean_s"] < 0.8 * m16["ttft_mean_s"]


def test_llama2_70b_on_two_h100s_at_batch_96_with_2048_token_prompts_runs():
    """TensorRT-LLM's table ran Llama 2 70B on 2 H100s, static batches of 96 x 2,048-token prompts
    (sv.11). Charging the whole batch's prefill activations at once (196,608 tokens: ~47 GB a chip)
    refused it; the engine prefills in steps of its token budget, so the workspace is one step's
    and the batch's KV (96 x 2,176 tokens in fp8) fits beside the 35 GB of weights."""
    cfg = _config("gpu-h100", "2", {"model": "llama2-70b", "tensor": 2, "precision": FP8},
                  {"kind": "static", "max_batch": 96, "kv": "reserve"}, _offline(96, 2048, 128), engine="tensorrt-llm-0.6")
    r = simulate_serving(cfg)
    assert r.metrics["requests_completed"] == 96 and r.metrics["concurrent_seqs_max"] == 96
    assert r.budget.workspace_bytes < 2e9  # one 2,048-token step's activations, not 96 prompts'
    assert r.budget.tokens >= 96 * (2048 + 128)


@pytest.mark.parametrize(("generation", "slice_", "model", "engine"), [
    ("gpu-h100", "1", {"model": "llama2-70b", "overrides": {"n_layers": 32, "d_model": 4096, "n_heads": 32, "n_kv_heads": 32,
                                                            "d_ff": 11008}, "precision": FP8}, "auto"),
    ("gpu-h100", "4", {"model": "llama2-70b", "precision": FP8}, "tensorrt-llm"),
    ("gpu-h100", "1", {"model": "llama2-70b", "overrides": {"n_layers": 32, "d_model": 4096, "n_heads": 32, "n_kv_heads": 8,
                                                            "d_ff": 14336}}, "vllm"),
    ("tpu-v5e", "2x4", {"model": "llama2-70b", "precision": {"weights": "int8"}}, "auto"),
])
def test_batch1_first_token_is_not_below_the_host_floor(generation, slice_, model, engine):
    """A lone request's first token on a short prompt waits for the engine's host time of its
    prefill step (per step, per layer, per sampled token): podsim's TTFT is never below that
    floor, and the floor is what the engine's figures say."""
    cfg = _config(generation, slice_, model, {"kind": "continuous"}, _offline(1, 32, 2), engine=engine)
    r = simulate_serving(cfg)
    e = resolve_engine(engine, generation)
    floor = e.host_s(1, cfg.model.config().n_layers)
    assert floor > 1e-3
    assert r.metrics["ttft_mean_s"] >= floor
    ideal = simulate_serving(cfg, engine=ENGINES["ideal"]["any"]).metrics["ttft_mean_s"]
    assert r.metrics["ttft_mean_s"] == pytest.approx(ideal + floor, rel=1e-9)  # host time adds to the device's


def test_auto_picks_the_validated_engine_and_names_are_refused_where_podsim_has_none():
    assert resolve_engine("auto", "gpu-h100").name == "tensorrt-llm"
    assert resolve_engine("auto", "tpu-v5e").name == "jetstream"
    assert resolve_engine("auto", "tpu-v5e", "static", "saxml").name == "saxml"
    with pytest.raises(PodsimError, match="engine tensorrt-llm: no parameters for tpus"):
        resolve_engine("tensorrt-llm", "tpu-v6e")
    with pytest.raises(PodsimError, match="engine saxml runs Saxml's batcher"):
        resolve_engine("saxml", "tpu-v5e", "continuous")
    with pytest.raises(PodsimError, match="engine 'sglang' is not known"):
        resolve_engine("sglang", "gpu-h100")
    with pytest.raises(PodsimError, match="kv_read_fraction"):
        EngineModel("x", "gpu", kv_read_fraction=Sourced(0.0, "x"))
    for per in ENGINES.values():  # every figure names where it comes from
        for model in per.values():
            assert all(f.source for f in model.figures().values())


def test_a_kernel_without_gqa_sharing_reads_each_kv_head_per_query_head():
    """tensorrt-llm-0.6's masked MHA kernel (before v0.8's XQA) reads a KV head once per query head
    of its group: Llama 2 70B (64 query heads, 8 KV heads) reads 8x the KV bytes; the same model
    without GQA (64 KV heads) is not affected."""
    from podsim.serving.simulate import ServingSim

    for overrides, group in (({}, 8), ({"n_layers": 4, "n_kv_heads": 64}, 1)):
        spec = {"model": "llama2-70b", "overrides": overrides, "tensor": 2, "precision": FP8}
        shards = {}
        for engine in ("tensorrt-llm-0.6", "tensorrt-llm"):
            cfg = _config("gpu-h100", "2", spec, {"kind": "static", "max_batch": 8, "kv": "reserve"}, _offline(8, 256, 8),
                          engine=engine)
            shards[engine] = ServingSim(cfg, engine=replace(ENGINES[engine]["gpu"], kv_read_fraction=Sourced(1.0, "x"))).shard
        old, new = shards["tensorrt-llm-0.6"], shards["tensorrt-llm"]
        assert old.kv_read_cost_bytes_per_token_layer() == pytest.approx(group * new.kv_read_cost_bytes_per_token_layer())


def test_a_mixture_of_experts_model_on_tensor_parallelism_alone_runs():
    """Mixtral on tensor parallelism only (expert 1: TensorRT-LLM's 2-H100 rows, or int8 on a v5e
    4x4) crashed with KeyError in the step timer; its step now equals the engine's step study."""
    sh = InferenceShard(get_model("mixtral-8x7b"), tensor=16, precision=InferencePrecision(weights="int8"))
    t = StepTimer(sh, "tpu-v5e", (4, 4))
    for n in (1, 5, 48):
        load = sh.attention_load([Seq(1, 700)] * n)
        study = serving_step_study(sh, t.generation, t.shape, n, n, load, t.onchip_bytes, on=t.built)
        assert t.step_s(n, n, load) == pytest.approx(run_study(study).step_time_s, rel=1e-9)
    r = simulate_serving(_config("gpu-h100", "2", {"model": "mixtral-8x7b", "tensor": 2, "precision": FP8},
                                 {"kind": "continuous"}, _offline(50, 128, 16)))
    assert r.metrics["requests_completed"] == 50


def test_small_gpu_all_reduces_cost_what_nccl_measured():
    """A TP all-reduce of 2-64 kB on 8 H100s took a median 31 us in NCCL (cl.1, vidur's profile);
    podsim's 3.8 us of route latency alone was 8x short. With gpu-h100's collective latency (27 us,
    NCCL's time beyond the routes) it is within 10%; on 2 GPUs within the measured interquartile
    range (7-35 us); large messages still go at bandwidth (64 MiB: cl.3's 322 us within 15%). TPUs
    add no library time: a v5e 2x4 all-reduce of 8 kB is its hops at ~1 us each (x.2)."""
    gpu = get_generation("gpu-h100")
    for kb in (2, 16, 64):
        t = simulate_collective(build_slice(gpu, (8,), False, True), "all_reduce", kb * 1024, "x").simulated_s
        assert t == pytest.approx(31e-6, rel=0.10)
    t2 = simulate_collective(build_slice(gpu, (2,), False, True), "all_reduce", 16 * 1024, "x").simulated_s
    assert 7e-6 <= t2 <= 35e-6
    big = simulate_collective(build_slice(gpu, (8,), False, True), "all_reduce", 64 * 2**20, "x")
    assert big.simulated_s == pytest.approx(322e-6, rel=0.15) and big.simulated_s == pytest.approx(big.closed_form_s, rel=1e-9)
    v5e = get_generation("tpu-v5e")
    assert v5e.collective_latency_s == 0.0
    r = simulate_collective(build_slice(v5e, (2, 4), False, True), "all_reduce", 8192, "all")
    assert 2e-6 <= r.simulated_s <= 12e-6 and math.isclose(r.simulated_s, r.closed_form_s, rel_tol=1e-9)
