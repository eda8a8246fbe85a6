"""How long one serving step takes on a slice: the per-op compute model for every op, the
engine (or a measured profile) for every collective.

`StepTimer` times the ops of `podsim.serving.program.step_ops` the way the engine runs their
step trace (`serving_step_trace`): compute ops by `podsim.perf.compute_time_s`, each collective
by the flow-level engine on the slice (`simulate_collective` on the group the mesh mapping
gives its logical axis; but all-reduces on gpu-h100 as published, which take vidur's measured
NCCL profile, `podsim.serving.nccl_profile`), a collective and its prefetch side by side. A serving simulation asks
for a step time at every iteration, so the timer keeps what does not change between steps:
every op's time but the attention core's depends only on the step's tokens and sampled
positions and is cached on them; the attention core's depends on the KV cache the batch reads
and is timed afresh (one roofline); collective times are engine runs at a fixed grid of sizes
(exact up to 4 units of their per-token bytes, then 25% apart), linear in between, so the
result of a step never depends on which steps came before.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from podsim.engine import simulate_collective
from podsim.errors import PodsimError
from podsim.perf import chip_compute, compute_time_s
from podsim.perf.opmodel import memory_time_s, padded_flops
from podsim.serving.costs import AttentionLoad, InferenceShard
from podsim.serving.engines import ENGINES, EngineModel
from podsim.serving.nccl_profile import SOURCE as PROFILE_SOURCE
from podsim.serving.nccl_profile import all_reduce_s, profile_for
from podsim.serving.program import (
    StepOp,
    matmul_tuples,
    prefetched_costs,
    step_ops,
    weight_matrix_bytes,
    without_prefetched,
)
from podsim.topology import build_slice, get_generation, parse_shape
from podsim.topology.summary import Built
from podsim.trace.costs import Cost
from podsim.trace.mesh import DEFAULT_INTENSITY, ParallelPlan, map_mesh
from podsim.trace.model import format_group

MiB = 2**20
# On-chip memory per chip that XLA's memory-space assignment can prefetch weights into (VMEM,
# and CMEM on v4), with its source. Ids are rows of shared/reference/hardware.md.
ONCHIP_MEMORY: dict[str, tuple[float, str]] = {
    "tpu-v3": (32 * MiB, "v3.17: 32 MiB VMEM per chip (ISCA23 Table 4)"),
    "tpu-v4": (128 * MiB, "v4.4: 128 MiB CMEM shared by the chip's TensorCores (ISCA23 §2.2)"),
    "tpu-v5e": (48 * MiB, "MLPerf Inference v4.0, mlcommons/inference_results_v4.0@3c4a1cf "
                          "closed/Google/systems/tpu_v5e_x4.json: accelerator_on-chip_memories 48 MiB"),
    "tpu-v5p": (48 * MiB, "assumption: not published; v5e's 48 MiB"),
    "tpu-v6e": (48 * MiB, "assumption: not published; v5e's 48 MiB"),
    "tpu-7x": (48 * MiB, "assumption: not published; v5e's 48 MiB"),
}


def onchip_memory(generation) -> tuple[float, str]:
    """(bytes, source) of a generation's on-chip memory for weight prefetch; 0 where unknown (a
    GPU, a custom chip: every collective of a step exposed)."""
    gen = get_generation(generation)
    return ONCHIP_MEMORY.get(gen.chip_id, (0.0, "no on-chip prefetch modelled for this generation"))


GRID_EXACT = 4  # units timed exactly below the grid's geometric part


def _grid(limit: float) -> list[int]:
    """Units at which collectives are timed exactly: 1..4, then 25% apart, up to `limit`."""
    out = list(range(1, GRID_EXACT + 1))
    while out[-1] < limit:
        out.append(max(out[-1] + 1, round(out[-1] * 1.25)))
    return out


_ENGINE_TIMES: dict[tuple, float] = {}  # (generation, shape, twisted, ocs, kind, group, bytes, routing) -> s


class CollectiveTable:
    """One collective's engine time against its size in units of `unit_bytes` (a step's tokens
    or sampled positions): exact on the grid, linear in between. Engine runs are kept for the
    process, keyed by everything they depend on (the slice, the collective, its bytes)."""

    def __init__(self, built: Built, kind: str, group: str, unit_bytes: float, routing: str, key: tuple):
        self.built, self.kind, self.group, self.unit, self.routing = built, kind, group, unit_bytes, routing
        self.key = key
        self.points: list[int] = []
        self.times: dict[int, float] = {}

    def exact_s(self, units: int) -> float:
        if units not in self.times:
            k = (*self.key, self.kind, self.group, units * self.unit, self.routing)
            if k not in _ENGINE_TIMES:
                r = simulate_collective(self.built, self.kind, units * self.unit, self.group, routing=self.routing)
                _ENGINE_TIMES[k] = r.simulated_s
            self.times[units] = _ENGINE_TIMES[k]
        return self.times[units]

    def time_s(self, units: float) -> float:
        if units <= 0:
            return 0.0
        if units == int(units) and (units <= GRID_EXACT or units in self.times):
            return self.exact_s(int(units))
        if not self.points or self.points[-1] < units:
            self.points = _grid(max(units, 2 * (self.points[-1] if self.points else GRID_EXACT)))
        i = bisect.bisect_left(self.points, units)
        hi = self.points[i]
        lo = self.points[i - 1] if i > 0 else 0
        t_hi = self.exact_s(hi)
        t_lo = self.exact_s(lo) if lo > 0 else 0.0
        return t_lo + (t_hi - t_lo) * (units - lo) / (hi - lo)


@dataclass(frozen=True)
class StepBreakdown:
    """Where one step's time goes (seconds): compute ops, the attention core among them, the
    collectives' time beyond their prefetch (exposed), and the engine's host time."""

    step_s: float
    compute_s: float
    attention_s: float
    comm_exposed_s: float
    host_s: float = 0.0


class StepTimer:
    """Step times of `shard` served on one slice of `generation` (see the module docstring)."""

    def __init__(self, shard: InferenceShard, generation, shape: str | Sequence[int], *, twisted: bool = False,
                 ocs: bool = True, routing: str = "dimension_order", onchip_bytes: float | None = None,
                 engine: EngineModel | None = None):
        self.shard = shard
        # the server's host time per step (podsim.serving.engines); the chips' time alone by default
        self.engine = engine if engine is not None else ENGINES["ideal"]["any"]
        self.generation = get_generation(generation)
        self.shape = parse_shape(shape) if isinstance(shape, str) else tuple(int(x) for x in shape)
        chips = math.prod(self.shape)
        if shard.chips != chips:
            raise PodsimError(f"tensor={shard.tensor} x expert={shard.expert} = {shard.chips} chips, but slice "
                              f"{'x'.join(map(str, self.shape))} has {chips}; they must be equal")
        self.built = build_slice(self.generation, self.shape, twisted, ocs)
        self._slice_key = (self.generation.model_dump_json(), self.shape, twisted, ocs)
        self.routing = routing
        mapping = map_mesh(self.shape, ParallelPlan(tensor=shard.tensor, expert=shard.expert), DEFAULT_INTENSITY)
        self.groups = {a: format_group(mapping.groups[a]) for a in ("tensor", "expert") if mapping.groups[a]}
        # axes whose all-reduces come from a measured profile (their group sizes), and what a run says of it
        self._profiled = {a: n for a, n in (("tensor", shard.tensor), ("expert", shard.expert))
                          if n > 1 and profile_for(self.generation, "all_reduce", n)}
        self.collective_source = (f"all-reduces from a measured NCCL profile ({PROFILE_SOURCE}), other collectives by the "
                                  "flow-level engine" if self._profiled else "the flow-level engine")
        self.mesh = mapping.describe()
        self.chip = chip_compute(self.generation)
        self.onchip_bytes, self.onchip_source = (onchip_bytes, "given") if onchip_bytes is not None else onchip_memory(self.generation)
        self._tables: dict[tuple, CollectiveTable] = {}
        self._body: dict[tuple[int, bool], float] = {}
        self._head: dict[int, float] = {}
        for p in ("matmul", "attention"):  # refuse a precision the chip has no published rate for, now
            self.chip.peak_for(getattr(shard.precision, p), f"{p} precision")
        att = shard.precision.attention
        self._attn_rate = self.chip.peak_for(att) * self.chip.fraction_for(att)
        self._hbm_rate = self.chip.hbm_bytes_per_s * self.chip.hbm_fraction
        # attention_s's constants for tokens_step_s (per chip: the group's share, 1/expert)
        h, dh, e, tile = shard.heads, shard.cfg.d_head, shard.expert, self.chip.mxu_dim
        self._tile = tile
        self._e = float(e)
        self._q_bytes = h * dh * 2.0 / e  # (2 q h dh ACT_BYTES) / 2, per query token
        self._kv_read_bytes = shard.kv_read_cost_bytes_per_token_layer() / e / 2.0
        self._kv_write_bytes = shard.kv_bytes_per_token_layer() / e / 2.0
        self._padded_heads = 2.0 * h * (math.ceil(dh / tile) * tile if tile > 1 else dh)
        self._layers2 = 2.0 * shard.cfg.n_layers
        self._n_layers = shard.cfg.n_layers
        self._linear = _Linear(self)

    # Timing ops -----------------------------------------------------------------------------
    def precision_of(self, op: StepOp) -> str:
        return getattr(self.shard.precision, op.precision)

    def compute_s(self, cost: Cost, precision: str) -> float:
        if not cost.flops and not cost.hbm:
            return 0.0
        return compute_time_s(self.chip, cost.flops, cost.hbm, matmul_tuples(cost), precision)

    def collective_s(self, op: StepOp, units: float, unit_bytes: float) -> float:
        """The time of the collective `op` at `units` x `unit_bytes` bytes per chip: the measured
        profile's where the generation has one for it (`podsim.serving.nccl_profile`: all-reduces on
        H100s), else the engine's."""
        size = self._profiled.get(op.axis) if op.kind == "all_reduce" else None
        if size is not None:
            return all_reduce_s(self.generation.id, size, units * unit_bytes) if units > 0 else 0.0
        key = (op.kind, op.axis, unit_bytes)
        table = self._tables.get(key)
        if table is None:
            table = self._tables[key] = CollectiveTable(self.built, op.kind, self.groups[op.axis], unit_bytes, self.routing,
                                                        self._slice_key)
        return table.time_s(units)

    def op_times(self, ops: list[StepOp], tokens: float, sampled: float) -> list[tuple[StepOp, float, float]]:
        """(op, time, time not hidden by a prefetch) per op: compute at its prefetched cost; a
        run of collectives between two compute ops takes max(their engine times in a row, the
        prefetch beside them), the excess over the prefetch counted as exposed."""
        out = []
        pairs = prefetched_costs(ops)
        for i, (op, cost) in enumerate(pairs):
            if op.is_compute:
                t = self.compute_s(cost, self.precision_of(op))
                out.append((op, t, t))
                continue
            units = sampled if op.name == "sample.ar" else tokens
            c = self.collective_s(op, units, op.nbytes / units)
            if i > 0 and not pairs[i - 1][0].is_compute:  # after another collective of the run
                run_c, fetch = out[-1][3], out[-1][4]
            else:
                run_c = 0.0
                j = i
                while j < len(ops) and not ops[j].is_compute:
                    j += 1
                fetch = memory_time_s(ops[j - 1].prefetch, self.chip)  # the run's last collective holds it
            left = max(fetch - run_c, 0.0)  # prefetch time still to run when this collective starts
            last = i + 1 == len(ops) or ops[i + 1].is_compute
            t = max(c, left) if last else c
            out.append((op, t, max(c - left, 0.0), run_c + c, fetch))
        return [o[:3] for o in out]

    # Steps ----------------------------------------------------------------------------------
    def _ops3(self, tokens: float, sampled: float) -> tuple[list[StepOp], list[float]]:
        """The step's ops with the first and last layer and one middle layer (every middle layer
        is alike), and each op's weight (n - 2 for the middle layer's)."""
        n = self.shard.cfg.n_layers
        ops = step_ops(self.shard, tokens, sampled, AttentionLoad(), self.onchip_bytes, layers=min(n, 3))
        return ops, [float(n - 2) if n > 3 and op.layer == "L1" else 1.0 for op in ops]

    def _body_exact_s(self, tokens: float, sampled: float) -> tuple[float, float, float]:
        """(time, compute time, exposed collective time) of every op but the attention core, op
        by op (`op_times`); `_Linear` gives the same time as closed forms."""
        ops, weight = self._ops3(tokens, sampled)
        timed = self.op_times(ops, tokens, sampled)
        total = sum(w * t for w, (_, t, _) in zip(weight, timed, strict=True))
        comp = sum(w * t for w, (op, t, _) in zip(weight, timed, strict=True) if op.is_compute)
        exposed = sum(w * e for w, (op, _, e) in zip(weight, timed, strict=True) if not op.is_compute)
        return total, comp, exposed

    def _body_s(self, tokens: int, sampled: int) -> float:
        """Every op but the attention core: its tokens' part (cached per tokens and whether the
        step samples) plus its sampled positions' part (cached per count)."""
        key = (tokens, sampled > 0)
        t = self._body.get(key)
        if t is None:
            t = self._body[key] = self._linear.tokens_s(tokens, sampled > 0)
        h = self._head.get(sampled)
        if h is None:
            h = self._head[sampled] = self._linear.sampled_s(sampled)
        return t + h

    def attention_s(self, load: AttentionLoad) -> float:
        """The attention core of every layer for this load: `compute_time_s` of the two
        matmuls of `InferenceShard.attention`, written out (it runs every step)."""
        q = load.queries
        if q <= 0:
            return 0.0
        sh = self.shard
        h, dh = sh.heads, sh.cfg.d_head
        keys = load.flops / (4.0 * h * dh)  # summed over the queries, padded once (InferenceShard.attention)
        half = (2.0 * q * h * dh * 2 + load.kv_read_bytes + load.kv_write_bytes) / 2  # ACT_BYTES = 2 (costs.py)
        tile = self.chip.mxu_dim
        if tile > 1:
            padded = 2.0 * h * math.ceil(dh / tile) * tile * math.ceil(keys / tile) * tile
        else:
            padded = 2.0 * h * dh * keys
        one = max(padded / self._attn_rate, half / self._hbm_rate)
        return sh.cfg.n_layers * 2.0 * one

    def tokens_step_s(self, tokens: int, sampled: int, queries: float, keys: float, read_tokens: float,
                      write_tokens: float) -> float:
        """`step_s` from the step's attention token totals (`InferenceShard.load`'s arguments),
        without building the load: what a serving simulation calls every step."""
        if tokens <= 0:
            return 0.0
        return self.engine.step_s(self.tokens_device_s(tokens, sampled, queries, keys, read_tokens, write_tokens), sampled,
                                  self._n_layers)

    def tokens_device_s(self, tokens: int, sampled: int, queries: float, keys: float, read_tokens: float,
                        write_tokens: float) -> float:
        """The chips' part of `tokens_step_s` (no host time)."""
        if tokens <= 0:
            return 0.0
        body = self._body_s(tokens, sampled)
        if queries <= 0:
            return body
        k = keys / self._e  # the chip's keys summed over its queries, padded once (attention_s)
        half = self._q_bytes * queries + self._kv_read_bytes * read_tokens + self._kv_write_bytes * write_tokens
        tile = self._tile
        padded = self._padded_heads * (math.ceil(k / tile) * tile if tile > 1 else k)
        return body + self._layers2 * max(padded / self._attn_rate, half / self._hbm_rate)

    def step_s(self, tokens: int, sampled: int, load: AttentionLoad) -> float:
        """One step's time: `tokens` through the model (prefill chunks and decode tokens),
        `sampled` positions through the LM head, the attention core over `load`, and the
        engine's host time."""
        if tokens <= 0:
            return 0.0
        return self.engine.step_s(self.device_s(tokens, sampled, load), sampled, self._n_layers)

    def device_s(self, tokens: int, sampled: int, load: AttentionLoad) -> float:
        """The chips' part of `step_s`: what the engine's run of the step's trace takes."""
        if tokens <= 0:
            return 0.0
        return self._body_s(int(tokens), int(sampled)) + self.attention_s(load)

    def breakdown(self, tokens: int, sampled: int, load: AttentionLoad) -> StepBreakdown:
        body, comp, exposed = self._body_exact_s(int(tokens), int(sampled))
        attn = self.attention_s(load)
        device = body + attn
        step = self.engine.step_s(device, sampled, self._n_layers)
        return StepBreakdown(step, comp + attn, attn, exposed, step - device)

    def memory_s(self, hbm_bytes: float) -> float:
        """A memory-bound op's time on one chip: `hbm_bytes` at the achievable HBM rate."""
        return memory_time_s(hbm_bytes, self.chip)

    def hbm_bound_s(self) -> float:
        """Weight bytes per chip over the HBM bandwidth: no decode step can be faster."""
        return self.shard.weight_bytes() / self.generation.hbm_bytes_per_s

    def flops_bound_s(self, flops_per_chip: float) -> float:
        """FLOPs per chip at the matmul precision's peak: no prefill can be faster."""
        return flops_per_chip / self.chip.peak_for(self.shard.precision.matmul)


