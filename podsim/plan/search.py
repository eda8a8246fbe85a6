"""The plan search: enumerate, prune, rank by the analytic estimate, confirm the best with the engine.

1. Enumerate (podsim.plan.space): slices x slice shapes, the axes inside a slice, sequence
   parallelism and collective-matmul modes; for each, recompute policies and micro-batch counts.
2. Prune: the generator's refusals (`transformer_shard`, as `podsim steptime` refuses the same
   plan), then the memory model (`transformer_footprint` over the chip's HBM). Without a pipeline,
   micro-batches only trade memory for time (each one re-gathers FSDP weights and runs smaller
   matmuls), as recomputation trades memory for FLOPs: for each plan and recompute policy only
   the fewest micro-batches that fit are ranked, and a policy that recomputes more is ranked only
   if it fits with fewer micro-batches than every lighter policy. The rest are counted as
   `dominated`.
3. Rank the survivors by the analytic estimate (podsim.plan.estimate).
4. Confirm the best `top` with the engine (`run_study` of the very StepStudy `podsim steptime`
   builds for that plan), and say why each loses to the best (podsim.plan.explain).
"""

from __future__ import annotations

import bisect
import math
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from podsim.engine.summary import flops_utilisation
from podsim.errors import PodsimError
from podsim.plan.candidate import Assessed, Candidate, Context, assess, bounded, context, estimated
from podsim.plan.space import RECOMPUTE, TENSOR_MODES, bases, job_layouts, microbatch_options
from podsim.study import StepStudy, run_study
from podsim.topology import DcnSpec, Generation
from podsim.trace.generate import GenerateOptions

KEEP = 20
"""Plans a search ranks at least (the rest are only bounded when their compute alone is slower)."""
SEARCHED_OPTIONS = ("microbatches", "recompute", "sequence_parallel", "collective_matmul")
UNMODELLED_OPTIONS = ("overlap_fsdp_prefetch", "overlap_grad_reduce", "overlap_dcn", "combine_grad_reduce",
                      "input_pipeline", "input_rate_per_host", "replicas_per_chip", "bn_group")
"""Generator options the analytic estimate does not model; a search refuses them rather than
rank plans as if they were not set."""


def refuse_top(name: str, top: int) -> None:
    """The one rule for how many plans a search confirms with the engine; `name` as the caller spells it."""
    if not 0 <= top <= 50:
        raise PodsimError(f"{name} {top} must be between 0 and 50 (plans confirmed with the engine)")


@dataclass(frozen=True)
class PlanQuery:
    """What a plan search is asked: a model on a generation, a chip budget (or a slice shape and
    slice count), the model's fields changed (e.g. global_batch), the options held fixed, what is
    searched, and how many of the best to confirm with the engine."""

    model: str
    generation: str | Generation
    chips: int | None = None
    slice: tuple[int, ...] | None = None
    slices: int | None = None
    model_overrides: Mapping[str, object] = field(default_factory=dict)
    options: GenerateOptions = field(default_factory=GenerateOptions)
    dcn: DcnSpec = field(default_factory=DcnSpec)
    recompute: tuple[str, ...] = RECOMPUTE
    microbatches: tuple[int, ...] | None = None
    tensor_modes: tuple[str, ...] = TENSOR_MODES
    top: int = 5
    bound: bool = True  # skip plans whose compute alone is slower than the KEEP-th best estimate
    fewest_slices: bool = False  # only the splits of the chips into the fewest slices the generation allows

    def __post_init__(self) -> None:
        if self.chips is not None and (isinstance(self.chips, bool) or self.chips < 1):
            raise PodsimError(f"chips {self.chips!r} must be a whole number >= 1")
        if self.slices is not None and (isinstance(self.slices, bool) or self.slices < 1):
            raise PodsimError(f"slices {self.slices!r} must be a whole number >= 1")
        refuse_top("top", self.top)
        bad = [r for r in self.recompute if r not in RECOMPUTE]
        if bad or not self.recompute:
            raise PodsimError(f"recompute {bad[0] if bad else '(none)'!r}: use one or more of {', '.join(RECOMPUTE)}")
        bad = [m for m in self.tensor_modes if m not in TENSOR_MODES]
        if bad:
            raise PodsimError(f"collective_matmul {bad[0]!r}: a search tries {', '.join(TENSOR_MODES)}")
        if self.microbatches is not None and (not self.microbatches or any(m < 1 for m in self.microbatches)):
            raise PodsimError("microbatches must be whole numbers >= 1")
        default = GenerateOptions()
        for name in UNMODELLED_OPTIONS + ("mesh",):
            if getattr(self.options, name) != getattr(default, name):
                raise PodsimError(f"option {name}: the plan search's estimate does not model it; leave it at its default "
                                  f"({getattr(default, name)!r}) or time that plan with podsim steptime")


