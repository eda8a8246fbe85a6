"""What a multislice step loses beyond the DCN time the engine leaves exposed, as separate,
switchable terms, each from a published mechanism and magnitude (issue 32, build 4).

The engine already times the cross-slice gradient reduction as flows under the backward pass
(DESIGN.md "Overlap is in the DAG"): what it adds to the step, the **DCN tail** (`dcn_tail_s`:
the time the cross-slice ops run while nothing else does), is in the step's exposed communication. XLA pipelines these data-parallel all-reduces across the
iterations of the layer loop (`--xla_tpu_enable_data_parallel_all_reduce_opt`, "optimization to
increase overlap opportunities for DCN all-reduces used for data parallel sharding", and
`--xla_tpu_data_parallel_opt_different_sized_ops`, "pipelining of data parallel ops across
multiple iterations": AI-Hypercomputer/maxtext@e591f30 src/maxtext/configs/README.md:84-85 and
benchmarks/xla_flags_library.py:141-147; set since maxtext@0fb125f, 2023-06-21, by every v5e/v5p
multislice recipe, the scripts behind MaxText's v5e and v5p tables included:
podsim.validation.maxtext_rows), which is what the generator's per-layer reductions express. On top of it, `run_study` adds:

- **straggler wait** (`straggler_wait_s`): the slices are not identical machines. A step ends
  when the slowest slice's gradients are in, so with per-slice step times T (1 + cv Z), Z standard
  normal and independent across slices, the expected step is T (1 + cv E[max of N Z]): the
  expected maximum of N normals (order statistics, `expected_max_normal`; 0.56 for 2 slices, 2.07
  for 32). The per-layer pipelining gives each slice a layer of slack, under which per-layer
  jitter averages out within the step (a max-plus recursion with one iteration of slack loses
  what no synchronisation at all loses), so the variation that counts is the step's.
  `STRAGGLER_CV` is measured on a published production trace (STRAGGLER_SOURCE).
- **ECMP collisions** (`ecmp_collision_s`): the engine's default DCN (`dcn.ecmp: split`) puts
  each flow's bytes evenly on the equal-cost uplinks, the expected load; per-flow hashing of a
  few large flows collides (Al-Fares et al., Hedera, NSDI 2010, §2: flows hashed to the same
  uplink share it while others idle), and a collective ends with its slowest flow. With F of the
  job's flows leaving a switch over U uplinks, the busiest uplink carries E[max load] of a
  uniform multinomial (`expected_max_load`, exact) against the F / U the split gives: the DCN's
  busy time stretches by that factor, and what no longer fits under the backward pass is exposed.
  0 when the DCN is an OCS mesh (circuits, no hashing) or already hashed (`dcn.ecmp: hash`, one
  draw simulated by the engine).

No term stands for host-side synchronisation per step: no source gives its magnitude.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cache

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from podsim.engine.results import StepResult
from podsim.units import format_seconds

STRAGGLER_CV = 0.0052
"""Coefficient of variation of one data-parallel replica's step time. Median over the 176
(step, pipeline stage) groups of the sample CV, across its data-parallel ranks, of each rank's
forward plus backward compute per step, in the production job 'AR' (dp 4 x pp 4 x tp 4, 64 GPUs,
44 steps) of the what-if straggler study's published traces, its one injected slow worker
(rank 0) left out: ByteDance-Seed/StragglerAnalysis@8efcd7f data/trace-AR.parquet (Lin et al.,
'Understanding Stragglers in Large Model Training Using What-if Analysis', OSDI 2025). The
same measure on the study's other clean trace ('ST', dp 2) is 0.0045. In DuckDB:
`with per as (select step, stage, dp_rank, sum(duration) c from 'trace-AR.parquet' where optype in
('forward-compute','backward-compute') and rank <> 0 group by all) select median(cv) from
(select stddev_samp(c)/avg(c) cv from per group by step, stage)`."""
STRAGGLER_SOURCE = ("Lin et al., OSDI 2025 (what-if straggler analysis), published trace AR: per-replica step-time CV "
                    "0.52% (ByteDance-Seed/StragglerAnalysis@8efcd7f data/trace-AR.parquet)")
ECMP_SOURCE = "per-flow ECMP hashing (Hedera, NSDI 2010 §2): expected busiest uplink of F flows hashed over U uplinks"
TAIL_SOURCE = ("engine: the cross-slice ops' time in flight while nothing else runs: with overlap_dcn (the default), the "
               "reductions pipelined under the backward pass as XLA's data-parallel all-reduce optimisation runs them "
               "(--xla_tpu_enable_data_parallel_all_reduce_opt, set by MaxText's v5e/v5p scripts since maxtext@0fb125f; "
               "described at maxtext@e591f30 src/maxtext/configs/README.md:84-85), what is left after the last layer; "
               "without it, all of them, after the backward pass")


class MultisliceSpec(BaseModel):
    """Which multislice terms a study adds to the engine's step (each on by default), and the
    straggler term's per-slice step-time variation (None: STRAGGLER_CV, from its source)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    straggler: bool = Field(True, description="add the expected wait for the slowest of N slices each step")
    straggler_cv: float | None = Field(None, gt=0, lt=1, description="per-slice step-time coefficient of variation "
                                       f"(default {STRAGGLER_CV}: the what-if straggler study's published trace)")
    ecmp_collisions: bool = Field(True, description="add the expected cost of per-flow ECMP hash collisions on the DCN uplinks "
                                  "(with dcn.ecmp split; hash simulates one draw instead)")


