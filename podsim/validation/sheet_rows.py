"""The rows of shared/reference/measurements.md (M1..M17, P1), its caveats' extra points (P1a, T4,
T12) and hardware.md's ml.12 (ML12), each with the setup the sheet states; `assumed` says what
podsim takes where the sheet leaves a choice open (podsim.validation.table's docstring has the
rules every row follows)."""

from __future__ import annotations

from dataclasses import replace

from podsim.trace.generate import GenerateOptions
from podsim.validation.mlperf_rows_logs import Pooled
from podsim.validation.row import (
    GPT3_EVAL_INTERVAL,
    GSPMD_SHARDED,
    INT8,
    JPEG_NOTE,
    LINGVO_DENSE_BUILDER,
    MAXTEXT,
    MAXTEXT_INT8,
    MAXTEXT_INT8_TFF,
    MAXTEXT_REMAT,
    MEGATRON,
    MULTIPOD_NOTE,
    R41,
    SHARDED_NOTE,
    TF1_BERT_REMAT,
    TFF_NOTE,
    UNFUSED,
    Row,
    Series,
    encoder_lm,
    eval_interval,
    maxtext_remat_note,
    resnet_tf1,
)

# When each row's measurement was published: an MLPerf Training round's results day (MLCommons'
# announcement of the round; keyed by the round's number, 0.6 for MLPerf Training v0.6), the PaLM
# paper's first arXiv version.
MLPERF_ROUND_PUBLISHED = {"0.6": "2019-07-10", "0.7": "2020-07-29", "1.0": "2021-06-30", "1.1": "2021-12-01",
                          "2.0": "2022-06-29", "3.1": "2023-11-08", "4.0": "2024-06-12", "4.1": "2024-11-13"}
PALM_PUBLISHED = "2022-04-05"  # arXiv:2204.02311 v1
# The rows whose `assumed` fills a choice of plan or options the source leaves open (all others'
# sources state both; split rule R2: only those may calibrate): M10 (the in-slice sharding is in
# the paxml wheel, not the repo), M14, M15, T4, T12 (the cross-slice layout is not set in the
# script), M16 (the mesh axes' roles, read from the wiki_bert.py class whose sizes match the README,
# which names none; its remat is its code's: M16_REMAT), P1 and P1a (PaLM's remat policy is not
# stated; P1a's step is the paper's "about 1.95x").
NOT_STATED = {"M10", "M14", "M15", "T4", "T12", "M16", "P1", "P1a"}
# The Trillium rows (M14, M15, T4, T12): each script (TRILLIUM_SCRIPTS) states per_device_batch_size
# (3 on 2 slices, else 2), ici_fsdp_parallelism=-1 (fsdp over the 256 chips), remat_policy=full,
# attention=flash, quantization=int8 and tff_quant=true; the branch it checks out (mlperf/4.1 =
# AI-Hypercomputer/maxtext@a6b44b3, MaxText/configs/base.yml) sets data parallelism across slices
# (dcn_data_parallelism: -1) and max_target_length 2048. They stay in NOT_STATED: the script spells the
# forward-only switch `tff_quant`, which that base.yml does not hold (its key is enable_tff_quant, and
# pyconfig refuses an unknown key), so the switch podsim runs (MAXTEXT_INT8_TFF) is read from the
# script's intent, not from a setting the published code accepts.
TRILLIUM_SCRIPTS = f"{R41}:Google/benchmarks/gpt3/implementations/maxtext/cloud-tpu-trillium/"
TRILLIUM_NOTE = ("data parallel across slices (MaxText base.yml dcn_data_parallelism -1); " + TFF_NOTE
                 + " (the script's tff_quant=true, enable_tff_quant in the branch's code)")
