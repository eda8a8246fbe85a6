"""A job's step program: its trace's ops planned (durations, collective plans) and walked as one
SimPy process on the shared flow network.

The program walks the trace's DAG: an op starts when its dependencies are done, so compute and
communication overlap where the DAG allows. A compute op is a timer; a collective runs its
schedule stage by stage, each stream submitting one phase of flows at a time to the network and
moving on when that phase is delivered (podsim.engine.core runs the programs and reads results).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial

import numpy as np

from podsim.collectives import Plan, plan_collective
from podsim.collectives.groups import SITE_AXIS, group_layout
from podsim.collectives.routes import Router, RouterPool
from podsim.collectives.schedule import Schedule
from podsim.engine.jobs import Job
from podsim.engine.network import FlowNetwork
from podsim.engine.results import OpTiming
from podsim.errors import PodsimError
from podsim.perf import chip_compute
from podsim.perf.opmodel import op_timer
from podsim.trace.model import Collective, Compute, SendRecv, format_group
from podsim.units import format_bytes


@dataclass(frozen=True, eq=False)
class OpPlan:
    op: object
    kind: str
    deps: tuple[int, ...]
    duration_s: float = 0.0
    plan: Plan | None = None
    group: str = ""
    level: str = ""  # ici, dcn (the group crosses the data-centre network) or wan; "" for compute


def _level(layout) -> str:
    """The highest network level a group's traffic reaches: `wan` when it spans sites, `dcn`
    when it spans slices (or GPU nodes), else `ici`."""
    if SITE_AXIS in layout.axes:
        return "wan"
    return "dcn" if any(layout.dcn) else "ici"


PlanKey = tuple
"""A distinct collective of a trace: (kind, group, bytes, algorithm asked, shift)."""


def prepare_ops(job: Job, pool: RouterPool, efficiency: float | None, plans: dict[PlanKey, Plan] | None = None,
                exclude: Mapping[PlanKey, Mapping[str, tuple[str, str]]] | None = None,
                ) -> tuple[list[OpPlan], dict[str, str]]:
    """Each op of the trace with its dependencies (indices), duration or collective plan; and
    per distinct collective (kind, group, size), its algorithm and why (one line). `plans`:
    the plans made so far, by PlanKey (kept and filled in); `exclude`: per PlanKey, the
    algorithms `auto` may not take (plan_collective's `exclude`)."""
    trace = job.trace
    trace.validate()
    order = trace.topological_order()
    index = {op.id: i for i, op in enumerate(order)}
    layouts: dict[str, object] = {}

    def layout(group) -> object:
        key = format_group(group)
        if key not in layouts:
            layouts[key] = group_layout(job.views, group)
        return layouts[key]

    plans = {} if plans is None else plans
    exclude = exclude or {}
    duration = op_timer(job.fabric.generation, chip_compute(job.fabric.generation) if efficiency is None else None, efficiency)

    def plan(kind: str, group, nbytes: float, algorithm: str, shift: int = 1):
        """Plans are read-only: a model's layers repeat a handful of collectives, plan each once."""
        key = (kind, format_group(group), nbytes, algorithm, shift)
        if key not in plans:
            plans[key] = plan_collective(kind, layout(group), nbytes, algorithm, pool, shift, exclude.get(key))
        return plans[key]

    out = []
    for op in order:
        deps = tuple(index[d] for d in op.deps)
        if isinstance(op, Compute):
            out.append(OpPlan(op, "input" if op.host else "compute", deps, duration_s=duration(op)))
        elif isinstance(op, Collective):
            lay = layout(op.group)
            out.append(OpPlan(op, op.kind, deps, plan=plan(op.kind, op.group, op.bytes, op.algorithm),
                               group=lay.name, level=_level(lay)))
        elif isinstance(op, SendRecv):
            lay = layout(op.group)
            out.append(OpPlan(op, "send_recv", deps, plan=plan("send_recv", op.group, op.bytes, "auto", op.shift),
                               group=lay.name, level=_level(lay)))
        else:  # pragma: no cover - the trace model has three op types
            raise PodsimError(f"op {getattr(op, 'id', op)!r} has an unknown type {type(op).__name__}")
    choices = {f"{kind} {group} {format_bytes(nbytes)}" + (f" shift {shift:+d}" if kind == "send_recv" else ""): pl.why
               for (kind, group, nbytes, _, shift), pl in plans.items()}
    return out, choices


class _Run:
    """A collective in flight: its stage and, per stream, (phase index, repeats left)."""

    __slots__ = ("index", "schedule", "stage", "cursors", "streams_left")

    def __init__(self, index: int, schedule: Schedule):
        self.index = index
        self.schedule = schedule
        self.stage = -1
        self.cursors: list[list[int]] = []
        self.streams_left = 0


class Program:
    """One job's program: the SimPy process that runs its trace `steps` times."""

    def __init__(self, env, net: FlowNetwork, router: Router, owner: int, job: Job, plans: list[OpPlan]):
        self.env, self.net, self.router, self.owner, self.job, self.plans = env, net, router, owner, job, plans
        self.inbox: list[tuple] = []
        self.mail = env.event()
        self.timeline: list[OpTiming] = []
        self.step_times: list[float] = []
        self.flows = 0
        self.flows_simulated = 0
        self._bytes: dict[int, np.ndarray] = {}
        self._tiers: dict[int, str] = {}
        self._start_t: dict[int, float] = {}
        self._step = 0
        self.choices: dict[str, str] = {}
        self.fold = ""

    def post(self, msg: tuple) -> None:
        self.inbox.append(msg)
        if not self.mail.triggered:
            self.mail.succeed()

    def run(self):
        users: list[list[int]] = [[] for _ in self.plans]
        for i, p in enumerate(self.plans):
            for d in p.deps:
                users[d].append(i)
        for step in range(self.job.steps):
            self._step = step
            t0 = self.env.now
            waiting = [len(p.deps) for p in self.plans]
            left = len(self.plans)
            for i, w in enumerate(waiting):
                if w == 0:
                    self._start(i)
            while left:
                yield self.mail
                self.mail = self.env.event()
                msgs, self.inbox = self.inbox, []
                for msg in msgs:
                    done = self._handle(msg)
                    if done is None:
                        continue
                    left -= 1
                    self._finish(done)
                    for u in users[done]:
                        waiting[u] -= 1
                        if waiting[u] == 0:
                            self._start(u)
            self.step_times.append(self.env.now - t0)

    # --- ops -----------------------------------------------------------------------------
    def _start(self, i: int) -> None:
        self._start_t[i] = self.env.now
        p = self.plans[i]
        if p.plan is None:
            ev = self.env.timeout(p.duration_s)
            ev.callbacks.append(lambda _ev, i=i: self.post(("done", i)))
            return
        run = _Run(i, p.plan.schedule)
        launch = self.job.fabric.generation.collective_latency_s  # the library's time per collective (NCCL's)
        if launch > 0:
            self.env.timeout(launch).callbacks.append(lambda _ev, run=run: self._begin(run))
            return
        self._begin(run)

    def _begin(self, run: _Run) -> None:
        if not self._next_stage(run):
            self.post(("done", run.index))

    def _finish(self, i: int) -> None:
        p = self.plans[i]
        op = p.op
        self.timeline.append(OpTiming(
            step=self._step, id=op.id, kind=p.kind, start_s=float(self._start_t.pop(i)), end_s=float(self.env.now),
            name=op.name, layer=op.layer, bytes=float(getattr(op, "bytes", 0.0)), group=p.group,
            algorithm=p.plan.schedule.algorithm if p.plan else "", closed_form_s=p.plan.closed_form_s if p.plan else None,
            level=p.level, tier=self._tier(p)))

    def _tier(self, p: OpPlan) -> str:
        """The highest DCN tier the op's routed flows reach ("" for an op inside slices)."""
        if p.level not in ("dcn", "wan"):
            return ""
        hit = self._tiers.get(id(p.plan))
        if hit is None:
            names, tier = self.job.fabric.dcn_tiers
            top = max((int(tier[lk].max()) for pat in p.plan.schedule.patterns()
                       if len(lk := self.router.routes(pat).links)), default=-1)
            hit = self._tiers[id(p.plan)] = names[top] if top >= 0 else ""
        return hit

    def _next_stage(self, run: _Run) -> bool:
        """Start the run's next stage; False when there is none."""
        run.stage += 1
        stages = run.schedule.stages
        if run.stage >= len(stages):
            return False
        stage = stages[run.stage]
        run.cursors = [[0, stream[0].repeat] for stream in stage]
        run.streams_left = len(stage)
        for s in range(len(stage)):
            self._submit(run, s)
        return True

    def _submit(self, run: _Run, s: int) -> None:
        phase = run.schedule.stages[run.stage][s][run.cursors[s][0]]
        routes = self.router.routes(phase.pattern)
        nbytes = self._bytes.get(id(phase))
        if nbytes is None:
            nbytes = np.full(routes.n_flows, phase.bytes) if routes.weight is None else phase.bytes * routes.weight
            self._bytes[id(phase)] = nbytes
        self.flows += routes.flows_represented
        self.flows_simulated += routes.n_flows
        self.net.submit(routes.indptr, routes.links, nbytes, routes.latency_s, self.owner,
                        partial(self.post, ("phase", run, s)), routes.frac)

    def _handle(self, msg: tuple) -> int | None:
        """Process a message; the index of an op that just finished, if any."""
        if msg[0] == "done":
            return msg[1]
        _, run, s = msg
        cur = run.cursors[s]
        stream = run.schedule.stages[run.stage][s]
        cur[1] -= 1
        if cur[1] == 0:
            cur[0] += 1
            if cur[0] < len(stream):
                cur[1] = stream[cur[0]].repeat
        if cur[0] < len(stream):
            self._submit(run, s)
            return None
        run.streams_left -= 1
        if run.streams_left or self._next_stage(run):
            return None
        return run.index
