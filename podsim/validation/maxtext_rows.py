"""MaxText's published performance tables as validation rows: the 16B-128B models on 1 to 32
TPU v5e-256 slices and the 32B-1024B models on one and two v5p slices (40 rows), each run as its
script states it.

Sources, at the README commit (AI-Hypercomputer/maxtext@76bd53b, 2023-12-15):

- the measured figures: MaxText/configs/v5e/README.md and MaxText/configs/v5p/README.md
  (TFLOP/s per chip and MFU of each model on each hardware);
- each row's setup: the script beside the README (MaxText/configs/v5e/16b.sh ... v5p/1024b.sh):
  `global_parameter_scale` (the model: podsim.trace.configs.maxtext_model), `per_device_batch_size`
  (a device is a chip on v5e and, megacore, on v5p), `max_target_length` 2048, `remat_policy`
  (`full`: nothing saved, podsim's `full`; `minimal`: MaxText/layers/models.py's
  jax.checkpoint_policies.checkpoint_dots_with_no_batch_dims, every weight matmul's output saved and
  the rest recomputed: podsim's `dots`), `ici_fsdp_parallelism` / `ici_tensor_parallelism`
  (unset: fsdp = -1, the whole slice), `dcn_data_parallelism` = the slices (base.yml: -1, auto over
  slices), `attention='flash'`; base.yml's logical_axis_rules shard `activation_embed` over the tensor
  axis (sequence parallelism's layout where the plan has one). Every one of the ten scripts, and
  the MaxText/configs/largest_job/ scripts the v5e table was measured with (at ebb226d, 9bc243c and
  e47fa1b, 2023-10-24 to 10-31, the commits that published its figures), sets
  `--xla_tpu_enable_data_parallel_all_reduce_opt=true` and
  `--xla_tpu_data_parallel_opt_different_sized_ops=true` (added to MaxText's 16B/32B scripts by
  0fb125f, 2023-06-21, "Add multislice XLA flags for 16B and 32B configs"): XLA pipelines the
  cross-slice data-parallel all-reduces across the layer loop, so every row states
  `overlap_dcn=True`. The gradients cross the DCN as podsim's default bf16 (`grad_bytes` 2): the
  weights are fp32 (MaxText/layers/linears.py at the commit creates each kernel in float32 and casts
  it to bf16 before its matmul), but the sum over the batch that SPMD partitioning inserts for a
  batch-sharded weight-gradient matmul is of that matmul's bf16 output, before the cast's transpose
  turns it into fp32; no script states the wire dtype, and fp32 (`grad_bytes` 4) would double the
  DCN bytes, still under the backward pass (docs/multislice.md). The scripts' other XLA flags
  (`--xla_tpu_enable_async_collective_fusion*`, `--xla_tpu_overlap_compute_collective_tc`,
  `--xla_enable_async_all_gather`, v5p's `--xla_tpu_enable_ag_backward_pipelining`) run collectives
  asynchronously beside compute, which podsim's FSDP prefetch and gradient reduce-scatters already
  do; none decomposes a tensor-parallel collective (no `--xla_tpu_decompose_*` or windowed-einsum
  flag), and the compiler of the time did not unless asked: Google's MLPerf Training round 4.0 GPT-3
  scripts (2024) had to pass `--xla_tpu_decompose_all_gather_einsum=true` to get it
  (mlcommons/training_results_v4.0 Google/benchmarks/gpt3/implementations/maxtext/v5p-1024.sh).
  So a row with a tensor axis states `collective_matmul="exposed"`: the generator's TPU default
  (chunked, podsim.trace.defaults, as today's compiler runs) is not what these runs ran.
- the step time: the README's MFU (more digits than its TFLOP/s, which it matches to rounding)
  times the bf16 peak (v5e 197, v5p 459 TFLOP/s: 16B on one slice, 61.10% x 197 = 120.4, the README's 120), into MaxText's own FLOP count
  per device and step (MaxText/train.py calculate_training_tflops in the code that measured it): 6 x
  the parameter count (embedding included, counted once: logits_via_embedding) x the tokens per
  device, plus the attention 12 x heads x layers x head_dim x seq^2 x per-device batch, halved for
  causality since 64ee4e9 (2023-11-08). So step = that count / (MFU x peak). The parameter count is
  MaxText's own (`maxtext_params`: its pytree, norm scales included).

The v5e figures are older than the README that carries them (V5E_MEASURED): MaxText's README
published them at ebb226d (16B and 32B on 1-16 slices, 2023-10-24), 9bc243c (64B and 128B, 10-27) and
e47fa1b (32 slices; 64B on 16 re-read, 10-31), each beside its largest_job/ scripts, and 76bd53b copied
them. The code of those commits differs from 76bd53b's in two ways a step depends on:
- its count did not halve the attention for causality (train.py calculate_training_tflops from
  0e65013, 2023-06-02, to 64ee4e9): the step each figure implies is the count without the halving
  over (MFU x peak);
- its attention did the whole score matrix: with `enable_flash_attention=true` (the scripts from
  5ebcd67, 2023-10-27, so the 9bc243c and e47fa1b figures) MaxText/layers.py ran Pallas
  `flash_attention(..., causal = False, ...)` (line 349 at ebb226d, 9bc243c and e47fa1b; causal=True
  from 64ee4e9): the row runs its model with `causal=False`; without it (the ebb226d scripts, base.yml
  `enable_flash_attention: False`, so the 16B and 32B figures on 1-16 slices) `dot_product_attention`
  computed the score matrix with einsums and a softmax between them (the mask and the relative
  position bias added to the whole matrix): `attention="materialized"`.
(The parameter count of that code differs from `maxtext_params` by its relative-position bias, 32 x
heads per layer, in place of 76bd53b's query/key/value norm scales: under 1e-6 of the count, ignored.)
The v5p figures first appear in 76bd53b itself, whose code halves the count and runs flash causally.
"""

