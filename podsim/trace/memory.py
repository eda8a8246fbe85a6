"""HBM footprint of one training step per chip: does the plan fit the chip at all?

A step time for a plan that cannot fit in HBM is a number for a run that cannot happen, so the
generator records the peak bytes per chip and `steptime` says when they exceed the chip's HBM.
The count is first principles, by part:

- training state: the weights as used (`weight_bytes`), their gradients (`grad_bytes`) and the
  optimizer's own state per parameter (`OPTIMIZER_STATE_BYTES`: mixed-precision Adam's fp32 master
  copy and two moments, 12 bytes, Rajbhandari et al. 2020, ZeRO §3.1; Adafactor's factored second
  moment, 4 or 5), sharded over `fsdp` (and split by tensor, pipeline and expert as the generator
  splits them);
- FSDP: two layers' weights gathered at once (the one computing and the one prefetched);
- activations kept for backward (Korthikanti et al. 2022, arXiv:2205.05198 §4: s·b·h·(34 +
  5·a·s/h) bytes per layer with dropout; here without its masks, 32·s·b·h + 2·a·s²·b for
  their GPT layer as tests/test_memory.py checks, and with the model's own widths): per layer
  the two norm inputs, the QKV input, Q/K/V, the attention output, the MLP input, its hidden
  activations and the down-projection input; a materialised attention keeps its softmax output
  (b·heads·s² elements). `minimal` recompute drops the attention core (scores and softmax);
  `dots` (JAX's checkpoint_dots_with_no_batch_dims) keeps only each layer's input and the outputs of
  its weight matmuls (Q/K/V, the attention output projection, the MLP's input and output matmuls);
  `save_attention` keeps only each layer's input, Q/K/V and the attention output before and after
  its projection (the MLP and the scores are recomputed), plus one layer's MLP activations while
  they are recomputed; `full` keeps only each layer's input, plus one layer's activations while it
  is recomputed.
  Tensor parallelism splits what is split over heads or d_ff; sequence parallelism also the rest.
  A pipeline stage holds the activations of the micro-batches in flight (p under 1F1B);
- workspace: one micro-batch's fp32 logits for the loss.

ResNet: the state as above (no FSDP), and per image each layer's input and output (the output
twice: batch norm and ReLU each keep one), as the TF-era implementations saved them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from podsim.trace.configs import ResNetConfig
from podsim.trace.costs import TransformerShard
from podsim.trace.optimizers import optimizer_state_bytes
from podsim.units import format_bytes

LOGIT_BYTES = 4  # fp32 logits for the softmax cross-entropy


@dataclass(frozen=True)
class HbmFootprint:
    """Peak HBM bytes per chip of a training step, by part."""

    state_bytes: float  # weights, gradients, fp32 master and optimizer moments (sharded)
    gathered_bytes: float  # FSDP: full layer weights gathered for compute
    activations_bytes: float  # kept for backward at the peak (first layer's backward)
    workspace_bytes: float  # logits and one layer's recompute buffer

    @property
    def total_bytes(self) -> float:
        return self.state_bytes + self.gathered_bytes + self.activations_bytes + self.workspace_bytes

    def as_dict(self) -> dict[str, float]:
        return {**asdict(self), "total_bytes": self.total_bytes}


def _state_per_param(opts) -> float:
    return opts.weight_bytes + opts.grad_bytes + optimizer_state_bytes(opts.optimizer)


def layer_activation_elems(sh: TransformerShard) -> tuple[float, float]:
    """(elements one layer keeps for backward, elements of its full activations) per micro-batch
    on one chip, under the shard's recompute policy and attention kernel. A parallel block
    (PaLM §2) has one norm, and attention and the MLP read the same normalised input: kept once."""
    c, T = sh.cfg, float(sh.tokens)
    recompute, attention = sh.opts.recompute, sh.opts.attention
    rep = sh.sharded  # [b, s, d] tensors between blocks: split by sequence parallelism only
    dh = c.d_head
    x = T * c.d_model * rep  # one [b, s, d] tensor between blocks
    norms_in = (1 if c.parallel_block else 2) * x
    qkv_in = x
    qkv = T * (sh.heads + 2 * sh.kv_heads) * dh
    attn_out = T * sh.heads * dh
    mlp_in = 0.0 if c.parallel_block else x
    tokens_per_expert = sh.cfg.top_k * sh.opts.capacity_factor if c.is_moe else 1.0
    up = T * sh.d_ff * tokens_per_expert * (c.mlp_matrices - 1)  # the up (and gate) matmuls' outputs
    hidden = up + T * sh.d_ff * tokens_per_expert  # ... and the down matmul's input
    scores = sh.b * sh.heads * float(c.seq_len) ** 2 if attention == "materialized" else T * sh.heads  # flash: logsumexp
    full = norms_in + qkv_in + qkv + attn_out + mlp_in + hidden + scores
    if recompute == "full":
        return x, full
    if recompute == "save_attention":  # the layer input, Q/K/V, the attention output and its projection
        return 2 * x + qkv + attn_out, full
    if recompute == "dots":  # the layer input and every weight matmul's output: Q/K/V, the projections, the MLP's
        return x + qkv + x + up + x, full
    if recompute == "minimal":
        return full - scores, full
    return full, full


def transformer_footprint(sh: TransformerShard, microbatches: int) -> HbmFootprint:
    """Peak HBM bytes per chip of a transformer sharded as `sh` (see the module docstring)."""
    cfg, opts, plan = sh.cfg, sh.opts, sh.plan
    layer_params = sh.dense_params() + sh.expert_params()
    params = sh.layers * layer_params + sh.embed_params()
    state = params * _state_per_param(opts) / plan.fsdp
    gathered = 2 * layer_params * opts.weight_bytes if plan.fsdp > 1 else 0.0
    kept, full = layer_activation_elems(sh)
    in_flight = min(microbatches, plan.pipeline) if plan.pipeline > 1 else 1
    activations = sh.layers * kept * opts.act_bytes * in_flight
    logits = sh.b * cfg.head_positions * sh.vocab * LOGIT_BYTES  # the positions through the LM head
    recompute_buf = full * opts.act_bytes if opts.recompute in ("full", "save_attention") else 0.0
    return HbmFootprint(state, gathered, activations, logits + recompute_buf)


def resnet_footprint(cfg: ResNetConfig, images: int, opts) -> HbmFootprint:
    """Peak HBM bytes per chip of data-parallel `cfg` with `images` per micro-batch."""
    state = cfg.params * _state_per_param(opts) * opts.replicas_per_chip  # each replica keeps its own copy
    per_image = sum(layer.in_elems_per_image + 2 * layer.out_elems_per_image for layer in cfg.layers())
    return HbmFootprint(state, 0.0, per_image * images * opts.act_bytes, images * cfg.classes * LOGIT_BYTES)


def fits_hbm(footprint_bytes: float, capacity_bytes: float | None) -> bool:
    """The step fits the chip's HBM (a chip without a published capacity is taken to fit)."""
    return not capacity_bytes or footprint_bytes <= capacity_bytes


def hbm_text(footprint_bytes: float, capacity_bytes: float | None) -> str:
    """'20 GiB of 32 GiB', marked when it does not fit: the CLI's and the report's row."""
    cap = format_bytes(capacity_bytes) if capacity_bytes else "unknown"
    return f"{format_bytes(footprint_bytes)} of {cap}" + ("" if fits_hbm(footprint_bytes, capacity_bytes) else ": DOES NOT FIT")


def fits_message(footprint_bytes: float, capacity_bytes: float | None) -> str | None:
    """A one-line warning when the step does not fit in the chip's HBM, else None."""
    if fits_hbm(footprint_bytes, capacity_bytes):
        return None
    return (f"this plan needs about {footprint_bytes / 2**30:.1f} GiB of HBM per chip (state, gathered weights, kept "
            f"activations, logits) but the chip has {capacity_bytes / 2**30:.1f} GiB: more recompute, more sharding "
            f"or fewer sequences per chip would be needed; its step time may be for a run that cannot happen")