# What the v1.1 open rows' code states beyond the sheet (each applied as the code says):
# M16, Lingvo-TF wiki_bert.py BertTemplate (the file the sheet cites): XLAShardingAdafactor, BETA1 = 0,
# factored=True; M17, Lingvo-JAX bert.py BertSpmdL66H12kBiggerBatch8x8x16 on TransformerBertSpmdAdafactor
# (tensorflow/lingvo@0c5d29e lingvo/jax/tasks/lm/params/bert.py, lingvo/jax/tasks/lm/model_params.py):
# set_default_adafactor (ShardedAdafactor, beta1 0.9, momentum int8 by default, factored) and
# CHECKPOINT_POLICY SAVE_DOT_FOR_MLPERF_200B, which saves only 'combined_qkv_proj', 'query_proj',
# 'value_proj', 'key_proj', 'context' and 'out_proj' (lingvo/jax/layers/repeats.py _custom_policy):
# the MLP and the attention scores are recomputed.
M16_CODE = "Adafactor without momentum, factored (its code)"
# M16's remat: MLPerfBertDense500B2K inherits USE_REPEAT_LAYER = True from MLPerfBertDense1T (wiki_bert.py);
# gshard_builder's _LayerStack then wraps the layers in builder_layers.RepeatLayer, which runs them through
# lingvo's recurrent.Recurrent: "Recurrent saves only the state output from cell_fn, not any of the
# intermediate tensors ... we have to recompute those intermediate tensors in the backward pass"
# (core/recurrent.py, core/builder_layers.py RepeatLayer.FProp, beside wiki_bert.py in the submission):
# each layer's forward re-runs in backward, podsim's `full`.
M16_REMAT = "remat full: USE_REPEAT_LAYER, each layer's forward re-run in backward by lingvo's Recurrent (its code)"
# M10's code (MLPerf v3.1 PAX; the experiment class C4SpmdGpt3AdamDataParallel16x16x16Int8 is in the
# paxml wheel, not the repository, but its bases are public): the submission's C4SpmdGpt3AdamMLPerfHP
# (src/gpt3.py) derives from paxml's c4.C4SpmdGpt3AdamOrgHP, which sets CHECKPOINT_POLICY = SAVE_NOTHING
# (google/paxml@eb75ad3, the last change before the run's 20230904 wheel, paxml/tasks/lm/params/c4.py
# line 641; the same in the r1.1.0 and r1.2.0 releases around it): full remat; its layers' attention is
# praxis's DotProductAttention (praxis/layers/transformers.py Transformer.tr_atten_tpl), which computes
# the logits with an einsum, the softmax, then the context with another (google/praxis@e263efe,
# praxis/layers/attentions.py _dot_atten, lines 1421-1505): the score matrix through HBM, no fused kernel.
M10_CODE = ("remat full (paxml C4SpmdGpt3AdamOrgHP: CHECKPOINT_POLICY = SAVE_NOTHING); unfused attention (praxis "
            "DotProductAttention: logits einsum, softmax, context einsum)")
M10_SOURCES = ("google/paxml@eb75ad3632a039b2fe58b9fff7be677d83a80f8b:paxml/tasks/lm/params/c4.py (line 641); "
               "google/praxis@e263efe2a9743674aae13b3f4a94de780d4a105e:praxis/layers/attentions.py (lines 1421-1505)")
# PaLM's remat: the paper names no policy; its Appendix B counts 4.10 TFLOP per token with rematerialisation
# against 3.28 without (MFU 46.2%, HFU 57.8%): 0.25 of the model FLOPs, three quarters of a forward pass,
# recomputed. podsim's `full` re-runs the whole forward; no named policy recomputes three quarters.
PALM_REMAT = ("rematerialisation as full recompute (the paper's Appendix B: 4.10 against 3.28 TFLOP per token, "
              "three quarters of a forward re-run; full re-runs all of it; no policy stated)")
M17_CODE = "SAVE_DOT_FOR_MLPERF_200B: Q/K/V, context and out_proj saved, the MLP recomputed; Adafactor with int8 momentum (its code)"
_ROUND = {"M1": "0.6", "M2": "0.6", "ML12": "0.6", "M3": "0.7", "M4": "0.7", "M7": "0.7", "M8": "0.7",
          "M5": "1.0", "M9": "1.0", "M16": "1.1", "M17": "1.1", "M6": "2.0", "M10": "3.1", "M11": "4.0",
          "M12": "4.0", "M13": "4.1", "M14": "4.1", "M15": "4.1", "T4": "4.1", "T12": "4.1"}