@dataclass(frozen=True)
class Confirmed:
    """A plan run on the engine: the step `podsim steptime` gives for it, and its figures."""

    assessed: Assessed
    study: StepStudy
    step_s: float
    compute_s: float
    exposed_comm_s: float
    mfu: float | None  # model FLOPs over the peak: step_summary's (None: the trace has no model FLOPs)
    hfu: float | None  # hardware FLOPs (recompute included) over the peak: step_summary's
    tokens_per_s: float
    hbm_bytes: float
    levels: dict[str, dict[str, float]]
    wall_s: float

    @property
    def estimate_error(self) -> float:
        """The analytic estimate's error against the engine: estimate / engine - 1."""
        return self.assessed.estimate.step_s / self.step_s - 1


@dataclass
class Counts:
    """How many plans each stage saw."""

    enumerated: int = 0
    refused: int = 0
    over_hbm: int = 0
    dominated: int = 0
    bounded: int = 0  # not estimated: their compute alone exceeds the KEEP-th best step
    ranked: int = 0
    confirmed: int = 0


@dataclass
class PlanSearch:
    """A search's answer: the ranked plans (analytic), the confirmed best (engine), the counts,
    why plans were refused, and what would fit when nothing did."""

    query: PlanQuery
    context: Context
    layouts: tuple[tuple[int, tuple[int, ...]], ...]
    counts: Counts
    ranked: list[Assessed]
    confirmed: list[Confirmed]
    refusals: Counter
    wall_s: dict[str, float]
    smallest_over: Assessed | None = None  # the plan closest to fitting when none fits
    engine_refused: list[tuple[Assessed, str]] = field(default_factory=list)  # ranked, but the engine refused them

    @property
    def best(self) -> Confirmed | None:
        return self.confirmed[0] if self.confirmed else None

    @property
    def chips(self) -> int:
        return self.layouts[0][0] * math.prod(self.layouts[0][1])


def _prune(ctx: Context, base: Candidate, query: PlanQuery, counts: Counts, refusals: Counter,
           over: list[Assessed]) -> list[Candidate]:
    """The (recompute, micro-batches) choices of one plan worth ranking (see the module docstring)."""
    mbs = microbatch_options(ctx.cfg.global_batch, base, query.microbatches)
    per_policy = len(mbs)
    counts.enumerated += per_policy * len(query.recompute)
    keep: list[Candidate] = []
    best_m = math.inf
    for rc in sorted(query.recompute, key=RECOMPUTE.index):  # lighter first: dominance needs the order
        seen = 0
        for m in mbs:
            seen += 1
            cand = replace(base, recompute=rc, microbatches=m)
            a = assess(ctx, cand, estimate=False)
            if a.refused:
                counts.refused += 1
                refusals[a.refused] += 1
                if a.refused.startswith("microbatches"):
                    continue  # this count does not divide the batch; another may
                counts.refused += per_policy - seen  # the others are refused alike
                break
            if a.hbm_bytes is not None and ctx.hbm_capacity_bytes is not None and a.hbm_bytes > ctx.hbm_capacity_bytes:
                counts.over_hbm += 1
                over.append(a)
                continue
            if m < best_m:
                keep.append(cand)
                best_m = m
            else:
                counts.dominated += 1
            counts.dominated += per_policy - seen
            break
    return keep


def _confirm(ctx: Context, query: PlanQuery, a: Assessed) -> Confirmed:
    c = a.candidate
    study = plan_study(ctx, query, c)
    t0 = time.perf_counter()
    r = run_study(study)
    wall = time.perf_counter() - t0
    u = flops_utilisation(r)  # step_summary's MFU and HFU
    return Confirmed(a, study, r.step_time_s, r.compute_s, r.exposed_comm_s, u.get("mfu"), u.get("hfu"),
                     ctx.cfg.tokens_per_step / r.step_time_s, r.trace.meta["hbm_footprint"]["total_bytes"], r.levels, wall)


