"""Every Google TPU submission of MLPerf Training (rounds 0.6 to 5.1) that podsim can model and that
measurements.md does not already hold, each with the setup its own scripts state (issue 32).

Rounds with Google TPU results: 0.6, 0.7, 1.0, 1.1, 2.0, 3.1, 4.0, 4.1 and 5.0 (2.1, 3.0 and 5.1 have
none). Benchmarks podsim models: ResNet-50, BERT-large and GPT-3 175B (the generator's presets;
the round 1.1 open BERT-style LMs are M16 and M17 already). Each row's step comes from the run's
own MLLOG result files exactly as measurements.md's method section says: the median interval
between consecutive eval points (eval_accuracy), the first interval of each run left out, pooled
over the runs, divided by the steps per interval the run script states (iterations_per_loop,
steps_per_loop, or the log's sample counters). Such an interval holds one eval pass, so the row is
an upper bound (`kind="upper_bound"`) carrying the samples trained and evaluated per interval
(split rule R6). Logs that time training in blocks apart from eval (R07-bert-16) give a
training-only step (`kind="measured"`). `benchmarks/mlperf_rows.py intervals DIR` re-derives any
row's figures from a checkout of the results repository.

Result folders left out (Google/results/<folder>/<benchmark>), and why:

- benchmarks podsim has no model of (the generator builds decoders, BERT-style encoders and
  ResNet-50 only): SSD, Mask R-CNN, GNMT, Transformer (NMT, encoder-decoder), DLRM, MiniGo,
  U-Net3D, Stable Diffusion. Round 0.6: ssd on tpu-v3-32/128/256/512/1024/2048, transformer on
  the same six, gnmt on tpu-v3-32/128/256/512/1024, mask on tpu-v3-32/128/256. Round 0.7:
  tpu-v3-1024-TF gnmt, maskrcnn; tpu-v3-4096-JAX ssd; tpu-v3-8192-JAX transformer;
  tpu-v3-8192-TF ssd, transformer; tpu-v4-16-TF dlrm, gnmt, maskrcnn, ssd, transformer;
  tpu-v4-128-TF dlrm, gnmt, maskrcnn, minigo, ssd, transformer; tpu-v4-512-TF gnmt, maskrcnn,
  ssd, transformer. Round 1.0: tpu-v4-128-JAX and tpu-v4-1024-JAX unet3d; tpu-v4-128-TF dlrm,
  maskrcnn, ssd; tpu-v4-256-TF dlrm; tpu-v4-2048-TF maskrcnn; tpu-v4-4096-TF ssd. Round 2.0:
  cloud-tpu-v4-2048-TF maskrcnn; cloud-tpu-v4-4096-TF maskrcnn, ssd; research-tpu-v4-256-TF dlrm.
  Round 4.1: cloud-tpu-v5p-16/128/1024/2048-maxdiffusion stable_diffusion. Round 5.0:
  cloud-tpu-trillium-256-maxdiffusion stable_diffusion;
- a step podsim cannot express honestly:
  - round 0.7 tpu-v3-8192-JAX bert: weight-update sharding (run script `--enable_wus`,
    `--xla_jf_auto_cross_replica_sharding=true`; Xu et al. 2020): gradients reduce-scattered, the
    LAMB update on 1/4096 of the weights per chip, the weights all-gathered. podsim's data-parallel
    step updates every weight on every chip, and its FSDP gathers every layer twice per step;
  - round 1.0 tpu-v4-128-TF bert and round 2.0 cloud-tpu-v4-8192-TF bert: sequence-length
    bucketing (`--seq_len_buckets` 128/256/512 and 64..512, `--batch_size_buckets`): each step
    runs several shorter sequence lengths, set by the data; podsim runs fixed-length sequences
    (measurements.md caveat 7 found the second at about 100% of peak if padded to 512);
  - round 1.0 tpu-v4-256-JAX-Distributed-Shampoo resnet (open division): the Distributed Shampoo
    optimizer's preconditioners (matrix roots every few steps); podsim's update is Adam-style;
- not a TPU: round 0.7 gpu-v100-8-TF2.0 bert, resnet; round 5.0 h200_nemo, h200_n8_nemo;
- already rows of measurements.md or its caveats (podsim.validation.sheet_rows): M1-M17, ML12,
  T4, T12. (Round 1.0 tpu-v4-6912-TF bert and round 2.0 cloud-tpu-v4-6912-TF bert, which
  measurements.md caveat 7 leaves out for their spread, are rows here: R10-bert-3456 and
  R20-bert-3456, their interquartile ranges in their sources.) No Google TPU entry is a Llama 2
  70B LoRA or a Llama 3.1 run.

Setups follow podsim.validation.table's rules (flash vs materialised attention by date; remat
where stated, else the least that fits HBM) and the option sets of podsim.validation.row: the TF1
gradient path (`resnet_tf1`, `UNFUSED`), MaxText's sharded activations and collective matmul
(`MAXTEXT`). `assumed` names what the code leaves open and what podsim takes.
"""

