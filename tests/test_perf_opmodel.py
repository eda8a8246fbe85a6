"""The per-op compute model (podsim.perf) and the generator's shapes, recompute and precision."""

from __future__ import annotations

import json

import pytest
from helpers import run_podsim

from podsim.engine import simulate_step, step_summary
from podsim.errors import PodsimError
from podsim.perf import chip_compute, compute_time_s
from podsim.perf.opmodel import Matmul, backward_matmuls, matmul_time_s, memory_time_s, padded_flops
from podsim.topology import build_slice
from podsim.trace import generate_trace
from podsim.trace.configs import PRESETS, get_model
from podsim.trace.generate import GenerateOptions
from podsim.trace.model import Compute

SMALL = {"n_layers": 2, "global_batch": 64, "seq_len": 1024}


def test_tile_padding_per_generation():
    mm = Matmul(4096, 64, 64)  # K and N half a 128 tile, a quarter of a 256 tile
    assert padded_flops(mm, 128) == pytest.approx(4 * mm.flops)
    assert padded_flops(mm, 256) == pytest.approx(16 * mm.flops)
    aligned = Matmul(4096, 1024, 2048, count=3)
    assert padded_flops(aligned, 128) == pytest.approx(aligned.flops)
    assert chip_compute("tpu-v4").mxu_dim == 128 and chip_compute("tpu-v6e").mxu_dim == 256  # v4.3, v6e.3


def test_matmul_time_closed_form_and_precision():
    v5e = chip_compute("tpu-v5e")
    mm = Matmul(8192, 8192, 8192)
    bf16 = matmul_time_s(mm, v5e)
    assert bf16 == pytest.approx(mm.flops / (197e12 * v5e.matmul_fraction))  # v5e.1
    assert bf16 / matmul_time_s(mm, v5e, "int8") == pytest.approx(393 / 197)
    v4 = chip_compute("tpu-v4")
    assert matmul_time_s(mm, v4, "int8") == pytest.approx(matmul_time_s(mm, v4))  # v4.1: int8 = bf16 rate
    with pytest.raises(PodsimError, match="precision 'int8' has no published rate on tpu-v3"):
        matmul_time_s(mm, chip_compute("tpu-v3"), "int8")


def test_each_precision_runs_at_its_generations_own_fraction():
    """An int8 matmul on v6e at v6e's own int8 fraction (eff.4), bf16 at its bf16 one (eff.3); v5p's
    int8, with no source or row of its own, at v5p's bf16 fraction of the int8 peak (podsim.perf.efficiency)."""
    from podsim.perf.efficiency import fraction

    mm = Matmul(8192, 8192, 8192)
    v6e, v5p = chip_compute("tpu-v6e"), chip_compute("tpu-v5p")
    assert matmul_time_s(mm, v6e, "int8") == pytest.approx(mm.flops / (1836e12 * fraction("tpu-v6e:matmul:int8").value))  # v6e.1
    assert matmul_time_s(mm, v6e) == pytest.approx(mm.flops / (918e12 * fraction("tpu-v6e:matmul:bf16").value))
    assert matmul_time_s(mm, v5p, "int8") == pytest.approx(mm.flops / (918e12 * fraction("tpu-v5p:matmul:bf16").value))  # v5p.6


def test_memory_bound_and_sum():
    v4 = chip_compute("tpu-v4")
    assert memory_time_s(1.2e9, v4) == pytest.approx(1.0 / v4.hbm_fraction * 1e-3)  # v4.2: 1200 GB/s
    thin = Matmul(1 << 20, 128, 128, hbm_bytes=1e9)  # operand-bound: the roofline takes the bytes
    assert matmul_time_s(thin, v4) == pytest.approx(memory_time_s(1e9, v4))
    big = Matmul(8192, 8192, 8192, hbm_bytes=1e6)
    t = compute_time_s(v4, big.flops, 1e6 + 5e8, [big.as_tuple()])
    assert t == pytest.approx(matmul_time_s(big, v4) + memory_time_s(5e8, v4))


def test_backward_matmuls_twice_the_flops():
    mm = Matmul(300, 500, 700, count=2)
    dx, dw = backward_matmuls(mm)
    assert dx.flops + dw.flops == pytest.approx(2 * mm.flops)
    assert (dx.m, dx.k, dx.n) == (300, 700, 500) and (dw.m, dw.k, dw.n) == (500, 300, 700)


def test_palm_parameters_from_its_dimensions():
    """head_dim independent of d_model / n_heads and multi-query attention: PaLM 540B's
    published 540.35B parameters (Chowdhery et al. 2022, Table 1; measurements.md P1)."""
    cfg = PRESETS["palm-540b"]
    assert cfg.d_head == 256 != cfg.d_model // cfg.n_heads
    assert cfg.params == pytest.approx(540.35e9, rel=0.005)


