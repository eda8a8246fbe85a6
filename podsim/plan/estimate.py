"""The analytic step-time estimate of one plan: the step program's passes (podsim.plan.program)
on the job's slices, each collective at its closed-form time (podsim.plan.pricing), overlapped
as the generator's DAG says, without simulating a flow.

The rules, each the DAG's own (podsim.trace.generate):

- a pass's chain runs compute and blocking collectives one after another; a windowed matmul
  (collective matmul) pays max(partial matmul, permute) per iteration; a collective beside the
  next compute (collective_matmul hidden) pays max(collective, compute);
- FSDP gathers run in order, each when the one before is done and the pass two back has ended
  (one layer of prefetch), and a pass starts when its gather is done;
- gradient reductions start when their pass ends (a hierarchical all-reduce across slices as its
  reduce-scatter, DCN all-reduce and all-gather in turn); the update waits for all of them;
- collectives that run beside the chain (gathers, reductions) and meet on a physical axis of the
  slice (or the DCN) share it equally: one that starts while others still hold `backlog` seconds
  of that axis's time takes min(its time, backlog) longer, and adds its time to the backlog.

Every layer of a kind is alike, so a run of identical passes is followed until its state moves by
the same amount each pass, then extrapolated; so are micro-batches (the last one, which issues
the data-parallel all-reduces, is followed in full).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from podsim.plan.overlap import Flight, Job
from podsim.plan.pricing import Pricer
from podsim.plan.program import Comm, Pass, StepProgram
from podsim.trace.builder import ProgramBuilder
from podsim.trace.mesh import DEFAULT_INTENSITY, LOGICAL_AXES, MeshMapping, ParallelPlan, map_mesh
from podsim.trace.model import DCN_AXIS, Collective, SendRecv, format_group

EXTRAPOLATE_AFTER = 3
"""Passes (or micro-batches) followed in full before a run whose state moves by equal steps is extrapolated."""


@dataclass(frozen=True)
class PhysOp:
    """A logical collective laid on the slice: one or more collectives run in turn (a
    hierarchical all-reduce is three), its closed-form time, the physical axes it occupies, and
    the logical axis it is charged to in the breakdown."""

    time_s: float
    axes: frozenset[str]
    label: str  # e.g. 'tensor', 'fsdp', 'data+dcn'
    level: str  # ici or dcn
    parts: tuple[tuple[str, str, float, float, frozenset[str]], ...] = ()  # (kind, group, bytes, seconds, axes), run in turn

    def jobs(self, tag: str = "") -> Job:
        """The op as jobs of a flight, each part starting when the one before ends (returns the first)."""
        jobs = [Job(ax, t, self.label, tag) for _, _, _, t, ax in self.parts] or [Job(self.axes, 0.0, self.label, tag)]
        for a, b in zip(jobs, jobs[1:], strict=False):
            a.then.append(b)
        return jobs[0]


def mesh_order(volume: dict[str, float], given: tuple[str, ...] | None) -> tuple[str, ...]:
    """The generator's order of logical axes: most bytes moved first, ties by MaxText's order."""
    if given:
        return given
    return tuple(sorted(LOGICAL_AXES, key=lambda a: (-volume.get(a, 0.0), DEFAULT_INTENSITY.index(a))))


class Layout:
    """A plan's collectives laid on its slice (mesh mapping, the generator's own `finish`) and priced."""

    def __init__(self, plan: ParallelPlan, shape: tuple[int, ...], mapping: MeshMapping, pricer: Pricer):
        self.plan, self.shape, self.mapping, self.pricer = plan, shape, mapping, pricer
        self.sizes = {**plan.sizes(), "dcn": plan.dcn}
        self._ops: dict[Comm, PhysOp] = {}
        # plans on one job layout share laid-out collectives: keyed by mapping, axis sizes and op
        self._key = (tuple(mapping.groups.items()), mapping.order, tuple(self.sizes.items()))
        self._shared = pricer.laid

    def op(self, c: Comm) -> PhysOp:
        hit = self._ops.get(c)
        if hit is None:
            hit = self._shared.get((self._key, c))
            if hit is not None:
                self._ops[c] = hit
                return hit
            b = ProgramBuilder(self.sizes)
            if c.kind == "send_recv":
                b.send("c", c.nbytes, +1, deps=[], axis=c.axes[0])
            else:
                b.collective("c", c.kind, c.nbytes, c.axes, deps=[])
            parts, level = [], "ici"
            for op in b.finish(self.mapping, self.shape):
                assert isinstance(op, (Collective, SendRecv))
                kind = "send_recv" if isinstance(op, SendRecv) else op.kind
                group = format_group(op.group)
                axes = frozenset(g.axis for g in op.group)
                level = "dcn" if DCN_AXIS in axes else level
                parts.append((kind, group, op.bytes, self.pricer.time_s(kind, group, op.bytes), axes))
            hit = self._ops[c] = PhysOp(sum(p[3] for p in parts), frozenset().union(*(p[4] for p in parts)), "+".join(c.axes),
                                        level, tuple(parts))
            self._shared[(self._key, c)] = hit
        return hit


@dataclass(frozen=True)
class Estimate:
    """The analytic step of one plan and where its time goes."""

    step_s: float
    compute_s: float  # busy compute on the chip's stream (the optimizer update included)
    recompute_s: float  # the part of compute_s that recomputes forward work
    exposed_s: dict[str, float]  # logical axes ('tensor', 'fsdp', 'data+dcn', ...) -> chain time waiting on them
    exposed_level_s: dict[str, float]  # ici / dcn -> exposed
    optimizer_s: float
    flops: float  # hardware FLOPs per chip per step
    mesh: dict[str, str]
    memory_bound_s: float = 0.0  # memory-bound compute (the update included), recomputation not
    label_level: dict[str, str] = field(default_factory=dict)  # each exposed label's level (ici, dcn)
    straggler_s: float = 0.0  # multislice: the expected wait for the slowest slice (in step_s)

    @property
    def exposed_comm_s(self) -> float:
        return max(self.step_s - self.compute_s, 0.0)


class _Gathers:
    """The FSDP gathers ahead of the chain, in program order: each starts when the one before has
    ended and, unless its pass is the first layer of a run, once the pass two before it has run
    its last compute (`window`)."""

    def __init__(self, flight: Flight):
        self.flight = flight
        self.ahead: list[list] = []  # [passes ahead of the current one, job, eligible, started]
        self.last: Job | None = None

    def want(self, offset: int, op: PhysOp, first: bool) -> None:
        if not any(e[0] == offset for e in self.ahead):
            self.ahead.append([offset, op.jobs("gather"), first, False])
            self.ahead.sort(key=lambda e: e[0])

    def window(self, offset: int, at: float) -> None:
        for e in self.ahead:
            if e[0] == offset:
                e[2] = True
        self.issue(at)

    def issue(self, at: float) -> None:
        for e in self.ahead:
            if e[3]:
                continue
            if not e[2]:
                return
            job = e[1]
            if self.last is None or not math.isnan(self.last.end):
                self.flight.start(job, max(at, self.last.end if self.last is not None else at))
            else:
                self.last.then.append(job)
            e[3], self.last = True, job

    def current(self) -> Job | None:
        e = self.ahead[0] if self.ahead and self.ahead[0][0] == 0 else None
        return e[1] if e is not None else None

    def next_pass(self) -> None:
        self.ahead = [[e[0] - 1, *e[1:]] for e in self.ahead if e[0] > 0]

    def state(self) -> tuple:
        return tuple((e[0], e[2], e[3]) for e in self.ahead)


class _Walk:
    """The step in time: the chain, the flight of collectives beside it, what the chain waited for."""

    def __init__(self, layout: Layout):
        self.layout = layout
        self.flight = Flight()
        self.gathers = _Gathers(self.flight)
        self.now = 0.0
        self.exposed: dict[str, float] = {}
        self.prev_beside = (-math.inf, "")  # collectives beside the previous compute: this one waits for them
        self.cur_beside = (-math.inf, "")  # collectives beside the next compute (collective_matmul hidden)
        self._memo: dict[int, tuple[list[tuple], int]] = {}

    def wait(self, label: str, seconds: float) -> None:
        if seconds > 0:
            self.exposed[label] = self.exposed.get(label, 0.0) + seconds

    def chain(self, op: PhysOp, at: float) -> float:
        """A collective on the chain from `at`: when it ends (its parts in turn, sharing their axes)."""
        if len(op.parts) == 1:
            return self.flight.run_chain(op.axes, op.time_s, at)
        t = at
        for _, _, _, sec, axes in op.parts:
            t = self.flight.run_chain(axes, sec, t)
        return t

    def _resolved(self, ps: Pass) -> tuple[list[tuple], int]:
        hit = self._memo.get(id(ps))
        if hit is None:
            items = [(it, self.layout.op(it.comm) if it.comm is not None else None) for it in ps.chain]
            last = max((i for i, (it, op) in enumerate(items) if op is None or it.repeat), default=-1)
            hit = self._memo[id(ps)] = (items, last)
        return hit

    def run(self, ps: Pass, gather_job: Job | None, reduce_ops: list[PhysOp], dp_ops: list[PhysOp], window) -> None:
        """One pass (see the module docstring); `window(at)` is called at its last compute's end."""
        items, last_compute = self._resolved(ps)
        t = self.now
        gather_waited = gather_job is None
        for i, (it, op) in enumerate(items):
            if op is None or it.repeat:
                if not gather_waited:  # the pass's first compute waits for its weights
                    end = self.flight.wait(gather_job)
                    self.wait(gather_job.label, end - t)
                    t, gather_waited = max(t, end), True
                b_end, b_label = self.prev_beside
                if b_end > t:
                    self.wait(b_label, b_end - t)
                    t = b_end
                if self.cur_beside[0] > -math.inf or b_end > -math.inf:
                    self.prev_beside, self.cur_beside = self.cur_beside, (-math.inf, "")
            if op is None:
                t += it.compute_s
            elif it.repeat:
                if self.flight.shares(op.axes):
                    for _ in range(it.repeat):
                        p_end = self.chain(op, t)
                        self.wait(op.label, p_end - (t + it.compute_s))
                        t = max(p_end, t + it.compute_s)
                else:  # nothing beside it on its axes: every iteration alike
                    self.wait(op.label, it.repeat * (op.time_s - it.compute_s))
                    t += it.repeat * max(op.time_s, it.compute_s)
                t += it.tail_s
            elif it.beside:
                start = max(t, self.cur_beside[0], self.prev_beside[0])
                self.cur_beside = (self.chain(op, start), op.label)
            else:
                start = t
                for b_end, b_label in (self.prev_beside, self.cur_beside):
                    if b_end > start:
                        self.wait(b_label, b_end - start)
                        start = b_end
                self.prev_beside = self.cur_beside = (-math.inf, "")
                end = self.chain(op, start)
                self.wait(op.label, end - start)
                t = end
            if i == last_compute:
                rs_end: Job | None = None
                for r in reduce_ops:
                    rs_end = self.flight.start(r.jobs(), t)
                for d in dp_ops:
                    job = d.jobs()
                    if rs_end is not None and math.isnan(rs_end.end):
                        rs_end.then.append(job)
                    else:
                        self.flight.start(job, t)
                window(t)
        self.now = t

    def vector(self) -> tuple[tuple, tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
        """(structure, absolute times, seconds left of jobs in flight, exposure): what must repeat
        for a run of passes to be extrapolated."""
        fl = self.flight
        keys = (tuple(j.label for j in fl.active), tuple(fl.ended), self.gathers.state(), tuple(self.exposed),
                self.prev_beside[1], self.cur_beside[1], self.gathers.last is not None and math.isnan(self.gathers.last.end))
        last_end = self.gathers.last.end if self.gathers.last is not None and not math.isnan(self.gathers.last.end) else 0.0
        times = (self.now, fl.t, *fl.ended.values(), last_end,
                 *(x for x in (self.prev_beside[0], self.cur_beside[0]) if math.isfinite(x)))
        return keys, times, tuple(j.left for j in fl.active), tuple(self.exposed.values())

    def shift(self, d_times: tuple[float, ...], d_exposed: tuple[float, ...], k: int) -> None:
        it = iter(x * k for x in d_times)
        self.now += next(it)
        self.flight.t += next(it)
        for label in self.flight.ended:
            self.flight.ended[label] += next(it)
        last = next(it)
        if self.gathers.last is not None and not math.isnan(self.gathers.last.end):
            self.gathers.last.end += last
        if math.isfinite(self.prev_beside[0]):
            self.prev_beside = (self.prev_beside[0] + next(it), self.prev_beside[1])
        if math.isfinite(self.cur_beside[0]):
            self.cur_beside = (self.cur_beside[0] + next(it), self.cur_beside[1])
        for label, d in zip(list(self.exposed), d_exposed, strict=True):
            self.exposed[label] += d * k


def _steady(history: list) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    """The per-pass step of times and exposure when the last three states move by equal steps."""
    if len(history) < 3:
        return None
    (k1, t1, l1, e1), (k2, t2, l2, e2), (k3, t3, l3, e3) = history[-3:]
    if not (k1 == k2 == k3) or len(t1) != len(t3) or len(e1) != len(e3):
        return None
    close = lambda a, b: math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)  # noqa: E731
    if not all(close(a, b) and close(b, c) for a, b, c in zip(l1, l2, l3, strict=True)):
        return None
    dt = tuple(b - a for a, b in zip(t2, t3, strict=True))
    if not all(close(b - a, d) for a, b, d in zip(t1, t2, dt, strict=True)):
        return None
    de = tuple(b - a for a, b in zip(e2, e3, strict=True))
    if not all(close(b - a, d) for a, b, d in zip(e1, e2, de, strict=True)):
        return None
    return dt, de


