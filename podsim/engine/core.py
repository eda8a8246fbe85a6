"""Run step traces on the flow network: one SimPy process per job's program, one for the network.

Each job's program walks its trace's DAG: an op starts when its dependencies are done, so
compute and communication overlap where the DAG allows. A compute op is a timer (its duration,
or the per-op model of podsim.perf: matmuls padded to the MXU tile at the precision's rate plus
memory-bound bytes at HBM bandwidth; with a flat `compute_efficiency` override, the roofline of
FLOPs at peak x efficiency vs HBM bytes at HBM bandwidth); a collective runs its schedule stage by stage, each stream submitting one phase of
flows at a time to the shared network and moving on when that phase is delivered.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from podsim._arrays import has_duplicates
from podsim.collectives import Plan, plan_collective
from podsim.collectives.algorithms import busbw_factor
from podsim.collectives.groups import SITE_AXIS, group_layout
from podsim.collectives.routes import Placement, Router, RouterPool, fold_reason
from podsim.collectives.schedule import Schedule
from podsim.engine import validate
from podsim.engine.jobs import Job
from podsim.engine.network import CountingEnvironment, FlowNetwork
from podsim.engine.results import CollectiveResult, OpTiming, StepResult
from podsim.errors import PodsimError, PodsimWarning
from podsim.perf import chip_compute
from podsim.perf.opmodel import op_timer
from podsim.topology.summary import Built
from podsim.trace.kinds import normalise_algorithm, normalise_kind
from podsim.trace.model import (
    SLICE_AXES,
    Collective,
    Compute,
    SendRecv,
    StepTrace,
    format_group,
    parse_group,
)
from podsim.units import format_bytes, parse_bytes


@dataclass(frozen=True, eq=False)
class _OpPlan:
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


def _prepare(job: Job, pool: RouterPool, efficiency: float | None) -> tuple[list[_OpPlan], dict[str, str]]:
    """Each op of the trace with its dependencies (indices), duration or collective plan; and
    per distinct collective (kind, group, size), its algorithm and why (one line)."""
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

    plans: dict[tuple, object] = {}
    duration = op_timer(job.fabric.generation, chip_compute(job.fabric.generation) if efficiency is None else None, efficiency)

    def plan(kind: str, group, nbytes: float, algorithm: str, shift: int = 1):
        """Plans are read-only: a model's layers repeat a handful of collectives, plan each once."""
        key = (kind, format_group(group), nbytes, algorithm, shift)
        if key not in plans:
            plans[key] = plan_collective(kind, layout(group), nbytes, algorithm, pool, shift)
        return plans[key]

    out = []
    for op in order:
        deps = tuple(index[d] for d in op.deps)
        if isinstance(op, Compute):
            out.append(_OpPlan(op, "input" if op.host else "compute", deps, duration_s=duration(op)))
        elif isinstance(op, Collective):
            lay = layout(op.group)
            out.append(_OpPlan(op, op.kind, deps, plan=plan(op.kind, op.group, op.bytes, op.algorithm),
                               group=lay.name, level=_level(lay)))
        elif isinstance(op, SendRecv):
            lay = layout(op.group)
            out.append(_OpPlan(op, "send_recv", deps, plan=plan("send_recv", op.group, op.bytes, "auto", op.shift),
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


class _Program:
    """One job's program: the SimPy process that runs its trace `steps` times."""

    def __init__(self, env, net: FlowNetwork, router: Router, owner: int, job: Job, plans: list[_OpPlan]):
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

    def _tier(self, p: _OpPlan) -> str:
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


LEVELS = ("ici", "dcn", "wan")
"""Network levels a step's communication is split by (StepResult.levels)."""


def busy_time_s(intervals: Iterable[tuple[float, float]]) -> float:
    """Busy time of a set of ops, as every podsim figure named `*busy_s` means it: the time at
    least one of them is in flight (the union of their (start, end) intervals; overlapping ops
    count once), so a part's busy time never exceeds its whole's."""
    total, end = 0.0, -np.inf
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def _result(prog: _Program, net: FlowNetwork, owner: int, wall: float, events: int) -> StepResult:
    """The StepResult of one job's program (link loads unfolded onto every link)."""
    steps = prog.job.steps
    comp = [(t.start_s, t.end_s) for t in prog.timeline if t.kind == "compute"]
    comm = [(t.start_s, t.end_s) for t in prog.timeline if t.kind not in ("compute", "input")]
    # host input: its busy time, and how long each step waited for it after the chips were done
    host = [(t.start_s, t.end_s) for t in prog.timeline if t.kind == "input"]
    device_end = [0.0] * steps
    for t in prog.timeline:
        if t.kind != "input":
            device_end[t.step] = max(device_end[t.step], t.end_s)
    input_wait = sum(max(0.0, t.end_s - device_end[t.step]) for t in prog.timeline if t.kind == "input")
    totals: dict[str, dict] = {}
    for t in prog.timeline:
        d = totals.setdefault(t.kind, {"count": 0.0, "bytes": 0.0, "time_s": 0.0, "closed_form_s": 0.0, "algorithms": []})
        d["count"] += 1 / steps
        d["bytes"] += t.bytes / steps
        d["time_s"] += t.duration_s / steps
        d["closed_form_s"] += (t.closed_form_s or 0.0) / steps
        if t.algorithm and t.algorithm not in d["algorithms"]:
            d["algorithms"].append(t.algorithm)
    for kind, d in totals.items():  # busy: in flight at all (union), beside time_s, the ops' summed durations
        d["busy_s"] = busy_time_s([(t.start_s, t.end_s) for t in prog.timeline if t.kind == kind]) / steps
    sym = prog.router.symmetry
    link_bytes = net.link_bytes[owner] / steps
    peak = net.link_peak_utilisation.copy()
    if sym is not None:
        link_bytes, peak = link_bytes[sym.canon_link], peak[sym.canon_link]
    peak = np.where(link_bytes > 0, peak, 0.0)
    compute_s, comm_s = busy_time_s(comp), busy_time_s(comm)
    levels = {}
    for level in LEVELS:
        ivs = [(t.start_s, t.end_s) for t in prog.timeline if t.level == level]
        levels[level] = {"busy_s": busy_time_s(ivs) / steps, "exposed_s": (busy_time_s(comp + ivs) - compute_s) / steps}
    tiers = {}
    names, link_tier = prog.job.fabric.dcn_tiers
    cap = prog.job.fabric.link_capacity_bytes_per_s
    for i, name in enumerate(names):
        on = link_tier == i
        if not on.any():
            continue
        ivs = [(t.start_s, t.end_s) for t in prog.timeline if t.tier == name]
        load = link_bytes[on] / cap[on]
        tiers[name] = {"busy_s": busy_time_s(ivs) / steps, "exposed_s": (busy_time_s(comp + ivs) - compute_s) / steps,
                       "link_busy_s": float(load.max(initial=0.0)), "links": int((load > 0).sum())}
    return StepResult(
        job=prog.job.name, steps=steps, step_time_s=float(np.mean(prog.step_times)) if prog.step_times else 0.0,
        step_times_s=tuple(prog.step_times), compute_s=compute_s / steps, comm_s=comm_s / steps,
        exposed_comm_s=(busy_time_s(comp + comm) - compute_s) / steps, timeline=tuple(sorted(prog.timeline, key=lambda t: (t.start_s, t.end_s))),
        totals=totals, link_bytes=link_bytes, link_peak_utilisation=peak, fabric=prog.job.fabric, engine_wall_s=wall,
        events=events, flows=prog.flows, flows_simulated=prog.flows_simulated, fast_path=sym is not None,
        levels=levels, tiers=tiers, slices=len(prog.job.slices), input_s=busy_time_s(host) / steps, input_wait_s=input_wait / steps,
        links_alike=None if sym is None else np.bincount(sym.canon_link, minlength=len(link_bytes)),
        algorithm_choices=prog.choices, fold=prog.fold,
        trace=prog.job.trace, views=prog.job.views,
    )


NOTE_FLOWS = 1_000_000
"""A step that would simulate more flows than this, folded as far as it goes, is said on stderr
(a PodsimWarning) before it runs: at ~1-2 us per flow and event that is seconds to minutes."""


def _fold_note(job: Job, plans: list[_OpPlan], patterns: list, router: Router, pool: RouterPool, fast_path: bool,
               jobs: int) -> str:
    """How many flows the job's steps simulate and why not fewer (one line); a PodsimWarning
    with it, before simulating, when they are more than NOTE_FLOWS. `patterns`: the plans'
    distinct patterns (the router's)."""
    per_step = 0
    for p in plans:
        if p.plan is not None:
            per_step += sum(ph.repeat * router.flows_to_simulate(ph.pattern)
                            for stage in p.plan.schedule.stages for stream in stage for ph in stream)
    n = per_step * job.steps
    why = "the fast path is off" if not fast_path else fold_reason(pool.placement, patterns, router.symmetry, jobs)
    note = f"{n:,} flows to simulate ({why})"
    if fast_path and n > NOTE_FLOWS:
        warnings.warn(f"job {job.name!r}: {note}; this may take a while", PodsimWarning, stacklevel=2)
    return note


def _simulate(jobs: Sequence[Job], compute_efficiency: float | None, fast_path: bool, routing: str = "dimension_order",
              failed: tuple[tuple[int, ...], tuple[int, ...]] = ((), ())) -> tuple[list[StepResult], list[list[_OpPlan]]]:
    t_wall = time.perf_counter()
    jobs = list(jobs)
    if not jobs:
        raise PodsimError("no job to simulate")
    fabric = jobs[0].fabric
    if any(j.fabric is not fabric for j in jobs):
        raise PodsimError("jobs simulated together must share one fabric (build it once with all their slices' circuits)")
    chips = np.concatenate([v.chips for j in jobs for v in j.views])
    if has_duplicates(chips):
        raise PodsimError("two jobs use the same chips")
    env = CountingEnvironment()
    net = FlowNetwork(env, fabric.link_capacity_bytes_per_s, owners=len(jobs),
                      validator=validate.validator_for(fabric.link_capacity_bytes_per_s))
    programs, all_plans = [], []
    for owner, job in enumerate(jobs):
        eff = job.compute_efficiency if job.compute_efficiency is not None else compute_efficiency
        pool = RouterPool(Placement(fabric, job.views, routing, *failed))
        plans, choices = _prepare(job, pool, eff)
        patterns = list({id(pat): pat for p in plans if p.plan for pat in p.plan.schedule.patterns()}.values())
        pool.drop_pricing()
        router = pool.router(patterns, fold=fast_path and len(jobs) == 1, fold_dcn=True)
        pool.release(router)
        prog = _Program(env, net, router, owner, job, plans)
        prog.choices = choices
        prog.fold = _fold_note(job, plans, patterns, router, pool, fast_path, len(jobs))
        env.process(prog.run())
        programs.append(prog)
        all_plans.append(plans)
    env.run()
    validate.check(net.validator)
    wall = time.perf_counter() - t_wall
    return [_result(p, net, i, wall, env.events_processed) for i, p in enumerate(programs)], all_plans


def _failed(links: Sequence[int], chips: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    return tuple(int(i) for i in links), tuple(int(i) for i in chips)


def _check_efficiency(eff: float | None) -> None:
    if eff is not None and not 0 < eff <= 1:
        raise PodsimError(f"compute_efficiency {eff} must be in (0, 1]")


def simulate_jobs(jobs: Sequence[Job], *, compute_efficiency: float | None = None,
                  fast_path: bool = True, routing: str = "dimension_order",
                  failed_links: Sequence[int] = (), failed_chips: Sequence[int] = ()) -> list[StepResult]:
    """Run several jobs at once on their shared fabric, so jobs whose flows share links (the
    DCN, an oversubscribed spine) slow each other down. One StepResult per job, in order.
    `compute_efficiency` None: compute ops are timed by the per-op model (podsim.perf); a
    number: a flat fraction of peak FLOP/s for every op (roofline), the explicit override.
    The symmetry fast path applies to a lone job only (one slice: translations of its torus;
    several identical slices: the first slice's ICI flows stand for every slice's). `routing`:
    the policy inside slices (podsim.topology.multipath.ROUTING_POLICIES); `failed_links` /
    `failed_chips`: fabric ICI link / chip ids that are down (flows go around them)."""
    _check_efficiency(compute_efficiency)
    return _simulate(jobs, compute_efficiency, fast_path, routing, _failed(failed_links, failed_chips))[0]


def simulate_step(trace: StepTrace | None, built_or_job: Built | Job, *,
                  compute_efficiency: float | None = None, fast_path: bool = True,
                  routing: str = "dimension_order", failed_links: Sequence[int] = (),
                  failed_chips: Sequence[int] = ()) -> StepResult:
    """Simulate one training step of `trace` on a slice (`build_slice(...)`) or a Job (whose
    own trace is used when `trace` is None), routed by `routing` inside the slice."""
    _check_efficiency(compute_efficiency)
    if isinstance(built_or_job, Job):
        job = built_or_job if trace is None else replace(built_or_job, trace=trace)
    elif isinstance(built_or_job, Built):
        if trace is None:
            raise PodsimError("simulate_step needs a trace when given a slice")
        job = Job.on(built_or_job, trace)
    else:
        raise PodsimError(f"simulate_step runs on a Built slice or a Job, not {type(built_or_job).__name__}")
    return _simulate([job], compute_efficiency, fast_path, routing, _failed(failed_links, failed_chips))[0][0]


def _check_group_axes(built: Built, group, parsed) -> None:
    """A group named axis by axis may name only axes the slice has (the caller has already
    turned 'all' into the axes the slice has)."""
    dims = len(built.slice.shape)
    for g in parsed:
        if g.axis in SLICE_AXES and SLICE_AXES.index(g.axis) >= dims:
            raise PodsimError(f"group {group!r}: the {'x'.join(map(str, built.slice.shape))} slice has no {g.axis} axis "
                              f"(its axes: {', '.join(SLICE_AXES[:dims])}, or all)")


def simulate_collective(built: Built, kind: str, size_bytes: float | str, group: str = "all",
                        algorithm: str = "auto", fast_path: bool = True, routing: str = "dimension_order",
                        failed_links: Sequence[int] = (), failed_chips: Sequence[int] = ()) -> CollectiveResult:
    """One collective on one slice, alone on the fabric: simulated and closed-form time, algbw
    and busbw (nccl-tests convention).

    Parameters
    ----------
    built : Built
        The slice (`build_slice`).
    kind : str
        all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce or send_recv
        (group: one axis); any spelling `podsim.trace.kinds` knows.
    size_bytes : float or str
        The buffer in the nccl-tests convention, e.g. '1GiB'.
    group : str
        The slice axes of the group: 'x', 'x,y', 'all', 'x:4' ...
    algorithm : str
        'auto' (the fastest by closed form) or an algorithm of `podsim.collectives.ALGORITHMS`.
    fast_path : bool
        Fold symmetric flows (False: simulate every flow).
    routing : str
        ICI routing: dimension_order, shortest_paths or adaptive.
    failed_links, failed_chips : sequence of int
        Fabric ICI link / chip ids that are down: flows go around them and `auto` prices every
        algorithm on the degraded routes, so it falls back to the one that suffers least.

    Returns
    -------
    CollectiveResult
        Simulated and closed-form seconds, algorithm bandwidth, bus bandwidth per chip, the
        engine's events and flows.

    Examples
    --------
    >>> from podsim import build_slice, simulate_collective
    >>> r = simulate_collective(build_slice("tpu-v4", "4x4x4"), "all_reduce", "256MiB")
    >>> r.algorithm, round(r.simulated_s / r.closed_form_s, 6), round(r.busbw_bytes_per_s / 1e9)
    ('torus_all_links', 1.0, 268)
    """
    size = parse_bytes(size_bytes)
    if isinstance(group, str) and group.strip() == "all":
        group = ",".join(SLICE_AXES[:len(built.slice.shape)])  # every axis the slice has
    parsed = parse_group(group)
    kind, algorithm = normalise_kind(kind, field="collective"), normalise_algorithm(algorithm)
    _check_group_axes(built, group, parsed)
    if kind == "send_recv":
        if len(parsed) != 1:
            raise PodsimError(f"send_recv runs along one axis; group {group!r} names {len(parsed)}: give one, e.g. x")
        op = SendRecv("op", size, parsed[0])
    else:
        op = Collective("op", kind, size, parsed, algorithm)
    job = Job.on(built, StepTrace((op,), name=f"{kind} {group}"), name=kind)
    results, plans = _simulate([job], None, fast_path, routing, _failed(failed_links, failed_chips))
    res, p = results[0], plans[0][0]
    sched = p.plan.schedule
    if sched.layout.p == 1 and all(g.size is None for g in parsed):
        raise PodsimError(f"group {group!r} has 1 chip on the {'x'.join(map(str, built.slice.shape))} slice, so nothing "
                          "is communicated; name axes longer than 1 (or ask for a 1-chip group explicitly, e.g. x:1)")
    t = res.step_time_s
    algbw = size / t if t > 0 else float("inf")
    return CollectiveResult(
        kind=kind, algorithm=sched.algorithm, group=p.group, group_size=sched.layout.p, instances=sched.layout.instances,
        size_bytes=size, simulated_s=t, closed_form_s=p.plan.closed_form_s, algbw_bytes_per_s=algbw,
        busbw_bytes_per_s=algbw * busbw_factor(kind, sched.layout.p), engine_wall_s=res.engine_wall_s, events=res.events,
        flows=res.flows, flows_simulated=res.flows_simulated, fast_path=res.fast_path, candidates_s=p.plan.candidates_s,
        step=res, algorithm_choice=p.plan.why,
    )