def test_encoder_attention_is_twice_the_causal_core():
    dec = get_model("bert-large", {"causal": True, "loss_positions": None})
    enc = get_model("bert-large", {"loss_positions": None})
    s, h, dh, layers = enc.seq_len, enc.n_heads, enc.d_head, enc.n_layers
    assert enc.forward_flops_per_token() - dec.forward_flops_per_token() == pytest.approx(2 * s * h * dh * layers)


@pytest.mark.parametrize("policy", ["none", "minimal", "full"])
def test_recompute_policies_add_hardware_flops(policy):
    t = generate_trace("gpt3-175b", "4x4x4", "fsdp=16,tensor=4", overrides=SMALL, options=GenerateOptions(recompute=policy))
    cfg = get_model("gpt3-175b", SMALL)
    hw, model = t.meta["hardware_flops_per_step"], t.meta["model_flops_per_step"]
    # optimiser FLOPs (12 per parameter) are hardware work beyond the model's; replicated norms and the
    # padded vocabulary shard add ~1e-5 more
    extra = hw - model - 12 * cfg.params
    layer_fwd = cfg.n_layers * (cfg.forward_flops_per_token() - 2 * cfg.d_model * cfg.vocab) / cfg.n_layers * cfg.tokens_per_step
    core = cfg.n_layers * 2 * cfg.seq_len * cfg.n_heads * cfg.d_head * cfg.tokens_per_step
    expect = {"none": 0.0, "minimal": core, "full": layer_fwd}[policy]
    assert extra == pytest.approx(expect, rel=1e-3, abs=2e-5 * model)


def test_mfu_hfu_and_per_op_default():
    t = generate_trace("gpt3-175b", "4x4x4", "fsdp=16,tensor=4", overrides=SMALL, options=GenerateOptions(recompute="full"))
    built = build_slice("tpu-v4", "4x4x4")
    s = step_summary(simulate_step(t, built), t)
    assert s["hfu"] / s["mfu"] == pytest.approx(t.meta["hardware_flops_per_step"] / t.meta["model_flops_per_step"])
    assert s["hfu"] > s["mfu"]
    flat = step_summary(simulate_step(t, built, compute_efficiency=1.0), t)
    assert flat["compute_s"] < s["compute_s"]  # the model never beats 100% of peak
    ops = [op for op in t.ops if isinstance(op, Compute) and op.flops > 0 and op.id != "optimizer"]
    assert all(op.matmuls for op in ops)
    for op in ops:  # the op's matmuls carry its FLOPs
        assert sum(2 * c * m * k * n for c, m, k, n, _ in op.matmuls) == pytest.approx(op.flops, rel=1e-9)


def test_int8_trace_is_faster_on_v5e_and_refused_on_v3():
    kw = {"overrides": SMALL, "generation": "tpu-v5e"}
    bf16 = generate_trace("gpt3-175b", "8x8", "fsdp=16,tensor=4", **kw)
    int8 = generate_trace("gpt3-175b", "8x8", "fsdp=16,tensor=4", options=GenerateOptions(precision="int8"), **kw)
    built = build_slice("tpu-v5e", "8x8")
    assert simulate_step(int8, built).compute_s < 0.75 * simulate_step(bf16, built).compute_s
    v3 = generate_trace("gpt3-175b", "8x8", "fsdp=16,tensor=4", generation="tpu-v3", overrides=SMALL, options=GenerateOptions(precision="int8"))
    with pytest.raises(PodsimError, match="precision 'int8' has no published rate on tpu-v3"):
        simulate_step(v3, build_slice("tpu-v3", "8x8"))
    with pytest.raises(PodsimError, match="precision 'int4' is not known"):
        generate_trace("gpt3-175b", "8x8", "fsdp=16,tensor=4", generation="tpu-v5e", overrides=SMALL, options=GenerateOptions(precision="int4"))
    with pytest.raises(PodsimError, match="recompute 'some' is not known"):
        generate_trace("gpt3-175b", "8x8", "fsdp=16,tensor=4", generation="tpu-v5e", overrides=SMALL, options=GenerateOptions(recompute="some"))