from __future__ import annotations

from podsim.trace.configs import PRESETS, TransformerConfig
from podsim.trace.generate import GenerateOptions
from podsim.trace.model_sources import MAXTEXT_COMMIT
from podsim.validation.row import MAXTEXT_REMAT, Row, Series

MAXTEXT_PUBLISHED = "2023-12-15"  # the commit that added both READMEs (76bd53b)
PEAK_TFLOPS = {"tpu-v5e": 197.0, "tpu-v5p": 459.0}  # v5e.1, v5p.6: the peaks the READMEs' MFU divides by
SEQ = 2048

# v5e (MaxText/configs/v5e/README.md): scale -> (per_device_batch_size, in-slice plan, MFU % at 1, 2, 4, 8, 16, 32 slices)
V5E_SLICES = (1, 2, 4, 8, 16, 32)
V5E: dict[int, tuple[int, str, tuple[float, ...]]] = {
    16: (6, "fsdp=256", (61.10, 59.37, 59.14, 58.27, 56.56, 54.65)),
    32: (4, "fsdp=256", (66.86, 64.81, 64.10, 63.67, 62.26, 60.40)),
    64: (2, "fsdp=256", (59.90, 56.66, 55.85, 54.96, 53.29, 50.18)),
    128: (1, "fsdp=16,tensor=16", (56.06, 55.82, 54.93, 52.93, 50.86, 46.25)),
}
# the README's TFLOP/s per chip, to check the MFU against
V5E_TFLOPS = {16: (120, 117, 117, 115, 111, 108), 32: (132, 128, 126, 125, 123, 119), 64: (118, 112, 110, 108, 105, 99),
              128: (110, 110, 108, 104, 100, 91)}

