"""The validation table: published measured step times next to podsim's prediction.

Rows are those of shared/reference/measurements.md (ids M1..M17, P1) with the setups the
sheet states; where the sheet leaves a choice open (a sharding inside a slice, a remat policy)
the row's `assumed` says what podsim takes. One rule for all rows: an implementation that
predates FlashAttention (Dao et al., May 2022) materialises the attention scores in HBM
(`attention="materialized"`): the MLPerf v0.7-v1.1 BERT-style rows and PaLM; the 2023-24
GPT-3 rows use a fused kernel (M11 states flash attention). `kind`:

- `measured`: a derived training step time; error = predicted / measured - 1;
- `range`: the sheet gives a range (M6); error 0 inside it, else to the nearer end;
- `upper_bound`: the GPT-3 rows (an eval pass inside each interval, caveat 3): met when the
  prediction is at or below the bound and within 25% of it; error 0 then, else the distance
  to that band.

Rows beyond the sheet's table name their source: the Trillium GPT-3 runs on 4 and 12 slices
(T4, T12) that the sheet lists in its caveat 10, derived from the logs exactly as its method
section says, and PaLM on one pod (P1a) from its caveat 8. `SERIES` groups the runs of one model
at several slice counts; `series_table` sets their measured per-chip throughput, relative to the
fewest slices, beside podsim's.

At most four rows set constants (`calibration`, see podsim.perf.chips); they are left out of
the summary statistics. One row is not in measurements.md or its caveats: ML12 (hardware.md ml.12),
which issue 22 allows as the calibration row of the hosts' JPEG input rate. An upper-bound row is calibrated to the training part of its interval
(`calibration_target_s`). Each row is a `StepStudy` (`row_study`) run by `run_study`; multislice
rows run as one job on several slices (`place_slices` packs them pod by pod), with the DCN
between them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from podsim.engine import step_summary
from podsim.perf import chips as chip_constants
from podsim.study import StepStudy, run_study
from podsim.study.study import study_trace
from podsim.topology import get_generation, parse_shape
from podsim.trace.configs import PRESETS, TransformerConfig
from podsim.trace.generate import RECOMPUTE_POLICIES, GenerateOptions
from podsim.trace.memory import fits_hbm
from podsim.trace.model import StepTrace

UPPER_BOUND_BAND = 0.25


@dataclass(frozen=True)
class Row:
    id: str
    system: str
    model: str | TransformerConfig
    generation: str
    shape: str
    plan: str
    measured_s: float
    slices: int = 1
    overrides: dict = field(default_factory=dict)
    options: GenerateOptions = GenerateOptions()
    kind: str = "measured"  # measured | range | upper_bound
    measured_hi_s: float | None = None  # range rows: the upper end
    calibration: str = ""  # the constant this row sets, if any
    remat_stated: bool = False  # the sheet states a remat policy; else the least recompute that fits HBM
    assumed: str = ""
    source: str = ""

    @property
    def model_name(self) -> str:
        return self.model if isinstance(self.model, str) else self.model.name


def _encoder(name: str, layers: int, d: int, ffn: int, heads: int, batch: int, source: str, **shape) -> TransformerConfig:
    """The MLPerf v1.1 open-division BERT-style LMs (measurements.md M16, M17): vocabulary and
    masked positions as BERT-large's (not stated for these models); `shape`: what the row's model
    class sets beyond the sheet's sizes (head_dim, n_kv_heads, mlp)."""
    bert = PRESETS["bert-large"]
    return bert.model_copy(update={"name": name, "source": source, "n_layers": layers, "d_model": d, "d_ff": ffn,
                                   "n_heads": heads, "n_kv_heads": heads, "global_batch": batch, **shape})


# M16's class (Lingvo wiki_bert.py MLPerfBertDense500B2K, on BertTemplate and gshard_builder's
# DenseBuilder): gated_ffn_activation 'silu' (3 FFN matrices), attention_num_memory_heads=1
# (multi-query), attention_key_value_dim 128 per head: 481.8B parameters, as the sheet states
# (with BERT-large's plain MLP and full heads of d_model / 256 the sizes give only 344B).
LINGVO_DENSE_BUILDER = {"mlp": "swiglu", "n_kv_heads": 1, "head_dim": 128}


