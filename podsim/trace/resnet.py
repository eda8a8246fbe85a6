"""The data-parallel ResNet-50 step program: each layer's forward, then backward in reverse with
its gradient all-reduce, then the weight update.

Distributed batch norm (`bn_group` > 1, TF's `distributed_group_size` in the MLPerf ResNet
submissions): each batch-norm layer's per-channel statistics are summed over a group of
replicas before the layer can normalise, in forward (mean and variance sums) and in backward
(the sums of dy and dy·x̂): two all-reduces of 2 x C fp32 per layer on the critical path, each
over a compact block of the slice (`bn_tile`: 2x2 chips, 2x2x2, ... as the submissions'
`tile_shape` lays the group).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from podsim.errors import PodsimError
from podsim.trace.builder import ProgramBuilder
from podsim.trace.configs import ResNetConfig
from podsim.trace.costs import adam_update, conv_cost
from podsim.trace.memory import resnet_footprint
from podsim.trace.mesh import ParallelPlan, physical_axes
from podsim.trace.model import AxisGroup, format_group
from podsim.trace.plans import grad_allreduce_blocking, local_batch, microbatches

if TYPE_CHECKING:
    from podsim.trace.options import GenerateOptions

BN_STAT_BYTES = 2 * 4  # two fp32 sums per channel (the statistics are computed in fp32)


def bn_tile(chips: int, shape: Sequence[int]) -> tuple[AxisGroup, ...]:
    """A compact block of `chips` chips (a power of two) on a slice of `shape`: factors of two
    dealt to the axes in turn (x, y, z), each axis taking one while it still divides it."""
    if chips < 2 or chips & (chips - 1):
        raise PodsimError(f"a batch-norm group of {chips} chips is not a power of two >= 2")
    sizes, left = [1] * len(shape), chips
    while left > 1:
        grown = False
        for i, n in enumerate(shape):
            if left > 1 and n % (sizes[i] * 2) == 0:
                sizes[i] *= 2
                left //= 2
                grown = True
        if not grown:
            raise PodsimError(f"a batch-norm group of {chips} chips does not tile slice {'x'.join(map(str, shape))}")
    return tuple(AxisGroup(a, k) for a, k in zip(physical_axes(shape), sizes, strict=True) if k > 1)


def _bn_tile_of(opts: GenerateOptions, plan: ParallelPlan, shape: Sequence[int]) -> tuple[AxisGroup, ...] | None:
    if opts.bn_group == 1:
        return None
    r = opts.replicas_per_chip
    if opts.bn_group < 1 or opts.bn_group % r:
        raise PodsimError(f"bn_group {opts.bn_group} must be a multiple of replicas_per_chip ({r})")
    chips = opts.bn_group // r
    if chips == 1:
        return None  # the group is the chip's own replicas: no traffic between chips
    if chips > plan.data or plan.data % chips:
        raise PodsimError(f"bn_group {opts.bn_group} ({chips} chips) must divide the {plan.data} data-parallel chips of a slice")
    return bn_tile(chips, shape)


def resnet_program(cfg: ResNetConfig, plan: ParallelPlan, opts: GenerateOptions, sizes: Mapping[str, int],
                   shape: Sequence[int]) -> tuple[ProgramBuilder, dict]:
    """The step's ops (data and dcn axes only) and its meta."""
    other = [a for a in ("fsdp", "pipeline", "tensor", "expert") if getattr(plan, a) > 1]
    if other:
        raise PodsimError(f"{cfg.name} is generated data-parallel only; drop {other[0]}={getattr(plan, other[0])} (use data and dcn)")
    local = local_batch(cfg.global_batch, plan, "images")
    m = microbatches(local, plan, opts)
    n = local // m
    layers = cfg.layers()
    tile = _bn_tile_of(opts, plan, shape)
    b = ProgramBuilder(sizes, opts.precision, opts.combine_grad_reduce)
    reductions: list[str] = []
    ar_blocking = grad_allreduce_blocking(opts, plan)

    def bn_stats(op_id: str, layer) -> None:
        if tile and layer.batchnorm:
            b.tile_all_reduce(op_id, BN_STAT_BYTES * layer.c_out, tile, name="distributed batch-norm statistics", layer=layer.name)

    for j in range(m):
        for layer in layers:
            b.compute(f"mb{j}.fwd.{layer.name}", conv_cost(layer, n, opts), name="fully connected forward" if layer.bias else "convolution forward", layer=layer.name)
            bn_stats(f"mb{j}.fwd.{layer.name}.bn", layer)
        for layer in reversed(layers):
            bn_stats(f"mb{j}.bwd.{layer.name}.bn", layer)  # batch norm's backward comes first and needs the group's sums
            done = b.compute(f"mb{j}.bwd.{layer.name}", conv_cost(layer, n, opts).backward(), name="layer backward", layer=layer.name)
            if j == m - 1:
                ar = b.grad_all_reduce(f"{layer.name}.grad.ar", layer.params * opts.grad_bytes, ("data", "dcn"), ready=done, blocking=ar_blocking, name="data-parallel gradient all-reduce", layer=layer.name)
                reductions += [ar] if ar else []
    # each replica (one per TensorCore when replicas_per_chip is 2) updates its own copy of the weights
    b.compute("optimizer", adam_update(cfg.params, opts).times(opts.replicas_per_chip), deps=[*reductions, *b.flush_grads()],
              name="optimizer update", layer="optimizer")
    info = {
        "params": cfg.params,
        "images_per_step": cfg.global_batch,
        "model_flops_per_step": cfg.training_flops_per_step(),
        "microbatches": m,
        "microbatch_images": n,
        "bn_tile": format_group(tile) if tile else None,
        "hbm_footprint": resnet_footprint(cfg, n, opts).as_dict(),
    }
    return b, info
