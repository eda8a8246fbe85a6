"""Generate the step trace of a model trained with a parallelism plan on a slice.

What each chip does in one training step, as an SPMD op DAG (every chip runs the same ops):

- Compute ops carry FLOPs and HBM bytes per chip (a matmul [M,K]x[K,N] is 2MKN FLOPs and
  reads/writes (MK + KN + MN) elements; attention is counted for the causal half, see
  configs.py); the backward of an op is twice its forward in FLOPs and bytes. Compute ops run
  in program order (each depends on the previous one): a chip has one compute stream.
- Tensor parallelism (Megatron-LM, Shoeybi et al. 2019): per layer forward, an all-reduce of the
  activations [b, s, d] after attention and after the MLP; per layer backward, one after each
  block's input gradient. With `sequence_parallel` (Korthikanti et al. 2022) each becomes an
  all-gather before the block and a reduce-scatter after it (and the reverse in backward): the
  same bytes; the norms and residual adds between blocks then run on a 1/tensor slice of the
  sequence (their HBM bytes fall by the tensor degree), as do the activations kept for backward.
  The vocabulary-parallel embedding all-reduces its output, the LM head all-reduces its input
  gradient, and the cross-entropy all-reduces three fp32 values per token.
- Collective matmul (`collective_matmul`, COLLECTIVE_MATMUL): the all-gather into a block's
  first matmul and the reduce-scatter out of its last are decomposed as XLA's windowed einsum
  (Wang et al., ASPLOS 2023): t partial matmuls and t - 1 collective permutes of one shard round
  the tensor ring, each permute beside a partial matmul (ProgramBuilder.windowed_matmul), so what
  is exposed is what the chunk schedule leaves; `exposed` and `hidden` are the two extremes, and
  `auto` (the default) does what XLA's SPMD partitioner does by default.
- FSDP / ZeRO-3: every layer's weights are all-gathered before its forward and again before its
  backward, one layer ahead of use (issued in order, once the previous layer starts computing);
  gradients are reduce-scattered after the layer's backward, every micro-batch. The embedding
  block is gathered once per micro-batch and kept to the end of its backward.
- Data parallelism (and `dcn`, data parallelism across slices): each layer's gradients are
  all-reduced once per step, after the layer's last backward; these ops depend only on that
  backward, so they overlap the rest of the backward pass. With FSDP they reduce the 1/fsdp shard
  (hybrid sharding). Dense weights are also replicated over the expert axis, so their gradients
  reduce over data x expert; expert weights over data only.
- Expert parallelism (GShard/Switch): an MoE layer routes each token to top_k experts; an
  all-to-all over the expert axis dispatches tokens and one combines them (each chip's send
  buffer: tokens x top_k x d_model x capacity_factor), and both run again in backward.
- Optimizer: one Adam-style update of the chip's parameter shard after all reductions (fp32
  master weights and two moments read and written, the gradient read, bf16 weights written).
- Host input (`input_pipeline`, `input_rate_per_host`): one op on the hosts, beside the chips'
  program, producing the next step's batch (each host its chips' share of the images or tokens at
  its rate), so the step ends when both end: it waits only when the hosts are slower.

Pipeline parallelism (1F1B with m micro-batches over p stages). The SPMD program is the
lock-step loop an SPMD (GSPMD/XLA) pipeline runs, seen from one stage: p - 1 forward-only
iterations (the pipeline fills), m iterations of one forward and one backward (1F1B's steady
state), and p - 1 backward-only iterations (it drains). Every stage-iteration is followed by a
collective permute (a SendRecv along the pipeline axis: activations shift +1 after a forward,
gradients -1 after a backward), and the next iteration waits for it. In each of the 2(p - 1)
fill and drain iterations the stage has no valid micro-batch: those compute ops are flagged
`bubble` (they take the time of a stage forward or backward but do no useful work); their
tensor-parallel collectives and the permutes run as they do in an SPMD pipeline. The DAG's
critical path is therefore (p - 1)(F + c) + m(F + B) + (p - 1)(B + c) for stage forward and
backward times F, B and permute time c: 1F1B's (m + p - 1)(F + B) with the bubble on the path.
The labelling is exact for the last stage; every stage has the same number of bubble slots.
Work that only the first or last stage does (embedding, LM head, loss) is spread evenly over the
p stages (scaled by 1/p in every stage-iteration), so per-step totals are exact on average.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, get_args

from pydantic import ConfigDict

from podsim import quantities as q
from podsim.bounds import check_budget
from podsim.errors import PodsimError
from podsim.perf.chips import INPUT_PIPELINES, host_input_rate
from podsim.topology import get_generation
from podsim.topology.shapes import validate_shape
from podsim.trace.builder import ProgramBuilder
from podsim.trace.configs import ModelConfig, ResNetConfig, TransformerConfig, get_model
from podsim.trace.costs import Block, TransformerShard, adam_update
from podsim.trace.memory import transformer_footprint
from podsim.trace.mesh import (
    DEFAULT_INTENSITY,
    LOGICAL_AXES,
    ParallelPlan,
    map_mesh,
    parse_parallelism,
)
from podsim.trace.model import (
    PRECISIONS,
    Compute,
    StepTrace,
)
from podsim.trace.plans import grad_allreduce_blocking, local_batch, microbatches
from podsim.trace.resnet import resnet_program

Precision = Literal["bf16", "int8", "fp8"]  # PRECISIONS, as a type the scenario schema checks
Attention = Literal["flash", "materialized"]
Recompute = Literal["none", "minimal", "full"]
CollectiveMatmul = Literal["auto", "exposed", "chunked", "all_gather", "reduce_scatter", "hidden"]  # COLLECTIVE_MATMUL
InputPipeline = Literal["none", "jpeg"]  # podsim.perf.chips.INPUT_PIPELINES
assert get_args(Precision) == PRECISIONS and get_args(InputPipeline) == INPUT_PIPELINES


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
    # core, QK^T, softmax and AV, re-runs in backward); full (each layer's forward re-runs).
    # True/False are accepted for full/none.
    recompute: Recompute | bool = "none"
    precision: Precision = "bf16"  # matmul precision: bf16, or int8 / fp8 where the generation publishes the rate
    # Overlap as XLA schedules it (each a switch so its effect can be measured):
    overlap_fsdp_prefetch: bool = True  # FSDP gathers of the next layer run under this layer's compute
    overlap_grad_reduce: bool = True  # FSDP reduce-scatters and in-slice data-parallel all-reduces overlap backward
    overlap_dcn: bool = True  # gradient all-reduces that cross slices (dcn) overlap backward
    # Tensor-parallel collectives and their adjacent matmuls (COLLECTIVE_MATMUL): auto (the
    # default per generation and plan); exposed; chunked (all-gathers and reduce-scatters
    # decomposed, XLA's windowed einsum); all_gather / reduce_scatter (only those); hidden (beside
    # the next compute: the ideal bound). True/False are accepted for chunked/exposed.
    collective_matmul: CollectiveMatmul | bool = "auto"
    attention: Attention = "flash"  # flash: fused, causal half, scores stay on chip; materialized: scores through HBM
    sequence_parallel: bool = False  # Megatron sequence parallelism (all-gather + reduce-scatter)
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
RECOMPUTE_POLICIES = ("none", "minimal", "full")

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
- `auto`: the compiler's and the published recipes' default for the generation and plan
  (`_collective_matmul`): nothing to decompose without sequence parallelism (a Megatron
  all-reduce program); on a generation whose published recipes decompose, what they do
  (COLLECTIVE_MATMUL_DEFAULTS); on GPUs XLA's windowed-einsum threshold
  (GPU_WINDOWED_EINSUM_THRESHOLD_MIB); on other TPUs exposed.
"""
COLLECTIVE_MATMUL_DEFAULTS: dict[str, tuple[str, str]] = {
    "tpu-v5p": ("all_gather", "MaxText's MLPerf GPT-3 recipes for v5p set --xla_tpu_decompose_all_gather_einsum=true and not its "
                "reduce-scatter counterpart (mlcommons/training_results_v4.0 62f111b, Google/benchmarks/gpt3/implementations/"
                "maxtext/v5p-1024.sh and v5p-12288.sh; v4.1 cloud-tpu-v5p/v5p-4096.sh likewise)"),
}
"""Generation -> (mode, source) where published runs state their collective matmul. TPU compilers
do not decompose by default as far as the sources show: the recipes that want it pass the flags
(the v5p ones above); the Trillium recipes (v4.1 trillium-512.sh, -2048.sh) pass none and run
no tensor parallelism."""
GPU_WINDOWED_EINSUM_THRESHOLD_MIB = 100_000
"""XLA's GPU default size (MiB) from which an einsum's operand is windowed: openxla/xla
xla/debug_options_flags.cc, xla_gpu_threshold_for_windowed_einsum_mib = 100000 (commit 1ff3f7d),
i.e. off unless asked. (The open-source partitioner's own default is 256 MiB, unidirectional, not
unrolled: xla/service/spmd/spmd_partitioner.h, commit 017d6d6; the TPU compiler sets its own.)"""
_DECOMPOSED = ("chunked", "all_gather", "reduce_scatter")