from __future__ import annotations

from dataclasses import replace

from podsim.trace.generate import GenerateOptions
from podsim.validation.mlperf_rows_logs import Pooled
from podsim.validation.row import (
    GPT3_EVAL_INTERVAL,
    JPEG_NOTE,
    MAXTEXT,
    MAXTEXT_INT8,
    MAXTEXT_REMAT,
    MULTIPOD_NOTE,
    R41,
    TF1_BERT_REMAT,
    UNFUSED,
    Row,
    Series,
    eval_interval,
    maxtext_remat_note,
    resnet_tf1,
)
from podsim.validation.sheet_rows import MLPERF_ROUND_PUBLISHED

R06 = "mlcommons/training_results_v0.6@f312518c2d6107eec983750eed23950f1f0c8a0e"
R07 = "mlcommons/training_results_v0.7@0a8a85a209c8e45b661596c382cc20f4e32fd2fe"
R10 = "mlcommons/training_results_v1.0@50619b5df63f1d646715a82c1fb8c35f271e25fa"
R20 = "mlcommons/training_results_v2.0@8437fbb78349aa3c3054aeccb1d47d2a315a80e7"
R40 = "mlcommons/training_results_v4.0@6fe954378efe4a1a1bd665550b18ff8f26018def"

# Eval samples per interval (split rule R6): what the chips run in one eval pass, as
# podsim.validation.sheet_rows states for its rows. ResNet: ceil(50,000 / eval_batch_size) steps of
# eval_batch_size images (resnet_main.py `eval_steps`; the round 0.7 TF2 code's common.py
# get_num_eval_steps and the JAX train.py's steps_per_eval likewise, the JAX per-device eval batch
# ceil(50,000 / 8192) = 7); BERT: max_eval_steps batches of eval_batch_size sequences
# (util/train_and_eval_runner.py `repeat(eval_steps, eval_step)`), from each run script. The logs'
# eval_samples key gives the data set (50,000 images; 10,000 sequences), not the padded batches.

# The hosts of the TF ResNet code on v4 decode JPEGs every step below a replica count
# (resnet_main.py: cache_decoded_image only when num_replicas > 2048 in round 0.7, >= 512 from round
# 1.0); no v4 host decode rate is published, so podsim runs no host input for them, as for M4.
V4_JPEG_NOTE = "hosts decode JPEGs every step (the code caches decoded images only for more replicas); no v4 host rate is published: host input not modelled, as M4"
TF1_REPLICAS_NOTE = "num_tpu_cores = 2 x chips (a replica per TensorCore): podsim's transformer step runs one replica per chip, as M7-M9"
V4_CUBE = "slice 4x4x4 (the script states no topology: the 64-chip cube)"
V4_256 = "slice 4x8x8 (the script states no topology: the k x 2k x 2k shape of 256 chips)"
V4_2048 = "slice 8x16x16 (the script states no topology: as M9)"
V4_3456 = "slice 12x12x24 (the script states no topology: as M5)"


