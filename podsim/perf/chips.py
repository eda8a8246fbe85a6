"""Per-generation constants of the compute model and the hosts' input, each with its source.

Row ids (v4.3, v6e.1 ...) are rows of shared/reference/hardware.md; `assumption` marks a
figure the reference sheet does not give, with the reason in the note.

Two achievable-fraction constants are shared by every generation, and one is v6e's own (the
host input rate below is the fourth calibrated constant):

- `MATMUL_FRACTION`: the fraction of the MXU's peak a tile-aligned matmul sustains (pipeline
  fill, VMEM tiling and the vector work XLA fuses into it);
- `HBM_FRACTION`: the fraction of HBM bandwidth memory-bound ops (norms, elementwise, softmax,
  optimiser update, embedding lookups) and a matmul's operand traffic reach;
- `V6E_INT8_FRACTION`: the fraction of v6e's int8 peak an int8 matmul sustains.

None is published for TPUs. Each is set from ONE validation row (docs/validation.md marks
them "calibration"): MATMUL_FRACTION from M17 (a 200B dense LM on 1024 TPU v4 chips: large
matmuls, little else), HBM_FRACTION from M4 (ResNet-50 on 8 TPU v4 chips: convolutions plus
memory-bound batch norm, no communication to speak of), V6E_INT8_FRACTION from M15 (GPT-3 175B
on two v6e slices, int8; added after the first table showed both v6e rows 2x fast, and checked by
M14 alone). `benchmarks/validation.py --calibrate` recomputes all four (with the host rate, from
ML12); the first two are measured on v4 and carried to the other generations unchanged (an
assumption: no per-generation figure exists). HBM_FRACTION sits at its bound, 1.0, since issue
22's sharded activations moved M17 and with it MATMUL_FRACTION (0.845 before): M4 cannot be met
exactly (+1.4%).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from podsim.errors import PodsimError
from podsim.topology import Generation, get_generation

MATMUL_FRACTION = 0.752
"""Calibrated on validation row M17 (`benchmarks/validation.py --calibrate`, see the module docstring)."""
HBM_FRACTION = 1.000
"""Calibrated on validation row M4 (`benchmarks/validation.py --calibrate`, see the module docstring)."""
V6E_INT8_FRACTION = 0.394
"""The fraction of v6e's int8 peak (1836 TOP/s, v6e.1) an int8 matmul sustains. Calibrated on
validation row M15 (`benchmarks/validation.py --calibrate`): the first table showed both v6e rows
at 0.39 of their bounds with MATMUL_FRACTION, i.e. int8 on v6e does not reach twice the bf16 rate
in the measured runs; why (quantisation overhead, VPU-bound work) the sources do not say."""


@dataclass(frozen=True)
class ChipCompute:
    """What the compute model needs of one chip: MXU tile, peak rate per precision, fractions."""

    generation: str
    mxu_dim: int  # the systolic array is mxu_dim x mxu_dim; matmul K and N pad to it
    mxu_source: str
    peak_flops_per_s: dict[str, float]  # precision -> FLOP/s (bf16 always present)
    peak_source: str
    hbm_bytes_per_s: float
    matmul_fraction: float
    hbm_fraction: float
    notes: tuple[str, ...] = field(default=())
    precision_fractions: dict[str, float] = field(default_factory=dict)  # precision -> fraction, where not matmul_fraction

    def fraction_for(self, precision: str) -> float:
        """The fraction of `precision`'s peak a tile-aligned matmul sustains on this chip."""
        return self.precision_fractions.get(precision, self.matmul_fraction)

    def peak_for(self, precision: str, what: str = "op") -> float:
        try:
            return self.peak_flops_per_s[precision]
        except KeyError:
            have = ", ".join(sorted(self.peak_flops_per_s))
            raise PodsimError(f"{what}: precision {precision!r} has no published rate on {self.generation}; use one of: {have}") from None


