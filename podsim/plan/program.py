"""One training step as the analytic estimate sees it: per micro-batch, the passes of the
generator's program (embedding, each layer forward, LM head, each layer backward, embedding
gradient), each a chain of compute and blocking collectives, with the collectives that run beside
the chain (FSDP gathers ahead of a layer, gradient reductions after it).

The passes are the generator's program itself (podsim.trace.transformer): `_TransformerProgram` runs on a builder
that records what it asks for (compute costs, collectives and their blocking, windowed matmuls,
gradient reductions) instead of building ops, once per shard's tensor and expert sizes and
options, and the record is cut into passes with one layer standing for every layer of its kind:
a step is `microbatches x (forward + backward)` passes of a handful of kinds, not a DAG of
thousands of ops. Compute is timed by
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
from podsim.trace.builder import ProgramBuilder
from podsim.trace.costs import Cost, TransformerShard
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
            total = matmul = 0.0
            for prec, part in cost.by_precision(self.precision):  # as ProgramBuilder.compute splits it
                mms = tuple(mm.as_tuple() for mm in part.matmuls if mm.count > 0)
                prec = prec if mms else "bf16"
                total += compute_time_s(self.chip, part.flops, part.hbm, mms, prec)
                matmul += sum(matmul_time_s(Matmul.of(t), self.chip, prec) for t in mms)
            hit = self._memo[key] = (total, max(total - matmul, 0.0))
        if not recompute:
            self.memory_s += hit[1] * times
        return hit[0]


class _Recorder(ProgramBuilder):
    """A program builder that records what `podsim.trace.transformer._TransformerProgram` asks of it
    (compute, collectives with their blocking, windowed matmuls, gradient all-reduces) in order,
    with each op's layer, instead of building ops: the estimate's passes are the generator's own
    program, so a new recompute policy or optimizer there is one here too."""

    def __init__(self, sizes: dict[str, int], precision: str):
        super().__init__(sizes, precision)
        self.events: list[tuple] = []

    def compute(self, op_id, cost, *, deps=(), name="", layer="", bubble=False):
        self.events.append(("compute", op_id, layer, cost))
        self.last_compute = op_id
        return op_id

    def collective(self, op_id, kind, nbytes, axes, *, deps=None, blocking=True, name="", layer=""):
        axes = tuple(a for a in axes if self.sizes[a] > 1)
        if not axes or nbytes <= 0:
            return None
        self.events.append(("coll", op_id, layer, Comm(kind, axes, float(nbytes)), blocking))
        return op_id

    def windowed_matmul(self, op_id, side, cost, nbytes, axis, *, deps=(), name, layer, bubble=False):
        self.events.append(("window", op_id, layer, cost, Comm("send_recv", (axis,), nbytes / self.sizes[axis]), self.sizes[axis]))
        self.last_compute = op_id

    def grad_all_reduce(self, op_id, nbytes, axes, *, ready, blocking, name, layer):
        axes = tuple(a for a in axes if self.sizes[a] > 1)
        if axes and nbytes > 0:
            self.events.append(("dp", op_id, layer, Comm("all_reduce", axes, float(nbytes))))
        return None

    def frontier(self):
        return []

    def flush_grads(self):
        return []

    def send(self, *a, **kw):  # pragma: no cover - no pipeline is searched
        raise PodsimError("the plan estimate models no pipeline parallelism (pipeline=1)")


CANONICAL_SHARDS = 2
"""The recorded program's data, fsdp and dcn sizes: every gather and reduction is emitted (a plan
without FSDP drops them), and the per-plan data-parallel bytes and update scale from it."""


def _pass_kind(layer: str) -> str:
    return "layer" if layer.startswith("L") and layer[1:].isdigit() else layer


def _record(sh: TransformerShard) -> tuple[list[tuple[str, str, list[tuple]]], tuple]:
    """The generator's program for one micro-batch of `sh` (its tensor and expert sizes, its
    options), on canonical data/fsdp/dcn sizes: the passes in order as (phase, kind, events) with
    one representative layer per phase, and the update's event."""
    from podsim.trace.transformer import _TransformerProgram

    k = CANONICAL_SHARDS
    plan = replace(sh.plan, data=k, fsdp=k, dcn=k)
    shard = replace(sh, plan=plan)
    rec = _Recorder({**plan.sizes(), "dcn": plan.dcn}, sh.opts.precision)
    _TransformerProgram(shard, rec, 1).step()
    passes: list[tuple[str, str, list[tuple]]] = []
    optimizer = None
    phase, seen_layer = "fwd", None
    for ev in rec.events:
        op_id, layer = ev[1], ev[2]
        if layer == "optimizer":
            optimizer = ev
            continue
        if phase == "fwd" and (".bwd." in op_id or ".recompute." in op_id):
            phase, seen_layer = "bwd", None
        kind = _pass_kind(layer)
        if kind == "layer":
            if seen_layer is None:
                seen_layer = layer
            if layer != seen_layer:
                continue  # every layer is alike: one stands for all
        if not passes or passes[-1][:2] != (phase, kind):
            passes.append((phase, kind, []))
        passes[-1][2].append(ev)
    if optimizer is None:
        raise PodsimError("the generator's program has no update step; the plan estimate cannot time it")
    return passes, optimizer