def _collective_matmul(value: str | bool, sh: TransformerShard, generation: str, vendor: str) -> tuple[str, str]:
    """The collective-matmul mode the program runs (never auto) and why, for the trace's meta."""
    mode = ("chunked" if value else "exposed") if isinstance(value, bool) else value  # checked by generate_trace
    if sh.plan.tensor == 1:
        return "exposed", "no tensor parallelism"
    if mode != "auto":
        return mode, "as asked"
    if not sh.opts.sequence_parallel:
        return "exposed", "default: a Megatron all-reduce program (no sequence parallelism) has no all-gather or reduce-scatter to decompose"
    if generation in COLLECTIVE_MATMUL_DEFAULTS:
        default, source = COLLECTIVE_MATMUL_DEFAULTS[generation]
        return default, f"default for {generation}: {source}"
    if vendor == "NVIDIA":
        mib, size = GPU_WINDOWED_EINSUM_THRESHOLD_MIB, sh.act / 2**20
        if size >= mib:
            return "chunked", f"XLA's GPU default: the windowed operand ({size:.0f} MiB) reaches its threshold of {mib} MiB"
        return "exposed", f"XLA's GPU default: the windowed operand ({size:.0f} MiB) is below its threshold of {mib} MiB"
    return "exposed", f"default for {generation}: no published recipe decomposes; TPU recipes that do pass XLA flags (COLLECTIVE_MATMUL_DEFAULTS)"


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
    sizes = {**plan.sizes(), "dcn": plan.dcn}
    if isinstance(cfg, TransformerConfig):
        builder, info = _transformer_program(cfg, plan, opts, sizes, gen.id, gen.vendor)
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
        "sequence_parallel": opts.sequence_parallel,
        "precision": opts.precision,
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