def evaluate(program: StepProgram, layout: Layout) -> Estimate:
    """The step time of `program` laid out by `layout` (see the module docstring)."""
    w = _Walk(layout)
    runs = [*program.forward, *program.backward]
    m = program.microbatches
    gather_ops = {id(ps): layout.op(ps.gather) for ps in runs if ps.gather is not None}
    red_ops = {id(ps): [layout.op(c) for c in ps.reduce] for ps in runs}
    dp_ops = {id(ps): [layout.op(c) for c in ps.last_reduce] for ps in runs}

    def ahead(r: int, k: int, n: int) -> list[tuple[int, Pass, bool]]:
        """The next `n` passes after pass k of run r: (offset, pass, first of its run)."""
        out = []
        for off in range(1, n + 1):
            kk, rr = k + off, r
            while kk >= runs[rr].count:
                kk -= runs[rr].count
                rr = (rr + 1) % len(runs)
            out.append((off, runs[rr], kk == 0))
        return out

    def one(r: int, k: int, last_mb: bool) -> None:
        ps = runs[r]
        nxt = ahead(r, k, 2)
        if ps.gather is not None:
            w.gathers.want(0, gather_ops[id(ps)], True)
        for off, q, first in nxt:
            if q.gather is not None:
                w.gathers.want(off, gather_ops[id(q)], first)
        w.gathers.issue(w.now)
        w.run(ps, w.gathers.current() if ps.gather is not None else None, red_ops[id(ps)],
              dp_ops[id(ps)] if last_mb else [], lambda at: w.gathers.window(2, at))
        w.gathers.next_pass()

    def run_of(r: int, last_mb: bool) -> None:
        n, k, history = runs[r].count, 0, []
        while k < n:
            one(r, k, last_mb)
            k += 1
            history.append(w.vector())
            if 0 < k < n - 2 and (step := _steady(history)) is not None:
                w.shift(*step, n - 2 - k)
                k = n - 2

    history: list = []
    done = 0
    while done < m - 1:
        for r in range(len(runs)):
            run_of(r, False)
        done += 1
        history.append(w.vector())
        if done < m - 1 and (step := _steady(history)) is not None:
            w.shift(*step, m - 1 - done)
            done = m - 1
    for r in range(len(runs)):
        run_of(r, True)
    b_end = max(w.prev_beside[0], w.cur_beside[0])
    if b_end > w.now:
        w.wait(w.prev_beside[1] if w.prev_beside[0] >= w.cur_beside[0] else w.cur_beside[1], b_end - w.now)
        w.now = b_end
    chain_end = w.now
    bg_end = w.flight.idle_after()
    if bg_end > chain_end:  # the update waits for the last reduction: charged to the one that ended last
        w.wait(max(w.flight.ended, key=w.flight.ended.get), bg_end - chain_end)
    step = max(chain_end, bg_end) + program.optimizer_s
    compute = program.optimizer_s
    recompute = 0.0
    for ps in runs:
        compute += sum(it.busy_compute_s for it in ps.chain) * ps.count * m
        recompute += sum(it.recompute_s for it in ps.chain) * ps.count * m
    levels: dict[str, float] = {}
    level_of = {op.label: op.level for op in layout._ops.values()}
    for label, sec in w.exposed.items():
        lv = level_of.get(label, "ici")
        levels[lv] = levels.get(lv, 0.0) + sec
    return Estimate(step, compute, recompute, dict(w.exposed), levels, program.optimizer_s, program.flops,
                    layout.mapping.describe(), program.memory_bound_s, level_of)


def layout_for(program: StepProgram, plan: ParallelPlan, shape: tuple[int, ...], pricer: Pricer,
               order: tuple[str, ...] | None = None, explicit=None) -> Layout:
    """The plan's mesh mapping as the generator makes it (axes ordered by bytes moved) and its layout."""
    order = mesh_order(program.volume_per_axis(), order)
    if explicit:
        mapping = map_mesh(shape, plan, order, explicit=explicit)
    else:
        key = (shape, plan, order)
        mapping = pricer.mappings.get(key)
        if mapping is None:
            mapping = pricer.mappings[key] = map_mesh(shape, plan, order)
    return Layout(plan, shape, mapping, pricer)
