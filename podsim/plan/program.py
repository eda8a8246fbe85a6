"""One training step as the analytic estimate sees it: per micro-batch, the passes of the
generator's program (embedding, each layer forward, LM head, each layer backward, embedding
gradient), each a chain of compute and blocking collectives, with the collectives that run beside
the chain (FSDP gathers ahead of a layer, gradient reductions after it).

The passes follow `podsim.trace.generate`'s program op for op (the same `TransformerShard` costs,
the same collectives on the same logical axes, the same blocking rules), but as one layer of each
kind with counts instead of a DAG of thousands of ops: every layer of a model is alike, so a
step is `microbatches x (forward + backward)` passes of a handful of kinds. Compute is timed by
`podsim.perf.compute_time_s`, exactly as the engine times each op. tests/test_plan_program.py
checks the totals (FLOPs, HBM bytes, bytes per collective kind and axis) against a generated
trace, so a change to the generator that this model misses fails there.

Pipeline parallelism is not modelled (the search does not enumerate it).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from podsim.errors import PodsimError
from podsim.perf import compute_time_s
from podsim.perf.chips import ChipCompute
from podsim.perf.opmodel import Matmul, matmul_time_s
from podsim.trace.costs import Block, Cost, TransformerShard, adam_update
from podsim.trace.model import busbw_factor


@dataclass(frozen=True)
class Comm:
    """A collective on logical axes (`dcn` across slices), bytes in the nccl-tests convention."""

    kind: str
    axes: tuple[str, ...]
    nbytes: float


@dataclass(frozen=True)
class Item:
    """One link of a pass's chain. `compute_s` alone: compute on the chip's stream. `comm` alone:
    a blocking collective. Both with `repeat` > 0: a windowed matmul, `repeat` iterations of a
    partial matmul (`compute_s`) beside one permute (the next iteration waits for both), plus
    `tail_s`, the iteration with no permute (the all-gather side's last, the reduce-scatter
    side's first). `beside`: a collective run beside the next compute item (collective_matmul
    hidden)."""

    @property
    def busy_compute_s(self) -> float:
        """The compute this item puts on the chip's stream."""
        return self.compute_s * self.repeat + self.tail_s if self.repeat else self.compute_s

    compute_s: float = 0.0
    comm: Comm | None = None
    repeat: int = 0
    tail_s: float = 0.0
    beside: bool = False
    recompute_s: float = 0.0  # the part of compute_s that recomputes forward work


@dataclass
class Pass:
    """A pass of the program: its chain, the FSDP gather its first compute waits for (issued one
    layer ahead), and the gradient reductions issued when it ends (every micro-batch: FSDP
    reduce-scatter; the last: data-parallel all-reduces)."""

    name: str
    chain: list[Item] = field(default_factory=list)
    gather: Comm | None = None
    reduce: list[Comm] = field(default_factory=list)
    last_reduce: list[Comm] = field(default_factory=list)
    count: int = 1  # passes of this kind per micro-batch (layers)


@dataclass
class StepProgram:
    """The step: the passes of one micro-batch in order, `microbatches` times, then the update."""

    forward: list[Pass]
    backward: list[Pass]
    microbatches: int
    optimizer_s: float
    flops: float  # per chip per step (hardware FLOPs: recomputation included)
    hbm_bytes: float  # per chip per step, compute ops
    memory_bound_s: float  # per step: memory-bound compute (norms, elementwise, the update), recomputation not included

    @property
    def compute_s(self) -> float:
        """Compute on the chip's stream per step: a lower bound of the step (one stream)."""
        m = self.microbatches
        return self.optimizer_s + sum(it.busy_compute_s * ps.count * m for ps in (*self.forward, *self.backward) for it in ps.chain)

    @property
    def ops(self) -> int:
        """About how many ops the generated trace holds (what the ops budget is checked on):
        a windowed matmul's partial matmuls and permutes, each collective, the update."""
        def n(it: Item) -> int:
            return 2 * it.repeat + 1 if it.repeat else 1

        m, total = self.microbatches, 1
        for ps in (*self.forward, *self.backward):
            per = sum(n(it) for it in ps.chain) + (ps.gather is not None) + len(ps.reduce)
            # an all-reduce across slices and axes inside them runs as three (hierarchical)
            last = sum(3 if "dcn" in c.axes and len(c.axes) > 1 else 1 for c in ps.last_reduce)
            total += ps.count * (m * per + last)
        return total

    def volume_per_axis(self) -> dict[str, float]:
        """Bytes each chip moves on each logical axis per step (the generator's
        `volume_per_axis`, which orders the mesh mapping)."""
        vol: dict[str, float] = {}
        sizes = self.sizes

        def add(c: Comm | None, n: float, permute: bool = False) -> None:
            if c is None or n == 0:
                return
            group = 1
            for a in c.axes:
                group *= sizes.get(a, 1)
            moved = c.nbytes if permute else c.nbytes * busbw_factor(c.kind, group)
            for a in c.axes:
                vol[a] = vol.get(a, 0.0) + moved * n

        m = self.microbatches
        for ps in (*self.forward, *self.backward):
            for it in ps.chain:
                add(it.comm, m * ps.count * max(it.repeat, 1), permute=it.repeat > 0)
            add(ps.gather, m * ps.count)
            for c in ps.reduce:
                add(c, m * ps.count)
            for c in ps.last_reduce:
                add(c, ps.count)
        return vol

    sizes: dict[str, int] = field(default_factory=dict)