# ---------------------------------------------------------------------------------------------
# Transformers


class _TransformerProgram:
    """Emits one stage's program: forward and backward stage-iterations and the reductions."""

    def __init__(self, sh: TransformerShard, builder: ProgramBuilder, microbatches: int):
        self.sh, self.b, self.m = sh, builder, microbatches
        self.p = sh.plan.pipeline
        self.edge = 1.0 / self.p  # share of embedding/head work in each stage-iteration
        self.fsdp = sh.plan.fsdp > 1
        self.sp = sh.opts.sequence_parallel
        self.last_gather: str | None = None
        self.grad_ready: dict[str, str] = {}  # block -> last backward op of the last valid micro-batch
        self.reductions: list[str] = []
        opts = sh.opts
        mode = opts.collective_matmul  # resolved by _transformer_program: never auto here
        self.tp_blocking: bool | str = "overlap" if mode == "hidden" else True
        self.cm_ag = mode in ("chunked", "all_gather")  # all-gathers into a matmul decomposed
        self.cm_rs = mode in ("chunked", "reduce_scatter")  # reduce-scatters out of a matmul decomposed
        self.rs_blocking = not opts.overlap_grad_reduce
        self.ar_blocking = grad_allreduce_blocking(opts, sh.plan)
        self.parallel = sh.cfg.parallel_block  # attention and the dense MLP as one block (never MoE: _transformer_program)

    # Tensor-parallel boundaries (Megatron f and g operators, or their sequence-parallel forms),
    # on the critical path, or (collective_matmul "hidden") beside the next compute op; the
    # decomposed forms are emitted by _block_fwd / _block_bwd.
    def _enter(self, prefix: str, layer: str) -> None:
        if self.sp:
            self.b.collective(f"{prefix}.ag", "all_gather", self.sh.act, ("tensor",), blocking=self.tp_blocking, name="sequence-parallel gather", layer=layer)

    def _exit(self, prefix: str, layer: str, scale: float = 1.0) -> None:
        kind = "reduce_scatter" if self.sp else "all_reduce"
        self.b.collective(f"{prefix}.{'rs' if self.sp else 'ar'}", kind, self.sh.act * scale, ("tensor",), blocking=self.tp_blocking, name="tensor-parallel partial sums", layer=layer)

    def _enter_bwd(self, prefix: str, layer: str, scale: float = 1.0) -> None:
        kind = "reduce_scatter" if self.sp else "all_reduce"
        self.b.collective(f"{prefix}.{'rs' if self.sp else 'ar'}", kind, self.sh.act * scale, ("tensor",), blocking=self.tp_blocking, name="tensor-parallel input gradient", layer=layer)

    def _exit_bwd(self, prefix: str, layer: str, scale: float = 1.0) -> None:
        if self.sp:
            self.b.collective(f"{prefix}.ag", "all_gather", self.sh.act * scale, ("tensor",), blocking=self.tp_blocking, name="sequence-parallel gather", layer=layer)

    def _gather(self, op_id: str, block: str, params: float, window: str | None) -> str | None:
        """FSDP all-gather of a block's weights, issued in order, one block ahead of use."""
        if not self.fsdp:
            return None
        deps = [self.last_gather, window]
        if not self.sh.opts.overlap_fsdp_prefetch:  # gathered just before use, on the critical path
            return self.b.collective(op_id, "all_gather", params * self.sh.opts.weight_bytes, ("fsdp",), name=f"FSDP gather {block}", layer=block)
        gid = self.b.collective(op_id, "all_gather", params * self.sh.opts.weight_bytes, ("fsdp",), deps=deps, blocking=False, name=f"FSDP gather {block}", layer=block)
        self.last_gather = gid or self.last_gather
        return gid

    # Stage-iterations ----------------------------------------------------------------------
    def forward(self, tag: str, *, bubble: bool, entry: Sequence[str | None] = ()) -> None:
        """One forward stage-iteration."""
        sh, b = self.sh, self.b
        pre = f"{tag}.fwd"
        g = self._gather(f"{tag}.embed.gather", "embed", sh.embed_params() * self.edge, None)
        b.compute(f"{pre}.embed", sh.embed_fwd().times(self.edge), deps=[*entry, g], name="embedding lookup", layer="embed", bubble=bubble)
        self._exit(f"{pre}.embed", "embed", self.edge)
        window: str | None = None  # the op before the previous layer: its end lets the next gather go
        for k in range(sh.layers):
            layer = f"L{k}"
            g = self._gather(f"{tag}.{layer}.fwd.gather", layer, sh.dense_params() + sh.expert_params(), window)
            window = b.last_compute
            self._layer_forward(f"{pre}.{layer}", layer, bubble, g)
        self._enter(f"{pre}.head.in", "head")
        b.compute(f"{pre}.head", sh.head_fwd().times(self.edge), name="LM head and loss forward", layer="head", bubble=bubble)
        b.collective(f"{pre}.loss.ar", "all_reduce", 3.0 * sh.tokens * 4 * self.edge, ("tensor",), name="vocab-parallel cross-entropy (max, target logit, sum exp)", layer="head")

    def _block_fwd(self, pre: str, layer: str, blk: Block, *, bubble: bool, name: str, deps: Sequence[str | None] = ()) -> None:
        """One block's forward: gathered in (sequence parallel), computed, its partial sums
        reduced out. Under collective matmul the gather is decomposed under the block's first
        matmul and the reduction under its last (ProgramBuilder.windowed_matmul), so the block is
        emitted as its parts; otherwise as one op (ids: `pre`, `pre.in.*`, `pre.out.*`)."""
        sh, b = self.sh, self.b
        if not (self.cm_ag or self.cm_rs):
            self._enter(f"{pre}.in", layer)
            b.compute(pre, blk.total(), deps=deps, name=name, layer=layer, bubble=bubble)
            self._exit(f"{pre}.out", layer)
            return
        b.compute(f"{pre}.norm", blk.norm, deps=deps, name=f"{name}: norm", layer=layer, bubble=bubble)
        if self.cm_ag:
            b.windowed_matmul(f"{pre}.in", "all_gather", blk.first, sh.act, "tensor", name=f"{name}: input matmul", layer=layer, bubble=bubble)
        else:
            self._enter(f"{pre}.in", layer)
            b.compute(f"{pre}.first", blk.first, name=f"{name}: input matmul", layer=layer, bubble=bubble)
        b.compute(f"{pre}.mid", blk.mid, name=name, layer=layer, bubble=bubble)
        if self.cm_rs:
            b.windowed_matmul(f"{pre}.out", "reduce_scatter", blk.last, sh.act, "tensor", name=f"{name}: output matmul", layer=layer, bubble=bubble)
        else:
            b.compute(f"{pre}.last", blk.last, name=f"{name}: output matmul", layer=layer, bubble=bubble)
            self._exit(f"{pre}.out", layer)
        b.compute(f"{pre}.residual", blk.residual, name=f"{name}: residual add", layer=layer, bubble=bubble)

    def _block_bwd(self, pre: str, layer: str, blk: Block, *, bubble: bool, name: str, deps: Sequence[str | None] = (),
                   before_mid=None) -> str:
        """One block's backward, the mirror of `_block_fwd`: the output gradient gathered (the
        transpose of the forward's reduce-scatter) into the last matmul's backward, the input
        gradient's partial sums reduced out of the first's; `before_mid` emits ops that must
        precede the block's middle (recomputation). Returns the op after which the block's
        weight gradients are complete."""
        sh, b = self.sh, self.b
        if not (self.cm_ag or self.cm_rs):
            self._exit_bwd(f"{pre}.out", layer)
            if before_mid:
                before_mid()
            done = b.compute(pre, blk.total().backward(), deps=deps, name=name, layer=layer, bubble=bubble)
            self._enter_bwd(f"{pre}.in", layer)
            return done
        b.compute(f"{pre}.residual", blk.residual.backward(), deps=deps, name=f"{name}: residual add", layer=layer, bubble=bubble)
        if self.cm_ag:
            b.windowed_matmul(f"{pre}.out", "all_gather", blk.last.backward(), sh.act, "tensor", name=f"{name}: output matmul", layer=layer, bubble=bubble)
        else:
            self._exit_bwd(f"{pre}.out", layer)
            b.compute(f"{pre}.last", blk.last.backward(), name=f"{name}: output matmul", layer=layer, bubble=bubble)
        if before_mid:
            before_mid()
        b.compute(f"{pre}.mid", blk.mid.backward(), name=name, layer=layer, bubble=bubble)
        if self.cm_rs:
            b.windowed_matmul(f"{pre}.in", "reduce_scatter", blk.first.backward(), sh.act, "tensor", name=f"{name}: input matmul", layer=layer, bubble=bubble)
        else:
            b.compute(f"{pre}.first", blk.first.backward(), name=f"{name}: input matmul", layer=layer, bubble=bubble)
            self._enter_bwd(f"{pre}.in", layer)
        return b.compute(f"{pre}.norm", blk.norm.backward(), name=f"{name}: norm", layer=layer, bubble=bubble)

    def _layer_forward(self, pre: str, layer: str, bubble: bool, gather: str | None, note: str = "") -> None:
        """One layer's forward ops (attention, then the MLP or the MoE block), ids under `pre`."""
        sh, b = self.sh, self.b
        if self.parallel:  # one block: one norm, one reduction of both partial sums (PaLM §2)
            self._block_fwd(f"{pre}.block", layer, sh.parallel_block(), bubble=bubble, name=f"attention and MLP forward{note}", deps=[gather])
            return
        self._block_fwd(f"{pre}.attn", layer, sh.attn_block(), bubble=bubble, name=f"attention forward{note}", deps=[gather])
        if sh.cfg.is_moe:
            self._enter(f"{pre}.mlp.in", layer)
            b.compute(f"{pre}.router", sh.router_fwd(), name=f"MoE router forward{note}", layer=layer, bubble=bubble)
            b.collective(f"{pre}.dispatch", "all_to_all", sh.dispatch_bytes(), ("expert",), name=f"MoE dispatch{note}", layer=layer)
            b.compute(f"{pre}.experts", sh.experts_fwd(), name=f"MoE experts forward{note}", layer=layer, bubble=bubble)
            b.collective(f"{pre}.combine", "all_to_all", sh.dispatch_bytes(), ("expert",), name=f"MoE combine{note}", layer=layer)
            self._exit(f"{pre}.mlp.out", layer)
        else:
            self._block_fwd(f"{pre}.mlp", layer, sh.mlp_block(), bubble=bubble, name=f"MLP forward{note}")

    def backward(self, tag: str, *, bubble: bool, last: bool, entry: Sequence[str | None] = ()) -> None:
        """One backward stage-iteration; `last`: the last valid micro-batch (reduce gradients)."""
        sh, b = self.sh, self.b
        pre = f"{tag}.bwd"
        b.compute(f"{pre}.head", sh.head_fwd().times(self.edge).backward(), deps=entry, name="LM head and loss backward", layer="head", bubble=bubble)
        self._enter_bwd(f"{pre}.head.in", "head", self.edge)
        window: str | None = None
        for k in reversed(range(sh.layers)):
            layer = f"L{k}"
            g = self._gather(f"{tag}.{layer}.bwd.gather", layer, sh.dense_params() + sh.expert_params(), window)
            window = b.last_compute
            if sh.opts.recompute == "full":
                self._layer_forward(f"{tag}.recompute.{layer}", layer, bubble, g, " (recomputed)")
                g = None

            def recompute_core(layer: str = layer) -> None:
                if sh.opts.recompute == "minimal":
                    b.compute(f"{pre}.{layer}.attn.recompute", sh.attn_core(), name="attention core recomputed", layer=layer, bubble=bubble)

            if self.parallel:
                done = self._block_bwd(f"{pre}.{layer}.block", layer, sh.parallel_block(), bubble=bubble, name="attention and MLP backward",
                                       deps=[g], before_mid=recompute_core)
                if not bubble:
                    self._reduce(tag, layer, done, sh.dense_params(), sh.expert_params(), last)
                continue
            if sh.cfg.is_moe:
                self._exit_bwd(f"{pre}.{layer}.mlp.out", layer)
                b.collective(f"{pre}.{layer}.combine", "all_to_all", sh.dispatch_bytes(), ("expert",), deps=[*b.frontier(), g], name="MoE combine backward", layer=layer)
                b.compute(f"{pre}.{layer}.experts", sh.experts_fwd().backward(), deps=[g], name="MoE experts backward", layer=layer, bubble=bubble)
                b.collective(f"{pre}.{layer}.dispatch", "all_to_all", sh.dispatch_bytes(), ("expert",), name="MoE dispatch backward", layer=layer)
                b.compute(f"{pre}.{layer}.router", sh.router_fwd().backward(), name="MoE router backward", layer=layer, bubble=bubble)
                self._enter_bwd(f"{pre}.{layer}.mlp.in", layer)
            else:
                self._block_bwd(f"{pre}.{layer}.mlp", layer, sh.mlp_block(), bubble=bubble, name="MLP backward", deps=[g])

            done = self._block_bwd(f"{pre}.{layer}.attn", layer, sh.attn_block(), bubble=bubble, name="attention backward", before_mid=recompute_core)
            if not bubble:
                self._reduce(tag, layer, done, sh.dense_params(), sh.expert_params(), last)
        self._exit_bwd(f"{pre}.embed", "embed", self.edge)
        done = b.compute(f"{pre}.embed", sh.embed_fwd().times(self.edge).backward(), name="embedding gradient", layer="embed", bubble=bubble)
        if not bubble:
            self._reduce(tag, "embed", done, sh.embed_params() * self.edge, 0, last)

    def _reduce(self, tag: str, block: str, after: str, dense: float, expert: float, last: bool) -> None:
        """Gradient reduction of one block: FSDP reduce-scatter every micro-batch, data-parallel
        all-reduce after the last; both wait only for the block's backward."""
        b, g = self.b, self.sh.opts.grad_bytes
        f = self.sh.plan.fsdp
        ready = after
        if self.fsdp:
            rs = b.collective(f"{tag}.{block}.grad.rs", "reduce_scatter", (dense + expert) * g, ("fsdp",), deps=[after], blocking=self.rs_blocking, name="FSDP gradient reduce-scatter", layer=block)
            ready = rs or after
            self.reductions.append(ready)
        if last:
            ar = b.grad_all_reduce(f"{block}.grad.ar", dense * g / f, ("data", "expert", "dcn"), ready=ready, blocking=self.ar_blocking, name="data-parallel gradient all-reduce", layer=block)
            ar_e = b.grad_all_reduce(f"{block}.grad.expert.ar", expert * g / f, ("data", "dcn"), ready=ready, blocking=self.ar_blocking, name="data-parallel expert gradient all-reduce", layer=block)
            self.reductions += [x for x in (ar, ar_e) if x]

    def optimizer(self) -> None:
        sh = self.sh
        params = (sh.layers * (sh.dense_params() + sh.expert_params()) + sh.embed_params() * self.edge) / sh.plan.fsdp
        self.b.compute("optimizer", adam_update(params, sh.opts), deps=[*self.reductions, *self.b.flush_grads()], name="Adam update of this chip's shard", layer="optimizer")

    # The step ------------------------------------------------------------------------------
    def step(self) -> None:
        p, m, b, sh = self.p, self.m, self.b, self.sh
        send = sh.act / (sh.t if self.sp else 1)
        if p == 1:
            for j in range(m):
                self.forward(f"mb{j}", bubble=False)
                self.backward(f"mb{j}", bubble=False, last=j == m - 1)
            self.optimizer()
            return
        fwd_in: str | None = None  # the permute that brings this iteration's forward input
        bwd_in: str | None = None
        n_fwd = n_bwd = 0
        total = m + p - 1

        def fwd(tag: str, bubble: bool) -> None:
            nonlocal fwd_in, n_fwd
            self.forward(tag, bubble=bubble, entry=[fwd_in])
            n_fwd += 1
            fwd_in = b.send(f"{tag}.fwd.send", send, +1, deps=b.frontier(), name="pipeline activations to the next stage") if n_fwd < total else None

        def bwd(tag: str, bubble: bool, last: bool) -> None:
            nonlocal bwd_in, n_bwd
            self.backward(tag, bubble=bubble, last=last, entry=[bwd_in])
            n_bwd += 1
            bwd_in = b.send(f"{tag}.bwd.send", send, -1, deps=b.frontier(), name="pipeline gradients to the previous stage") if n_bwd < total else None

        for k in range(p - 1):
            fwd(f"fill{k}", True)
        for j in range(m):
            fwd(f"mb{j}", False)
            bwd(f"mb{j}", False, j == m - 1)
        for k in range(p - 1):
            bwd(f"drain{k}", True, False)
        self.optimizer()


