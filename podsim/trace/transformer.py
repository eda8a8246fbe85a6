"""The transformer step program: what each chip does in one training step, as an SPMD op DAG
(every chip runs the same ops), emitted through a ProgramBuilder:

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

from collections.abc import Mapping, Sequence
from dataclasses import replace

from podsim.bounds import check_budget
from podsim.errors import PodsimError
from podsim.trace.builder import ProgramBuilder
from podsim.trace.configs import TransformerConfig
from podsim.trace.costs import Block, TransformerShard, adam_update
from podsim.trace.defaults import (
    collective_matmul_default,
    quantized_matmuls_default,
    sequence_parallel_default,
    shards_between_blocks,
)
from podsim.trace.memory import transformer_footprint
from podsim.trace.mesh import ParallelPlan
from podsim.trace.options import DECOMPOSED, GenerateOptions
from podsim.trace.plans import grad_allreduce_blocking, local_batch, microbatches

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
        mode = opts.collective_matmul  # resolved by transformer_program: never auto here
        self.tp_blocking: bool | str = "overlap" if mode == "hidden" else True
        self.cm_ag = mode in ("chunked", "all_gather")  # all-gathers into a matmul decomposed
        self.cm_rs = mode in ("chunked", "reduce_scatter")  # reduce-scatters out of a matmul decomposed
        self.rs_blocking = not opts.overlap_grad_reduce
        self.ar_blocking = grad_allreduce_blocking(opts, sh.plan)
        self.parallel = sh.cfg.parallel_block  # attention and the dense MLP as one block (never MoE: transformer_program)

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

            if sh.opts.recompute == "save_attention":  # the MLP's input and activation, for its backward
                self._recompute_mlp_input(pre, layer, bubble, g)
                g = None

            def recompute_core(layer: str = layer) -> None:
                if sh.opts.recompute in ("minimal", "save_attention"):
                    b.compute(f"{pre}.{layer}.attn.recompute", sh.attn_core(), name="attention core recomputed", layer=layer, bubble=bubble)
                elif sh.opts.recompute == "dots":  # what no weight matmul produced: the core, the norms, the activation
                    mlp = sh.mlp_block()
                    b.compute(f"{pre}.{layer}.attn.recompute", sh.attn_core() + mlp.norm + mlp.mid, layer=layer, bubble=bubble,
                              name="attention core, norms and MLP activation recomputed")

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

    def _recompute_mlp_input(self, pre: str, layer: str, bubble: bool, gather: str | None) -> None:
        """`save_attention`: the MLP's forward up to its output matmul re-run before its backward
        (its input gathered again under sequence parallelism, the norm, the input matmul(s) and the
        activation); the attention projections and output are kept."""
        mlp = self.sh.mlp_block()
        self._enter(f"{pre}.{layer}.mlp.recompute.in", layer)
        self.b.compute(f"{pre}.{layer}.mlp.recompute", mlp.norm + mlp.first + mlp.mid, deps=[gather],
                       name="MLP input and activation recomputed", layer=layer, bubble=bubble)

    def optimizer(self) -> None:
        sh = self.sh
        params = (sh.layers * (sh.dense_params() + sh.expert_params()) + sh.embed_params() * self.edge) / sh.plan.fsdp
        what = "Adam" if sh.opts.optimizer == "adam" else "Adafactor"
        self.b.compute("optimizer", adam_update(params, sh.opts), deps=[*self.reductions, *self.b.flush_grads()], name=f"{what} update of this chip's shard", layer="optimizer")

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


def transformer_shard(cfg: TransformerConfig, plan: ParallelPlan, opts: GenerateOptions,
                      vendor: str) -> tuple[TransformerShard, int, str, str, str]:
    """The per-chip shard the program runs for `plan` (its options resolved: `sequence_parallel`
    `collective_matmul` and `quantized_matmuls` by podsim.trace.defaults, once), its micro-batches, and why
    each of the three was chosen (sequence parallel, collective matmul, quantized matmuls); a one-line PodsimError for a plan the generator
    refuses. The plan search (podsim.plan) prunes and costs plans with it without building the program."""
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
    if opts.recompute == "save_attention" and cfg.is_moe:
        raise PodsimError(f"recompute 'save_attention' re-runs a dense MLP's input matmul; {cfg.name} has experts: use minimal or full")
    if opts.sequence_parallel and not shards_between_blocks(cfg, t):
        raise PodsimError(f"sequence parallelism needs tensor={t} to divide the sequence length {cfg.seq_len} or the width {cfg.d_model}")
    local = local_batch(cfg.global_batch, plan, "sequences")
    m = microbatches(local, plan, opts)
    # At least a forward and a backward compute op per layer of the stage per stage-iteration
    # (m + p - 1 of each): refused before the program is built if that passes the ops budget.
    layers = cfg.n_layers // p
    check_budget("ops", 2 * layers * (m + p - 1), f"{cfg.name} with {m} micro-batch(es) over {p} stage(s)",
                 f"at least 2 x {layers} layers x {m + p - 1} stage-iterations")
    sp, sp_why = sequence_parallel_default(opts.sequence_parallel, cfg, t)
    sh = TransformerShard(cfg, plan, replace(opts, sequence_parallel=sp), b=local // m, layers=layers)
    mode, why = collective_matmul_default(opts.collective_matmul, t, sp, vendor, sh.act / 2**20)
    if mode in DECOMPOSED and not sp:
        if opts.sequence_parallel is False:
            raise PodsimError(f"collective_matmul {mode!r} decomposes the tensor-parallel all-gathers and reduce-scatters of "
                              "activations sharded between blocks; it cannot run with sequence_parallel=false")
        if not shards_between_blocks(cfg, t):
            raise PodsimError(f"collective_matmul {mode!r} shards the activations between blocks: tensor={t} must divide the "
                              f"sequence length {cfg.seq_len} or the width {cfg.d_model}")
        sp, sp_why = True, f"collective_matmul {mode!r} shards the activations between blocks"
    quantized, quantized_why = quantized_matmuls_default(opts.quantized_matmuls, opts.precision)
    opts = replace(opts, collective_matmul=mode, sequence_parallel=sp, quantized_matmuls=quantized)
    return replace(sh, opts=opts), m, sp_why, why, quantized_why


def transformer_program(cfg: TransformerConfig, plan: ParallelPlan, opts: GenerateOptions, sizes: Mapping[str, int],
                        vendor: str) -> tuple[ProgramBuilder, dict]:
    """The transformer's step program under `plan` (its sizes per logical axis in `sizes`) and the
    trace meta it adds (the shard: `transformer_shard`)."""
    sh, m, sp_why, why, quantized_why = transformer_shard(cfg, plan, opts, vendor)
    opts, p, mode = sh.opts, plan.pipeline, sh.opts.collective_matmul
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
        "sequence_parallel_why": sp_why,
        "collective_matmul": {"mode": mode, "why": why},
        "quantized_matmuls": opts.quantized_matmuls,
        "quantized_matmuls_why": quantized_why,
        "hbm_footprint": transformer_footprint(sh, m).as_dict(),
    }
    return builder, info
