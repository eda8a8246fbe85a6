"""One serving step as a step trace for the engine: the ops of `podsim.serving.program` laid on
the slice by the trainer's mesh mapping, run as a step study (`serving_step_study`, `podsim.study.run_study`)
like any training step.

Compute ops chain on one stream; each collective runs beside the prefetch of the next op's
weights (a memory-only compute op that waits only for the op before the collective), and the
next op waits for both. This is the DAG `StepTimer` adds up without the engine.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from podsim.serving.costs import AttentionLoad, InferenceShard
from podsim.serving.program import prefetched_costs, step_ops
from podsim.study import StepStudy
from podsim.trace.builder import ProgramBuilder
from podsim.trace.mesh import DEFAULT_INTENSITY, ParallelPlan, map_mesh
from podsim.trace.model import Compute, StepTrace


def serving_step_trace(shard: InferenceShard, shape: Sequence[int], tokens: int, sampled: int, load: AttentionLoad,
                       onchip_bytes: float = 0.0, name: str = "") -> StepTrace:
    """The step trace of one serving step of `tokens` tokens, `sampled` of them through the LM
    head, the attention core over `load`, on a slice of `shape` (tensor x expert chips)."""
    shape = tuple(int(s) for s in shape)
    plan = ParallelPlan(tensor=shard.tensor, expert=shard.expert)
    builder = ProgramBuilder({**plan.sizes(), "dcn": 1}, shard.precision.matmul)
    ops = step_ops(shard, tokens, sampled, load, onchip_bytes)
    attention_ids: set[str] = set()
    waiting: str | None = None  # the collective the next compute op waits for
    for op, cost in prefetched_costs(ops):
        if op.is_compute:
            builder.compute(op.name, cost, deps=[waiting], name=op.name, layer=op.layer)
            waiting = None
            if op.precision == "attention":
                attention_ids.add(op.name)
            continue
        before = [d for d in (builder.last_compute, waiting) if d]  # collectives in a row run one after another
        waiting = builder.collective(op.name, op.kind, op.nbytes, (op.axis,), deps=before, blocking=False,
                                     name=op.name, layer=op.layer)
        if op.prefetch > 0:  # the next op's weights, read into on-chip memory while the collective runs
            builder.compute(f"{op.name}.prefetch", cost, name=f"prefetch for {op.name}", layer=op.layer)
    mapping = map_mesh(shape, plan, DEFAULT_INTENSITY)
    finished = builder.finish(mapping, shape)
    if shard.precision.attention != shard.precision.matmul:
        finished = [replace(o, precision=shard.precision.attention) if isinstance(o, Compute) and o.id in attention_ids else o
                    for o in finished]
    meta = {"generator": "podsim.serving.trace", "model": shard.cfg.name, "tensor": shard.tensor, "expert": shard.expert,
            "tokens": tokens, "sampled": sampled, "chips": math.prod(shape),
            "prefetched_bytes": sum(op.prefetch for op in ops)}
    return StepTrace(tuple(finished), name=name or f"{shard.cfg.name} serving step, {tokens} tokens", meta=meta)



def serving_step_study(shard: InferenceShard, generation, shape: Sequence[int], tokens: int, sampled: int,
                       load: AttentionLoad, onchip_bytes: float = 0.0, *, routing: str = "dimension_order",
                       on=None) -> StepStudy:
    """One serving step as the step study every face runs (`podsim.study.run_study`): the step
    trace on one slice of `shape` (`on`: an already built slice)."""
    trace = serving_step_trace(shard, shape, tokens, sampled, load, onchip_bytes)
    return StepStudy(generation, tuple(int(s) for s in shape), trace=trace, routing=routing, on=on,
                     name=f"{shard.cfg.name} serving step")
