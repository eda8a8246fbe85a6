"""A candidate plan (slices x slice shape, logical axes, micro-batches, recompute, sequence
parallelism, collective matmul) and its analytic estimate, refusal or HBM overflow.

`Context` holds what every candidate of one search shares: the model config, the generation and
its compute constants, the options the user fixed, the DCN. `assess(ctx, cand)` runs the
generator's own checks (`transformer_shard`: the refusals of `podsim steptime`), the memory model
(`transformer_footprint`), and, for a plan that fits, the analytic estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property

from podsim.bounds import check_budget
from podsim.errors import PodsimError
from podsim.perf import chip_compute
from podsim.perf.chips import ChipCompute
from podsim.plan.estimate import Estimate, evaluate, layout_for
from podsim.plan.pricing import pricer
from podsim.plan.program import StepProgram, step_program
from podsim.study.multislice import MultisliceSpec, straggler_wait
from podsim.topology import DcnSpec, Generation, format_shape, get_generation
from podsim.trace.configs import TransformerConfig
from podsim.trace.generate import GenerateOptions
from podsim.trace.memory import transformer_footprint
from podsim.trace.mesh import ParallelPlan
from podsim.trace.transformer import transformer_shard


@dataclass(frozen=True)
class Candidate:
    """One plan: `slices` slices of `shape`, the logical axes inside a slice (dcn = slices), and
    the searched options."""

    shape: tuple[int, ...]
    slices: int
    data: int = 1
    fsdp: int = 1
    tensor: int = 1
    expert: int = 1
    microbatches: int = 1
    recompute: str = "none"
    sequence_parallel: bool = False
    collective_matmul: str = "auto"

    @property
    def plan(self) -> ParallelPlan:
        return ParallelPlan(data=self.data, fsdp=self.fsdp, tensor=self.tensor, expert=self.expert, dcn=self.slices)

    @property
    def parallelism(self) -> str:
        """The plan inside a slice as `podsim steptime --parallelism` takes it (dcn left out)."""
        return str(replace(self.plan, dcn=1))

    @property
    def chips(self) -> int:
        return math.prod(self.shape) * self.slices

    def options(self, base: GenerateOptions) -> GenerateOptions:
        return replace(base, microbatches=self.microbatches, recompute=self.recompute,
                       sequence_parallel=self.sequence_parallel, collective_matmul=self.collective_matmul)

    def label(self) -> str:
        """'2 x 8x8x16 fsdp=256,tensor=4 m=2 remat=full sp cm=all_gather' (what differs from the defaults)."""
        where = format_shape(self.shape) if self.slices == 1 else f"{self.slices} x {format_shape(self.shape)}"
        parts = [where, self.parallelism]
        if self.microbatches > 1:
            parts.append(f"mb={self.microbatches}")
        if self.recompute != "none":
            parts.append(f"remat={self.recompute}")
        if self.sequence_parallel:
            parts.append("sp")
        if self.tensor > 1 and self.collective_matmul != "auto":
            parts.append(f"cm={self.collective_matmul}")
        return " ".join(parts)

    def option_args(self) -> list[str]:
        """The `podsim steptime --option` arguments that run this plan."""
        out = [f"microbatches={self.microbatches}", f"recompute={self.recompute}"]
        if self.sequence_parallel:
            out.append("sequence_parallel=true")
        if self.collective_matmul != "auto":
            out.append(f"collective_matmul={self.collective_matmul}")
        return out


@dataclass
class Context:
    """What every candidate of one search shares."""

    model: str
    cfg: TransformerConfig
    generation: Generation
    base: GenerateOptions = field(default_factory=GenerateOptions)
    dcn: DcnSpec = field(default_factory=DcnSpec)
    model_overrides: dict = field(default_factory=dict)

    @cached_property
    def chip(self) -> ChipCompute:
        return chip_compute(self.generation)

    @cached_property
    def hbm_capacity_bytes(self) -> float | None:
        fig = self.generation.hbm_per_chip
        return fig.si if fig is not None and fig.value is not None else None


@dataclass(frozen=True)
class Assessed:
    """A candidate's fate: refused by the generator (`refused`: its one line), over HBM
    (`hbm_bytes` > capacity), or estimated (`estimate`)."""

    candidate: Candidate
    hbm_bytes: float | None = None
    refused: str | None = None
    estimate: Estimate | None = None
    microbatch_sequences: int | None = None
    collective_matmul: str = "exposed"
    sequence_parallel: bool = False
    bound_s: float | None = None  # the step's compute: no estimate of it can be lower
    program: StepProgram | None = field(default=None, compare=False, repr=False)

    @property
    def fits(self) -> bool:
        return self.refused is None and self.estimate is not None


def shard_of(ctx: Context, cand: Candidate):
    """The generator's shard of the candidate (its refusals as PodsimError)."""
    return transformer_shard(ctx.cfg, cand.plan, cand.options(ctx.base), ctx.generation.vendor)