# The MLPerf rows' intervals (measurements.md's method: the median interval between eval points,
# each run's first left out, pooled over the runs; M16 and M17: training blocks), re-derived from
# the result logs at the sheet's commits with podsim.validation.mlperf_rows_logs
# (`benchmarks/mlperf_rows.py intervals DIR`): (median s, intervals, first quartile s, third quartile s)
_POOLED = {
    "M1": (164.119, 66, 164.1127, 164.125), "M2": (3.945, 81, 3.9185, 3.97), "ML12": (12.3975, 80, 12.333, 13.2723),
    "M3": (1.115, 99, 1.108, 1.121), "M4": (184.1925, 40, 184.1843, 184.2037), "M5": (0.65, 88, 0.643, 0.655),
    "M6": (0.661, 65, 0.355, 0.682), "M7": (2.8925, 60, 2.8613, 2.9038), "M8": (455.647, 40, 455.641, 455.6535),
    "M9": (1.1345, 144, 1.126, 1.14), "M10": (109.026, 66, 108.9882, 109.0935), "M11": (285.7765, 66, 285.7632, 285.799),
    "M12": (23.87, 78, 23.862, 23.875), "M13": (67.494, 72, 67.481, 67.922), "M14": (64.485, 69, 64.4585, 64.5245),
    "M15": (254.094, 66, 253.434, 254.605), "M16": (2199.054, 71, 2162.51, 2245.582), "M17": (1679.913, 277, 1674.952, 1688.2485),
    "T4": (128.804, 63, 128.782, 128.848), "T12": (43.196, 79, 43.033, 43.727),
}
# Eval samples per interval of the ResNet and BERT rows: what the chips run in one eval pass. ResNet:
# ceil(50,000 / eval_batch_size) eval steps of eval_batch_size images (resnet_main.py, every round:
# `eval_steps = ceil(num_eval_images / eval_batch_size)`, the last batch padded); BERT:
# max_eval_steps batches of eval_batch_size sequences (util/train_and_eval_runner.py:
# `repeat(eval_steps, eval_step)`), the flags from each row's run_and_time.sh. (The logs' eval_samples
# key says 50,000 and 10,000: the data set, not the padded batches.)
_ROWS: tuple[Row, ...] = (
    Row("M1", "TPU v3, 16 chips", "resnet50", "tpu-v3", "4x4", "data=16", 0.1311, overrides={"global_batch": 4096}, options=resnet_tf1(32, 16, None),
        **eval_interval(1252, 4096, 13 * 4096), source="measurements.md M1 (MLPerf v0.6, R06 Google tpu-v3-32; eval_batch_size=4096)"),
    Row("M2", "TPU v3, 1024 chips (pod)", "resnet50", "tpu-v3", "32x32", "data=1024", 0.0251, overrides={"global_batch": 32768},
        options=replace(resnet_tf1(2048, 1024, None, 8), input_pipeline="jpeg"), **eval_interval(157, 32768, 2 * 32768), assumed=JPEG_NOTE,
        source="measurements.md M2 (MLPerf v0.6, R06 Google tpu-v3-2048; eval_batch_size=32768)"),
    Row("M3", "TPU v3, 4096 chips (multipod)", "resnet50", "tpu-v3-multipod", "32x128", "data=4096", 0.0141,
        overrides={"global_batch": 65536}, options=resnet_tf1(8192, 4096, None, 8), **eval_interval(79, 65536, 65536), assumed=MULTIPOD_NOTE,
        source="measurements.md M3 (MLPerf v0.7, R07 Google tpu-v3-8192-TF; eval_batch_size=65536)"),
    # hardware.md ml.12 gave ~92.7 ms, the slowest of the five runs (result_0: 92.4 ms per step over
    # its intervals); pooled over the five by measurements.md's method (its caveat 10: ~79 ms):
    Row("ML12", "TPU v3, 256 chips", "resnet50", "tpu-v3", "16x16", "data=256", 0.07896, overrides={"global_batch": 32768},
        options=replace(resnet_tf1(512, 256, None), input_pipeline="jpeg"), assumed=JPEG_NOTE,
        **eval_interval(157, 32768, 2 * 32768),
        source="hardware.md ml.12 (MLPerf v0.6, R06 Google tpu-v3-512: num_cores=512, distributed_group_size=1, eval_batch_size=32768), "
               "its step re-derived from mlcommons/training_results_v0.6@f312518c2d6107eec983750eed23950f1f0c8a0e "
               "Google/results/tpu-v3-512/resnet/result_*.txt: median 12.3975 s over 80 intervals / 157 steps (iterations_per_loop)"),
    Row("M4", "TPU v4, 8 chips", "resnet50", "tpu-v4", "2x2x2", "data=8", 0.0736, overrides={"global_batch": 2048}, options=resnet_tf1(16, 8, None),
        **eval_interval(2502, 2048, 25 * 2048),
        assumed="fp32 gradients (CrossShardOptimizer: no bfloat16_replica_threshold in the round 0.7 code)",
        source="measurements.md M4 (MLPerf v0.7, R07 Google tpu-v4-16-TF; eval_batch_size=2048)"),
    Row("M5", "TPU v4, 3456 chips", "resnet50", "tpu-v4", "12x12x24", "data=3456", 0.00698, overrides={"global_batch": 55296}, options=resnet_tf1(3456, 3456, 8192, 4),
        **eval_interval(93, 55296, 55296), assumed="slice 12x12x24 (3456 chips)",
        source="measurements.md M5 (MLPerf v1.0, R10 Google tpu-v4-6912-TF; eval_batch_size=55296)"),
    Row("M6", "TPU v4, 4096 chips (pod)", "resnet50", "tpu-v4", "16x16x16", "data=4096", 0.0034, kind="range", measured_hi_s=0.0042,
        overrides={"global_batch": 32768}, options=resnet_tf1(4096, 4096, 8192, 8), source="measurements.md M6 (MLPerf v2.0, R20; low confidence: 3.4-4.2 ms)"),
    Row("M7", "TPU v3, 4096 chips (multipod)", "bert-large", "tpu-v3-multipod", "32x128", "data=4096", 0.0466,
        overrides={"global_batch": 8192}, options=UNFUSED, **eval_interval(62, 8192, 2 * 8192), remat_stated=True,
        assumed=MULTIPOD_NOTE + "; unfused attention; " + TF1_BERT_REMAT,
        source="measurements.md M7 (MLPerf v0.7, R07 Google tpu-v3-8192-TF; eval_batch_size=8192, max_eval_steps=2)"),
    Row("M8", "TPU v4, 8 chips", "bert-large", "tpu-v4", "2x2x2", "data=8", 0.2333, overrides={"global_batch": 256},
        options=UNFUSED, **eval_interval(1953, 256, 40 * 256), remat_stated=True, assumed="unfused attention; " + TF1_BERT_REMAT,
        source="measurements.md M8 (MLPerf v0.7, R07 Google tpu-v4-16-TF; eval_batch_size=256, max_eval_steps=40)"),
    Row("M9", "TPU v4, 2048 chips", "bert-large", "tpu-v4", "8x16x16", "data=2048", 0.0344, overrides={"global_batch": 6144},
        options=UNFUSED, **eval_interval(33, 6144, 2 * 6144), remat_stated=True, assumed="unfused attention; " + TF1_BERT_REMAT,
        source="measurements.md M9 (MLPerf v1.0, R10 Google tpu-v4-4096-TF; eval_batch_size=6144, max_eval_steps=2)"),
    Row("M10", "TPU v5e, 16 x 256 chips (multislice)", "gpt3-175b", "tpu-v5e", "16x16", "fsdp=128,tensor=2,dcn=16", 9.09, slices=16,
        overrides={"global_batch": 2048}, options=GenerateOptions(precision=INT8, recompute="full", attention="materialized", **MEGATRON),
        kind="upper_bound", **GPT3_EVAL_INTERVAL, remat_stated=True,
        assumed="in-slice sharding fsdp 128 x tensor 2 (not in the repo); " + M10_CODE, source="measurements.md M10 (MLPerf v3.1, R31); " + M10_SOURCES),
    Row("M11", "TPU v5p, 512 chips", "gpt3-175b", "tpu-v5p", "8x8x8", "fsdp=64,tensor=8", 23.81,
        overrides={"global_batch": 2048}, options=GenerateOptions(**MAXTEXT_INT8, recompute=MAXTEXT_REMAT["full"], **MAXTEXT), kind="upper_bound",
        **GPT3_EVAL_INTERVAL, assumed=maxtext_remat_note("full"), remat_stated=True, source="measurements.md M11 (MLPerf v4.0, R40 v5p-1024)"),
    Row("M12", "TPU v5p, 6144 chips", "gpt3-175b", "tpu-v5p", "8x16x48", "data=16,fsdp=48,tensor=8", 5.97,
        overrides={"global_batch": 6144}, options=GenerateOptions(**MAXTEXT_INT8, recompute=MAXTEXT_REMAT["save_dot_except_logits"], **MAXTEXT), kind="upper_bound",
        **GPT3_EVAL_INTERVAL, assumed=maxtext_remat_note("save_dot_except_logits"), remat_stated=True, source="measurements.md M12 (MLPerf v4.0, R40 v5p-12288)"),
    Row("M13", "TPU v5p, 2048 chips", "gpt3-175b", "tpu-v5p", "4x8x64", "data=4,fsdp=64,tensor=8", 11.25,
        overrides={"global_batch": 4096}, options=GenerateOptions(**MAXTEXT_INT8, recompute=MAXTEXT_REMAT["save_dot_except_mlpwi"], **MAXTEXT), kind="upper_bound",
        **GPT3_EVAL_INTERVAL, assumed=maxtext_remat_note("save_dot_except_mlpwi"), remat_stated=True, source="measurements.md M13 (MLPerf v4.1, R41 v5p-4096)"),
    Row("M14", "TPU v6e, 8 x 256 chips (multislice)", "gpt3-175b", "tpu-v6e", "16x16", "fsdp=256,dcn=8", 10.75, slices=8,
        overrides={"global_batch": 4096}, options=GenerateOptions(**MAXTEXT_INT8_TFF, recompute="full"), kind="upper_bound", **GPT3_EVAL_INTERVAL,
        assumed=TRILLIUM_NOTE, remat_stated=True, source=f"measurements.md M14 (MLPerf v4.1, R41 trillium-2048); {TRILLIUM_SCRIPTS}trillium-2048.sh"),
    Row("M15", "TPU v6e, 2 x 256 chips (multislice)", "gpt3-175b", "tpu-v6e", "16x16", "fsdp=256,dcn=2", 15.88, slices=2,
        overrides={"global_batch": 1536}, options=GenerateOptions(**MAXTEXT_INT8_TFF, recompute="full"), kind="upper_bound", **GPT3_EVAL_INTERVAL,
        assumed=TRILLIUM_NOTE, remat_stated=True,
        source=f"measurements.md M15 (MLPerf v4.1, R41 trillium-512); {TRILLIUM_SCRIPTS}trillium-512.sh"),
    Row("M16", "TPU v4, 2048 chips", encoder_lm("lm-482b", 64, 16384, 131072, 256, 4096, "measurements.md M16", **LINGVO_DENSE_BUILDER), "tpu-v4", "8x16x16",
        "fsdp=256,tensor=8", 22.0, options=replace(UNFUSED, recompute="full", optimizer="adafactor", **GSPMD_SHARDED),
        assumed="mesh [256, 8] as fsdp x tensor; bf16; " + M16_REMAT + "; unfused attention; " + M16_CODE + "; " + SHARDED_NOTE,
        remat_stated=True,
        source="measurements.md M16 (MLPerf v1.1 open, R11 tpu-v4-4096-TF)"),
    Row("M17", "TPU v4, 1024 chips", encoder_lm("lm-200b", 66, 12288, 98304, 128, 4096, "measurements.md M17"), "tpu-v4", "8x8x16",
        "fsdp=64,tensor=16", 16.8,
        options=GenerateOptions(recompute="save_attention", optimizer="adafactor_int8_momentum", attention="materialized", **GSPMD_SHARDED),
        assumed="mesh [1, 64, 16] as fsdp x tensor; " + M17_CODE + "; unfused attention; " + SHARDED_NOTE,
        remat_stated=True, source="measurements.md M17 (MLPerf v1.1 open, R11 tpu-v4-2048-JAX)"),
    Row("P1", "TPU v4, 2 pods x 3072 chips", "palm-540b", "tpu-v4", "12x16x16", "fsdp=256,tensor=12,dcn=2", 17.6, slices=2,
        options=GenerateOptions(recompute="full", attention="materialized", **MEGATRON), assumed=PALM_REMAT + "; unfused attention",
        remat_stated=True, source="measurements.md P1 (Chowdhery et al. 2022 §4.1, Table 3)"),
    # PaLM on one of its pods at half the batch: "about 1.95x" the single-pod throughput on two
    # (§4), so ~122K tok/s and ~17.2 s per step (approximate; measurements.md caveat 8)
    Row("P1a", "TPU v4, 1 pod x 3072 chips", "palm-540b", "tpu-v4", "12x16x16", "fsdp=256,tensor=12", 17.2,
        overrides={"global_batch": 1024}, options=GenerateOptions(recompute="full", attention="materialized", **MEGATRON),
        assumed="approximate: the paper's 'about 1.95x' on two pods; " + PALM_REMAT + "; unfused attention",
        remat_stated=True, source="measurements.md caveat 8 (P1 on one pod at half the batch; Chowdhery et al. 2022 §4)"),
    # The Trillium GPT-3 series' other two points (measurements.md caveat 10): the same script as
    # M14 (per_device_batch_size=2, ici_fsdp_parallelism=-1, remat full, int8 with tff_quant) on 4 and 12 slices.
    # Step: the median interval between eval points (the first after run_start left out), pooled
    # over the three runs, / the 24,576 sequences per interval over the global batch (an upper
    # bound: each interval also runs one eval pass, caveat 3).
    Row("T4", "TPU v6e, 4 x 256 chips (multislice)", "gpt3-175b", "tpu-v6e", "16x16", "fsdp=256,dcn=4", 10.734, slices=4,
        overrides={"global_batch": 2048}, options=GenerateOptions(**MAXTEXT_INT8_TFF, recompute="full"), kind="upper_bound", **GPT3_EVAL_INTERVAL,
        assumed=TRILLIUM_NOTE, remat_stated=True,
        source=f"measurements.md caveat 10: {R41} Google/results/cloud-tpu-trillium-1024-maxtext/gpt3/result_0..2.txt "
               "(median 128.81 s over 66 intervals / 12 steps), Google/benchmarks/gpt3/implementations/maxtext/cloud-tpu-trillium/trillium-1024.sh"),
    Row("T12", "TPU v6e, 12 x 256 chips (multislice)", "gpt3-175b", "tpu-v6e", "16x16", "fsdp=256,dcn=12", 10.803, slices=12,
        overrides={"global_batch": 6144}, options=GenerateOptions(**MAXTEXT_INT8_TFF, recompute="full"), kind="upper_bound", **GPT3_EVAL_INTERVAL,
        assumed=TRILLIUM_NOTE, remat_stated=True,
        source=f"measurements.md caveat 10: {R41} Google/results/cloud-tpu-trillium-3072-maxtext/gpt3/result_0..2.txt "
               "(median 43.21 s over 82 intervals / 4 steps), Google/benchmarks/gpt3/implementations/maxtext/cloud-tpu-trillium/trillium-3072.sh"),
)


def _dated(row: Row) -> Row:
    """The row with its date, corpus, pooled intervals and whether its source states its setup."""
    row = replace(row, stated=row.id not in NOT_STATED)
    if row.id in _POOLED:
        median, n, q1, q3 = _POOLED[row.id]
        row = replace(row, intervals=Pooled(median, n, q1, q3))
    if row.id in _ROUND:
        return replace(row, published=MLPERF_ROUND_PUBLISHED[_ROUND[row.id]], corpus="mlperf-training")
    return replace(row, published=PALM_PUBLISHED, corpus="paper")


SHEET_ROWS: tuple[Row, ...] = tuple(_dated(r) for r in _ROWS)

SHEET_SERIES: tuple[Series, ...] = (
    Series("GPT-3 175B on Trillium v6e-256 slices (MLPerf v4.1, R41)", ("M15", "T4", "M14", "T12")),
    Series("PaLM 540B on v4 pods (Chowdhery et al. 2022)", ("P1a", "P1")),
)