T = 1e12
# generation id -> (mxu_dim, mxu source, {precision: FLOP/s beyond bf16}, peak source, notes)
CHIPS: dict[str, tuple[int, str, dict[str, float], str, tuple[str, ...]]] = {
    "tpu-v2": (128, "v2.5", {}, "v2.6", ()),
    "tpu-v3": (128, "v3.3", {}, "v3.1", ()),
    "tpu-v4": (128, "v4.3", {"int8": 275 * T}, "v4.1", ("int8 runs at the bf16 rate (v4.1: 275 TFLOP/s bf16 or int8)",)),
    "tpu-v5e": (128, "assumption", {"int8": 393 * T}, "v5e.1",
                ("MXU size not in the reference sheet (v5e.3 gives 4 MXUs, no size); 128x128 as v2-v4 (v2.5, v3.3, v4.3)",)),
    "tpu-v5p": (128, "assumption", {"int8": 918 * T, "fp8": 459 * T}, "v5p.6",
                ("MXU size not in the reference sheet; 128x128 as v2-v4 (v2.5, v3.3, v4.3)",)),
    "tpu-v6e": (256, "v6e.3", {"int8": 1836 * T}, "v6e.1", ()),
    "tpu-7x": (256, "assumption", {"fp8": 4614 * T}, "v7.2",
               ("MXU size not in the reference sheet; 256x256 as v6e (v6e.3)",)),
    # GPUs: tensor-core tiles are not modelled (mxu_dim 1); dense peaks, not the 2:4-sparse ones
    "gpu-h100": (1, "assumption", {"fp8": 1979 * T, "int8": 1979 * T}, "lp.1, lp.2",
                 ("no MXU tile modelled", "fp8 and int8 dense tensor-core peaks 1,979 TFLOP/s / TOPS (lp.1, lp.2: "
                  "NVIDIA's datasheet, 3,958 with 2:4 sparsity); bf16 989 (generations.yaml NV-H100)")),
}


# generation id -> {precision: name of its own achievable-fraction constant}; looked up when a
# chip is built, so `podsim.validation.table.fractions` (calibration) reaches it
PRECISION_FRACTIONS: dict[str, dict[str, str]] = {"tpu-v6e": {"int8": "V6E_INT8_FRACTION"}}


# Host input pipelines -----------------------------------------------------------------------

V3_HOST_JPEG_IMAGES_PER_S = 11_046.4
"""Images per second one TPU v3 host (8 chips, hardware.md v3.6) decodes, augments and feeds when
its pipeline decodes JPEGs every step: the MLPerf v0.6 resnet_main.py without
--cache_decoded_image (R06 Google/benchmarks/resnet/tpu-v3-512/run_and_time.sh sets
num_prefetch_threads=16 and no cache). No source publishes a host's rate; it is the rate the
sheet's ml.12 run implies (256 v3 chips, 32 hosts, 32768 images in ~92.7 ms: 11.0k per host),
calibrated on validation row ML12 (`benchmarks/validation.py --calibrate`), the fourth calibration
constant. M2 (the same code on 1024 chips, 10.2k per host measured) checks it."""

INPUT_PIPELINES = ("none", "jpeg")
"""none: the input never holds a step up (synthetic data, or cached decoded images fed faster
than the chips consume them: no source gives that rate); jpeg: JPEGs decoded every step at the
generation's host rate (HOST_INPUT_RATES)."""

# generation id -> {pipeline: (name of its rate constant, unit)}; looked up by name when a trace is
# generated, so calibration reaches it
HOST_INPUT_RATES: dict[str, dict[str, tuple[str, str]]] = {"tpu-v3": {"jpeg": ("V3_HOST_JPEG_IMAGES_PER_S", "images")}}


def host_input_rate(gen: str | Generation, pipeline: str) -> tuple[float, str]:
    """(items per second one host feeds, unit: images or tokens) of a named input pipeline on a
    generation's hosts; a one-line error where no figure exists."""
    g = get_generation(gen)
    if pipeline not in INPUT_PIPELINES or pipeline == "none":
        raise PodsimError(f"input_pipeline {pipeline!r} has no rate; use one of: {', '.join(INPUT_PIPELINES)}")
    try:
        name, unit = HOST_INPUT_RATES[g.chip_id][pipeline]
    except KeyError:
        have = ", ".join(f"{p} on {gid}" for gid, ps in HOST_INPUT_RATES.items() for p in ps)
        raise PodsimError(f"input_pipeline {pipeline!r}: no published or calibrated rate for {g.id} hosts (podsim has: {have}); "
                          "give the rate instead (input_rate_per_host)") from None
    return float(globals()[name]), unit


def chip_compute(gen: str | Generation) -> ChipCompute:
    """The compute constants of a generation; one without an entry (a GPU, a custom chip) gets
    no tile padding and its bf16 peak only."""
    g = get_generation(gen)
    bf16 = g.peak_flops_per_s
    if g.chip_id in CHIPS:
        dim, dim_src, extra, peak_src, notes = CHIPS[g.chip_id]
    else:
        dim, dim_src, extra, peak_src, notes = 1, "assumption", {}, "peak_bf16_tflops_per_chip", ("no MXU tile modelled",)
    per_precision = {p: globals()[name] for p, name in PRECISION_FRACTIONS.get(g.chip_id, {}).items()}
    return ChipCompute(g.id, dim, dim_src, {"bf16": bf16, **extra}, peak_src, g.hbm_bytes_per_s,
                       matmul_fraction=MATMUL_FRACTION, hbm_fraction=HBM_FRACTION, notes=notes,
                       precision_fractions=per_precision)