def program_of(ctx: Context, cand: Candidate) -> tuple[StepProgram, object]:
    sh, m, *_ = shard_of(ctx, cand)
    return step_program(sh, ctx.chip, m), sh


def _sized(ctx: Context, cand: Candidate) -> tuple[Assessed, object, int]:
    """The candidate refused by the generator or with its HBM footprint, and its shard and
    micro-batches (None, 0 when refused): what `assess` and `bounded` both start from."""
    try:
        sh, m, *_ = shard_of(ctx, cand)
    except PodsimError as exc:
        return Assessed(cand, refused=str(exc)), None, 0
    hbm = transformer_footprint(sh, m).total_bytes
    return Assessed(cand, hbm_bytes=hbm, microbatch_sequences=sh.b, collective_matmul=sh.opts.collective_matmul,
                    sequence_parallel=sh.opts.sequence_parallel), sh, m


def _over_hbm(ctx: Context, a: Assessed) -> bool:
    cap = ctx.hbm_capacity_bytes
    return cap is not None and a.hbm_bytes > cap


def assess(ctx: Context, cand: Candidate, *, estimate: bool = True) -> Assessed:
    """Refusal, HBM, then (if it fits and `estimate`) the analytic step of one candidate."""
    a, sh, m = _sized(ctx, cand)
    if sh is None or _over_hbm(ctx, a) or not estimate:
        return a
    program = step_program(sh, ctx.chip, m)
    return estimated(ctx, replace(a, bound_s=program.compute_s, program=program))


def bounded(ctx: Context, cand: Candidate) -> Assessed:
    """`assess` up to the step program and its compute bound, without the estimate."""
    a, sh, m = _sized(ctx, cand)
    if sh is None or _over_hbm(ctx, a):
        return a
    program = step_program(sh, ctx.chip, m)
    try:  # the trace the engine would run must be within the ops budget, as generate_trace checks
        check_budget("ops", program.ops, f"trace of {cand.label()}", "counted from the plan's passes")
    except PodsimError as exc:
        return replace(a, refused=str(exc))
    return replace(a, bound_s=program.compute_s, program=program)


def estimated(ctx: Context, a: Assessed) -> Assessed:
    """A bounded candidate with its analytic estimate (or the mapping's refusal)."""
    cand, program = a.candidate, a.program
    try:
        layout = layout_for(program, cand.plan, cand.shape, pricer(ctx.generation, cand.shape, cand.slices, ctx.dcn),
                            ctx.base.mesh_order, ctx.base.mesh)
        est = evaluate(program, layout)
    except PodsimError as exc:  # a mapping the slice cannot take: the generator refuses it too
        return replace(a, refused=str(exc), program=None)
    if cand.slices > 1:
        wait = straggler_wait_s(cand.slices, est.compute_s)
        est = replace(est, step_s=est.step_s + wait, straggler_s=wait)
    return replace(a, estimate=est, program=None)


def straggler_wait_s(slices: int, compute_s: float) -> float:
    """The study's multislice straggler term on the estimate's compute (podsim.study.multislice:
    the expected slowest of N slices whose steps vary by STRAGGLER_CV), as run_study adds it to
    the engine's step. Its ECMP-collision term needs the engine's flows and is not estimated."""
    return straggler_wait(MultisliceSpec(), slices, compute_s)[0]


def context(model: str, generation: str | Generation, *, options: GenerateOptions | None = None,
            dcn: DcnSpec | None = None, overrides: dict | None = None) -> Context:
    """The search context of a transformer preset on a generation (a one-line error otherwise)."""
    from podsim.trace.plans import model_config

    cfg = model_config(model, overrides)
    if not isinstance(cfg, TransformerConfig):
        raise PodsimError(f"plan search covers transformer models; {cfg.name} is a {cfg.kind}")
    return Context(model, cfg, get_generation(generation), options or GenerateOptions(), dcn or DcnSpec(), dict(overrides or {}))
