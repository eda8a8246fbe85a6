"""Issue 22's sweep: `podsim scaling` of a 16B-class and a 128B-class dense decoder on 1..32
slices of v5e-256 (FSDP inside each slice, data parallel across), behind a DCN in tiers: the
per-chip throughput falls with every slice count, and the DCN's busy and exposed time per tier
say where the fall comes from."""

from __future__ import annotations

import json

import pytest

from podsim.cli import main
from podsim.trace import generate_trace
from podsim.trace.model import Collective, format_group

# One v5e slice (32 hosts, 2 x 100G NICs each) per 2:1 ToR (32 down ports of 200G: 2 NICs per
# port), six ToRs per 3:1 aggregation block, 8 spine blocks: a planner's own figures.
TIERS = "tor=48x200/2,aggregation=64x400/3,spine=256x400*8"
TOR_UPLINK = 16 * 200e9 / 8  # bytes/s up one ToR (16 of its 48 ports)
SLICES = (1, 2, 4, 8, 16, 32)
MODELS = {  # llama-style decoders: d_model, heads (GQA 8), d_ff, layers
    "16B": {"d_model": 6144, "n_heads": 48, "n_kv_heads": 8, "d_ff": 16384, "n_layers": 40},
    "128B": {"d_model": 12288, "n_heads": 96, "n_kv_heads": 8, "d_ff": 32768, "n_layers": 80},
}


def _sweep(capsys, model: dict) -> dict:
    sets = [a for k, v in model.items() for a in ("--set", f"{k}={v}")]
    try:
        main(["scaling", "llama2-70b", "--generation", "tpu-v5e", "--slice", "16x16", "-p", "fsdp=256",
              "--slices", ",".join(map(str, SLICES)), "--batch-per-slice", "256", "--dcn-tiers", TIERS, "--json", *sets])
    except SystemExit as exc:
        assert not exc.code
    return json.loads(capsys.readouterr().out)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MODELS))
def test_per_chip_throughput_falls_and_the_tiers_explain_it(capsys, name):
    out = _sweep(capsys, MODELS[name])
    trace = generate_trace("llama2-70b", "16x16", "fsdp=256,dcn=2", generation="tpu-v5e",
                           overrides={**MODELS[name], "global_batch": 512})
    shard = sum(op.bytes for op in trace.ops if isinstance(op, Collective) and format_group(op.group) == "dcn")
    assert shard == pytest.approx(trace.meta["params"] * 2 / 256, rel=0.02)  # the bf16 gradient's 1/fsdp shard
    steps, tiers = out["step_time_s"], out["tiers"]
    assert out["slices"] == list(SLICES) and out["chips"] == [256 * n for n in SLICES]
    # weak scaling, 256 sequences per slice: per-chip throughput = 256 / step / 256 falls with every count
    assert all(b > a for a, b in zip(steps, steps[1:], strict=False)), steps
    for i, n in enumerate(SLICES[1:], 1):
        fall, exposed = steps[i] - steps[0], out["dcn_exposed_s"][i]
        # the fall is DCN time no compute hides (less what ICI time exposed at one slice already covers)
        assert fall <= exposed * (1 + 1e-9) and exposed <= fall + out["ici_exposed_s"][0]
        row = {tiers["tier"][k]: k for k in range(len(tiers["tier"])) if tiers["slices"][k] == n}
        # the all-reduce climbs to the ToR uplinks (the aggregation tier) while the slices share a
        # block (6 slices), to the spine once they do not; that tier holds all of the DCN's time
        top = row["aggregation"] if n <= 6 else row["spine"]
        assert tiers["busy_s"][top] == pytest.approx(out["dcn_busy_s"][i], rel=1e-9)
        assert tiers["exposed_s"][top] == pytest.approx(exposed, rel=1e-9)
        # the 2:1 ToR uplinks are what the DCN time is made of: every chip's 2(N-1)/N x shard goes
        # up its slice's ToR (256 chips, 400 GB/s): twice what the NICs need (4 chips per 12.5 GB/s)
        per_chip = 2 * (n - 1) / n * shard
        assert tiers["link_busy_s"][row["aggregation"]] == pytest.approx(256 * per_chip / TOR_UPLINK, rel=1e-6)
        assert tiers["link_busy_s"][row["tor"]] == pytest.approx(tiers["link_busy_s"][row["aggregation"]] / 2, rel=1e-6)
        assert out["dcn_busy_s"][i] >= tiers["link_busy_s"][row["aggregation"]] * (1 - 1e-6)
        if n > 6:  # one slice's bytes cross each block boundary: the 3:1 block uplinks keep up
            assert tiers["link_busy_s"][row["spine"]] <= tiers["link_busy_s"][row["aggregation"]]
    # the fall grows with the slice count, as each chip's DCN bytes do (2(N-1)/N)
    assert all(b > a for a, b in zip(out["dcn_exposed_s"][1:], out["dcn_exposed_s"][2:], strict=False))