@dataclass(frozen=True)
class MultisliceTerms:
    """The terms of one multislice step (seconds per step), and what each was computed from."""

    slices: int
    straggler_wait_s: float = 0.0
    straggler_cv: float = 0.0
    expected_max_z: float = 0.0
    dcn_tail_s: float = 0.0
    ecmp_collision_s: float = 0.0
    ecmp: dict[str, dict[str, float]] = field(default_factory=dict)  # tier -> flows, uplinks, factor, extra_s
    notes: dict[str, str] = field(default_factory=dict)  # term (dcn_tail, straggler, ecmp_collision) -> source, or why it is off; metric <term>_source

    @property
    def added_s(self) -> float:
        """What the terms add to the engine's step (the DCN tail is already in it)."""
        return self.straggler_wait_s + self.ecmp_collision_s

    def as_dict(self) -> dict:
        return {"slices": self.slices, "straggler_wait_s": self.straggler_wait_s, "straggler_cv": self.straggler_cv,
                "expected_max_z": self.expected_max_z, "dcn_tail_s": self.dcn_tail_s,
                "ecmp_collision_s": self.ecmp_collision_s, "added_s": self.added_s, "ecmp": self.ecmp, "notes": self.notes}


@cache
def expected_max_normal(n: int) -> float:
    """E[max of n independent standard normals] (0 for n = 1), by integrating x n phi(x) Phi(x)^(n-1)."""
    if n < 1:
        raise ValueError(f"expected maximum of {n} normals")
    if n == 1:
        return 0.0
    x = np.linspace(-12.0, 12.0, 24001)
    cdf = 0.5 * (1.0 + np.frompyfunc(math.erf, 1, 1)(x / math.sqrt(2.0)).astype(float))
    pdf = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    return float(np.trapezoid(x * n * pdf * cdf ** (n - 1), x))


def _power(q: np.ndarray, times: int, size: int) -> np.ndarray:
    """q convolved with itself `times` times, cut to `size` terms (binary powers)."""
    out, base = np.array([1.0]), q
    while times:
        if times & 1:
            out = np.convolve(out, base)[:size]
        times >>= 1
        if times:
            base = np.convolve(base, base)[:size]
    return out