class _Timer:
    """Compute ops timed as the engine times them (`op_timer`: per-op model), each distinct cost once."""

    def __init__(self, chip: ChipCompute, precision: str):
        self.chip, self.precision = chip, precision
        self.flops = 0.0
        self.hbm = 0.0
        self.memory_s = 0.0  # memory-bound time (not recomputation) per micro-batch
        self._memo: dict[tuple, tuple[float, float]] = {}

    def __call__(self, cost: Cost, times: float = 1.0, recompute: bool = False) -> float:
        self.flops += cost.flops * times
        self.hbm += cost.hbm * times
        key = (cost.flops, cost.hbm, cost.matmuls)
        hit = self._memo.get(key)
        if hit is None:
            mms = tuple(mm.as_tuple() for mm in cost.matmuls if mm.count > 0)
            prec = self.precision if mms else "bf16"
            total = compute_time_s(self.chip, cost.flops, cost.hbm, mms, prec)
            matmul = sum(matmul_time_s(Matmul.of(t), self.chip, prec) for t in mms)
            hit = self._memo[key] = (total, max(total - matmul, 0.0))
        if not recompute:
            self.memory_s += hit[1] * times
        return hit[0]


class _Builder:
    """Mirrors `podsim.trace.generate._TransformerProgram` for one stage (no pipeline)."""

    def __init__(self, sh: TransformerShard, chip: ChipCompute, microbatches: int):
        if sh.plan.pipeline != 1:
            raise PodsimError("the plan estimate models no pipeline parallelism (pipeline=1)")
        self.sh, self.m = sh, microbatches
        self.timer = _Timer(chip, sh.opts.precision)
        self.weight = 1.0  # how many times the ops now emitted occur per micro-batch (for the totals)
        opts = sh.opts
        mode = opts.collective_matmul
        self.t = sh.plan.tensor
        self.sp = opts.sequence_parallel
        self.hidden = mode == "hidden"
        self.cm_ag = mode in ("chunked", "all_gather")
        self.cm_rs = mode in ("chunked", "reduce_scatter")
        self.fsdp = sh.plan.fsdp > 1
        self.sizes = {**sh.plan.sizes(), "dcn": sh.plan.dcn}

    # chain items ---------------------------------------------------------------------------
    def _ok(self, axes: tuple[str, ...], nbytes: float) -> bool:
        return nbytes > 0 and any(self.sizes[a] > 1 for a in axes)

    def coll(self, chain: list[Item], kind: str, nbytes: float, axes: tuple[str, ...] = ("tensor",), *, tp: bool = True) -> None:
        """A collective on the chain: blocking, or beside the next compute for tensor-parallel
        collectives under collective_matmul hidden."""
        axes = tuple(a for a in axes if self.sizes[a] > 1)
        if not axes or nbytes <= 0:
            return
        chain.append(Item(comm=Comm(kind, axes, nbytes), beside=tp and self.hidden))

    def compute(self, chain: list[Item], cost: Cost, recompute: bool = False) -> None:
        s = self.timer(cost, self.weight, recompute)
        chain.append(Item(compute_s=s, recompute_s=s if recompute else 0.0))

    def window(self, chain: list[Item], side: str, cost: Cost, recompute: bool = False) -> None:
        """`ProgramBuilder.windowed_matmul`: t partial matmuls, t - 1 permutes of act / t."""
        t = self.t
        part = self.timer(cost.times(1.0 / t), self.weight * t, recompute)
        chain.append(Item(compute_s=part, comm=Comm("send_recv", ("tensor",), self.sh.act / t), repeat=t - 1,
                          tail_s=part, recompute_s=part * t if recompute else 0.0))

    def enter(self, chain, scale=1.0):
        if self.sp:
            self.coll(chain, "all_gather", self.sh.act)

    def exit(self, chain, scale=1.0):
        self.coll(chain, "reduce_scatter" if self.sp else "all_reduce", self.sh.act * scale)

    def enter_bwd(self, chain, scale=1.0):
        self.coll(chain, "reduce_scatter" if self.sp else "all_reduce", self.sh.act * scale)

    def exit_bwd(self, chain, scale=1.0):
        if self.sp:
            self.coll(chain, "all_gather", self.sh.act * scale)

    # blocks -----------------------------------------------------------------------------------
    def block_fwd(self, chain: list[Item], blk: Block, recompute: bool = False) -> None:
        if not (self.cm_ag or self.cm_rs):
            self.enter(chain)
            self.compute(chain, blk.total(), recompute)
            self.exit(chain)
            return
        self.compute(chain, blk.norm, recompute)
        if self.cm_ag:
            self.window(chain, "all_gather", blk.first, recompute)
        else:
            self.enter(chain)
            self.compute(chain, blk.first, recompute)
        self.compute(chain, blk.mid, recompute)
        if self.cm_rs:
            self.window(chain, "reduce_scatter", blk.last, recompute)
        else:
            self.compute(chain, blk.last, recompute)
            self.exit(chain)
        self.compute(chain, blk.residual, recompute)

    def block_bwd(self, chain: list[Item], blk: Block, core: bool = False) -> None:
        sh = self.sh
        if not (self.cm_ag or self.cm_rs):
            self.exit_bwd(chain)
            if core:
                self.compute(chain, sh.attn_core(), recompute=True)
            self.compute(chain, blk.total().backward())
            self.enter_bwd(chain)
            return
        self.compute(chain, blk.residual.backward())
        if self.cm_ag:
            self.window(chain, "all_gather", blk.last.backward())
        else:
            self.exit_bwd(chain)
            self.compute(chain, blk.last.backward())
        if core:
            self.compute(chain, sh.attn_core(), recompute=True)
        self.compute(chain, blk.mid.backward())
        if self.cm_rs:
            self.window(chain, "reduce_scatter", blk.first.backward())
        else:
            self.compute(chain, blk.first.backward())
            self.enter_bwd(chain)
        self.compute(chain, blk.norm.backward())

    def layer_fwd(self, chain: list[Item], recompute: bool = False) -> None:
        sh = self.sh
        if sh.cfg.parallel_block:
            self.block_fwd(chain, sh.parallel_block(), recompute)
            return
        self.block_fwd(chain, sh.attn_block(), recompute)
        if sh.cfg.is_moe:
            self.enter(chain)
            self.compute(chain, sh.router_fwd(), recompute)
            self.coll(chain, "all_to_all", sh.dispatch_bytes(), ("expert",), tp=False)
            self.compute(chain, sh.experts_fwd(), recompute)
            self.coll(chain, "all_to_all", sh.dispatch_bytes(), ("expert",), tp=False)
            self.exit(chain)
        else:
            self.block_fwd(chain, sh.mlp_block(), recompute)

    def layer_bwd(self, chain: list[Item]) -> None:
        sh = self.sh
        core = sh.opts.recompute == "minimal"
        if sh.opts.recompute == "full":
            self.layer_fwd(chain, recompute=True)
        if sh.cfg.parallel_block:
            self.block_bwd(chain, sh.parallel_block(), core)
            return
        if sh.cfg.is_moe:
            self.exit_bwd(chain)
            self.coll(chain, "all_to_all", sh.dispatch_bytes(), ("expert",), tp=False)
            self.compute(chain, sh.experts_fwd().backward())
            self.coll(chain, "all_to_all", sh.dispatch_bytes(), ("expert",), tp=False)
            self.compute(chain, sh.router_fwd().backward())
            self.enter_bwd(chain)
        else:
            self.block_bwd(chain, sh.mlp_block())
        self.block_bwd(chain, sh.attn_block(), core)

    # reductions ---------------------------------------------------------------------------
    def gather(self, params: float) -> Comm | None:
        if not self.fsdp:
            return None
        return Comm("all_gather", ("fsdp",), params * self.sh.opts.weight_bytes)

    def reductions(self, dense: float, expert: float) -> tuple[list[Comm], list[Comm]]:
        g, f = self.sh.opts.grad_bytes, self.sh.plan.fsdp
        every = [Comm("reduce_scatter", ("fsdp",), (dense + expert) * g)] if self.fsdp and dense + expert > 0 else []
        last = []
        for nbytes, axes in ((dense * g / f, ("data", "expert", "dcn")), (expert * g / f, ("data", "dcn"))):
            axes = tuple(a for a in axes if self.sizes[a] > 1)
            if axes and nbytes > 0:
                last.append(Comm("all_reduce", axes, nbytes))
        return every, last

    def chains(self) -> tuple[list[list[Item]], float, float, float]:
        """The chains of the six passes of one micro-batch (they do not depend on fsdp, data or
        dcn: those add gathers and reductions beside them) and the per-micro-batch FLOPs, HBM
        bytes and memory-bound seconds."""
        sh, L = self.sh, self.sh.layers
        out: list[list[Item]] = [[] for _ in range(6)]
        embed, layer, head, head_b, layer_b, embed_b = out
        self.weight = 1.0
        self.compute(embed, sh.embed_fwd())
        self.exit(embed)
        self.weight = L
        self.layer_fwd(layer)
        self.weight = 1.0
        self.enter(head)
        self.compute(head, sh.head_fwd())
        self.coll(head, "all_reduce", 3.0 * sh.tokens * 4, tp=False)
        self.compute(head_b, sh.head_fwd().backward())
        self.enter_bwd(head_b)
        self.weight = L
        self.layer_bwd(layer_b)
        self.weight = 1.0
        self.exit_bwd(embed_b)
        self.compute(embed_b, sh.embed_fwd().backward())
        return out, self.timer.flops, self.timer.hbm, self.timer.memory_s

    def build(self) -> StepProgram:
        sh, L, m = self.sh, self.sh.layers, self.m
        chip = self.timer.chip
        key = (sh.cfg.name, id(sh.cfg), chip.generation, tuple(sorted(chip.peak_flops_per_s.items())), chip.hbm_bytes_per_s,
               chip.matmul_fraction, chip.hbm_fraction, tuple(sorted(chip.precision_fractions.items())),
               sh.plan.tensor, sh.plan.expert, sh.b, L, replace(sh.opts, microbatches=None))
        hit = _CHAINS.get(key)
        if hit is None:
            if len(_CHAINS) > 4096:
                _CHAINS.clear()
            hit = _CHAINS[key] = (self.chains(), sh.cfg)  # the config held so its id stays its own
        (embed, layer, head, head_b, layer_b, embed_b), flops, hbm, memory = hit[0]
        layer_params = sh.dense_params() + sh.expert_params()
        every, last = self.reductions(sh.dense_params(), sh.expert_params())
        e_every, e_last = self.reductions(sh.embed_params(), 0)
        forward = [Pass("embed forward", embed, gather=self.gather(sh.embed_params())),
                   Pass("layer forward", layer, gather=self.gather(layer_params), count=L),
                   Pass("head forward", head)]
        backward = [Pass("head backward", head_b),
                    Pass("layer backward", layer_b, gather=self.gather(layer_params), reduce=every, last_reduce=last, count=L),
                    Pass("embed backward", embed_b, reduce=e_every, last_reduce=e_last)]
        opt = adam_update((L * layer_params + sh.embed_params()) / sh.plan.fsdp, sh.opts)
        opt_s = _Timer(self.timer.chip, sh.opts.precision)(opt)
        return StepProgram(forward, backward, m, opt_s, flops * m + opt.flops, hbm * m + opt.hbm, memory * m + opt_s,
                           sizes=self.sizes)


_CHAINS: dict[tuple, tuple] = {}
"""Chains by (model, chip, tensor, expert, sequences per micro-batch, layers, options): plans that
differ only in fsdp, data or dcn share them."""


def step_program(sh: TransformerShard, chip: ChipCompute, microbatches: int) -> StepProgram:
    """The step of `sh` (a shard from `podsim.trace.generate.transformer_shard`) as passes."""
    return _Builder(sh, chip, microbatches).build()
