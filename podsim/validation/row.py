"""A validation row: one published measured training step and the setup podsim runs it with.

The rows live in modules by source (`sheet_rows`: measurements.md and its caveats);
`podsim.validation.table` gathers, runs and scores them. The option sets here (TF1's gradient
path, MaxText's sharded activations, ...) are what the rows' code states, each with its source,
shared by every row whose code states the same.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from podsim.topology import parse_shape
from podsim.trace.configs import PRESETS, TransformerConfig
from podsim.trace.generate import GenerateOptions
from podsim.validation.mlperf_rows_logs import Pooled


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
    remat_stated: bool = False  # the sheet states a remat policy; else the least recompute that fits HBM
    # the row's source states its plan and the options it runs with (split rule R2: only such a row
    # may calibrate); False where `assumed` fills a choice the source leaves open
    stated: bool = False
    assumed: str = ""
    source: str = ""
    published: str = ""  # ISO date the measurement was published (an MLPerf round's results day, a paper's arXiv v1)
    corpus: str = ""  # the family of sources the row comes from: mlperf-training, paper, maxtext, ...
    # An upper-bound row whose interval holds one eval pass (split rule R6): the samples trained and
    # the samples evaluated between two eval points, as the run's log states them (0: not such a row)
    train_samples_per_interval: int = 0
    eval_samples_per_interval: int = 0
    # The pooled intervals between eval points (or training blocks) the step derives from, as the
    # row's source gives them (median, count, quartiles; measurements.md's method): what the
    # measurement-quality rule reads (podsim.validation.quality). None: no intervals (a stated rate)
    intervals: Pooled | None = None

    @property
    def model_name(self) -> str:
        return self.model if isinstance(self.model, str) else self.model.name


@dataclass(frozen=True)
class Series:
    """One model measured at several slice counts (row ids, fewest slices first)."""

    name: str
    rows: tuple[str, ...]


def encoder_lm(name: str, layers: int, d: int, ffn: int, heads: int, batch: int, source: str, **shape) -> TransformerConfig:
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
# MaxText's `quantization=int8` (AQT) in the MLPerf GPT-3 scripts (round 4.0: google/maxtext f586e43;
# round 4.1: the scripts check out branch mlperf/4.1, no commit, and the round's systems files name the
# commit each ran, `sw_notes` of Google/systems/cloud-tpu-v5p-*-maxtext.json: AI-Hypercomputer/maxtext@07700cb,
# of cloud-tpu-trillium-*-maxtext.json: @a6b44b3, a later commit of the branch): only the DenseGeneral weight
# matmuls are quantized, forward, input gradient and weight gradient (MaxText/layers/quantizations.py
# int8 config, alike at both: fwd_bits=8, dlhs_bits=8, drhs_bits=8 with quantization_local_shard_count -1 = the slice
# count); the flash attention kernel takes no quantizer (layers/attentions.py) and the logits come from
# `shared_embedding.attend` ("We do not quantize the logits matmul.", layers/models.py): bf16.
MAXTEXT_INT8 = {"precision": INT8, "quantized_matmuls": "weights"}
# The Trillium (v6e) scripts of round 4.1 add `tff_quant=true` (mlcommons/training_results_v4.1
# Google/benchmarks/gpt3/implementations/maxtext/cloud-tpu-trillium/trillium-*.sh): the GPT-3 layer's
# attention output projection and MLP quantized in forward only, "since backward is already
# communication-bounded" (MaxText/layers/gpt3.py at a6b44b3: config_v3(fwd_bits=8, dlhs_bits=None,
# drhs_bits=None)); the switch reached mlperf/4.1 as `enable_tff_quant` (a08ba225, 2024-10-10 23:42
# UTC), after lizhiyu/mlperf4.1_quant had it on unconditionally (04af2e4 MLP 2024-10-04, 9813868
# attention output 2024-10-06); the Trillium runs started 2024-10-09 23:22 to 2024-10-11 16:11 UTC.
MAXTEXT_INT8_TFF = {"precision": INT8, "quantized_matmuls": "tff"}
TFF_NOTE = ("int8 (AQT) Q/K/V projections forward and backward; attention output projection and MLP int8 in forward only, "
            "their gradients bf16 (tff_quant); attention core and logits bf16")
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
# The 2021-2023 programs of the rows below state no collective matmul and predate the TPU compiler's
# current default (podsim.trace.defaults: every tensor-parallel einsum decomposed); they keep what
# podsim ran them with before that default (issue 32): none decomposed. P1, P1a and M10 state no
# sharded activations either: a Megatron all-reduce program, as before.
MAXTEXT = {"sequence_parallel": True, "collective_matmul": "all_gather"}
GSPMD_SHARDED = {"sequence_parallel": True, "collective_matmul": "exposed"}
MEGATRON = {"sequence_parallel": False, "collective_matmul": "exposed"}
SHARDED_NOTE = "activations sharded over the model axis between blocks (as sequence parallelism)"
MAXTEXT_NOTE = SHARDED_NOTE + "; collective matmul of the all-gathers only (the script's XLA flags)"
R41 = "mlcommons/training_results_v4.1@b87b9e396f771345d4ef122ba33456304f15228d"
# MaxText's remat policies in the MLPerf GPT-3 code as podsim's recompute policies (the round 4.0 scripts
# check out google/maxtext f586e43; the round 4.1 ones branch mlperf/4.1, whose commit the systems files
# name: AI-Hypercomputer/maxtext@07700cb for the v5p runs, @a6b44b3 for the Trillium runs, the policies
# below alike at both; MaxText/layers/models.py at each):
# - `minimal`: jax.checkpoint_policies.checkpoint_dots_with_no_batch_dims, every weight matmul's
#   output saved: podsim's `dots`;
# - `save_dot_except_logits_ffn1` and `save_dot_except_logits` (f586e43) save only the named Q/K/V
#   and out projections, 'wv_prod' (the attention context), 'ffn2' (the MLP's output) and, for the
#   second, 'ffn1', which MaxText/layers/linears.py names after the activation (line 226: GPT-3's
#   mlp_activations ["gelu"]), so GELU's backward still needs the input matmul's output, which no
#   saved name holds; `save_dot_except_mlpwi` (07700cb, a6b44b3) saves the projections and 'mlpwo'. Each
#   re-runs the MLP's input matmul and activation and the attention weights ('logits'): podsim's
#   `save_attention` (the extra 'ffn1' / 'ffn2' kept in HBM are not in podsim's count).
MAXTEXT_REMAT = {"minimal": "dots", "save_dot_except_logits_ffn1": "save_attention", "save_dot_except_logits": "save_attention",
                 "save_dot_except_mlpwi": "save_attention", "full": "full"}


def maxtext_remat_note(policy: str) -> str:
    """A GPT-3 row's note for its script's remat_policy (MAXTEXT_REMAT)."""
    return f"remat_policy={policy} as {MAXTEXT_REMAT[policy]}; " + MAXTEXT_NOTE
# The MLPerf GPT-3 benchmark (MLPerf v3.1 on): between two eval points a run trains 24,576 sequences
# (eval_accuracy every 50,331,648 tokens in every Google log) and evaluates 24,567 (the logs'
# eval_samples), whatever its batch (measurements.md caveat 3)
GPT3_EVAL_INTERVAL = {"train_samples_per_interval": 24576, "eval_samples_per_interval": 24567}
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


def resnet_tf1(replicas: int, chips: int, bf16_threshold: int | None, bn_group: int = 1) -> GenerateOptions:
    """The ResNet-50 submission's own settings (its run_and_time.sh and resnet_main.py):
    `num_cores`/`num_replicas` per chip (2: a replica per TensorCore), and the gradient all-reduce
    in bf16 when num_replicas <= bfloat16_replica_threshold, else fp32. The flag first appears in
    the round 1.0 code (R10 resnet-preview-TF-tpu-v4-*/resnet_main.py: `use_bf16_allreduce =
    num_replicas <= bfloat16_replica_threshold`, every run script passing 8192); the round 0.6 and
    0.7 TF code has no such flag and wraps the optimizer in CrossShardOptimizer, which sums the fp32
    gradients of the fp32 variables (R07 resnet-research-TF-tpu-v4-16/resnet_main.py line 286):
    pass None for those. `distributed_group_size` as `bn_group` (batch-norm statistics summed over
    that many replicas; default 1)."""
    bf16 = bf16_threshold is not None and replicas <= bf16_threshold
    return replace(TF1, replicas_per_chip=replicas // chips, grad_bytes=2 if bf16 else 4, bn_group=bn_group)


def eval_interval(steps: int, batch: int, eval_samples: int) -> dict:
    """An upper-bound row's interval (split rule R6): `steps` training steps of `batch` samples,
    then one eval pass over `eval_samples` samples (what the chips run: the script's eval batches
    times its eval steps, padding included)."""
    return {"kind": "upper_bound", "train_samples_per_interval": steps * batch, "eval_samples_per_interval": eval_samples}


# The TF1 BERT code of every round (run_pretraining.py, modeling.py: the rows' sources) recomputes
# nothing in backward: its rows state remat "none" (`remat_stated`), whatever podsim's HBM count says
TF1_BERT_REMAT = "no recompute (the TF1 BERT code has none)"


def row_key(row: Row) -> tuple:
    """A hashable key of everything a row's trace, step and scoring read (a Row holds dicts and
    configs, so it is not hashable itself): the key of the caches of podsim.validation.table and
    podsim.validation.split, so a row changed by `replace` under the same id is never served stale."""
    return (row.id, row.model if isinstance(row.model, str) else repr(row.model), row.generation, row.shape, row.plan, row.slices,
            repr(row.options), repr(sorted(row.overrides.items())), row.remat_stated, row.measured_s, row.measured_hi_s, row.kind,
            row.stated, row.train_samples_per_interval, row.eval_samples_per_interval)


def row_chips(row: Row) -> int:
    return math.prod(parse_shape(row.shape)) * row.slices


def per_chip_throughput(row: Row, step_s: float) -> float:
    """Sequences (images) per chip-second at this step time: the row's global batch / step / chips."""
    batch = row.overrides.get("global_batch") or (row.model.global_batch if not isinstance(row.model, str) else PRESETS[row.model].global_batch)
    return batch / step_s / row_chips(row)