@cache
def expected_max_load(flows: int, bins: int) -> float:
    """E[the most flows any one of `bins` uplinks gets] when `flows` flows each pick one uniformly
    at random (ECMP's hash): sum over k of P(max > k), with P(max <= k) exact by Poissonisation
    (the bins independent Poisson(flows / bins), conditioned on their sum being `flows`)."""
    if flows <= 0 or bins <= 0:
        return 0.0
    if bins == 1:
        return float(flows)
    lam = flows / bins
    pmf = np.exp([j * math.log(lam) - lam - math.lgamma(j + 1) for j in range(flows + 1)])
    log_total = flows * math.log(flows) - flows - math.lgamma(flows + 1)  # P(the Poisson sum = flows)
    k = math.ceil(lam)  # no bin holds fewer than the mean at its fullest: P(max > k') = 1 below it
    out = float(k)
    while k < flows:
        q = pmf.copy()
        q[k + 1:] = 0.0
        conv = _power(q, bins, flows + 1)
        p_le = math.exp(math.log(conv[flows]) - log_total) if len(conv) > flows and conv[flows] > 0 else 0.0
        out += 1.0 - min(p_le, 1.0)
        if p_le > 1.0 - 1e-12:
            break
        k += 1
    return out


def _switch_loads(result: StepResult) -> list[tuple[str, int, int]]:
    """(tier, flows out of the job's busiest switch below it, its equal-cost uplinks) for each
    hashed tier the job's DCN traffic climbs through: one flow per NIC per collective phase."""
    fab = result.fabric
    dcn = fab.dcn
    if dcn.kind != "eps" or dcn.ecmp != "split" or not result.views:
        return []
    chips = np.concatenate([v.chips for v in result.views])
    nics = np.unique(fab.nic_of_chip[chips] - fab.first_nic)
    out = []
    if fab.tiered:
        tors = fab.tor_of_nic[nics]
        if len(np.unique(tors)) > 1:
            out.append(("aggregation", int(np.bincount(tors).max()), dcn.tiers.tor.ports("tor")[1]))
    leaves = fab.leaf_of_nic[nics]
    spines = int(fab.meta.get("n_spines", 0))
    if spines and len(np.unique(leaves)) > 1:
        out.append(("spine", int(np.bincount(leaves).max()), spines))
    return out


def _dcn_window_s(result: StepResult) -> float:
    """The compute time the DCN reductions ran under: from the first DCN op's start to the end of
    the last compute op that ends before the last DCN op does (the optimizer waits for them)."""
    dcn = [t for t in result.timeline if t.step == 0 and t.level in ("dcn", "wan")]
    if not dcn:
        return 0.0
    start, last = min(t.start_s for t in dcn), max(t.end_s for t in dcn)
    ends = [t.end_s for t in result.timeline if t.step == 0 and t.kind == "compute" and start < t.end_s <= last]
    return max(ends, default=start) - start


def dcn_tail_s(result: StepResult) -> float:
    """What the cross-slice (DCN and WAN) ops add to the step beyond everything else in it: the
    time they are in flight while no compute and no ICI communication is (the engine's exposed
    communication is the union of the two, so this part adds up with the rest)."""
    # the engine's own union of intervals (engine.core loads SimPy: imported on use)
    from podsim.engine.core import busy_time_s

    ops = [t for t in result.timeline if t.step == 0]
    rest = [(t.start_s, t.end_s) for t in ops if t.level not in ("dcn", "wan")]
    cross = [(t.start_s, t.end_s) for t in ops if t.level in ("dcn", "wan")]
    return busy_time_s(rest + cross) - busy_time_s(rest) if cross else 0.0


def straggler_wait(spec: MultisliceSpec, slices: int, compute_s: float) -> tuple[float, float, float]:
    """(wait_s, cv, z): the expected wait for the slowest of `slices` slices whose compute of
    `compute_s` varies by the spec's CV (STRAGGLER_CV unless given), z its expected max normal; 0s off."""
    if not spec.straggler:
        return 0.0, 0.0, 0.0
    cv = spec.straggler_cv if spec.straggler_cv is not None else STRAGGLER_CV
    z = expected_max_normal(slices)
    return z * cv * compute_s, cv, z


