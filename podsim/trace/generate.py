"""Generate the step trace of a model trained with a parallelism plan on a slice: one training
step as an SPMD op DAG, every chip running the same ops.

`generate_trace` checks the request (slice, plan, options), builds the model's program
(`podsim.trace.transformer`: data, FSDP, tensor, sequence, pipeline and expert parallelism and the
overlap XLA gives them; `podsim.trace.resnet`: the data-parallel CNN), maps its logical axes onto
the slice (`podsim.trace.mesh`), adds the hosts' input pipeline and records in the trace's meta the
plan, mesh, FLOPs, HBM footprint and every default it resolved (`podsim.trace.defaults`), with why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from podsim.errors import PodsimError
from podsim.perf.chips import INPUT_PIPELINES, host_input_rate
from podsim.topology import get_generation
from podsim.topology.shapes import validate_shape
from podsim.trace.configs import ModelConfig, ResNetConfig, TransformerConfig, get_model
from podsim.trace.mesh import (
    DEFAULT_INTENSITY,
    LOGICAL_AXES,
    ParallelPlan,
    map_mesh,
    parse_parallelism,
)
from podsim.trace.model import PRECISIONS, Compute, StepTrace
from podsim.trace.options import (
    COLLECTIVE_MATMUL,
    OVERLAP_SWITCHES,
    QUANTIZED_MATMULS,
    RECOMPUTE_POLICIES,
    GenerateOptions,
)
from podsim.trace.resnet import resnet_program
from podsim.trace.transformer import transformer_program

__all__ = ["GenerateOptions", "RECOMPUTE_POLICIES", "generate_trace"]  # GenerateOptions lives in podsim.trace.options


def _host_input(cfg: ModelConfig, gen, chips: int, opts: GenerateOptions) -> dict | None:
    """The hosts' input pipeline for one step, or None when it is not modelled: each host feeds
    its chips' share of the global batch (images, or tokens) at its rate, beside the step, so
    the step waits only when the hosts are slower than the chips (the engine's `input_wait_s`)."""
    rate, pipeline = opts.input_rate_per_host, opts.input_pipeline
    if pipeline not in INPUT_PIPELINES:
        raise PodsimError(f"input_pipeline {pipeline!r} is not known; use one of: {', '.join(INPUT_PIPELINES)}")
    unit = "images" if isinstance(cfg, ResNetConfig) else "tokens"
    if rate is not None:
        if not (isinstance(rate, int | float) and math.isfinite(rate) and rate > 0):
            raise PodsimError(f"input_rate_per_host {rate!r} must be a positive number of {unit} per second per host")
        source = "input_rate_per_host"
    elif pipeline == "none":
        return None
    else:
        rate, rate_unit = host_input_rate(gen, pipeline)
        if rate_unit != unit:
            raise PodsimError(f"input_pipeline {pipeline!r} feeds {rate_unit}; {cfg.name} takes {unit}: give input_rate_per_host in {unit} per second")
        source = f"podsim.perf.chips.HOST_INPUT_RATES[{gen.id!r}][{pipeline!r}]"
    per_chip = gen.chips_per_host.require(f"{gen.id} chips per host")
    items = (cfg.global_batch if unit == "images" else cfg.tokens_per_step) * per_chip / chips
    return {"pipeline": pipeline, "rate_per_host": float(rate), "unit": unit, "source": source,
            "items_per_host": items, "time_s": items / rate}


def _recompute_policy(value: str | bool) -> str:
    if value is True or value is False:
        return "full" if value else "none"
    if value not in RECOMPUTE_POLICIES:
        raise PodsimError(f"recompute {value!r} is not known; use one of: {', '.join(RECOMPUTE_POLICIES)}")
    return value


def generate_trace(
    model: str | ModelConfig,
    slice_shape: str | Sequence[int],
    parallelism: str | Mapping[str, int] | ParallelPlan,
    *,
    generation: str = "tpu-v4",
    twisted: bool = False,
    overrides: Mapping[str, object] | None = None,
    options: GenerateOptions | None = None,
) -> StepTrace:
    """The step trace of `model` trained with a parallelism plan on a `generation` slice: one
    training step as an SPMD op DAG (see the module docstring for what each axis adds).

    Parameters
    ----------
    model : str or ModelConfig
        A preset name (`podsim trace models`) or a config.
    slice_shape : str or sequence of int
        The slice, e.g. '8x16x16'.
    parallelism : str, mapping or ParallelPlan
        e.g. 'data=8,fsdp=16,tensor=16' (data, fsdp, pipeline, tensor, expert; dcn across
        slices); the sizes other than dcn multiply to the slice's chips.
    generation : str
        The chip generation.
    twisted : bool
        A twisted torus slice.
    overrides : mapping, optional
        Preset fields replaced, e.g. {'global_batch': 2048, 'n_layers': 8}.
    options : GenerateOptions, optional
        Recompute, precision, overlap switches, micro-batches, ...

    Returns
    -------
    StepTrace
        The ops with their dependencies; `meta` holds the plan, mesh mapping, chips, model and
        hardware FLOPs and the HBM footprint per chip.

    Examples
    --------
    >>> from podsim import generate_trace
    >>> t = generate_trace("gpt3-175b", "8x16x16", "data=8,fsdp=16,tensor=16")
    >>> t.meta["mesh"]
    {'tensor': 'y', 'fsdp': 'z', 'data': 'x'}
    >>> t.meta["chips"]
    2048
    """
    cfg = get_model(model, dict(overrides or {})) if isinstance(model, str) else model
    opts = options or GenerateOptions()
    gen = get_generation(generation)
    spec = validate_shape(gen, tuple(slice_shape) if not isinstance(slice_shape, str) else slice_shape, twisted=twisted)
    plan = parse_parallelism(parallelism)
    if plan.ici_chips != spec.chips:
        raise PodsimError(f"parallelism {plan} uses {plan.ici_chips} chips per slice but slice {spec} has {spec.chips}; the sizes other than dcn must multiply to {spec.chips}")
    if opts.capacity_factor < 1.0:
        raise PodsimError(f"capacity_factor {opts.capacity_factor} is below 1; MoE dispatch buffers must hold every routed token")
    if opts.capacity_factor != 1.0 and not (isinstance(cfg, TransformerConfig) and cfg.is_moe):
        raise PodsimError(f"capacity_factor {opts.capacity_factor} does not apply to {cfg.name}: it has no experts; leave it at 1")
    opts = replace(opts, recompute=_recompute_policy(opts.recompute))
    if opts.replicas_per_chip not in (1, 2) or (opts.replicas_per_chip > 1 and not isinstance(cfg, ResNetConfig)):
        raise PodsimError(f"replicas_per_chip {opts.replicas_per_chip} is not allowed for {cfg.name}; use 1, or 2 (one replica per TensorCore) for a data-parallel CNN")
    if opts.bn_group != 1 and not isinstance(cfg, ResNetConfig):
        raise PodsimError(f"bn_group {opts.bn_group} is not allowed for {cfg.name}: it has no batch norm; use 1")
    if opts.attention not in ("flash", "materialized"):
        raise PodsimError(f"attention {opts.attention!r} is not known; use flash or materialized")
    if not isinstance(opts.collective_matmul, bool) and opts.collective_matmul not in COLLECTIVE_MATMUL:
        raise PodsimError(f"collective_matmul {opts.collective_matmul!r} is not known; use one of: {', '.join(COLLECTIVE_MATMUL)}")
    if opts.precision not in PRECISIONS:
        raise PodsimError(f"precision {opts.precision!r} is not known; use one of: {', '.join(PRECISIONS)}")
    if opts.quantized_matmuls is not None and opts.quantized_matmuls not in QUANTIZED_MATMULS:
        raise PodsimError(f"quantized_matmuls {opts.quantized_matmuls!r} is not known; use one of: {', '.join(QUANTIZED_MATMULS)}")
    if opts.quantized_matmuls not in (None, "all") and (opts.precision == "bf16" or not isinstance(cfg, TransformerConfig)):
        raise PodsimError(f"quantized_matmuls {opts.quantized_matmuls!r} chooses which matmuls run at int8 or fp8: it needs precision "
                          f"int8 or fp8 and a transformer (got precision {opts.precision}, model {cfg.name}); leave it at all")
    sizes = {**plan.sizes(), "dcn": plan.dcn}
    if isinstance(cfg, TransformerConfig):
        builder, info = transformer_program(cfg, plan, opts, sizes, gen.vendor)
    else:
        builder, info = resnet_program(cfg, plan, opts, sizes, spec.shape)
    volume = builder.volume_per_axis()
    order = opts.mesh_order or tuple(sorted(LOGICAL_AXES, key=lambda a: (-volume.get(a, 0.0), DEFAULT_INTENSITY.index(a))))
    mapping = map_mesh(spec.shape, plan, order, explicit=opts.mesh)
    ops = builder.finish(mapping, spec.shape)
    host_input = _host_input(cfg, gen, spec.chips * plan.dcn, opts)
    if host_input:
        ops.append(Compute("host.input", duration_s=host_input["time_s"], name="host input pipeline: the next step's batch",
                           layer="input", host=True))
    meta = {
        "generator": "podsim.trace.generate",
        "model": cfg.name,
        "model_kind": cfg.kind,
        "config": cfg.model_dump(exclude={"source"}),
        "source": cfg.source,
        "generation": gen.id,
        "slice": str(spec),
        "chips": spec.chips * plan.dcn,
        "parallelism": str(plan),
        "mesh": mapping.describe(),
        "mesh_order": list(mapping.order),
        "comm_bytes_per_axis": {a: v for a, v in volume.items() if v},
        "recompute": opts.recompute,
        "sequence_parallel": bool(opts.sequence_parallel),
        "precision": opts.precision,
        "quantized_matmuls": opts.quantized_matmuls,
        "attention": opts.attention,
        "overlap": {**{k: getattr(opts, k) for k in OVERLAP_SWITCHES}, "collective_matmul": info.get("collective_matmul", {"mode": "exposed"})["mode"]},
        "combine_grad_reduce": opts.combine_grad_reduce,
        "replicas_per_chip": opts.replicas_per_chip,
        "bn_group": opts.bn_group,
        "host_input": host_input,
        **info,
        "hardware_flops_per_step": sum(op.flops for op in ops if isinstance(op, Compute) and not op.bubble) * spec.chips * plan.dcn,
    }
    trace = StepTrace(tuple(ops), name=f"{cfg.name} {plan} on {gen.id} {spec}", meta=meta)
    trace.validate(axes=("x", "y", "z")[: len(spec.shape)])
    return trace
