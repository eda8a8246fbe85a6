"""The generator's defaults that depend on the plan and the chip, as current JAX/XLA programs run
them, each with its source; a value the user gives always wins.

- `sequence_parallel` (None): a plan with a tensor axis shards every block's activations over it
  between blocks, as MaxText's logical axis rules do (SEQUENCE_PARALLEL_SOURCE): the norms and
  residual adds run on a 1/tensor share, the activations kept for backward are 1/tensor, and each
  Megatron all-reduce becomes an all-gather in and a reduce-scatter out (the same bytes).
- `collective_matmul` ("auto"): with sharded activations, TPUs decompose each tensor-parallel
  all-gather and reduce-scatter under its matmul (TPU_COLLECTIVE_MATMUL); GPUs only from XLA's
  windowed-einsum threshold on (GPU_WINDOWED_EINSUM_THRESHOLD_MIB, off by default).
- `quantized_matmuls` (None): an int8 or fp8 program quantizes its weight matmuls and runs the
  attention core and the LM head in bf16, as MaxText's AQT does (QUANTIZED_MATMULS_SOURCE).
"""

from __future__ import annotations

from podsim.trace.configs import TransformerConfig

SEQUENCE_PARALLEL_SOURCE = (
    "MaxText shards each block's [batch, length, embed] activations over the tensor axis between blocks: "
    "logical_axis_rules ['activation_embed', ['tensor']] and ['norm', ['tensor']] "
    "(AI-Hypercomputer/maxtext@e591f30 src/maxtext/configs/base.yml:598,606)")
TPU_COLLECTIVE_MATMUL = ("chunked", (
    "the TPU compiler decomposes tensor-parallel einsums (windowed einsum, both sides) unless told not to: MaxText turns "
    "it off with --xla_jf_spmd_threshold_for_windowed_einsum_mib=1000000 (DISABLE_COLLECTIVE_MATMUL, "
    "AI-Hypercomputer/maxtext@e591f30 benchmarks/xla_flags_library.py:201-202) and each side with "
    "xla_tpu_enable_windowed_einsum_for_all_gather / _for_reduce_scatter=false (src/maxtext/inference/mlperf/trillium/"
    "select_xla_flags.py:21-30); the default threshold is not published, so podsim decomposes every one"))
"""TPU generations' default collective matmul (mode, source)."""
GPU_WINDOWED_EINSUM_THRESHOLD_MIB = 100_000
"""XLA's GPU default size (MiB) from which an einsum's operand is windowed: openxla/xla
xla/debug_options_flags.cc, xla_gpu_threshold_for_windowed_einsum_mib = 100000 (commit 1ff3f7d),
i.e. off unless asked. (The open-source partitioner's own default is 256 MiB, unidirectional, not
unrolled: xla/service/spmd/spmd_partitioner.h, commit 017d6d6; the TPU compiler sets its own.)"""


def shards_between_blocks(cfg: TransformerConfig, t: int) -> bool:
    """Whether `t` tensor shards can split a block's activations: the sequence or the width divides."""
    return cfg.seq_len % t == 0 or cfg.d_model % t == 0


def sequence_parallel_default(value: bool | None, cfg: TransformerConfig, t: int) -> tuple[bool, str]:
    """Whether activations are sharded over the tensor axis between blocks, and why (for the
    trace's meta): as asked, else on with a tensor axis that can split them."""
    if value is not None:
        return bool(value), "as asked"
    if t == 1:
        return False, "no tensor parallelism"
    if shards_between_blocks(cfg, t):
        return True, f"default: {SEQUENCE_PARALLEL_SOURCE}"
    return False, (f"default off: tensor={t} divides neither the sequence ({cfg.seq_len}) nor the width "
                   f"({cfg.d_model}), so the activations stay whole between blocks")


def collective_matmul_default(value: str | bool, t: int, sequence_parallel: bool, vendor: str,
                              windowed_mib: float) -> tuple[str, str]:
    """The collective-matmul mode the program runs (never auto) and why: as asked, else none
    without a tensor axis or without sharded activations (a Megatron all-reduce program has no
    all-gather or reduce-scatter to decompose), else the chip's compiler default. `windowed_mib`:
    the size of the operand a windowed einsum would split (XLA's GPU threshold reads it)."""
    mode = ("chunked" if value else "exposed") if isinstance(value, bool) else value
    if t == 1:
        return "exposed", "no tensor parallelism"
    if mode != "auto":
        return mode, "as asked"
    if not sequence_parallel:
        return "exposed", "default: a Megatron all-reduce program (no sequence parallelism) has no all-gather or reduce-scatter to decompose"
    if vendor == "NVIDIA":
        mib = GPU_WINDOWED_EINSUM_THRESHOLD_MIB
        if windowed_mib >= mib:
            return "chunked", f"XLA's GPU default: the windowed operand ({windowed_mib:.0f} MiB) reaches its threshold of {mib} MiB"
        return "exposed", f"XLA's GPU default: the windowed operand ({windowed_mib:.0f} MiB) is below its threshold of {mib} MiB"
    if vendor == "Google":
        default, source = TPU_COLLECTIVE_MATMUL
        return default, f"default on TPUs: {source}"
    return "exposed", f"default: no compiler default is known for {vendor} chips"


QUANTIZED_MATMULS_SOURCE = (
    "MaxText's quantization=int8 wraps only the DenseGeneral layers' dot in AQT (MaxText/layers/quantizations.py, fwd, "
    "dlhs and drhs 8 bits); the flash attention kernel takes no quantizer and the logits matmul is not quantized "
    "(MaxText/layers/models.py: \"We do not quantize the logits matmul.\"), at AI-Hypercomputer/maxtext@a6b44b3 and f586e43")


def quantized_matmuls_default(value: str | None, precision: str) -> tuple[str, str]:
    """Which matmuls an int8 or fp8 program runs at its precision, and why (for the trace's meta):
    as asked, else the weight matmuls (QUANTIZED_MATMULS_SOURCE); 'all' (moot) at bf16."""
    if value is not None:
        return value, "as asked"
    if precision == "bf16":
        return "all", "bf16: nothing quantized"
    return "weights", f"default: {QUANTIZED_MATMULS_SOURCE}"
