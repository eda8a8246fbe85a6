"""The serving validation table (podsim.validation.serving_table): the engine rows' errors pinned
so fidelity can only go up, the calibration rule as code, its cross-validated figures, and the
serving error bands stored from the table. The Saxml rows are pinned in test_serving_validation.py;
the Server rows' rate searches (minutes) run only in `benchmarks/validation.py --serving --server`."""

from __future__ import annotations

import statistics

import pytest

from podsim.serving.engines import ENGINES, JETSTREAM_STEP_OVERHEAD_S, TRT_LAYER_OVERHEAD_S
from podsim.validation import bands
from podsim.validation import serving_table as st
from podsim.validation.serving_rows import ALL_ROWS, SERVER_ROWS

# predicted / measured - 1 of every engine row (benchmarks/validation.py --serving), at issue 32's per-generation
# compute fractions (podsim.perf.efficiency: H100 bf16 0.757 and HBM 0.869 from vidur's kernel profiles, eff.9 and
# eff.8; v5e 0.923, eff.2). Median 12.2% at the shared 0.752 before issue 32; 14.8% at eff.7's H100 0.789 with
# H100's HBM at its stated bandwidth (no basis); 16.5% with vidur's two (max 44.4% -> 37.2%, LOSO 24.0% -> 16.5%);
# 15.9% with sv.27/sv.28 at the engine limits their source states (TP 2: max_batch_size and max_num_tokens 2048,
# sv.27 30,000 requests; they ran at TP 4's 4,096/8,192 before: +13.2% -> +9.1%, +16.5% -> +9.5%); sv.41 +24.7% ->
# +19.5% with the MLPerf configs' KV cache at 90% of what weights and workspace leave (kvcache_free_gpu_mem_frac);
# sv.39 +35.7% -> +35.2%, sv.41 +19.5% -> +16.9% at 16,384 tokens per step (NVIDIA's builder's max_num_tokens), not 8,192;
# sv.66 (JetStream's experimental engine at 320 sequences) +28.0%, with sv.62 at the settings its code states (160
# sequences, one prompt chunk per step padded to its chunk size, decode over every slot): 15.9% -> 16.2%; +10.1% with
# its decode kernel's reads in whole blocks of 8 pages (attention_ops.py): 16.2% -> 15.6%;
# sv.41 +16.9% -> +22.2% at batch 896, the NVIDIA v4.1 Offline config its run log's target_qps 80 identifies (not 1,024);
# the static rows' context phase one step of the whole batch (GptSession's default without --ctx_micro_batch_size), not
# steps of 2,048 tokens, with a step's workspace the activations alive at once (the residual beside the largest op's
# input and output, buffers reused as TensorRT's allocator reuses them), not every intermediate of a layer twice: every
# static run fits as it ran (sv.11, 70B on 2 H100s at 96 x 2,048, refused under the old count), sv.1 -3.0% -> +3.0%,
# sv.3 -13.5% -> -5.9%, sv.7 -11.0% -> -2.9%, sv.11 -13.8% -> -6.8%, sv.5 +7.0% -> +13.2%; the v0.11 rows' KV cache 99%
# of the memory free after the engine loads (--kv_cache_free_gpu_mem_fraction), not of all HBM: under 1 point each;
# the live-activation workspace leaves the MLPerf rows more cache: sv.39 +35.2% -> +35.8%, sv.41 +22.2% -> +22.7%.
# Median 15.6% (unchanged), max 37.2% (sv.37). Then the H100 all-reduces from vidur's measured NCCL profile
# (podsim.serving.nccl_profile, cl.1-cl.3), 8-36% slower than the flow engine at 16-64 MiB: every multi-GPU in-flight
# row comes closer (sv.30 +24.4% -> +17.2%, sv.31 +24.6% -> +16.4%, sv.38 +19.2% -> +13.8%, sv.39 +35.8% -> +32.5%,
# sv.37 +37.2% -> +35.8%), the static rows podsim had too slow go further (sv.11 -6.8% -> -10.4%, sv.12 -26.3% ->
# -27.5%), sv.33 -11.7% -> -12.7%, sv.17 +2.3% -> +3.6%: median 15.1%, max 35.8% (sv.37)
PINNED = {"sv.1": 0.0296, "sv.2": -0.1652, "sv.3": -0.0586, "sv.4": -0.1605, "sv.5": 0.1321, "sv.6": -0.165,
          "sv.7": -0.0294, "sv.8": -0.1878, "sv.9": 0.037, "sv.10": -0.1886, "sv.11": -0.1039, "sv.12": -0.2751,
          "sv.13": 0.0, "sv.14": -0.1983, "sv.15": 0.1483, "sv.16": -0.238, "sv.17": 0.0362, "sv.18": -0.0818,
          "sv.19": 0.203, "sv.20": -0.0704, "sv.21": -0.2373, "sv.22": -0.2462, "sv.23": 0.1588, "sv.24": 0.0804,
          "sv.25": -0.0331, "sv.26": -0.0959, "sv.27": 0.0568, "sv.28": 0.0608, "sv.29": 0.1822, "sv.30": 0.1718,
          "sv.31": 0.1636, "sv.32": 0.2936, "sv.33": -0.1269, "sv.34": 0.0048, "sv.35": -0.0606, "sv.36": -0.1432,
          "sv.37": 0.3583, "sv.38": 0.1379, "sv.39": 0.325, "sv.41": 0.1972, "sv.62": 0.0, "sv.66": 0.1009}