class _Linear:
    """Every op of a step but the attention core as closed forms in the step's tokens T and
    sampled positions S, so a step costs a few array operations, exactly what `op_times` gives.

    A matmul of T (or S) rows has padded FLOPs p x T and moves u x T + v bytes (v: its weights
    less what a collective's prefetch read); an op's other bytes are r x T + r0; so its time is
    sum max(p T / rate, (u T + v) / bw) + (r T + r0) / bw. Collectives are `StepTimer.collective_s`
    at T (engine tables, or the measured profile), beside their prefetch's fixed time. The MoE experts' op reads only the experts its
    tokens reach, not linear in T: it and the dispatch before it are timed op by op. The head
    and the sampling reduction depend on S; with S = 0 the head is absent and the last
    collective prefetches nothing.
    """

    def __init__(self, timer: StepTimer):
        self.timer = timer
        chip = timer.chip
        self.bw = chip.hbm_bytes_per_s * chip.hbm_fraction
        tile = chip.mxu_dim
        ops1, weight = timer._ops3(1.0, 1.0)
        ops2, _ = timer._ops3(2.0, 2.0)
        mm_rows: dict[str, list] = {"T": [], "S": []}  # (weight, p, u, v, rate)
        rest: dict[str, list] = {"T": [], "S": []}  # (weight, r, r0)
        self.runs: list[tuple[float, list[StepOp], float]] = []  # runs of T collectives: (weight, ops at T=1, prefetch time)
        self.nonlinear: list[tuple[float, int]] = []  # (weight, index in the op list)
        self.last_coll: int | None = None  # index of the collective before the head
        self.sample_op: StepOp | None = None
        self.ops1 = ops1
        # the on-chip bytes the collective before each experts op may fill with its weights
        self.fetch_before = {i: (timer.onchip_bytes if i > 0 and not ops1[i - 1].is_compute and ops1[i - 1].prefetch > 0 else 0.0)
                             for i, op in enumerate(ops1) if op.name.endswith(".experts")}
        pairs1, pairs2 = prefetched_costs(ops1), prefetched_costs(ops2)
        for i, ((op, c1), (_, c2)) in enumerate(zip(pairs1, pairs2, strict=True)):
            w = weight[i]
            part = "S" if op.layer == "head" else "T"
            # the experts' op and the dispatch collective before it (none without an expert axis: the
            # router's compute op then precedes the experts and is linear in T)
            if op.name.endswith(".experts") or (not op.is_compute and i + 1 < len(ops1) and ops1[i + 1].name.endswith(".experts")):
                self.nonlinear.append((w, i))
                continue
            if not op.is_compute:
                if op.name == "sample.ar":
                    self.sample_op = op
                    continue
                if i > 0 and not ops1[i - 1].is_compute:
                    self.runs[-1][1].append(op)
                else:
                    self.runs.append((w, [op], 0.0))
                if i + 1 < len(ops1) and ops1[i + 1].is_compute:  # the run's last collective holds its prefetch
                    rw, rops, _ = self.runs[-1]
                    self.runs[-1] = (rw, rops, memory_time_s(op.prefetch, chip))
                if i + 1 < len(ops1) and ops1[i + 1].name == "head":
                    self.last_coll = len(self.runs) - 1
                continue
            rate = chip.peak_for(timer.precision_of(op)) * chip.fraction_for(timer.precision_of(op))
            for m1, m2 in zip(c1.matmuls, c2.matmuls, strict=True):
                f1, f2 = padded_flops(m1, tile), padded_flops(m2, tile)
                mm_rows[part].append((w, f2 - f1, m2.hbm_bytes - m1.hbm_bytes, 2 * m1.hbm_bytes - m2.hbm_bytes, rate))
            r1 = c1.hbm - sum(m.hbm_bytes for m in c1.matmuls)
            r2 = c2.hbm - sum(m.hbm_bytes for m in c2.matmuls)
            rest[part].append((w, r2 - r1, 2 * r1 - r2))
        self.mm = {k: np.array(v, dtype=float).reshape(-1, 5) for k, v in mm_rows.items()}
        self.rest = {k: np.array(v, dtype=float).reshape(-1, 3) for k, v in rest.items()}

    def _part_s(self, part: str, x: float) -> float:
        mm, rest = self.mm[part], self.rest[part]
        t = 0.0
        if len(mm):
            t += float((mm[:, 0] * np.maximum(mm[:, 1] * x / mm[:, 4], (mm[:, 2] * x + mm[:, 3]) / self.bw)).sum())
        if len(rest):
            t += float((rest[:, 0] * np.maximum(rest[:, 1] * x + rest[:, 2], 0.0)).sum()) / self.bw
        return t

    def time_s(self, tokens: int, sampled: int) -> float:
        return self.tokens_s(tokens, sampled > 0) + self.sampled_s(sampled)

    def tokens_s(self, tokens: int, head: bool) -> float:
        """The part that depends on the step's tokens: every op up to the head (`head`: whether
        the last collective prefetches the head's weights, i.e. the step samples)."""
        timer = self.timer
        t = self._part_s("T", tokens)
        for k, (w, ops, fetch) in enumerate(self.runs):
            c = sum(timer.collective_s(op, tokens, op.nbytes) for op in ops)
            t += w * max(c, fetch if head or k != self.last_coll else 0.0)
        if self.nonlinear:
            t += self._experts_s(tokens)
        return t

    def sampled_s(self, sampled: int) -> float:
        """The part that depends on the positions sampled: the head and the sampling reduction."""
        if sampled <= 0:
            return 0.0
        t = self._part_s("S", sampled)
        if self.sample_op is not None:
            t += self.timer.collective_s(self.sample_op, sampled, self.sample_op.nbytes)
        return t

    def _experts_s(self, tokens: float) -> float:
        """The MoE dispatch (beside its prefetch of the experts' weights) and the experts' op of
        every layer, at `tokens`."""
        timer, sh = self.timer, self.timer.shard
        cost = sh.experts(tokens)
        weights = weight_matrix_bytes(sh, cost)
        t = 0.0
        for w, i in self.nonlinear:
            op = self.ops1[i]
            if op.is_compute:
                fetch = self.fetch_before[i]
                t += w * timer.compute_s(without_prefetched(cost, weights, min(sum(weights), fetch)), timer.precision_of(op))
            else:
                fetch = min(sum(weights), op.prefetch and timer.onchip_bytes)
                t += w * max(timer.collective_s(op, tokens, op.nbytes), memory_time_s(fetch, timer.chip))
        return t