def plan_study(ctx: Context, query: PlanQuery, c: Candidate) -> StepStudy:
    """The StepStudy of a candidate: what `podsim steptime --model M --generation G --slice S
    --slices N --parallelism P --option ...` builds for it."""
    return StepStudy(ctx.generation, c.shape, model=query.model, model_overrides=dict(query.model_overrides),
                     plan=c.parallelism, slices=c.slices, options=c.options(query.options), dcn=query.dcn)


def _rank_key(a: Assessed) -> tuple:
    return (a.estimate.step_s, a.candidate.slices)


def search(query: PlanQuery, on_progress: Callable[[str, float, float], None] | None = None) -> PlanSearch:
    """Search the plans of `query` (see the module docstring). `on_progress(stage, done, total)`."""
    t0 = time.perf_counter()
    ctx = context(query.model, query.generation, options=query.options, dcn=query.dcn, overrides=dict(query.model_overrides))
    lay = job_layouts(ctx.generation, query.chips, query.slice, query.slices, fewest=query.fewest_slices)
    counts, refusals, over = Counts(), Counter(), []
    survivors: list[Candidate] = []
    all_bases = list(bases(lay, moe=ctx.cfg.is_moe, tensor_modes=query.tensor_modes))
    for i, base in enumerate(all_bases):
        survivors += _prune(ctx, base, query, counts, refusals, over)
        if on_progress and i % 64 == 0:
            on_progress("prune", i, len(all_bases))
    t1 = time.perf_counter()
    bounded_ = []
    for c in survivors:
        b = bounded(ctx, c)
        if b.refused:
            counts.refused += 1
            refusals[b.refused] += 1
        else:
            bounded_.append(b)
    bounded_.sort(key=lambda a: a.bound_s)
    keep = max(KEEP, 4 * query.top)
    ranked: list[Assessed] = []
    for i, b in enumerate(bounded_):
        if query.bound and len(ranked) >= keep and b.bound_s > ranked[keep - 1].estimate.step_s:
            counts.bounded = len(bounded_) - i  # its compute alone is slower than the keep-th best step
            break
        a = estimated(ctx, b)
        if a.refused:
            counts.refused += 1
            refusals[a.refused] += 1
        else:
            bisect.insort(ranked, a, key=_rank_key)
        if on_progress and i % 64 == 0:
            on_progress("rank", i, len(bounded_))
    counts.ranked = len(ranked)
    t2 = time.perf_counter()
    confirmed: list[Confirmed] = []
    failed: list[tuple[Assessed, str]] = []
    for a in ranked:
        if len(confirmed) >= query.top:
            break
        if on_progress:
            on_progress("confirm", len(confirmed), min(query.top, len(ranked)))
        try:
            confirmed.append(_confirm(ctx, query, a))
        except PodsimError as exc:  # the engine refuses what the estimate took (a budget): say so, take the next
            failed.append((a, str(exc)))
    confirmed.sort(key=lambda c: (c.step_s, ranked.index(c.assessed)))
    counts.confirmed = len(confirmed)
    t3 = time.perf_counter()
    smallest = min(over, key=lambda a: a.hbm_bytes) if over and not ranked else None
    return PlanSearch(query, ctx, lay.pairs, counts, ranked, confirmed, refusals,
                      {"prune": t1 - t0, "rank": t2 - t1, "confirm": t3 - t2, "total": t3 - t0}, smallest, failed)


def no_fit_advice(s: PlanSearch) -> str:
    """What would fit when no plan does: the nearest plan's HBM and the chips it would need."""
    cap = s.context.hbm_capacity_bytes
    a = s.smallest_over
    if a is None or cap is None:
        reasons = ", ".join(f"{r} ({n}x)" for r, n in s.refusals.most_common(2))
        return f"no plan of {s.query.model} on {s.chips} chips is valid: {reasons}"
    need = a.hbm_bytes / cap
    more = [f"more chips (about {math.ceil(need * s.chips):,}, to shard the state further)"]
    if "full" not in s.query.recompute:
        more.append("full recomputation (--recompute)")
    more.append("a smaller global batch (--global-batch)")
    return (f"no plan of {s.query.model} on {s.chips} {s.context.generation.id} chips fits in HBM: the smallest, "
            f"{a.candidate.label()}, needs {a.hbm_bytes / 2**30:.1f} GiB per chip of {cap / 2**30:.1f} GiB "
            f"({need:.1f}x); {', '.join(more[:-1])} or {more[-1]} would be needed")


__all__ = ["Confirmed", "Counts", "PlanQuery", "PlanSearch", "no_fit_advice", "plan_study", "search", "SEARCHED_OPTIONS"]