def test_materialized_attention_moves_the_scores_through_hbm():
    """Unfused attention: the whole score matrix computed, and 4 passes of it through HBM."""
    kw = {"overrides": SMALL, "generation": "tpu-v4"}  # a Megatron program: each block one op
    flash = generate_trace("gpt3-175b", "4x4x4", "fsdp=16,tensor=4", options=GenerateOptions(sequence_parallel=False), **kw)
    mat = generate_trace("gpt3-175b", "4x4x4", "fsdp=16,tensor=4", options=GenerateOptions(attention="materialized", sequence_parallel=False), **kw)
    f, m = ({op.id: op for op in t.ops} for t in (flash, mat))
    cfg, b, heads = get_model("gpt3-175b", SMALL), 64 // 16, 96 // 4
    s = cfg.seq_len
    op = "mb0.fwd.L0.attn"
    assert m[op].hbm_bytes - f[op].hbm_bytes == pytest.approx(4 * b * heads * s * s * 2)
    assert m[op].flops - f[op].flops == pytest.approx(2 * b * heads * s * (s / 2) * cfg.d_head * 2)  # the masked half
    with pytest.raises(PodsimError, match="attention 'fused' is not known"):
        generate_trace("gpt3-175b", "4x4x4", "fsdp=16,tensor=4", options=GenerateOptions(attention="fused"), **kw)


def test_cli_trace_generate_switches_and_steptime_mfu_hfu(capsys, tmp_path):
    path = tmp_path / "t.json"
    code, _, err = run_podsim(capsys, "trace", "generate", "gpt3-175b", "--slice", "4x4x4", "-p", "fsdp=16,tensor=4",
                              "--set", "n_layers=2", "--set", "global_batch=64", "--recompute", "full", "--no-overlap", "dcn,grad_reduce",
                              "--collective-matmul", "chunked", "-o", str(path))
    assert code == 0, err
    assert json.loads(path.read_text())["meta"]["overlap"]["collective_matmul"] == "chunked"
    code, out, err = run_podsim(capsys, "steptime", "--trace", str(path), "--generation", "tpu-v4", "--slice", "4x4x4", "--json")
    assert code == 0, err
    doc = json.loads(out)
    s = doc["metrics"]
    assert s["hfu"] / s["mfu"] == pytest.approx(s["hardware_flops_per_step"] / s["model_flops_per_step"]) and s["hfu"] > 1.2 * s["mfu"]
    code, out, _ = run_podsim(capsys, "steptime", "--trace", str(path), "--generation", "tpu-v4", "--slice", "4x4x4")
    assert "hardware FLOPs utilisation" in out
    code, _, err = run_podsim(capsys, "trace", "generate", "gpt3-175b", "--slice", "4x4x4", "-p", "fsdp=64", "--no-overlap", "tp", "-o", str(path))
    assert code == 2 and "--no-overlap 'tp' is not known" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_podsim(capsys, "trace", "generate", "gpt3-175b", "--slice", "4x4x4", "-p", "fsdp=16,tensor=4", "--collective-matmul", "yes", "-o", str(path))
    assert code == 2 and "collective_matmul 'yes' is not known" in err and len(err.strip().splitlines()) == 1


def test_quantized_matmuls_weights_and_tff_split_ops_by_precision():
    """MaxText's int8 (AQT) quantizes the weight matmuls only (`weights`: the attention core and the
    LM head in bf16); `tff` also leaves the attention output projection's and the MLP's gradients in
    bf16. With full recompute the int8 share of the weight-matmul FLOPs is then (Q/K/V in all four
    passes, 3 x 4, + output and MLP in forward and recompute, 9 x 2) / (12 x 4) = 30/48."""
    kw = {"overrides": SMALL, "generation": "tpu-v6e"}

    def trace(quantized: str, precision: str = "int8"):
        return generate_trace("gpt3-175b", "8x8", "fsdp=64", options=GenerateOptions(precision=precision, recompute="full",
                              quantized_matmuls=quantized), **kw)

    every, weights, tff, bf16 = trace("all"), trace("weights"), trace("tff"), trace("all", "bf16")
    ops = {name: {op.id: op for op in t.ops if isinstance(op, Compute)} for name, t in (("weights", weights), ("tff", tff))}
    assert ops["weights"]["mb0.fwd.L0.attn"].precision == "int8" and ops["weights"]["mb0.fwd.L0.attn.bf16"].precision == "bf16"
    assert len(ops["weights"]["mb0.fwd.L0.attn.bf16"].matmuls) == 2  # QK^T and AV
    assert ops["weights"]["mb0.bwd.L0.mlp"].precision == "int8" and ops["tff"]["mb0.bwd.L0.mlp"].precision == "bf16"
    assert ops["tff"]["mb0.fwd.L0.mlp"].precision == "int8" and ops["tff"]["mb0.bwd.L0.attn"].precision == "int8"

    def flops(t, precision: str) -> float:
        return sum(2 * c * m * k * n for op in t.ops if isinstance(op, Compute) and op.precision == precision for c, m, k, n, _ in op.matmuls)

    for t in (weights, tff):  # the split keeps every FLOP and byte
        assert sum(op.flops for op in t.ops if isinstance(op, Compute)) == pytest.approx(sum(op.flops for op in every.ops if isinstance(op, Compute)))
        assert sum(op.hbm_bytes for op in t.ops if isinstance(op, Compute)) == pytest.approx(sum(op.hbm_bytes for op in every.ops if isinstance(op, Compute)))
    cfg = get_model("gpt3-175b", SMALL)
    weight_flops = 2 * 12 * cfg.d_model**2 * cfg.n_layers * cfg.seq_len * 1 * 4  # one sequence per chip, four passes
    assert flops(weights, "int8") == pytest.approx(weight_flops, rel=1e-6)
    assert flops(tff, "int8") == pytest.approx(weight_flops * 30 / 48, rel=1e-6)
    built = build_slice("tpu-v6e", "8x8")
    s = [simulate_step(t, built).compute_s for t in (every, weights, tff, bf16)]
    assert s == sorted(s) and len(set(s)) == 4
    with pytest.raises(PodsimError, match="quantized_matmuls 'tff' .* needs precision int8 or fp8"):
        trace("tff", "bf16")