def _chain_item(ev: tuple, timer: _Timer, weight: float) -> Item:
    kind = ev[0]
    recompute = ".recompute" in ev[1]
    if kind == "compute":
        s = timer(ev[3], weight, recompute)
        return Item(compute_s=s, recompute_s=s if recompute else 0.0)
    if kind == "window":
        cost, comm, t = ev[3], ev[4], ev[5]
        part = timer(cost.times(1.0 / t), weight * t, recompute)
        return Item(compute_s=part, comm=comm, repeat=t - 1, tail_s=part, recompute_s=part * t if recompute else 0.0)
    comm, blocking = ev[3], ev[4]
    return Item(comm=comm, beside=blocking == "overlap")


def _build(sh: TransformerShard, chip: ChipCompute, m: int) -> StepProgram:
    if sh.plan.pipeline != 1:
        raise PodsimError("the plan estimate models no pipeline parallelism (pipeline=1)")
    key = (sh.cfg.name, id(sh.cfg), chip.generation, tuple(sorted(chip.peak_flops_per_s.items())), chip.hbm_bytes_per_s,
           chip.matmul_fraction, chip.hbm_fraction, tuple(sorted(chip.precision_fractions.items())),
           sh.plan.tensor, sh.plan.expert, sh.b, sh.layers, replace(sh.opts, microbatches=None))
    hit = _CHAINS.get(key)
    if hit is None:
        if len(_CHAINS) > 4096:
            _CHAINS.clear()
        hit = _CHAINS[key] = (_shape(sh, chip), sh.cfg)  # the config held so its id stays its own
    shape = hit[0]
    k, f, plan = CANONICAL_SHARDS, sh.plan.fsdp, sh.plan
    sizes = {**plan.sizes(), "dcn": plan.dcn}

    def real(c: Comm, scale: float = 1.0) -> Comm | None:
        axes = tuple(a for a in c.axes if sizes[a] > 1)
        return Comm(c.kind, axes, c.nbytes * scale) if axes else None

    forward, backward = [], []
    for phase, kind, chain, gather, reduce, dp in shape["passes"]:
        ps = Pass(f"{kind} {'forward' if phase == 'fwd' else 'backward'}", chain,
                  gather=real(gather) if gather is not None and f > 1 else None,
                  reduce=[c for c in (real(r) for r in reduce) if c is not None] if f > 1 else [],
                  last_reduce=[c for c in (real(d, k / f) for d in dp) if c is not None],
                  count=sh.layers if kind == "layer" else 1)
        (forward if phase == "fwd" else backward).append(ps)
    opt_cost = shape["optimizer"].times(k / f)
    timer = _Timer(chip, sh.opts.precision)
    opt_s = timer(opt_cost)
    return StepProgram(forward, backward, m, opt_s, shape["flops"] * m + opt_cost.flops, shape["hbm"] * m + opt_cost.hbm,
                       shape["memory_s"] * m + opt_s, sizes=sizes)


def _shape(sh: TransformerShard, chip: ChipCompute) -> dict:
    """The recorded program as chains of timed items and its collectives beside them, per pass."""
    passes, optimizer = _record(sh)
    timer = _Timer(chip, sh.opts.precision)
    out = []
    for phase, kind, events in passes:
        weight = sh.layers if kind == "layer" else 1.0
        chain, gather, reduce, dp = [], None, [], []
        for ev in events:
            if ev[0] == "dp":
                dp.append(ev[3])
            elif ev[0] == "coll" and ev[4] is False:
                if ev[3].kind == "all_gather" and "gather" in ev[1]:
                    gather = ev[3]
                else:
                    reduce.append(ev[3])
            else:
                chain.append(_chain_item(ev, timer, weight))
        out.append((phase, kind, chain, gather, reduce, dp))
    return {"passes": out, "optimizer": optimizer[3], "flops": timer.flops, "hbm": timer.hbm, "memory_s": timer.memory_s}


_CHAINS: dict[tuple, tuple] = {}
"""Recorded programs by (model, chip, tensor, expert, sequences per micro-batch, layers, options):
plans that differ only in fsdp, data or dcn share them."""


def step_program(sh: TransformerShard, chip: ChipCompute, microbatches: int) -> StepProgram:
    """The step of `sh` (a shard from `podsim.trace.transformer.transformer_shard`) as passes."""
    return _build(sh, chip, microbatches)