# v5p (MaxText/configs/v5p/README.md): (scale, hardware v5p-N (N cores = N/2 chips), slice shape, per_device_batch_size,
# in-slice plan, remat_policy, (MFU % on 1, 2 slices), (TFLOP/s on 1, 2 slices))
V5P: tuple[tuple[int, int, str, int, str, str, tuple[float, float], tuple[int, int]], ...] = (
    (32, 128, "4x4x4", 8, "fsdp=16,tensor=4", "minimal", (71.47, 69.43), (328, 319)),
    (64, 128, "4x4x4", 4, "fsdp=16,tensor=4", "minimal", (70.31, 67.26), (323, 309)),
    (128, 256, "4x4x8", 2, "fsdp=16,tensor=8", "minimal", (68.68, 66.34), (315, 305)),
    (128, 512, "4x8x8", 2, "fsdp=32,tensor=8", "minimal", (68.83, 59.66), (316, 274)),
    (256, 1024, "8x8x8", 2, "fsdp=64,tensor=8", "minimal", (67.09, 62.99), (308, 289)),
    (512, 1024, "8x8x8", 2, "fsdp=32,tensor=16", "full", (63.99, 61.45), (294, 282)),
    (1024, 2048, "8x8x16", 2, "fsdp=64,tensor=16", "full", (55.35, 51.55), (254, 237)),
    (1024, 4096, "8x16x16", 2, "fsdp=128,tensor=16", "full", (64.80, 60.83), (297, 279)),
)


def maxtext_params(cfg: TransformerConfig) -> int:
    """The parameters MaxText counts (max_utils.calculate_num_params_from_pytree at the commit): the
    shared embedding vocab x d; per layer Q, K, V, O (d x heads x head_dim each), the MLP's wi and
    wo, the pre-attention RMSNorm scale (d) and the query/key/value RMSNorm scales (head_dim each);
    the final RMSNorm (d)."""
    d, hd = cfg.d_model, cfg.n_heads * cfg.d_head
    layer = 4 * d * hd + 2 * d * cfg.d_ff + d + 3 * cfg.d_head
    return cfg.vocab * d + cfg.n_layers * layer + d


def maxtext_tflops_per_device(cfg: TransformerConfig, per_device_batch: float, causal_halved: bool = True) -> float:
    """MaxText's training TFLOPs per device and step (train.py calculate_training_tflops): 6 N per
    token plus the attention's 12 heads layers head_dim seq^2 per sequence, halved for causality
    from 64ee4e9 (2023-11-08) on (`causal_halved`; before, the whole matrix)."""
    weights = 6 * maxtext_params(cfg) * cfg.seq_len * per_device_batch
    attention = 12 * cfg.n_heads * cfg.n_layers * cfg.d_head * cfg.seq_len**2 * per_device_batch / (2 if causal_halved else 1)
    return (weights + attention) / 1e12


def step_from_mfu(cfg: TransformerConfig, per_device_batch: float, mfu_pct: float, generation: str,
                  causal_halved: bool = True) -> float:
    """The step time the README's MFU implies: MaxText's FLOPs per device (as the measuring code
    counted them) / (MFU x peak)."""
    return maxtext_tflops_per_device(cfg, per_device_batch, causal_halved) / (mfu_pct / 100 * PEAK_TFLOPS[generation])


def v5e_measured_at(scale: int, slices: int) -> str:
    """The MaxText commit that first published the v5e figure of `scale`B on `slices` slices
    (module docstring): ebb226d (16B, 32B on 1-16), 9bc243c (64B, 128B on 1-16), e47fa1b (32
    slices, and 64B on 16, re-read there from 53.39% to 53.29%)."""
    if slices == 32 or (scale, slices) == (64, 16):
        return "e47fa1b"
    return "ebb226d" if scale in (16, 32) else "9bc243c"


# The largest_job/ scripts passed enable_flash_attention=true from 5ebcd67 (2023-10-27) on: the
# ebb226d figures ran dot_product_attention (materialized), the later ones flash with causal=False.
V5E_MEASURED = {"ebb226d": "2023-10-24", "9bc243c": "2023-10-27", "e47fa1b": "2023-10-31"}
V5E_ATTENTION_NOTE = {
    "ebb226d": "measured at ebb226d (2023-10-24): no enable_flash_attention in its largest_job script, so "
               "dot_product_attention (the whole score matrix through HBM); MaxText's count then not halved for causality",
    "flash": "measured at {c} ({d}): flash_attention(causal = False), the whole score matrix in the kernel; MaxText's "
             "count then not halved for causality",
}


