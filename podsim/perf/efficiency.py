"""Achievable fractions of a chip's peak, per generation and precision: the compute model's constants.

Two kinds, each kept per generation (its chip id), never one shared across generations:

- `matmul` (per precision): the fraction of the MXU's peak of that precision a tile-aligned matmul
  sustains (pipeline fill, VMEM tiling, the vector work XLA fuses into it);
- `hbm`: the fraction of HBM bandwidth memory-bound work (norms, elementwise, softmax, optimiser
  update, embedding lookups) and a matmul's operand traffic reach.

Each constant has a basis, as the calibration split rule (docs/validation.md, fixed 2026-12-04)
says:

- `source` (R1): a published microbenchmark of that generation's matmul rate or HBM bandwidth,
  `SOURCED`, each with its id in podsim/data/reference/efficiency.md (`podsim sources eff.2`);
- `calibration` (R2): no source, so one validation row sets it: the row `calibration_rows`
  (podsim.validation.split) picks from the rows' data, `CALIBRATED` holding the value
  `benchmarks/validation.py --calibrate` solved on it;
- `none` (R3 could not be applied): neither a source nor an eligible row, and no source found that
  says another generation's figure holds for this one. The constant is then no derating at all,
  the vendor's figure: HBM at its stated bandwidth, a bf16 matmul at its stated peak, and a
  matmul of another precision at the generation's own bf16 fraction of that precision's peak.
  Every answer that uses one says so (`basis`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

MATMUL, HBM = "matmul", "hbm"


def constant_name(chip_id: str, kind: str, precision: str = "bf16") -> str:
    """'tpu-v4:matmul:bf16', 'tpu-v4:hbm': the name a constant is kept and calibrated under."""
    return f"{chip_id}:{kind}:{precision}" if kind == MATMUL else f"{chip_id}:{kind}"


def parse_name(name: str) -> tuple[str, str, str | None]:
    """(chip id, kind, precision or None) of a constant's name."""
    chip, kind, *rest = name.split(":")
    return chip, kind, (rest[0] if rest else None)


@dataclass(frozen=True)
class Sourced:
    """A constant set from a published measurement of its generation (R1)."""

    value: float
    source: str  # an id `podsim sources` resolves
    note: str


SOURCED: dict[str, Sourced] = {
    "tpu-v2:matmul:bf16": Sourced(1.0, "eff.1", "a profiled bf16 matmul on 8 v2 TensorCores ran at 1.02x the 45 TFLOP/s "
                                  "per chip of v2.6: at the peak"),
    "tpu-v5e:matmul:bf16": Sourced(0.923, "eff.2", "XLA bf16 matmul 8192^3 on one v5e chip: 181.8 of 197 TFLOP/s (dispatch "
                                   "included: a lower bound)"),
    "tpu-v6e:matmul:bf16": Sourced(0.793, "eff.3", "bf16 GEMM 8192^3 on one v6e chip, device time: 728 of 918 TFLOP/s "
                                   "(third-party measurement)"),
    "tpu-v6e:matmul:int8": Sourced(0.615, "eff.4", "int8 GEMM on one v6e chip, host-timed: 1129 of 1836 TOP/s (third-party; "
                                   "Python overhead included: a lower bound)"),
    "tpu-7x:matmul:bf16": Sourced(0.829, "eff.5", "bf16 GEMM 32768^3 on one TPU7x TensorCore: 956.4 of 1153.5 TFLOP/s "
                                  "(Google's accelerator-microbenchmarks)"),
    "tpu-7x:hbm": Sourced(0.892, "eff.6", "HBM copy of 8 GiB on one TPU7x chip: 6421 of 7200 GB/s (Google's "
                          "accelerator-microbenchmarks)"),
    "gpu-h100:matmul:bf16": Sourced(0.757, "eff.9", "Llama 2 7B layer matmuls at 4,096 tokens on one H100: 749 of 989 TFLOP/s "
                                    "(vidur's kernel profile; eff.7's 780, a gist, ran with boosted clocks)"),
    "gpu-h100:hbm": Sourced(0.869, "eff.8", "Llama 2 70B layer matmuls at 1 token on one H100 (a TP 2 shard) stream their weights "
                            "at 2.91 of 3.35 TB/s (vidur's kernel profile)"),
}
"""R1: the constants a published microbenchmark of the generation sets (podsim/data/reference/efficiency.md)."""