SAXML = {"I1": -0.074, "I2": -0.178, "I3": 0.154, "I4": 0.231}  # test_serving_validation.PINNED (the benchmark's 8 seeds)
CALIBRATION = {"sv.13": "tensorrt-llm-0.6.layer_overhead_s", "sv.62": "jetstream.step_overhead_s"}
# leave-one-out and leave-one-source-out errors where they differ from the plain one
CV = {"sv.1": (0.0296, 0.1744), "sv.2": (-0.1652, 0.1301), "sv.3": (-0.0586, 0.1424), "sv.4": (-0.1605, 0.0554),
      "sv.5": (0.1321, 0.3407), "sv.6": (-0.165, 0.1475), "sv.7": (-0.0294, 0.1364), "sv.8": (-0.1878, 0.0806),
      "sv.9": (0.037, 0.1175), "sv.10": (-0.1886, -0.0623), "sv.11": (-0.1039, -0.0296),
      "sv.12": (-0.2751, -0.1308), "sv.13": (-0.1297, -0.6698), "sv.14": (-0.1983, -0.3599),
      "sv.15": (0.1483, -0.6173), "sv.16": (-0.238, -0.3868), "sv.17": (0.0362, -0.4791),
      "sv.18": (-0.0818, -0.2047), "sv.62": (-0.1333, 0.7691), "sv.66": (0.1009, 0.5402)}


@pytest.fixture(scope="module")
def table():
    t = st.run_rows(ALL_ROWS)
    return t, st.cross_validated(ALL_ROWS, t)


@pytest.mark.slow
def test_every_engine_row_holds_its_fidelity(table):
    t, _ = table
    assert {r["id"] for r in t} == set(PINNED)
    for r in t:
        if PINNED[r["id"]] is None:  # refused: podsim finds no room for the run's configuration
            assert r["error"] is None and r["refused"], r["id"]
            continue
        assert r["error"] is not None and abs(r["error"]) <= abs(PINNED[r["id"]]) + 0.01, (r["id"], r["error"])
        assert r["calibration"] == CALIBRATION.get(r["id"], "")