def _logs(repo: str, folder: str, median_s: float, n: int, iqr: tuple[float, float], steps: int, per: str, scripts: str) -> dict:
    """The row's source (the result files read, the derivation's figures, where the steps come from,
    then `scripts`: the run's script and system files) and its pooled intervals."""
    return {"source": f"{repo} Google/results/{folder}/result_*.txt: median {median_s} s over {n} intervals "
                      f"(IQR {iqr[0]}-{iqr[1]} s) / {steps} steps ({per}); {scripts}",
            "intervals": Pooled(median_s, n, iqr[0], iqr[1])}


_ROWS: tuple[tuple[str, Row], ...] = (
    # Round 0.6, TPU v3, TF 1.14 (resnet_main.py per size; CrossShardOptimizer: fp32 gradients)
    ("0.6", Row("R06-resnet-64", "TPU v3, 64 chips", "resnet50", "tpu-v3", "8x8", "data=64", 0.1309,
                overrides={"global_batch": 16384}, options=resnet_tf1(128, 64, None), **eval_interval(313, 16384, 4 * 16384),
                assumed="--cache_decoded_image=True: no host decode",
                **_logs(R06, "tpu-v3-128/resnet", 40.973, 71, (40.955, 40.986), 313, "iterations_per_loop",
                      "Google/benchmarks/resnet/tpu-v3-128/run_and_time.sh (num_cores=128); Google/systems/tpu-v3-128.json (1 x 64)"))),
    ("0.6", Row("R06-resnet-128", "TPU v3, 128 chips", "resnet50", "tpu-v3", "8x16", "data=128", 0.1363,
                overrides={"global_batch": 32768}, options=replace(resnet_tf1(256, 128, None), input_pipeline="jpeg"),
                **eval_interval(157, 32768, 2 * 32768), assumed=JPEG_NOTE,
                **_logs(R06, "tpu-v3-256/resnet", 21.404, 83, (21.284, 23.033), 157, "iterations_per_loop",
                      "Google/benchmarks/resnet/tpu-v3-256/run_and_time.sh (num_cores=256, distributed_group_size=1); Google/systems/tpu-v3-256.json"))),
    ("0.6", Row("R06-resnet-512", "TPU v3, 512 chips", "resnet50", "tpu-v3", "16x32", "data=512", 0.04397,
                overrides={"global_batch": 32768}, options=replace(resnet_tf1(1024, 512, None), input_pipeline="jpeg"),
                **eval_interval(157, 32768, 2 * 32768), assumed=JPEG_NOTE + "; one of the 5 runs logged 'abort' (its intervals kept)",
                **_logs(R06, "tpu-v3-1024/resnet", 6.903, 85, (6.7725, 7.0345), 157, "iterations_per_loop",
                      "Google/benchmarks/resnet/tpu-v3-1024/run_and_time.sh (num_cores=1024, distributed_group_size=1); Google/systems/tpu-v3-1024.json"))),
    # Round 0.7
    ("0.7", Row("R07-resnet-16", "TPU v3, 16 chips (TF2)", "resnet50", "tpu-v3", "4x4", "data=16", 0.1281,
                overrides={"global_batch": 4096}, options=resnet_tf1(32, 16, None), **eval_interval(1248, 4096, 13 * 4096),
                assumed="TF2 custom loop: tape.gradient, then the optimizer's all-reduce of every fp32 gradient (the TF1 path); "
                        "32 replicas (a replica per TensorCore); Keras batch norm per replica; --cache_decoded_image",
                **_logs(R07, "tpu-v3-32-TF2.0/resnet", 159.8655, 40, (159.837, 159.9253), 1248,
                             "epochs_between_evals=4 x 312 steps per epoch: common.py drop_train_remainder=True",
                      "Google/benchmarks/resnet/tpu-v3-32-TF2.0/run_and_time.sh; resnet_runnable.py; Google/systems/tpu-v3-32-TF2.0.json (2 x 8)"))),
    ("0.7", Row("R07-bert-16", "TPU v3, 16 chips (TF2)", "bert-large", "tpu-v3", "4x4", "data=16", 0.4605,
                overrides={"global_batch": 448}, options=replace(UNFUSED, grad_bytes=4), intervals=Pooled(514.355, 55, 514.22, 514.442),
                assumed="unfused attention; TF2 custom loop: tape.gradient, then apply_gradients' implicit all-reduce (explicit_allreduce=False) "
                        "of the fp32 gradients after backward (the TF1 path); 32 replicas, podsim one per chip",
                source=f"{R07} Google/results/tpu-v3-32-TF2.0/bert/result_*.txt: training-only blocks (block_start->block_stop, eval timed "
                       "apart), median 514.355 s over 55 blocks (the first of each of 10 runs left out; IQR 514.220-514.442 s) / 1117 steps "
                       "(--steps_per_loop=1117); Google/benchmarks/bert/tpu-v3-32-TF2.0/run_and_time.sh (--dtype=bf16, train_batch_size=448)")),
    ("0.7", Row("R07-resnet-4096-jax", "TPU v3, 4096 chips (multipod, JAX)", "resnet50", "tpu-v3-multipod", "32x128", "data=4096", 0.01441,
                overrides={"global_batch": 65536}, options=resnet_tf1(8192, 4096, None, 8), **eval_interval(79, 65536, 8192 * 7),
                assumed=MULTIPOD_NOTE + "; JAX: value_and_grad then one lax.pmean of the fp32 gradient tree (the TF1 path); a device "
                        "per TensorCore; batchnorm_span 64 = 8 replicas (train.py defaults); decoded images cached (device_count > 64)",
                **_logs(R07, "tpu-v3-8192-JAX/resnet", 1.138, 104, (1.136, 1.139), 79, "train.py: ceil(4 epochs x 1281167 / 65536)",
                      "Google/benchmarks/resnet/tpu-v3-8192-JAX/run_and_time.sh (--batch_size=65536); Google/systems/tpu-v3-8192-JAX.json (512 x 8)"))),
    ("0.7", Row("R07-resnet-64", "TPU v4, 64 chips", "resnet50", "tpu-v4", "4x4x4", "data=64", 0.03913,
                overrides={"global_batch": 8192}, options=resnet_tf1(64, 64, None), **eval_interval(625, 8192, 7 * 8192),
                assumed=f"{V4_CUBE}; fp32 gradients (CrossShardOptimizer: no bfloat16_replica_threshold in this code); {V4_JPEG_NOTE}",
                **_logs(R07, "tpu-v4-128-TF/resnet", 24.458, 46, (24.4528, 24.4612), 625, "iterations_per_loop",
                      "Google/benchmarks/resnet/tpu-v4-128-TF/run_and_time.sh (num_replicas=64, distributed_group_size=1); Google/systems/tpu-v4-128-TF.json (1 x 64)"))),
    ("0.7", Row("R07-bert-64", "TPU v4, 64 chips", "bert-large", "tpu-v4", "4x4x4", "data=64", 0.3310,
                overrides={"global_batch": 3072}, options=UNFUSED, **eval_interval(163, 3072, 4 * 3072),
                remat_stated=True,
                assumed=f"{V4_CUBE}; unfused attention; {TF1_BERT_REMAT}; {TF1_REPLICAS_NOTE}",
                **_logs(R07, "tpu-v4-128-TF/bert", 53.948, 44, (53.945, 53.952), 163, "iterations_per_loop",
                      "Google/benchmarks/bert/tpu-v4-128-TF/run_and_time.sh (num_tpu_cores=128, use_bfloat16_all_reduce)"))),
    ("0.7", Row("R07-resnet-256", "TPU v4, 256 chips", "resnet50", "tpu-v4", "4x8x8", "data=256", 0.01428,
                overrides={"global_batch": 8192}, options=resnet_tf1(512, 256, None, 4), **eval_interval(626, 8192, 7 * 8192),
                assumed=f"{V4_256}; fp32 gradients (CrossShardOptimizer); {V4_JPEG_NOTE}",
                **_logs(R07, "tpu-v4-512-TF/resnet", 8.937, 45, (8.9195, 8.965), 626, "iterations_per_loop; steps_per_eval says 625",
                      "Google/benchmarks/resnet/tpu-v4-512-TF/run_and_time.sh (num_replicas=512, distributed_group_size=4); Google/systems/tpu-v4-512-TF.json (1 x 256)"))),
    ("0.7", Row("R07-bert-256", "TPU v4, 256 chips", "bert-large", "tpu-v4", "4x8x8", "data=256", 0.1109,
                overrides={"global_batch": 3072}, options=UNFUSED, **eval_interval(163, 3072, 4 * 3072),
                remat_stated=True,
                assumed=f"{V4_256}; unfused attention; {TF1_BERT_REMAT}; {TF1_REPLICAS_NOTE}",
                **_logs(R07, "tpu-v4-512-TF/bert", 18.0825, 40, (18.0645, 18.1975), 163, "iterations_per_loop",
                      "Google/benchmarks/bert/tpu-v4-512-TF/run_and_time.sh (num_tpu_cores=512, use_bfloat16_all_reduce)"))),
    # Round 1.0 (TF, logical_devices=1: one replica per chip; bfloat16_replica_threshold=8192)
    ("1.0", Row("R10-resnet-64", "TPU v4, 64 chips", "resnet50", "tpu-v4", "4x4x4", "data=64", 0.03714,
                overrides={"global_batch": 8192}, options=resnet_tf1(64, 64, 8192), **eval_interval(625, 8192, 7 * 8192),
                assumed=f"{V4_CUBE}; {V4_JPEG_NOTE}",
                **_logs(R10, "tpu-v4-128-TF/resnet", 23.215, 45, (23.203, 23.221), 625, "iterations_per_loop",
                      "Google/benchmarks/resnet/implementations/tpu-v4-128-TF/run_and_time.sh; Google/systems/tpu-v4-128-TF.json (16 x 4)"))),
    ("1.0", Row("R10-resnet-2048", "TPU v4, 2048 chips", "resnet50", "tpu-v4", "8x16x16", "data=2048", 0.006892,
                overrides={"global_batch": 32768}, options=resnet_tf1(2048, 2048, 8192, 4), **eval_interval(157, 32768, 2 * 32768),
                assumed=f"{V4_2048}; decoded images cached (num_replicas >= 512)",
                **_logs(R10, "tpu-v4-4096-TF/resnet", 1.082, 65, (1.075, 1.0895), 157, "iterations_per_loop",
                      "Google/benchmarks/resnet/implementations/tpu-v4-4096-TF/run_and_time.sh (distributed_group_size=4); Google/systems/tpu-v4-4096-TF.json (512 x 4)"))),
    ("1.0", Row("R10-bert-3456", "TPU v4, 3456 chips", "bert-large", "tpu-v4", "12x12x24", "data=3456", 0.02074,
                overrides={"global_batch": 6912}, options=UNFUSED, **eval_interval(33, 6912, 2 * 6912),
                remat_stated=True,
                assumed=f"{V4_3456}; unfused attention; {TF1_BERT_REMAT}; intervals of 0.5-2.8 s, longest early in each run (measurements.md caveat 7)",
                **_logs(R10, "tpu-v4-6912-TF/bert", 0.6845, 134, (0.6008, 0.7907), 33, "iterations_per_loop",
                      "Google/benchmarks/bert/implementations/tpu-v4-6912-TF/run_and_time.sh (num_tpu_cores=3456); Google/systems/tpu-v4-6912-TF.json (864 x 4)"))),
    # Round 2.0 (TF, as round 1.0's code)
    ("2.0", Row("R20-resnet-3456", "TPU v4, 3456 chips", "resnet50", "tpu-v4", "12x12x24", "data=3456", 0.006774,
                overrides={"global_batch": 55296}, options=resnet_tf1(3456, 3456, 8192, 4), **eval_interval(93, 55296, 55296),
                assumed=f"{V4_3456}; decoded images cached (num_replicas >= 512)",
                **_logs(R20, "cloud-tpu-v4-6912-TF/resnet", 0.63, 90, (0.6195, 0.636), 93, "iterations_per_loop",
                      "Google/benchmarks/resnet/implementations/cloud-tpu-v4-6912-TF/run_and_time.sh (distributed_group_size=4); Google/systems/cloud-tpu-v4-6912-TF.json (864 x 4)"))),
    ("2.0", Row("R20-bert-3456", "TPU v4, 3456 chips", "bert-large", "tpu-v4", "12x12x24", "data=3456", 0.02529,
                overrides={"global_batch": 6912}, options=UNFUSED, **eval_interval(33, 6912, 2 * 6912),
                remat_stated=True,
                assumed=f"{V4_3456}; unfused attention; {TF1_BERT_REMAT}; two modes: each run's first ~7 intervals 0.31-0.33 s, the rest 0.83-0.87 s",
                **_logs(R20, "cloud-tpu-v4-6912-TF/bert", 0.8345, 134, (0.323, 0.85), 33, "iterations_per_loop",
                      "Google/benchmarks/bert/implementations/cloud-tpu-v4-6912-TF/run_and_time.sh (num_tpu_cores=3456); Google/systems/cloud-tpu-v4-6912-TF.json"))),
    # Round 4.0, TPU v5p, MaxText f586e43 (the scripts' LIBTPU_INIT_ARGS decompose the all-gather einsums)
    ("4.0", Row("R40-gpt3-1024", "TPU v5p, 1024 chips", "gpt3-175b", "tpu-v5p", "8x8x16", "data=8,fsdp=16,tensor=8", 11.81,
                overrides={"global_batch": 2048}, options=GenerateOptions(**MAXTEXT_INT8, recompute=MAXTEXT_REMAT["save_dot_except_logits_ffn1"], **MAXTEXT),
                **GPT3_EVAL_INTERVAL, kind="upper_bound", remat_stated=True, assumed=maxtext_remat_note("save_dot_except_logits_ffn1"),
                **_logs(R40, "cloud-tpu-v5p-2048-maxtext/gpt3", 141.7715, 66, (141.747, 142.1332), 12, "24,576 sequences at 2048",
                      "Google/benchmarks/gpt3/implementations/maxtext/v5p-2048.sh (per_device_batch_size=2, ici data 8 fsdp 16 tensor 8, "
                  "int8, flash); Google/systems/cloud-tpu-v5p-2048-maxtext.json (256 x 4, 8x8x16)"))),
    ("4.0", Row("R40-gpt3-1536", "TPU v5p, 1536 chips", "gpt3-175b", "tpu-v5p", "8x12x16", "data=12,fsdp=16,tensor=8", 11.95,
                overrides={"global_batch": 3072}, options=GenerateOptions(**MAXTEXT_INT8, recompute=MAXTEXT_REMAT["save_dot_except_logits_ffn1"], **MAXTEXT),
                **GPT3_EVAL_INTERVAL, kind="upper_bound", remat_stated=True, assumed=maxtext_remat_note("save_dot_except_logits_ffn1"),
                **_logs(R40, "cloud-tpu-v5p-3072-maxtext/gpt3", 95.6145, 66, (95.586, 95.9143), 8, "24,576 sequences at 3072",
                      "Google/benchmarks/gpt3/implementations/maxtext/v5p-3072.sh (per_device_batch_size=2, ici data 12 fsdp 16 tensor 8, "
                  "int8, flash); Google/systems/cloud-tpu-v5p-3072-maxtext.json (384 x 4, 8x12x16)"))),
    # Round 4.1, TPU v5p, MaxText branch mlperf/4.1 (fused_qkv=true: the same matmul FLOPs)
    ("4.1", Row("R41-gpt3-4096", "TPU v5p, 4096 chips", "gpt3-175b", "tpu-v5p", "8x16x32", "data=16,fsdp=32,tensor=8", 6.177,
                overrides={"global_batch": 4096}, options=GenerateOptions(**MAXTEXT_INT8, recompute=MAXTEXT_REMAT["minimal"], **MAXTEXT),
                **GPT3_EVAL_INTERVAL, kind="upper_bound", remat_stated=True, assumed=maxtext_remat_note("minimal"),
                **_logs(R41, "cloud-tpu-v5p-8192-maxtext/gpt3", 37.062, 72, (37.0592, 37.066), 6, "24,576 sequences at 4096",
                      "Google/benchmarks/gpt3/implementations/maxtext/cloud-tpu-v5p/v5p-8192.sh (per_device_batch_size=1, ici data 16 "
                  "fsdp 32 tensor 8, int8, flash); Google/systems/cloud-tpu-v5p-8192-maxtext.json (1024 x 4, 8x16x32)"))),
    ("4.1", Row("R41-gpt3-6144", "TPU v5p, 6144 chips", "gpt3-175b", "tpu-v5p", "8x16x48", "data=16,fsdp=48,tensor=8", 5.991,
                overrides={"global_batch": 6144}, options=GenerateOptions(**MAXTEXT_INT8, recompute=MAXTEXT_REMAT["minimal"], **MAXTEXT),
                **GPT3_EVAL_INTERVAL, kind="upper_bound", remat_stated=True, assumed=maxtext_remat_note("minimal"),
                **_logs(R41, "cloud-tpu-v5p-12288-maxtext/gpt3", 23.964, 81, (23.9615, 23.967), 4, "24,576 sequences at 6144",
                      "Google/benchmarks/gpt3/implementations/maxtext/cloud-tpu-v5p/v5p-12288.sh (per_device_batch_size=1, ici data 16 "
                  "fsdp 48 tensor 8, int8, flash); Google/systems/cloud-tpu-v5p-12288-maxtext.json (1536 x 4, 8x16x48)"))),
)