INT8 = "int8"
# GSPMD programs that shard each block's [b, s, d] activations over the model axis between blocks,
# which is sequence parallelism's layout and traffic (Korthikanti et al. 2022: all-gather in,
# reduce-scatter out, norms and residual adds on a 1/t share):
# - MaxText (M11-M13): MaxText/configs/base.yml logical_axis_rules ['activation_embed', 'tensor'],
#   ['norm', 'tensor'] (AI-Hypercomputer/maxtext 000e935); its MLPerf scripts also set
#   --xla_tpu_decompose_all_gather_einsum=true and not the reduce-scatter counterpart
#   (mlcommons/training_results_v4.0 62f111b, Google/benchmarks/gpt3/implementations/maxtext/v5p-*.sh;
#   the v4.1 v5p-4096.sh likewise): collective matmul of the all-gathers only;
# - Lingvo-JAX (M17): TransformerBertSpmdAdafactor calls set_sharding_annotations_v1, whose
#   TransformerLm.set_sharding_params_v1 sets bld = [batch, None, mdl] (tensorflow/lingvo 98d104f,
#   lingvo/jax/layers/transformer_models.py; lingvo/jax/tasks/lm/model_params.py);
# - Lingvo-TF GShard (M16): wiki_bert.py BertTemplate blm_split=[0, -1, 1] (the file the sheet cites).
# Collective matmul elsewhere as XLA's partitioner does by default (auto).
MAXTEXT = {"sequence_parallel": True, "collective_matmul": "all_gather"}
GSPMD_SHARDED = {"sequence_parallel": True}
SHARDED_NOTE = "activations sharded over the model axis between blocks (as sequence parallelism)"
MAXTEXT_NOTE = SHARDED_NOTE + "; collective matmul of the all-gathers only (the script's XLA flags)"
R41 = "mlcommons/training_results_v4.1@b87b9e396f771345d4ef122ba33456304f15228d"
# TF1 programs (the MLPerf ResNet-50 and BERT submissions): tf.gradients, then a cross_replica_sum
# per variable, which XLA's all-reduce combiner merges into one after the backward pass.
TF1 = GenerateOptions(combine_grad_reduce=True)
UNFUSED = replace(TF1, attention="materialized")


JPEG_NOTE = "hosts decode JPEGs every step (no --cache_decoded_image)"
# The MLPerf v0.7 "TPU v3-8192" machine: 4 v3 pods joined by inter-pod ICI into one 32 x 128 chip
# network (generation tpu-v3-multipod; MULTIPOD-V07: the submission's util/image_util.py
# physical_shape (32, 128) for 8192 cores, its system file 512 hosts on one "2-D toroidal mesh"),
# the 128-chip axis a mesh line and the 32-chip axis a ring (MULTIPOD-WRAP: the BERT JAX run script
# for the same machine passes --deepsea_wrap=false,true,false on 128 x 32 chips; closed into a ring
# instead, M3 would be -22.7% and M7 -2.0%: benchmarks/validation.py --multipod-wrap).
MULTIPOD_NOTE = "one 32x128 slice: the 4 pods joined by inter-pod ICI, the long axis a mesh line (MULTIPOD-V07, MULTIPOD-WRAP)"