@pytest.mark.slow
def test_the_table_meets_the_issue_and_prints_its_cross_validated_figures(table):
    """Issue 33's Must-show: >= 20 scored rows from >= 3 sources, median |error| <= 15%: missed since
    H100's compute fractions come from vidur's kernel profiles (15.1% with H100's all-reduces from vidur's NCCL
    profile; 15.6% before, as before the static rows' context phase
    took GptSession's whole-batch step with a step's workspace its live activations; 15.9% before JetStream's
    second row, sv.66, +10.1%; 16.5% before sv.27/sv.28 took their stated engine limits; 14.8% with eff.7's matmul
    and the stated HBM bandwidth, 12.2% at the shared 0.752), a miss docs/validation.md explains; the max, 35.8%
    (sv.37), within the 40% asked. Beside it, the cross-validated medians: leave-one-out 14.6% (sv.62 from sv.66,
    -13.3%), leave-one-source-out 15.6%."""
    t, cv = table
    scored = [st.miss(e) for rid, e in {**PINNED, **SAXML}.items() if rid not in CALIBRATION]
    assert len(scored) >= 20 and len({r["group"] for r in t if not r["calibration"]} | {"mlperf-tpu"}) >= 3
    median = statistics.median(scored)
    assert median == pytest.approx(0.151, abs=0.005)
    assert max(scored) == pytest.approx(0.358, abs=0.005)
    every = {rid: CV.get(rid, (e, e)) for rid, e in {**PINNED, **SAXML}.items()}
    for rid, (loo, loso) in CV.items():
        assert cv[rid]["loo"] == pytest.approx(loo, abs=0.005) and cv[rid]["loso"] == pytest.approx(loso, abs=0.005), rid
    s = st.summarise(t + [{"id": k, "group": "mlperf-tpu", "error": v, "calibration": ""} for k, v in SAXML.items()],
                     {**cv, **{k: {"plain": v, "loo": v, "loso": v} for k, v in SAXML.items()}})
    assert s["loo_median_abs_error"] == pytest.approx(statistics.median(st.miss(v[0]) for v in every.values()), abs=1e-3)
    assert s["loo_median_abs_error"] == pytest.approx(0.146, abs=0.005)
    assert s["loso_median_abs_error"] == pytest.approx(0.156, abs=0.005)
    assert st.HEADER.split()[-3:-1] == ["LOO", "LOSO"] and "LOO" in st.HEADER


def test_the_rule_picks_its_rows_and_the_stored_figures_are_its_values():
    """S2 as code: TensorRT-LLM's host time per layer from the batch-1 first-token row with the
    shortest prompt and fewest layers (sv.13, GPT-J's 28 layers against Llama 2 7B's 32), JetStream's
    per step from its one row (sv.62); the figures podsim ships are the rule's values."""
    assert [r.id for r in st.eligible(ALL_ROWS, "tensorrt-llm-0.6")][:3] == ["sv.13", "sv.15", "sv.17"]
    values = st.calibrate(ALL_ROWS)
    assert values["tensorrt-llm-0.6"][1] == pytest.approx(TRT_LAYER_OVERHEAD_S, rel=2e-3)
    assert values["jetstream"][1] == pytest.approx(JETSTREAM_STEP_OVERHEAD_S, rel=2e-3)
    assert ENGINES["tensorrt-llm"]["gpu"].layer_overhead_s.value == TRT_LAYER_OVERHEAD_S  # borrowed (S3)
    # without sv.13 the rule falls to sv.15; without its group, TensorRT-LLM has no host time (nothing to borrow)
    assert st.calibrate(r for r in ALL_ROWS if r.id != "sv.13")["tensorrt-llm-0.6"][0].startswith("calibration: sv.15")
    assert "tensorrt-llm-0.6" not in st.calibrate(r for r in ALL_ROWS if r.group != "trtllm-0.6")
    assert {r.metric for r in SERVER_ROWS} == {"server"} and all(r.bound == (2.0, 0.2) for r in SERVER_ROWS)


def test_the_shipped_serving_bands_are_the_pinned_table():
    """podsim/data/error_bands.json's serve bands are `--serving --write-bands` of the table: the
    pinned |errors| of the rows that set no constant, by kind (throughput, ttft, rate) and generation."""
    kinds = {r.id: ("serve", r.kind, r.generation) for r in ALL_ROWS}
    kinds.update({rid: ("serve", "rate" if rid in ("I3", "I4") else "throughput", "tpu-v5e") for rid in SAXML})
    want = bands.bands_from_errors((kinds[rid], e) for rid, e in {**PINNED, **SAXML}.items()
                                   if rid not in CALIBRATION and e is not None)
    have = {k: v for k, v in bands.stored_bands().items() if k[0] == "serve"}
    assert set(have) == set(want)
    for kind, fig in want.items():
        assert have[kind]["n_runs"] == fig["n_runs"], kind
        for f in ("typical", "median", "max"):
            assert have[kind][f] == pytest.approx(fig[f], abs=1.5e-3), (kind, f)
    ttft = bands.serving_band("ttft", "gpu-h100")
    assert ttft.covered and ttft.n_runs == 5
    assert not bands.serving_band("chips", "tpu-v5e").covered  # 2 rate rows: falls back to every serving run
    assert "over 44 runs" in bands.serving_band("chips", "tpu-v5e").text()
