"""HBM footprint per chip (podsim.trace.memory) against its closed forms: ZeRO's 16 bytes per
parameter of mixed-precision Adam state, and Korthikanti et al. 2022's activations per layer
(their 34sbh + 5as^2b less the dropout masks: 32sbh + 2as^2b; with tensor parallelism t,
sbh(8 + 24/t) + 2as^2b/t; with sequence parallelism everything / t; full recompute 2sbh)."""

from __future__ import annotations

import json

import pytest
from helpers import run_podsim

from podsim.trace import generate_trace
from podsim.trace.configs import get_model
from podsim.trace.costs import TransformerShard
from podsim.trace.generate import GenerateOptions
from podsim.trace.memory import fits_message, layer_activation_elems
from podsim.trace.mesh import parse_parallelism

# GPT-style: gelu MLP of 4h, multi-head attention (Korthikanti's model)
GPT = get_model("gpt3-175b", {"n_layers": 4, "global_batch": 64})
S, H, A = GPT.seq_len, GPT.d_model, GPT.n_heads


def kept_bytes(plan: str, b: int, **opts) -> float:
    o = GenerateOptions(**{"attention": "materialized", **opts})
    sh = TransformerShard(GPT, parse_parallelism(plan), o, b=b, layers=GPT.n_layers)
    return layer_activation_elems(sh)[0] * o.act_bytes


@pytest.mark.parametrize("t", [1, 2, 4, 8])
def test_activations_per_layer_match_korthikanti_without_dropout(t):
    b = 2
    sbh = S * b * H
    assert kept_bytes(f"tensor={t}", b) == pytest.approx(sbh * (8 + 24 / t) + 2 * A * S * S * b / t)
    assert kept_bytes(f"tensor={t}", b, sequence_parallel=True) == pytest.approx(32 * sbh / t + 2 * A * S * S * b / t)
    # selective recompute drops the attention core; full keeps only the layer input
    assert kept_bytes(f"tensor={t}", b, recompute="minimal", sequence_parallel=True) == pytest.approx(32 * sbh / t)
    assert kept_bytes(f"tensor={t}", b, recompute="full") == pytest.approx(2 * sbh)


def test_state_is_sixteen_bytes_per_parameter_over_fsdp():
    trace = generate_trace(GPT, "4x4x4", "fsdp=64")
    f = trace.meta["hbm_footprint"]
    assert f["state_bytes"] == pytest.approx(GPT.params * 16 / 64)
    # two layers' weights gathered at once, bf16
    assert f["gathered_bytes"] == pytest.approx(2 * GPT.layer_params * 2)
    assert f["total_bytes"] == pytest.approx(sum(v for k, v in f.items() if k != "total_bytes"))


def test_more_recompute_needs_less_memory():
    totals = [generate_trace(GPT, "4x4x4", "fsdp=64", options=GenerateOptions(recompute=r)).meta["hbm_footprint"]["total_bytes"]
              for r in ("none", "minimal", "full")]
    assert totals[0] > totals[1] > totals[2]


def test_resnet_footprint_grows_with_images_per_chip():
    small = generate_trace("resnet50", "2x2x2", "data=8", overrides={"global_batch": 64}).meta["hbm_footprint"]
    big = generate_trace("resnet50", "2x2x2", "data=8", overrides={"global_batch": 2048}).meta["hbm_footprint"]
    assert small["state_bytes"] == big["state_bytes"] == pytest.approx(get_model("resnet50").params * 16)
    assert big["activations_bytes"] == pytest.approx(small["activations_bytes"] * 32)


def test_fits_message_only_when_over():
    assert fits_message(10 * 2**30, 32 * 2**30) is None
    msg = fits_message(40 * 2**30, 32 * 2**30)
    assert "40.0 GiB" in msg and "32.0 GiB" in msg


def test_steptime_reports_hbm_and_warns_when_the_plan_does_not_fit(tmp_path, capsys):
    big = tmp_path / "big.json"
    r = run_podsim(capsys, *["trace", "generate", "gpt3-175b", "-g", "tpu-v4", "--slice", "4x4x4", "--parallelism", "fsdp=64",
                            "--set", "n_layers=96", "--set", "global_batch=512", "-o", str(big)])
    assert r.code == 0, r.err
    # the summary sets the peak it holds against the chip's HBM, apart from the bytes it moves
    assert "HBM per chip (peak)" in r.out and "of 32 GiB: DOES NOT FIT" in r.out and "HBM traffic per chip" in r.out
    r = run_podsim(capsys, *["steptime", "--trace", str(big), "--generation", "tpu-v4", "--slice", "4x4x4", "--json"])
    assert r.code == 0, r.err
    s = json.loads(r.out)["metrics"]
    assert s["hbm_fits"] is False and s["hbm_bytes_per_chip"] > s["hbm_capacity_bytes"] == 32 * 2**30
    assert "warning: this plan needs" in r.err
    small = tmp_path / "small.json"
    r = run_podsim(capsys, *["trace", "generate", "gpt3-175b", "-g", "tpu-v4", "--slice", "4x4x4", "--parallelism", "fsdp=64",
                            "--set", "n_layers=2", "--set", "global_batch=64", "--recompute", "full", "-o", str(small)])
    assert r.code == 0, r.err
    assert "of 32 GiB" in r.out and "DOES NOT FIT" not in r.out
    r = run_podsim(capsys, *["steptime", "--trace", str(small), "--generation", "tpu-v4", "--slice", "4x4x4", "--json"])
    s = json.loads(r.out)["metrics"]
    assert s["hbm_fits"] is True and "warning" not in r.err
