"""Run step traces on the flow network: one SimPy process per job's program, one for the network.

Each job's program (podsim.engine.program) walks its trace's DAG: an op starts when its
dependencies are done, so compute and communication overlap where the DAG allows. A compute op
is a timer (its duration, or the per-op model of podsim.perf: matmuls padded to the MXU tile at
the precision's rate plus memory-bound bytes at HBM bandwidth; with a flat `compute_efficiency`
override, the roofline of FLOPs at peak x efficiency vs HBM bytes at HBM bandwidth); a collective
runs its schedule stage by stage, each stream submitting one phase of flows at a time to the
shared network and moving on when that phase is delivered. Here: the jobs' routers and programs
set up, run together, and each read back as a StepResult (busy and exposed time per level and
DCN tier, link loads unfolded onto every link).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import replace

import numpy as np

from podsim._arrays import has_duplicates
from podsim.bounds import budget
from podsim.collectives.algorithms import busbw_factor
from podsim.collectives.fabricroutes import Placement
from podsim.collectives.routes import Router, RouterPool, fold_reason
from podsim.engine import validate
from podsim.engine.jobs import Job
from podsim.engine.network import CountingEnvironment, FlowNetwork
from podsim.engine.program import OpPlan, Program, prepare_ops
from podsim.engine.results import CollectiveResult, StepResult
from podsim.errors import PodsimError, PodsimWarning
from podsim.topology.summary import Built
from podsim.trace.kinds import normalise_algorithm, normalise_kind
from podsim.trace.model import (
    SLICE_AXES,
    Collective,
    SendRecv,
    StepTrace,
    parse_group,
)
from podsim.units import parse_bytes

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


def _result(prog: Program, net: FlowNetwork, owner: int, wall: float, events: int) -> StepResult:
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


def _fold_note(job: Job, plans: list[OpPlan], patterns: list, router: Router, pool: RouterPool, fast_path: bool,
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


def _plan_job(job: Job, pool: RouterPool, efficiency: float | None, fast_path: bool, jobs: int
              ) -> tuple[list[OpPlan], dict[str, str], list, Router]:
    """The job's op plans, choices, distinct patterns and the router that simulates them.
    `auto` prices a candidate folded by its own patterns' symmetry, but the step's router folds
    only by what every pattern of the step shares (none, say, when one pattern breaks it, or on
    several jobs), so a chosen pattern may be routed with more flows than the budget. Each such
    collective is planned again without that algorithm (its `why` says so), and the router
    rebuilt, until every pattern fits: each round drops an algorithm, so it ends. A collective
    whose algorithm was asked by name, or with no candidate left, is refused with the budget
    error, before anything is simulated."""
    made: dict = {}
    exclude: dict[tuple, dict[str, tuple[str, str]]] = {}
    limit = budget().flows
    while True:
        plans, choices = prepare_ops(job, pool, efficiency, made, exclude)
        patterns = list({id(pat): pat for p in plans if p.plan for pat in p.plan.schedule.patterns()}.values())
        pool.drop_pricing()
        router = pool.router(patterns, fold=fast_path and jobs == 1, fold_dcn=True)
        over = []
        for key, plan in made.items():
            n, pat = max(((router.budget_flows(p), p) for p in plan.schedule.patterns()), key=lambda x: x[0],
                         default=(0, None))
            if n > limit:
                over.append((key, plan, n, pat))
        if not over:
            return plans, choices, patterns, router
        why = "the fast path is off" if not fast_path else fold_reason(pool.placement, patterns, router.symmetry, jobs)
        for key, plan, n, pat in over:
            err = f"{pat.name}: {n:,} flows, over the budget of {limit:,} flows (--max-flows)"
            try:
                router.check_budget(pat)
            except PodsimError as e:
                if key[3] != "auto":
                    raise  # asked by name
                err = str(e)
            alg = plan.schedule.algorithm
            note = (f"{alg} ({plan.closed_form_s * 1e6:.4g} us) is over the flows budget as this step routes it "
                    f"({pat.name}: {n:,} flows > {limit:,}, --max-flows; {why})")
            exclude.setdefault(key, {})[alg] = (note, err)
            del made[key]


def _simulate(jobs: Sequence[Job], compute_efficiency: float | None, fast_path: bool, routing: str = "dimension_order",
              failed: tuple[tuple[int, ...], tuple[int, ...]] = ((), ())) -> tuple[list[StepResult], list[list[OpPlan]]]:
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
        plans, choices, patterns, router = _plan_job(job, pool, eff, fast_path, len(jobs))
        pool.release(router)
        prog = Program(env, net, router, owner, job, plans)
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
