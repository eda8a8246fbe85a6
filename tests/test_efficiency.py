"""Per-generation achievable fractions (podsim.perf.efficiency): each from its own basis, the sourced
ones equal to the figure their microbenchmark row states, none shared across generations by default."""

from __future__ import annotations

import re

import pytest

from podsim.perf import chip_compute
from podsim.perf.efficiency import CALIBRATED, SOURCED, calibrated, constant_name, fraction
from podsim.sources import lookup


@pytest.mark.parametrize("name", sorted(n for n in SOURCED if n != "tpu-v2:matmul:bf16"))
def test_a_sourced_fraction_is_its_rows_stated_ratio(name):
    """The value is the 'NN.N% of' the efficiency.md row states, and the row names the generation."""
    s = SOURCED[name]
    row = lookup(s.source)
    pct = float(re.search(r"=\s*([\d.]+)% of", row["value"]).group(1)) / 100
    assert s.value == pytest.approx(pct, abs=5e-4)
    chip = name.split(":")[0]
    assert {"tpu-v2": "TPU v2", "tpu-v5e": "TPU v5e", "tpu-v6e": "TPU v6e", "tpu-7x": "TPU7x", "gpu-h100": "H100"}[chip] in row["fact"]


def test_the_v2_profile_is_at_the_peak():
    """eff.1 states 1.02x the peak: the fraction is capped at 1 (the value column says so)."""
    assert SOURCED["tpu-v2:matmul:bf16"].value == 1.0 and "fraction 1.0" in lookup("eff.1")["value"]


def test_each_constant_has_one_basis_and_the_chip_reads_them():
    v5e = chip_compute("tpu-v5e")
    assert v5e.matmul_fraction == SOURCED["tpu-v5e:matmul:bf16"].value
    assert v5e.hbm_fraction == fraction("tpu-v5e:hbm").value
    assert set(SOURCED).isdisjoint(CALIBRATED)
    v4 = chip_compute("tpu-v4")
    assert v4.matmul_fraction == CALIBRATED["tpu-v4:matmul:bf16"] and "calibrated" in v4.bases["tpu-v4:matmul:bf16"]
    assert "source eff.2" in v5e.bases["tpu-v5e:matmul:bf16"]


def test_a_constant_with_no_basis_is_no_derating_and_says_so():
    """No source and no row (R3 found no source that carries another generation's figure): the
    vendor's figure. Another precision takes its generation's own bf16 fraction of its peak."""
    hbm = fraction("tpu-v6e:hbm")
    assert hbm.basis == "none" and hbm.value == 1.0 and "stated HBM bandwidth" in hbm.text()
    int8 = fraction("tpu-v5p:matmul:int8")
    assert int8.basis == "none" and int8.value == fraction("tpu-v5p:matmul:bf16").value and "bf16 fraction" in int8.note
    assert chip_compute("tpu-v5p").fraction_for("int8") == int8.value


def test_calibration_overrides_are_temporary_and_refuse_sourced_constants():
    name = constant_name("tpu-v4", "hbm")
    before = fraction(name).value
    with calibrated({name: 0.5}):
        assert chip_compute("tpu-v4").hbm_fraction == 0.5
    assert fraction(name).value == before
    with calibrated({}, replace_all=True):  # a fold where the rule sets no row for it
        assert fraction(name).basis == "none" and fraction(name).value == 1.0
    assert fraction(name).value == before
    with pytest.raises(ValueError, match="not a calibratable"):
        with calibrated({"tpu-v5e:matmul:bf16": 0.5}):
            pass
