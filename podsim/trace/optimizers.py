"""What each optimizer keeps per parameter: the state its update reads and writes and the HBM
footprint holds (podsim.trace.memory, podsim.trace.costs), each figure with its source. A run's
optimizer is what its code states (`GenerateOptions.optimizer`)."""

from __future__ import annotations

OPTIMIZER_STATE_BYTES: dict[str, tuple[float, str]] = {
    "adam": (12.0, "an fp32 master weight and Adam's first and second moments, 4 bytes each (Rajbhandari et al. 2020, "
             "ZeRO §3.1)"),
    "adafactor": (4.0, "an fp32 master weight; no first moment (beta1 = 0); the second moment factored into a row and a "
                  "column vector per matrix, O(rows + cols) (Shazeer & Stern 2018, §3): ~0 per parameter. Lingvo's "
                  "XLAShardingAdafactor as MLPerf v1.1's wiki_bert.py BertTemplate sets it (BETA1 = 0, factored=True)"),
    "adafactor_int8_momentum": (5.0, "an fp32 master weight and a first moment quantised to int8 (1 byte: Lingvo-JAX "
                                "ShardedAdafactorOptimizer's default quantized_dtype 'int8', tensorflow/lingvo@0c5d29e "
                                "lingvo/jax/optimizers.py; beta1 = 0.9 as lingvo/jax/tasks/lm/model_params.py "
                                "set_default_adafactor sets it); the second moment factored (~0 per parameter)"),
}
"""Optimizer state bytes per parameter beyond the weights as used and their gradients, and why."""
OPTIMIZERS = tuple(OPTIMIZER_STATE_BYTES)


def optimizer_state_bytes(optimizer: str) -> float:
    """The optimizer's own state per parameter (OPTIMIZER_STATE_BYTES)."""
    return OPTIMIZER_STATE_BYTES[optimizer][0]