def _resnet_tf1(replicas: int, chips: int, bf16_threshold: int | None, bn_group: int = 1) -> GenerateOptions:
    """The ResNet-50 submission's own settings (its run_and_time.sh and resnet_main.py):
    `num_cores`/`num_replicas` per chip (2: a replica per TensorCore), and the gradient all-reduce
    in bf16 when num_replicas <= bfloat16_replica_threshold (v0.7 on; default 128), else fp32
    (CrossShardOptimizer on the fp32 variables; v0.6 always); `distributed_group_size` as
    `bn_group` (batch-norm statistics summed over that many replicas; default 1)."""
    bf16 = bf16_threshold is not None and replicas <= bf16_threshold
    return replace(TF1, replicas_per_chip=replicas // chips, grad_bytes=2 if bf16 else 4, bn_group=bn_group)
ROWS: tuple[Row, ...] = (
    Row("M1", "TPU v3, 16 chips", "resnet50", "tpu-v3", "4x4", "data=16", 0.1311, overrides={"global_batch": 4096}, options=_resnet_tf1(32, 16, None),
        source="measurements.md M1 (MLPerf v0.6, R06 Google tpu-v3-32)"),
    Row("M2", "TPU v3, 1024 chips (pod)", "resnet50", "tpu-v3", "32x32", "data=1024", 0.0251, overrides={"global_batch": 32768},
        options=replace(_resnet_tf1(2048, 1024, None, 8), input_pipeline="jpeg"), assumed=JPEG_NOTE,
        source="measurements.md M2 (MLPerf v0.6, R06 Google tpu-v3-2048)"),
    Row("M3", "TPU v3, 4096 chips (multipod)", "resnet50", "tpu-v3-multipod", "32x128", "data=4096", 0.0141,
        overrides={"global_batch": 65536}, options=_resnet_tf1(8192, 4096, 128, 8), assumed=MULTIPOD_NOTE,
        source="measurements.md M3 (MLPerf v0.7, R07 Google tpu-v3-8192-TF)"),
    Row("ML12", "TPU v3, 256 chips", "resnet50", "tpu-v3", "16x16", "data=256", 0.0927, overrides={"global_batch": 32768},
        options=replace(_resnet_tf1(512, 256, None), input_pipeline="jpeg"), calibration="V3_HOST_JPEG_IMAGES_PER_S", assumed=JPEG_NOTE,
        source="hardware.md ml.12 (MLPerf v0.6, R06 Google tpu-v3-512: num_cores=512, distributed_group_size=1)"),
    Row("M4", "TPU v4, 8 chips", "resnet50", "tpu-v4", "2x2x2", "data=8", 0.0736, overrides={"global_batch": 2048}, options=_resnet_tf1(16, 8, 128),
        calibration="HBM_FRACTION", source="measurements.md M4 (MLPerf v0.7, R07 Google tpu-v4-16-TF)"),
    Row("M5", "TPU v4, 3456 chips", "resnet50", "tpu-v4", "12x12x24", "data=3456", 0.00698, overrides={"global_batch": 55296}, options=_resnet_tf1(3456, 3456, 8192, 4),
        assumed="slice 12x12x24 (3456 chips)", source="measurements.md M5 (MLPerf v1.0, R10 Google tpu-v4-6912-TF)"),
    Row("M6", "TPU v4, 4096 chips (pod)", "resnet50", "tpu-v4", "16x16x16", "data=4096", 0.0034, kind="range", measured_hi_s=0.0042,
        overrides={"global_batch": 32768}, options=_resnet_tf1(4096, 4096, 8192, 8), source="measurements.md M6 (MLPerf v2.0, R20; low confidence: 3.4-4.2 ms)"),
    Row("M7", "TPU v3, 4096 chips (multipod)", "bert-large", "tpu-v3-multipod", "32x128", "data=4096", 0.0466,
        overrides={"global_batch": 8192}, options=UNFUSED, assumed=MULTIPOD_NOTE + "; unfused attention",
        source="measurements.md M7 (MLPerf v0.7, R07 Google tpu-v3-8192-TF)"),
    Row("M8", "TPU v4, 8 chips", "bert-large", "tpu-v4", "2x2x2", "data=8", 0.2333, overrides={"global_batch": 256},
        options=UNFUSED, assumed="unfused attention", source="measurements.md M8 (MLPerf v0.7, R07 Google tpu-v4-16-TF)"),
    Row("M9", "TPU v4, 2048 chips", "bert-large", "tpu-v4", "8x16x16", "data=2048", 0.0344, overrides={"global_batch": 6144},
        options=UNFUSED, assumed="unfused attention", source="measurements.md M9 (MLPerf v1.0, R10 Google tpu-v4-4096-TF)"),
    Row("M10", "TPU v5e, 16 x 256 chips (multislice)", "gpt3-175b", "tpu-v5e", "16x16", "fsdp=128,tensor=2,dcn=16", 9.09, slices=16,
        overrides={"global_batch": 2048}, options=GenerateOptions(precision=INT8, recompute="full"), kind="upper_bound",
        assumed="in-slice sharding fsdp 128 x tensor 2 (not in the repo); remat not stated: full, the least that fits HBM", source="measurements.md M10 (MLPerf v3.1, R31)"),
    Row("M11", "TPU v5p, 512 chips", "gpt3-175b", "tpu-v5p", "8x8x8", "fsdp=64,tensor=8", 23.81,
        overrides={"global_batch": 2048}, options=GenerateOptions(precision=INT8, recompute="full", **MAXTEXT), kind="upper_bound",
        assumed=MAXTEXT_NOTE, remat_stated=True, source="measurements.md M11 (MLPerf v4.0, R40 v5p-1024)"),
    Row("M12", "TPU v5p, 6144 chips", "gpt3-175b", "tpu-v5p", "8x16x48", "data=16,fsdp=48,tensor=8", 5.97,
        overrides={"global_batch": 6144}, options=GenerateOptions(precision=INT8, recompute="minimal", **MAXTEXT), kind="upper_bound",
        assumed="save_dot_except_logits as minimal recompute; " + MAXTEXT_NOTE, remat_stated=True, source="measurements.md M12 (MLPerf v4.0, R40 v5p-12288)"),
    Row("M13", "TPU v5p, 2048 chips", "gpt3-175b", "tpu-v5p", "4x8x64", "data=4,fsdp=64,tensor=8", 11.25,
        overrides={"global_batch": 4096}, options=GenerateOptions(precision=INT8, recompute="minimal", **MAXTEXT), kind="upper_bound",
        assumed="save_dot_except_mlpwi as minimal recompute; " + MAXTEXT_NOTE, remat_stated=True, source="measurements.md M13 (MLPerf v4.1, R41 v5p-4096)"),
    Row("M14", "TPU v6e, 8 x 256 chips (multislice)", "gpt3-175b", "tpu-v6e", "16x16", "fsdp=256,dcn=8", 10.75, slices=8,
        overrides={"global_batch": 4096}, options=GenerateOptions(precision=INT8, recompute="full"), kind="upper_bound",
        assumed="data parallel across slices", remat_stated=True, source="measurements.md M14 (MLPerf v4.1, R41 trillium-2048)"),
    Row("M15", "TPU v6e, 2 x 256 chips (multislice)", "gpt3-175b", "tpu-v6e", "16x16", "fsdp=256,dcn=2", 15.88, slices=2,
        overrides={"global_batch": 1536}, options=GenerateOptions(precision=INT8, recompute="full"), kind="upper_bound",
        assumed="data parallel across slices", remat_stated=True, calibration="V6E_INT8_FRACTION",
        source="measurements.md M15 (MLPerf v4.1, R41 trillium-512)"),
    Row("M16", "TPU v4, 2048 chips", _encoder("lm-482b", 64, 16384, 131072, 256, 4096, "measurements.md M16", **LINGVO_DENSE_BUILDER), "tpu-v4", "8x16x16",
        "fsdp=256,tensor=8", 22.0, options=replace(UNFUSED, **GSPMD_SHARDED),
        assumed="mesh [256, 8] as fsdp x tensor; bf16; remat not stated: the least that fits HBM; unfused attention; " + SHARDED_NOTE,
        source="measurements.md M16 (MLPerf v1.1 open, R11 tpu-v4-4096-TF)"),
    Row("M17", "TPU v4, 1024 chips", _encoder("lm-200b", 66, 12288, 98304, 128, 4096, "measurements.md M17"), "tpu-v4", "8x8x16",
        "fsdp=64,tensor=16", 16.8, options=GenerateOptions(recompute="minimal", attention="materialized", **GSPMD_SHARDED), calibration="MATMUL_FRACTION",
        assumed="mesh [1, 64, 16] as fsdp x tensor; SAVE_DOT as minimal recompute; unfused attention; " + SHARDED_NOTE,
        remat_stated=True, source="measurements.md M17 (MLPerf v1.1 open, R11 tpu-v4-2048-JAX)"),
    Row("P1", "TPU v4, 2 pods x 3072 chips", "palm-540b", "tpu-v4", "12x16x16", "fsdp=256,tensor=12,dcn=2", 17.6, slices=2,
        options=GenerateOptions(recompute="full", attention="materialized"), assumed="rematerialisation as full recompute; unfused attention",
        remat_stated=True, source="measurements.md P1 (Chowdhery et al. 2022 §4.1, Table 3)"),
    # PaLM on one of its pods at half the batch: "about 1.95x" the single-pod throughput on two
    # (§4), so ~122K tok/s and ~17.2 s per step (approximate; measurements.md caveat 8)
    Row("P1a", "TPU v4, 1 pod x 3072 chips", "palm-540b", "tpu-v4", "12x16x16", "fsdp=256,tensor=12", 17.2,
        overrides={"global_batch": 1024}, options=GenerateOptions(recompute="full", attention="materialized"),
        assumed="approximate: the paper's 'about 1.95x' on two pods; rematerialisation as full recompute; unfused attention",
        remat_stated=True, source="measurements.md caveat 8 (P1 on one pod at half the batch; Chowdhery et al. 2022 §4)"),
    # The Trillium GPT-3 series' other two points (measurements.md caveat 10): the same script as
    # M14 (per_device_batch_size=2, ici_fsdp_parallelism=-1, remat full, int8) on 4 and 12 slices.
    # Step: the median interval between eval points (the first after run_start left out), pooled
    # over the three runs, / the 24,576 sequences per interval over the global batch (an upper
    # bound: each interval also runs one eval pass, caveat 3).
    Row("T4", "TPU v6e, 4 x 256 chips (multislice)", "gpt3-175b", "tpu-v6e", "16x16", "fsdp=256,dcn=4", 10.734, slices=4,
        overrides={"global_batch": 2048}, options=GenerateOptions(precision=INT8, recompute="full"), kind="upper_bound",
        assumed="data parallel across slices", remat_stated=True,
        source=f"measurements.md caveat 10: {R41} Google/results/cloud-tpu-trillium-1024-maxtext/gpt3/result_0..2.txt "
               "(median 128.81 s over 66 intervals / 12 steps), benchmarks/gpt3/implementations/maxtext/cloud-tpu-trillium/trillium-1024.sh"),
    Row("T12", "TPU v6e, 12 x 256 chips (multislice)", "gpt3-175b", "tpu-v6e", "16x16", "fsdp=256,dcn=12", 10.803, slices=12,
        overrides={"global_batch": 6144}, options=GenerateOptions(precision=INT8, recompute="full"), kind="upper_bound",
        assumed="data parallel across slices", remat_stated=True,
        source=f"measurements.md caveat 10: {R41} Google/results/cloud-tpu-trillium-3072-maxtext/gpt3/result_0..2.txt "
               "(median 43.21 s over 82 intervals / 4 steps), benchmarks/gpt3/implementations/maxtext/cloud-tpu-trillium/trillium-3072.sh"),
)


@dataclass(frozen=True)
class Series:
    """One model measured at several slice counts (row ids, fewest slices first)."""

    name: str
    rows: tuple[str, ...]


SERIES: tuple[Series, ...] = (
    Series("GPT-3 175B on Trillium v6e-256 slices (MLPerf v4.1, R41)", ("M15", "T4", "M14", "T12")),
    Series("PaLM 540B on v4 pods (Chowdhery et al. 2022)", ("P1a", "P1")),
)
SERIES_TOLERANCE = 0.05  # the predicted per-chip throughput ratio within 5 points of the measured one


def row_chips(row: Row) -> int:
    return math.prod(parse_shape(row.shape)) * row.slices


def per_chip_throughput(row: Row, step_s: float) -> float:
    """Sequences (images) per chip-second at this step time: the row's global batch / step / chips."""
    batch = row.overrides.get("global_batch") or (row.model.global_batch if not isinstance(row.model, str) else PRESETS[row.model].global_batch)
    return batch / step_s / row_chips(row)


def series_table(table: list[dict], series: tuple[Series, ...] = SERIES) -> list[dict]:
    """Per series and row: slices, measured and predicted per-chip throughput relative to the
    series' fewest slices, and the difference in points (`table`: run_table's records, holding
    every row of the series asked for)."""
    by_id, rows = {r["id"]: r for r in table}, {r.id: r for r in ROWS}
    out = []
    for s in series:
        first = rows[s.rows[0]]
        m0 = per_chip_throughput(first, first.measured_s)
        p0 = per_chip_throughput(first, by_id[first.id]["predicted_s"])
        for rid in s.rows:
            row = rows[rid]
            m = per_chip_throughput(row, row.measured_s) / m0
            p = per_chip_throughput(row, by_id[rid]["predicted_s"]) / p0
            out.append({"series": s.name, "id": rid, "slices": row.slices, "chips": row_chips(row),
                        "measured_ratio": m, "predicted_ratio": p, "difference": p - m})
    return out


def setup_note(row: Row) -> str:
    """The row's note: what the sheet leaves open and podsim takes, then the TF1 gradient path."""
    o, parts = row.options, [row.assumed] if row.assumed else []
    if o.combine_grad_reduce:
        dtype = "fp32" if o.grad_bytes == 4 else "bf16"
        parts.append(f"TF1: one {dtype} gradient all-reduce after backward" + (", a replica per TensorCore" if o.replicas_per_chip == 2 else "")
                     + (f", batch norm over {o.bn_group} replicas" if o.bn_group > 1 else ""))
    return "; ".join(parts)


def row_study(row: Row, recompute: str | bool | None = None) -> StepStudy:
    """The row's step as a study (`recompute`: instead of the row's own policy)."""
    options = row.options if recompute is None else replace(row.options, recompute=recompute)
    return StepStudy(row.generation, row.shape, model=row.model, plan=row.plan, slices=row.slices,
                     model_overrides=row.overrides, options=options, name=row.id)


def fitting_study(row: Row) -> StepStudy:
    """The row's study. Where the sheet states no remat policy, the least recompute (none,
    minimal, full) whose HBM footprint per chip fits the chip (podsim.trace.memory): a run must
    fit, and nobody recomputes more than they must."""
    if row.remat_stated:
        return row_study(row)
    capacity = get_generation(row.generation).hbm_per_chip.si
    for policy in RECOMPUTE_POLICIES:
        study = row_study(row, policy)
        if fits_hbm(study_trace(study).meta["hbm_footprint"]["total_bytes"], capacity):
            return study
    return study  # fits under no policy: the table's hbm column says so


def row_trace(row: Row) -> StepTrace:
    """The trace of the row's study (`fitting_study`)."""
    return study_trace(fitting_study(row))


def predict(row: Row) -> dict:
    """Run the row's study (several slices: one job on `place_slices`, the DCN between them), and
    return the step summary with the recompute policy used."""
    r = run_study(fitting_study(row))
    return {**step_summary(r), "recompute": r.trace.meta["recompute"]}


def error(row: Row, predicted_s: float) -> float:
    """Signed error as the module docstring defines it per kind."""
    m = row.measured_s
    if row.kind == "range":
        hi = row.measured_hi_s or m
        return 0.0 if m <= predicted_s <= hi else (predicted_s / m - 1 if predicted_s < m else predicted_s / hi - 1)
    if row.kind == "upper_bound":
        lo = (1 - UPPER_BOUND_BAND) * m
        return 0.0 if lo <= predicted_s <= m else (predicted_s / m - 1 if predicted_s > m else predicted_s / lo - 1)
    return predicted_s / m - 1


def peak_scale(row: Row) -> float:
    """bf16 peak / the peak of the precision the row's matmuls run at: step_summary's
    utilisations are against the bf16 peak; the table's are against the precision's own (an
    int8 row on v5p against 918 TFLOP/s, not 459), so none reads over 100% for running int8."""
    cc = chip_constants.chip_compute(row.generation)
    return cc.peak_for("bf16") / cc.peak_for(row.options.precision, f"validation row {row.id}")


def run_table(rows: tuple[Row, ...] = ROWS, on_row: Callable[[dict], None] | None = None) -> list[dict]:
    """Each row's prediction and error; `mfu` and `hfu` against the peak of the row's precision
    (`peak_precision`), as `peak_scale` says."""
    out = []
    for row in rows:
        s = predict(row)
        scale = peak_scale(row)
        rec = {"id": row.id, "system": row.system, "model": row.model_name, "kind": row.kind,
               "measured_s": row.measured_s, "measured_hi_s": row.measured_hi_s, "predicted_s": s["step_time_s"],
               "ratio": s["step_time_s"] / row.measured_s, "error": error(row, s["step_time_s"]),
               "mfu": s["mfu"] * scale if s.get("mfu") else None, "hfu": s["hfu"] * scale if s.get("hfu") else None,
               "peak_precision": row.options.precision, "exposed_comm_s": s["exposed_comm_s"],
               "calibration": row.calibration, "assumed": setup_note(row), "source": row.source,
               "engine_wall_s": s["engine_wall_s"], "recompute": s["recompute"],
               "hbm_bytes_per_chip": s.get("hbm_bytes_per_chip"), "hbm_fits": s.get("hbm_fits")}
        out.append(rec)
        if on_row:
            on_row(rec)
    return out


def summarise(table: list[dict]) -> dict:
    """Median and max |error| over the rows that set no constant."""
    errs = [abs(r["error"]) for r in table if not r["calibration"]]
    return {"rows": len(table), "validation_rows": len(errs), "median_abs_error": statistics.median(errs) if errs else 0.0,
            "max_abs_error": max(errs, default=0.0)}


CONSTANTS = ("MATMUL_FRACTION", "HBM_FRACTION", "V6E_INT8_FRACTION", "V3_HOST_JPEG_IMAGES_PER_S")
BOUNDS = {"V3_HOST_JPEG_IMAGES_PER_S": (1.0, 1e9)}
"""Where a constant may range while it is solved (fractions: 0.05 to 1)."""


@contextmanager
def fractions(**values: float) -> Iterator[None]:
    """Temporarily set calibrated constants of podsim.perf.chips (achievable fractions, the host
    input rate) by name (calibration only)."""
    unknown = set(values) - set(CONSTANTS)
    if unknown:
        raise ValueError(f"not a calibrated constant: {sorted(unknown)}")
    old = {k: getattr(chip_constants, k) for k in values}
    for k, v in values.items():
        setattr(chip_constants, k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(chip_constants, k, v)


def calibration_target_s(row: Row) -> float:
    """The step time a calibration row is fitted to: its measurement; for an upper-bound row the
    training part of its interval. Each GPT-3 interval trains on 24,576 sequences and then runs
    the forward pass of 24,567 eval sequences (measurements.md caveat 3); at the training rate,
    with full remat a trained sequence costs 4 forward passes (3 without), so training is 4/5 (3/4)
    of the interval."""
    if row.kind != "upper_bound":
        return row.measured_s
    forwards = 4 if row.options.recompute == "full" else 3
    return row.measured_s * forwards / (forwards + 1)


def _solve(row: Row, which: str, others: dict[str, float], start: float, tol: float = 1e-3, evals: int = 8) -> float:
    """The value (a fraction at most 1; a rate within BOUNDS) that makes `row`'s prediction equal
    its calibration target: secant steps on predicted / target - 1 (the step time falls as the
    value grows)."""
    target = calibration_target_s(row)
    lo, hi = BOUNDS.get(which, (0.05, 1.0))

    def gap(f: float) -> float:
        with fractions(**{**others, which: f}):
            return predict(row)["step_time_s"] / target - 1

    x0, x1 = start, min(start * 1.05, hi) if start < hi else start * 0.95
    g0, g1 = gap(x0), gap(x1)
    for _ in range(evals):
        if abs(g1) < tol or g1 == g0:
            break
        x0, x1, g0 = x1, min(max(x1 - g1 * (x1 - x0) / (g1 - g0), lo), hi), g1
        g1 = gap(x1)
        if x1 == hi and g1 > 0:  # even the whole of peak / bandwidth is too slow: cap at the bound
            break
    return x1


def calibrate(rounds: int = 2) -> dict[str, float]:
    """Set each constant from its calibration row, in turn (each row depends a little on the
    others' constants), `rounds` times."""
    rows = {r.calibration: r for r in ROWS if r.calibration}
    values = {k: getattr(chip_constants, k) for k in CONSTANTS}
    for _ in range(rounds):
        for k in CONSTANTS:
            values[k] = _solve(rows[k], k, {o: v for o, v in values.items() if o != k}, values[k])
    return values
