"""Per-generation constants of the compute model and the hosts' input, each with its source.

Row ids (v4.3, v6e.1 ...) are rows of shared/reference/hardware.md; `assumption` marks a
figure the reference sheet does not give, with the reason in the note.

`CHIPS` is the peak table: MXU tile and peak rate per precision. The achievable fractions of those
peaks (matmul per precision, HBM) are per generation, each with its basis, in
`podsim.perf.efficiency` (a separate table, so the peaks and the efficiencies change apart):
`chip_compute` joins the two. The host input rate below is the one calibrated constant that is not
a compute fraction (with no basis at present: V3_HOST_JPEG_IMAGES_PER_S).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from podsim.errors import PodsimError
from podsim.perf.efficiency import HBM, MATMUL, constant_name, fraction
from podsim.topology import Generation, get_generation


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
    bases: dict[str, str] = field(default_factory=dict)  # constant name -> its value and basis (podsim.perf.efficiency)

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


# Host input pipelines -----------------------------------------------------------------------

V3_HOST_JPEG_IMAGES_PER_S: float | None = None
"""Images per second one TPU v3 host (8 chips, hardware.md v3.6) decodes, augments and feeds when
its pipeline decodes JPEGs every step (the MLPerf v0.6 resnet_main.py without
--cache_decoded_image). No source publishes a host's rate, and the calibration split (its host
rule with amendment A2, podsim.validation.split) finds no row it can be identified from: the
rule's row, R06-resnet-128 (the most images per host), runs slower on its chips alone by
podsim's count than its measured step, so no rate fits it and the solve runs to its bound, where
the step no longer depends on the rate. So the rate has no basis (None): a trace that asks for
the jpeg pipeline on v3 is refused with a request for input_rate_per_host, and the validation rows
whose code decodes JPEGs run without the hosts, said in their notes. (It was 11,049, fitted on
ML12 before the split rule; ML12 re-derived from its logs, 78.96 ms, would imply 13.0k.)"""

INPUT_PIPELINES = ("none", "jpeg")
"""none: the input never holds a step up (synthetic data, or cached decoded images fed faster
than the chips consume them: no source gives that rate); jpeg: JPEGs decoded every step at the
generation's host rate (HOST_INPUT_RATES), where it has one."""

# generation id -> {pipeline: (name of its rate constant, unit)}; looked up by name when a trace is
# generated, so calibration reaches it
HOST_INPUT_RATES: dict[str, dict[str, tuple[str, str]]] = {"tpu-v3": {"jpeg": ("V3_HOST_JPEG_IMAGES_PER_S", "images")}}


def _host_input(gen: str | Generation, pipeline: str) -> tuple[Generation, str, str, float | None]:
    """(generation, name of the rate constant, unit, its value or None) of a named pipeline on a
    generation's hosts; a one-line error where the pipeline has no rate or the generation no entry
    for it. The constant is read when called, so calibration reaches it."""
    g = get_generation(gen)
    if pipeline not in INPUT_PIPELINES or pipeline == "none":
        raise PodsimError(f"input_pipeline {pipeline!r} has no rate; use one of: {', '.join(INPUT_PIPELINES)}")
    try:
        name, unit = HOST_INPUT_RATES[g.chip_id][pipeline]
    except KeyError:
        have = ", ".join(f"{p} on {gid}" for gid, ps in HOST_INPUT_RATES.items() for p in ps)
        raise PodsimError(f"input_pipeline {pipeline!r}: no published or calibrated rate for {g.id} hosts (podsim has: {have}); "
                          "give the rate instead (input_rate_per_host)") from None
    return g, name, unit, globals()[name]


def host_input_has_basis(gen: str | Generation, pipeline: str) -> bool:
    """Whether a named pipeline's rate on a generation's hosts has a basis (its constant is set);
    the errors of host_input_rate where the pipeline or the generation has no entry at all."""
    return _host_input(gen, pipeline)[3] is not None


def host_input_rate(gen: str | Generation, pipeline: str) -> tuple[float, str]:
    """(items per second one host feeds, unit: images or tokens) of a named input pipeline on a
    generation's hosts; a one-line error where no figure exists."""
    g, name, unit, rate = _host_input(gen, pipeline)
    if rate is None:
        raise PodsimError(f"input_pipeline {pipeline!r} on {g.id}: the hosts' rate has no basis (no source, and no validation row "
                          "identifies it: podsim.perf.chips." + name + "); give the rate instead (input_rate_per_host)")
    return float(rate), unit


def chip_compute(gen: str | Generation) -> ChipCompute:
    """The compute constants of a generation: its peak table entry (one without an entry, a GPU or
    a custom chip, gets no tile padding and its bf16 peak only) and its achievable fractions
    (podsim.perf.efficiency), read when called so calibration reaches them."""
    g = get_generation(gen)
    bf16 = g.peak_flops_per_s
    if g.chip_id in CHIPS:
        dim, dim_src, extra, peak_src, notes = CHIPS[g.chip_id]
    else:
        dim, dim_src, extra, peak_src, notes = 1, "assumption", {}, "peak_bf16_tflops_per_chip", ("no MXU tile modelled",)
    fr = {p: fraction(constant_name(g.chip_id, MATMUL, p)) for p in ("bf16", *extra)}
    hbm = fraction(constant_name(g.chip_id, HBM))
    bases = {f.name: f.text() for f in (*fr.values(), hbm)}
    return ChipCompute(g.id, dim, dim_src, {"bf16": bf16, **extra}, peak_src, g.hbm_bytes_per_s,
                       matmul_fraction=fr["bf16"].value, hbm_fraction=hbm.value, notes=notes,
                       precision_fractions={p: f.value for p, f in fr.items() if p != "bf16"}, bases=bases)