def test_a_step_names_the_compute_constants_it_read_and_their_basis(capsys):
    """The constants the per-op model read for a step (podsim.engine.summary.compute_constants):
    the matmul fraction of each precision its ops run at and the HBM fraction, of the chip
    simulated, each with its basis; none under a flat efficiency or for fixed-duration ops.
    `podsim steptime` prints them on one row."""
    from podsim.engine.summary import compute_constants, compute_constants_text
    from podsim.perf.efficiency import fraction
    from podsim.trace.model import StepTrace

    kw = {"overrides": SMALL, "generation": "tpu-v5e"}
    int8 = generate_trace("gpt3-175b", "8x8", "fsdp=16,tensor=4", options=GenerateOptions(precision="int8"), **kw)
    r = simulate_step(int8, build_slice("tpu-v5e", "8x8"))
    names = compute_constants(r)
    assert names == ("tpu-v5e:matmul:bf16", "tpu-v5e:matmul:int8", "tpu-v5e:hbm")  # AQT leaves the attention core in bf16
    chip = chip_compute("tpu-v5e")
    assert [fraction(n).value for n in names] == [chip.fraction_for("bf16"), chip.fraction_for("int8"), chip.hbm_fraction]
    text = compute_constants_text(r)
    assert "tpu-v5e:matmul:bf16 0.923 (source eff.2)" in text and "tpu-v5e:hbm 1.000 (no basis: the vendor's figure" in text
    assert compute_constants(r, efficiency=0.5) == () and compute_constants_text(r, 0.5) == ""
    fixed = StepTrace((Compute("a", duration_s=1e-3),), name="fixed", meta={"chips": 64})
    assert compute_constants(simulate_step(fixed, build_slice("tpu-v5e", "8x8"))) == ()
    args = ("steptime", "--model", "llama2-70b", "-p", "fsdp=16", "--generation", "tpu-v5e", "--slice", "4x4",
            "--set", "n_layers=2", "--set", "global_batch=16")
    code, out, err = run_podsim(capsys, *args)
    assert code == 0, err
    assert "compute constants" in out and "(no basis: the vendor's" in out
    code, out, err = run_podsim(capsys, *args, "--compute-efficiency", "0.5")
    assert code == 0 and "compute constants" not in out, err
    # --json carries the same constants as records: name, value, basis, source id, what the text says
    code, out, err = run_podsim(capsys, *args, "--json")
    assert code == 0, err
    table = json.loads(out)["tables"]["compute_constants"]  # a result table: podsim run --json's step carries it too
    rows = [dict(zip(table, vals, strict=True)) for vals in zip(*table.values(), strict=True)]
    assert [r["name"] for r in rows] == ["tpu-v5e:matmul:bf16", "tpu-v5e:hbm"]
    assert rows[0] == {"name": "tpu-v5e:matmul:bf16", "value": chip.fraction_for("bf16"), "basis": "source", "source": "eff.2",
                       "why": "source eff.2"}
    assert rows[1]["basis"] == "none" and rows[1]["source"] == "" and rows[1]["why"].startswith("no basis: the vendor's")
    code, out, err = run_podsim(capsys, *args, "--compute-efficiency", "0.5", "--json")
    assert code == 0 and json.loads(out)["tables"]["compute_constants"]["name"] == [], err