# Each row's plan and options are its submission's scripts' (stated: split rule R2); the slice
# topology some scripts leave open (`assumed`) is the machine, not a choice of plan.
MLPERF_ROWS: tuple[Row, ...] = tuple(replace(row, published=MLPERF_ROUND_PUBLISHED[rnd], corpus="mlperf-training", stated=True)
                                     for rnd, row in _ROWS)

MLPERF_SERIES: tuple[Series, ...] = (
    Series("ResNet-50 on v3 slices (MLPerf v0.6, TF resnet_main.py)", ("M1", "R06-resnet-64", "R06-resnet-128", "ML12", "R06-resnet-512", "M2")),
    Series("ResNet-50 on v4 slices (MLPerf v0.7, TF resnet_main.py)", ("M4", "R07-resnet-64", "R07-resnet-256")),
    Series("BERT-large on v4 slices (MLPerf v0.7, TF run_pretraining.py)", ("M8", "R07-bert-64", "R07-bert-256")),
    Series("ResNet-50 on v4 slices (MLPerf v1.0, TF resnet_main.py)", ("R10-resnet-64", "R10-resnet-2048", "M5")),
    Series("GPT-3 175B on v5p slices (MLPerf v4.0, MaxText f586e43)", ("M11", "R40-gpt3-1024", "R40-gpt3-1536", "M12")),
    Series("GPT-3 175B on v5p slices (MLPerf v4.1, MaxText mlperf/4.1)", ("M13", "R41-gpt3-4096", "R41-gpt3-6144")),
)