def transformer_shard(cfg: TransformerConfig, plan: ParallelPlan, opts: GenerateOptions, generation: str,
                      vendor: str) -> tuple[TransformerShard, int, str]:
    """The per-chip shard the generator would build for `plan` (its options resolved: recompute
    policy and collective-matmul mode, sequence parallelism it implies), its micro-batches and why
    that collective-matmul mode; a one-line PodsimError for a plan the generator refuses. The plan
    search (podsim.plan) prunes and costs plans with it without building the program."""
    opts = replace(opts, recompute=_recompute_policy(opts.recompute))
    t, e, p = plan.tensor, plan.expert, plan.pipeline
    if why := cfg.tensor_problem(t):
        raise PodsimError(why)
    if why := cfg.expert_problem(e):
        raise PodsimError(why)
    if cfg.parallel_block and cfg.is_moe:
        raise PodsimError(f"parallel_block: {cfg.name} has experts; the generator builds a parallel block of attention and a "
                          "dense MLP only (PaLM §2), not of attention and a mixture of experts; drop parallel_block")
    if cfg.n_layers % p:
        raise PodsimError(f"pipeline={p} does not divide {cfg.name}'s {cfg.n_layers} layers")
    if opts.sequence_parallel and cfg.seq_len % t:
        raise PodsimError(f"sequence parallelism needs tensor={t} to divide the sequence length {cfg.seq_len}")
    local = local_batch(cfg.global_batch, plan, "sequences")
    m = microbatches(local, plan, opts)
    sh = TransformerShard(cfg, plan, opts, b=local // m, layers=cfg.n_layers // p)
    # At least a forward and a backward compute op per layer of the stage per stage-iteration
    # (m + p - 1 of each): refused before the program is built if that passes the ops budget.
    check_budget("ops", 2 * sh.layers * (m + p - 1), f"{cfg.name} with {m} micro-batch(es) over {p} stage(s)",
                 f"at least 2 x {sh.layers} layers x {m + p - 1} stage-iterations")
    mode, why = _collective_matmul(opts.collective_matmul, sh, generation, vendor)
    opts = replace(opts, collective_matmul=mode, sequence_parallel=opts.sequence_parallel or mode in _DECOMPOSED)
    if opts.sequence_parallel and cfg.seq_len % t:
        raise PodsimError(f"collective_matmul {mode!r} shards the sequence between blocks: tensor={t} must divide the sequence length {cfg.seq_len}")
    return replace(sh, opts=opts), m, why


def _transformer_program(cfg: TransformerConfig, plan: ParallelPlan, opts: GenerateOptions, sizes: Mapping[str, int],
                         generation: str, vendor: str) -> tuple[ProgramBuilder, dict]:
    sh, m, why = transformer_shard(cfg, plan, opts, generation, vendor)
    opts, p = sh.opts, plan.pipeline
    mode = opts.collective_matmul
    builder = ProgramBuilder(sizes, opts.precision, opts.combine_grad_reduce)
    _TransformerProgram(sh, builder, m).step()
    info = {
        "params": cfg.params,
        "active_params": cfg.active_params,
        "tokens_per_step": cfg.tokens_per_step,
        "model_flops_per_step": cfg.training_flops_per_step(),
        "microbatches": m,
        "microbatch_sequences": sh.b,
        "layers_per_stage": sh.layers,
        "pipeline_bubble_fraction": (p - 1) / (m + p - 1),
        "sequence_parallel": opts.sequence_parallel,
        "collective_matmul": {"mode": mode, "why": why},
        "hbm_footprint": transformer_footprint(sh, m).as_dict(),
    }
    return builder, info
