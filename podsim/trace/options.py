"""How a generated step runs beyond its model and plan: `GenerateOptions`, the one model of the
generator's options (a scenario's `options` sections and `podsim steptime --option KEY=VALUE`
validate into it), and the names of its choices.

The options whose default depends on the plan and the chip (`sequence_parallel`,
`collective_matmul`) default to None / "auto", which `podsim.trace.defaults` resolves as current
JAX/XLA programs run, with the source of each default, and the trace's meta records.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, get_args

from pydantic import ConfigDict

from podsim import quantities as q
from podsim.perf.chips import INPUT_PIPELINES
from podsim.trace.model import PRECISIONS
from podsim.trace.optimizers import OPTIMIZERS

Precision = Literal["bf16", "int8", "fp8"]  # PRECISIONS, as a type the scenario schema checks
Attention = Literal["flash", "materialized"]
Recompute = Literal["none", "minimal", "dots", "save_attention", "full"]
CollectiveMatmul = Literal["auto", "exposed", "chunked", "all_gather", "reduce_scatter", "hidden"]  # COLLECTIVE_MATMUL
InputPipeline = Literal["none", "jpeg"]  # podsim.perf.chips.INPUT_PIPELINES
QuantizedMatmuls = Literal["all", "weights", "tff"]  # QUANTIZED_MATMULS
Optimizer = Literal["adam", "adafactor", "adafactor_int8_momentum"]  # podsim.trace.optimizers.OPTIMIZERS
assert get_args(Precision) == PRECISIONS and get_args(InputPipeline) == INPUT_PIPELINES and get_args(Optimizer) == OPTIMIZERS


@dataclass(frozen=True)
class GenerateOptions:
    """How the step is run, beyond the model and the parallelism plan.

    The one model of these options: a scenario's `options` sections and `podsim steptime
    --option KEY=VALUE` validate into it directly (pydantic reads the field types and bounds,
    unknown keys refused), so a new option is one field here."""

    __pydantic_config__ = ConfigDict(extra="forbid")

    # None: 1 without a pipeline, else the largest divisor of the local batch <= 4p
    microbatches: q.MICROBATCHES.type | None = None
    # Activation recomputation: none; minimal (Korthikanti et al. 2022 selective: the attention
    # core, QK^T, softmax and AV, re-runs in backward); dots (JAX's checkpoint_dots_with_no_batch_dims,
    # MaxText's remat_policy 'minimal' at 76bd53b: the weight matmuls' outputs kept, the attention core,
    # the norms and the MLP's activation re-run); save_attention (only Q/K/V and the attention
    # output before and after its projection are kept: the MLP's input matmul and activation and the
    # attention core re-run; Lingvo-JAX's SAVE_DOT_FOR_MLPERF_200B, tensorflow/lingvo@0c5d29e
    # lingvo/jax/layers/repeats.py); full (each layer's forward re-runs). True/False: full/none.
    recompute: Recompute | bool = "none"
    precision: Precision = "bf16"  # matmul precision: bf16, or int8 / fp8 where the generation publishes the rate
    # Which matmuls run at a `precision` other than bf16 (QUANTIZED_MATMULS): all; weights (the
    # weight matmuls, forward and backward; the attention core and the LM head in bf16); tff (as
    # weights, but the attention output projection and the MLP quantized in their forward only);
    # None: as current programs run, weights (podsim.trace.defaults)
    quantized_matmuls: QuantizedMatmuls | None = None
    optimizer: Optimizer = "adam"  # the optimizer's state per parameter (podsim.trace.optimizers): adam, adafactor, ...
    # Overlap as XLA schedules it (each a switch so its effect can be measured):
    overlap_fsdp_prefetch: bool = True  # FSDP gathers of the next layer run under this layer's compute
    overlap_grad_reduce: bool = True  # FSDP reduce-scatters and in-slice data-parallel all-reduces overlap backward
    overlap_dcn: bool = True  # gradient all-reduces that cross slices (dcn) overlap backward
    # Tensor-parallel collectives and their adjacent matmuls (COLLECTIVE_MATMUL): auto (what the
    # compiler does today: podsim.trace.defaults); exposed; chunked (all-gathers and
    # reduce-scatters decomposed, XLA's windowed einsum); all_gather / reduce_scatter (only those);
    # hidden (beside the next compute: the ideal bound). True/False are accepted for chunked/exposed.
    collective_matmul: CollectiveMatmul | bool = "auto"
    attention: Attention = "flash"  # flash: fused, causal half, scores stay on chip; materialized: scores through HBM
    # Activations sharded over the tensor axis between blocks (Megatron sequence parallelism:
    # all-gather in, reduce-scatter out): None, as current JAX programs run (on with a tensor axis
    # that divides the sequence or the width: podsim.trace.defaults); True / False as asked.
    sequence_parallel: bool | None = None
    capacity_factor: q.CAPACITY_FACTOR.type = 1.0  # MoE dispatch buffer per expert / (tokens x top_k / experts)
    act_bytes: q.GRAD_BYTES.type = 2  # bf16 activations
    weight_bytes: q.GRAD_BYTES.type = 2  # bf16 weights as used and gathered
    grad_bytes: q.GRAD_BYTES.type = 2  # bf16 gradients as reduced (4: fp32)
    # XLA's all-reduce combiner on a TF1 program: the data-parallel gradient all-reduces merged
    # into one after the backward pass (then none overlaps backward, whatever overlap_grad_reduce says)
    combine_grad_reduce: bool = False
    # CNN data parallelism: one replica per TensorCore (TF's num_cores = 2 x chips on v2-v4)
    replicas_per_chip: q.REPLICAS_PER_CHIP.type = 1
    # CNN distributed batch norm: replicas whose batch statistics are summed (TF's distributed_group_size)
    bn_group: q.BN_GROUP.type = 1
    # The hosts' input pipeline (podsim.perf.chips.INPUT_PIPELINES): none (never holds a step up),
    # or jpeg (JPEGs decoded every step, at the generation's host rate); input_rate_per_host gives
    # the rate instead: images (CNN) or tokens (transformer) per second one host feeds its chips.
    input_pipeline: InputPipeline = "none"
    input_rate_per_host: q.INPUT_RATE.type | None = None
    mesh_order: tuple[str, ...] | None = None  # logical axes, heaviest first; None: by measured volume
    mesh: Mapping[str, str] | None = field(default=None, hash=False)  # explicit mapping {'tensor': 'z', ...}


OVERLAP_SWITCHES = ("overlap_fsdp_prefetch", "overlap_grad_reduce", "overlap_dcn", "collective_matmul")
RECOMPUTE_POLICIES = get_args(Recompute)  # least recompute first

QUANTIZED_MATMULS = get_args(QuantizedMatmuls)
"""Which matmuls a program with `precision` int8 or fp8 runs at that precision (the rest in bf16):

- `all`: every matmul, the attention core and the LM head included;
- `weights`: the weight matmuls (Q/K/V, attention output, MLP, router, experts), forward and
  backward, as MaxText's `quantization=int8` does: AQT wraps only the DenseGeneral layers' dot
  (MaxText/layers/quantizations.py `_get_int8_quant_config`: fwd, dlhs and drhs 8 bits), the
  flash attention kernel and the logits (`shared_embedding.attend`) stay in bf16
  (AI-Hypercomputer/maxtext@a6b44b3, the mlperf/4.1 branch);
- `tff`: as `weights`, but the attention output projection and the MLP quantized in their forward
  (and its recomputation) only, their gradients in bf16: the GPT-3 decoder's `tff_quant`
  (MaxText/layers/gpt3.py at a6b44b3, `config_v3(fwd_bits=8, dlhs_bits=None, drhs_bits=None)`,
  "quantize forward only since backward is already communication-bounded"), which the MLPerf
  v4.1 Trillium GPT-3 scripts turn on.
"""

COLLECTIVE_MATMUL = get_args(CollectiveMatmul)
"""How tensor-parallel collectives meet the matmuls beside them:

- `exposed`: each all-gather / reduce-scatter / all-reduce on the critical path (one extreme);
- `chunked`: every all-gather into a matmul and every reduce-scatter out of one decomposed as
  XLA's windowed einsum (ProgramBuilder.windowed_matmul), which needs the activations sharded
  over the tensor axis between blocks: it implies sequence parallelism (XLA splits a Megatron
  all-reduce into reduce-scatter + all-gather around the sharded norm and residual);
- `all_gather` / `reduce_scatter`: only that side decomposed (TPU flags
  `--xla_tpu_decompose_all_gather_einsum` / `--xla_tpu_decompose_einsum_reduce_scatter`; the
  MLPerf v4.0-v4.1 MaxText GPT-3 scripts set the first only);
- `hidden`: each collective runs beside the next compute op and only the one after waits (the
  other extreme: what perfect overlap could give);
- `auto`: what the compiler does by default for the chip and plan (`podsim.trace.defaults`).
"""
DECOMPOSED = ("chunked", "all_gather", "reduce_scatter")
"""The collective-matmul modes that decompose a side (and so need sequence parallelism)."""