CALIBRATED: dict[str, float] = {
    "tpu-v3:hbm": 0.614,
    "tpu-v3:matmul:bf16": 0.986,
    "tpu-v4:hbm": 0.775,
    "tpu-v4:matmul:bf16": 0.905,
    "tpu-v5p:matmul:bf16": 0.756,
}
"""R2: the constants one validation row sets, as `benchmarks/validation.py --calibrate` solved them on
the rows `podsim.validation.split.calibration_rows` picks (tests/test_validation.py checks these
are exactly the constants the rule picks rows for)."""

BOUNDS = (0.05, 1.0)
"""Where a fraction may range while it is solved."""


@dataclass(frozen=True)
class Fraction:
    """One constant as the compute model uses it: its value and its basis."""

    name: str
    value: float
    basis: str  # source | calibration | none
    ref: str  # the source id, or '' (calibration: the row is the split's pick; none: see `note`)
    note: str

    def basis_words(self) -> str | None:
        """What its basis says in a few words ('source eff.2', 'calibrated on a validation row'); None without one."""
        return {"source": f"source {self.ref}", "calibration": "calibrated on a validation row"}.get(self.basis)

    def text(self) -> str:
        """'0.923 (source eff.2)', '0.752 (calibration)', '1.0 (no basis: ...)'."""
        return f"{self.value:.3f} ({self.basis_words() or f'no basis: {self.note}'})"


def fraction(name: str) -> Fraction:
    """The constant `name` (`constant_name`) with its basis (the module docstring's rule)."""
    if name in SOURCED:
        s = SOURCED[name]
        return Fraction(name, s.value, "source", s.source, s.note)
    if name in CALIBRATED:
        return Fraction(name, CALIBRATED[name], "calibration", "", "solved on the row calibration_rows picks")
    chip, kind, precision = parse_name(name)
    if kind == MATMUL and precision != "bf16":
        bf16 = fraction(constant_name(chip, MATMUL, "bf16"))
        return Fraction(name, bf16.value, "none", "", f"no source or row for {precision} on {chip}: its bf16 fraction "
                        f"({bf16.value:.3f}, {bf16.basis}) of the {precision} peak")
    what = "the stated HBM bandwidth" if kind == HBM else "the stated peak"
    return Fraction(name, 1.0, "none", "", f"no source or row for {chip}'s {kind} fraction: {what}")


def basis_rows(names: Iterable[str]) -> list[dict]:
    """The constants `names`, each as {name, value, basis (source | calibration | none), source
    (its id, or ''), why (what `basis_text` says of it)}: the structured form of `basis_text`."""
    rows = []
    for name in names:
        f = fraction(name)
        _, kind, precision = parse_name(name)
        why = f.basis_words()
        if why is None:
            why = ("no basis: the bf16 fraction of this peak" if kind == MATMUL and precision != "bf16"
                   else "no basis: the vendor's figure, no derating")
        rows.append({"name": name, "value": f.value, "basis": f.basis, "source": f.ref, "why": why})
    return rows


def basis_text(names: Iterable[str]) -> str:
    """The constants `names` on one line, each with its value and basis, for a user reading a step
    time: 'tpu-v5e:matmul:bf16 0.923 (source eff.2), tpu-v5e:hbm 1.000 (no basis: the vendor's
    figure, no derating)'."""
    return ", ".join(f"{r['name']} {r['value']:.3f} ({r['why']})" for r in basis_rows(names))


@contextmanager
def calibrated(values: Mapping[str, float], replace_all: bool = False) -> Iterator[None]:
    """Temporarily set calibrated constants (calibration and cross-validation only); with
    `replace_all` the calibrated set is exactly `values` (a constant the rule sets no row for in
    a fold falls back to its no-basis value)."""
    bad = [k for k in values if k in SOURCED or not (BOUNDS[0] <= values[k] <= BOUNDS[1])]
    if bad:
        raise ValueError(f"not a calibratable constant or out of {BOUNDS}: {bad}")
    old = dict(CALIBRATED)
    if replace_all:
        CALIBRATED.clear()
    CALIBRATED.update(values)
    try:
        yield
    finally:
        CALIBRATED.clear()
        CALIBRATED.update(old)