def multislice_terms(result: StepResult, spec: MultisliceSpec) -> MultisliceTerms:
    """The multislice terms of an engine step on `result.slices` slices (all zero for one)."""
    n = result.slices
    if n <= 1:
        return MultisliceTerms(1)
    dcn = result.levels.get("dcn", {})
    notes = {"dcn_tail": TAIL_SOURCE}
    wait, cv, z = straggler_wait(spec, n, result.compute_s)  # zeros when off
    notes["straggler"] = ("off (multislice straggler=false)" if not spec.straggler
                          else STRAGGLER_SOURCE if spec.straggler_cv is None else f"straggler_cv {cv:g} as given")
    ecmp: dict[str, dict[str, float]] = {}
    extra, tail = 0.0, dcn_tail_s(result)
    if spec.ecmp_collisions:
        loads = _switch_loads(result)
        busy, exposed = dcn.get("busy_s", 0.0), dcn.get("exposed_s", 0.0)
        window = _dcn_window_s(result)
        for tier, flows, uplinks in loads:
            factor = expected_max_load(flows, uplinks) / (flows / uplinks) if flows else 1.0
            factor = max(factor, 1.0)
            ecmp[tier] = {"flows": float(flows), "uplinks": float(uplinks), "factor": factor, "extra_s": 0.0}
        if ecmp:
            worst = max(ecmp, key=lambda t: ecmp[t]["factor"])
            c = ecmp[worst]["factor"]
            # the tail stretches by c; the hidden part is exposed where, stretched, it outgrows its window
            extra = tail * (c - 1.0) + max(0.0, (busy - exposed) * c - max(window, busy - exposed))
            ecmp[worst]["extra_s"] = extra
        why = {"eps": "", "ocs": "off: an OCS DCN joins blocks by circuits (no hashing)"}.get(result.fabric.dcn.kind, "")
        if result.fabric.dcn.ecmp == "hash" and result.fabric.dcn.kind == "eps":
            why = "in the engine: dcn.ecmp hash simulates one draw of the hash"
        notes["ecmp_collision"] = why or (ECMP_SOURCE if ecmp else "none: the job's DCN traffic climbs no hashed tier")
    else:
        notes["ecmp_collision"] = "off (multislice ecmp_collisions=false)"
    return MultisliceTerms(n, wait, cv, z, tail, extra, ecmp, notes)


def with_terms(result: StepResult, spec: MultisliceSpec) -> StepResult:
    """The engine's step with the multislice terms added to its step time (the breakdown in
    `multislice`, each hashed tier's share in `tiers[tier]['ecmp_collision_s']`)."""
    terms = multislice_terms(result, spec)
    if result.slices <= 1:
        return result
    tiers = {t: dict(d) for t, d in result.tiers.items()}
    for tier, e in terms.ecmp.items():
        tiers.setdefault(tier, {})["ecmp_collision_s"] = e["extra_s"]
    added = terms.added_s
    return replace(result, step_time_s=result.step_time_s + added,
                   step_times_s=tuple(t + added for t in result.step_times_s), multislice=terms.as_dict(), tiers=tiers)


def terms_text(straggler_wait_s: float, dcn_tail_s: float, ecmp_collision_s: float, notes: Mapping[str, str]) -> str:
    """What the slices add beyond one slice's step, term by term with its source (`notes`: term ->
    source, MultisliceTerms.notes; 'off' where a term has none), for the CLI and the dashboard:
    'straggler wait 0.12 s (source); DCN tail 0.013 s (in the exposed communication); ECMP collisions 0 s (source)'."""
    return "; ".join([f"straggler wait {format_seconds(straggler_wait_s)} ({notes.get('straggler', 'off')})",
                      f"DCN tail {format_seconds(dcn_tail_s)} (in the exposed communication)",
                      f"ECMP collisions {format_seconds(ecmp_collision_s)} ({notes.get('ecmp_collision', 'off')})"])