def _options(plan: str, remat: str, attention: str = "flash") -> GenerateOptions:
    tensor = "tensor=" in plan
    # overlap_dcn: the scripts' --xla_tpu_enable_data_parallel_all_reduce_opt (module docstring)
    return GenerateOptions(recompute=MAXTEXT_REMAT[remat], attention=attention, sequence_parallel=tensor,
                           collective_matmul="exposed" if tensor else "auto", overlap_dcn=True)


def _v5e_rows() -> list[Row]:
    rows = []
    for scale, (pdbs, plan, mfus) in V5E.items():
        cfg = PRESETS[f"maxtext-{scale}b"]
        for n, mfu, tflops in zip(V5E_SLICES, mfus, V5E_TFLOPS[scale], strict=True):
            chips = 256 * n
            at = v5e_measured_at(scale, n)
            unfused = at == "ebb226d"
            note = V5E_ATTENTION_NOTE["ebb226d"] if unfused else V5E_ATTENTION_NOTE["flash"].format(c=at, d=V5E_MEASURED[at])
            rows.append(Row(
                f"E{scale}x{n}", f"TPU v5e, {n} x 256 chips" + (" (multislice)" if n > 1 else ""), f"maxtext-{scale}b", "tpu-v5e",
                "16x16", plan + (f",dcn={n}" if n > 1 else ""), step_from_mfu(cfg, pdbs, mfu, "tpu-v5e", causal_halved=False), slices=n,
                overrides={"global_batch": pdbs * chips} | ({} if unfused else {"causal": False}),
                options=_options(plan, "full", "materialized" if unfused else "flash"), remat_stated=True, stated=True, assumed=note,
                source=f"{MAXTEXT_COMMIT}:MaxText/configs/v5e/README.md ({n}x v5e-256: {tflops} TFLOP/s/chip, {mfu:.2f}% MFU), "
                       f"first published at AI-Hypercomputer/maxtext@{at} (README.md); MaxText/configs/largest_job/{scale}b.sh there "
                       f"(per_device_batch_size={pdbs}, remat_policy=full{'' if unfused else ', enable_flash_attention=true'}); "
                       f"MaxText/train.py calculate_training_tflops and MaxText/layers.py there",
                published=V5E_MEASURED[at], corpus="maxtext"))
    return rows


def _v5p_rows() -> list[Row]:
    rows = []
    for scale, cores, shape, pdbs, plan, remat, mfus, tflops in V5P:
        cfg = PRESETS[f"maxtext-{scale}b"]
        chips = cores // 2
        for n, mfu, tf in zip((1, 2), mfus, tflops, strict=True):
            rows.append(Row(
                f"P{scale}x{n}@{cores}", f"TPU v5p, {n} x v5p-{cores} ({chips} chips)" + (" (multislice)" if n > 1 else ""),
                f"maxtext-{scale}b", "tpu-v5p", shape, plan + (f",dcn={n}" if n > 1 else ""), step_from_mfu(cfg, pdbs, mfu, "tpu-v5p"),
                slices=n, overrides={"global_batch": pdbs * chips * n}, options=_options(plan, remat), remat_stated=True, stated=True,
                source=f"{MAXTEXT_COMMIT}:MaxText/configs/v5p/README.md ({n}x v5p-{cores}: {tf} TFLOP/s/chip, {mfu:.2f}% MFU); "
                       f"MaxText/configs/v5p/{scale}b.sh (per_device_batch_size={pdbs}, remat_policy={remat})",
                published=MAXTEXT_PUBLISHED, corpus="maxtext"))
    return rows


MAXTEXT_ROWS: tuple[Row, ...] = (*_v5e_rows(), *_v5p_rows())

MAXTEXT_SERIES: tuple[Series, ...] = (
    *(Series(f"MaxText {s}B on 1-32 v5e-256 slices ({MAXTEXT_COMMIT[-40:-33]})", tuple(f"E{s}x{n}" for n in V5E_SLICES)) for s in V5E),
    *(Series(f"MaxText {s}B on 1-2 v5p-{c} slices ({MAXTEXT_COMMIT[-40:-33]})", (f"P{s}x1@{c}", f"P{s}x2@{c}")) for s, c, *_ in V5P),
)
