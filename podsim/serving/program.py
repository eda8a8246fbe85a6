"""The ops of one serving step in program order: the one description both the step-trace
builder (run on the engine) and the fast step timer (run every step of a serving simulation)
read, so the two agree by construction and a test checks the engine's critical path against
the timer.

A decode step is latency-bound on ICI between memory-bound matmuls: each tensor-parallel
all-reduce of a few kB waits ~microseconds per hop, and the next matmul cannot start its MXU
work before the all-reduce's result arrives. Its weights do not depend on that result, though:
XLA's memory-space assignment copies an op's operands from HBM into on-chip memory (VMEM/CMEM)
asynchronously ahead of use, across an asynchronous collective. So each collective is paired
with a `prefetch`: the next op's weight bytes that fit in the chip's on-chip memory are read
from HBM while the collective runs (beside every collective of a run of them: the prefetch waits
only for the op before), and the next op then reads only the rest. A run of collectives takes
max(their times in a row, the prefetch) + the rest of the next op; with nothing to prefetch (no
on-chip memory figure) the collectives are fully exposed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from podsim.serving.costs import AttentionLoad, InferenceShard
from podsim.trace.costs import Cost


@dataclass(frozen=True)
class StepOp:
    """A compute op (its `cost`, `weights`: bytes of its weight operands, matmul by matmul) or a
    collective (`kind` on the logical `axis`, `nbytes` per chip) with the `prefetch` bytes of
    the next op's weights read into on-chip memory while it runs."""

    name: str
    kind: str  # "compute" or a collective kind
    layer: str = ""
    cost: Cost = Cost()
    weights: tuple[float, ...] = ()
    axis: str = ""
    nbytes: float = 0.0
    prefetch: float = 0.0
    precision: str = "matmul"  # "matmul" or "attention": which precision of the shard it runs at

    @property
    def is_compute(self) -> bool:
        return self.kind == "compute"


def weight_matrix_bytes(sh: InferenceShard, cost: Cost) -> tuple[float, ...]:
    """Per matmul of a cost built from weights (InferenceShard._matmul): its [k, n] weight bytes."""
    return tuple(mm.count * mm.k * mm.n * sh.precision.weight_bytes for mm in cost.matmuls)


def without_prefetched(cost: Cost, weights: tuple[float, ...], fetched: float) -> Cost:
    """The op once `fetched` bytes of its weights are already on chip: its weight matmuls,
    in order, read that much less from HBM."""
    if fetched <= 0:
        return cost
    left, mms = fetched, []
    for mm, w in zip(cost.matmuls, weights, strict=True):
        take = min(left, w)
        mms.append(replace(mm, hbm_bytes=mm.hbm_bytes - take) if take > 0 else mm)
        left -= take
    return Cost(cost.flops, cost.hbm - (fetched - left), tuple(mms))


def _compute(sh: InferenceShard, name: str, cost: Cost, layer: str) -> StepOp:
    return StepOp(name, "compute", layer, cost, weight_matrix_bytes(sh, cost))


def layer_ops(sh: InferenceShard, tokens: float, load: AttentionLoad, layer: str) -> list[StepOp]:
    """One layer's ops: attention, then the MLP or the MoE block, with their collectives."""
    ops = [_compute(sh, f"{layer}.attn_in", sh.attn_in(tokens), layer),
           StepOp(f"{layer}.attention", "compute", layer, sh.attention(load), (0.0, 0.0), precision="attention")]
    reduce = sh.tensor_reduce_bytes(tokens)
    if sh.parallel_block:
        block = sh.attn_out(tokens) + sh.mlp_in(tokens) + sh.mlp_out(tokens)
        ops += [_compute(sh, f"{layer}.out_and_mlp", block, layer),
                StepOp(f"{layer}.ar", "all_reduce", layer, axis="tensor", nbytes=reduce)]
        return ops
    ops += [_compute(sh, f"{layer}.attn_out", sh.attn_out(tokens), layer),
            StepOp(f"{layer}.attn.ar", "all_reduce", layer, axis="tensor", nbytes=reduce)]
    if sh.cfg.is_moe:
        dispatch = sh.dispatch_bytes(tokens)
        ops += [_compute(sh, f"{layer}.router", sh.router(tokens), layer),
                StepOp(f"{layer}.dispatch", "all_to_all", layer, axis="expert", nbytes=dispatch),
                _compute(sh, f"{layer}.experts", sh.experts(tokens), layer),
                StepOp(f"{layer}.combine", "all_to_all", layer, axis="expert", nbytes=dispatch)]
    else:
        ops += [_compute(sh, f"{layer}.mlp_in", sh.mlp_in(tokens), layer),
                _compute(sh, f"{layer}.mlp_out", sh.mlp_out(tokens), layer)]
    ops.append(StepOp(f"{layer}.mlp.ar", "all_reduce", layer, axis="tensor", nbytes=reduce))
    return ops


def step_ops(sh: InferenceShard, tokens: float, sampled: float, load: AttentionLoad, onchip_bytes: float = 0.0,
             layers: int | None = None) -> list[StepOp]:
    """Every op of one serving step in program order, collectives on axes of size 1 dropped and
    the last collective before each compute op given the prefetch of that op's weights (at most
    `onchip_bytes`; collectives in a row run one after another, the prefetch beside them all). `layers`: how many layers to emit (default all)."""
    sizes = {"tensor": sh.tensor, "expert": sh.expert}
    ops = [StepOp("embed", "compute", "embed", sh.embed(tokens)),
           StepOp("embed.ar", "all_reduce", "embed", axis="tensor", nbytes=sh.tensor_reduce_bytes(tokens))]
    for k in range(sh.cfg.n_layers if layers is None else layers):
        ops += layer_ops(sh, tokens, load, f"L{k}")
    head = sh.head(sampled)
    ops += [StepOp("head", "compute", "head", head, weight_matrix_bytes(sh, head)),
            StepOp("sample.ar", "all_reduce", "head", axis="tensor", nbytes=sh.sample_bytes(sampled))]
    ops = [op for op in ops if op.is_compute or (sizes[op.axis] > 1 and op.nbytes > 0)]
    out: list[StepOp] = []
    for i, op in enumerate(ops):
        if not op.is_compute and i + 1 < len(ops) and ops[i + 1].is_compute:  # the last collective before an op
            op = replace(op, prefetch=min(sum(ops[i + 1].weights), onchip_bytes))
        out.append(op)
    return out


def prefetched_costs(ops: list[StepOp]) -> list[tuple[StepOp, Cost]]:
    """Each op with the cost it runs at: a compute op after a collective less what that
    collective's prefetch already read (the prefetch itself is its own memory-only cost)."""
    out, fetched = [], 0.0
    for op in ops:
        if op.is_compute:
            out.append((op, without_prefetched(op.cost, op.weights, fetched)))
            fetched = 0.0
        else:
            out.append((op, Cost(0.0, op.prefetch)))
            fetched = op.prefetch
    return out


def matmul_tuples(cost: Cost) -> tuple[tuple[float, ...], ...]:
    """A cost's matmuls as the trace's (count, m, k, n, hbm_bytes) tuples."""
    return tuple(mm.as_tuple() for mm in cost.matmuls if mm.count > 0)


__all__ = ["StepOp", "layer_ops", "matmul_tuples", "prefetched_costs", "step_ops", "without_prefetched"]
