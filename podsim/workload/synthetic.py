"""Synthetic job streams: arrivals, slice-size mix, durations and priorities, all seeded."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Literal

import numpy as np
from pydantic import AfterValidator, AliasChoices, ConfigDict, Field, model_validator

from podsim import quantities as q
from podsim.errors import PodsimError
from podsim.quantities import JobCount, Priority, Rate, Weight
from podsim.topology.generations import get_generation
from podsim.trace.configs import get_model
from podsim.workload.jobs import Job
from podsim.workload.popularity import V4_SLICE_POPULARITY, SliceMix


class _Spec(q.NoBoolNumbers):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


def _draw(rng: np.random.Generator, n: int, kind: str, median: float, sigma: float, low: float, high: float,
          what: str, unit: str) -> np.ndarray:
    """n draws: lognormal (median, sigma of the underlying normal), fixed (median), uniform [low, high]."""
    if kind == "lognormal":
        return rng.lognormal(np.log(median), sigma, size=n)
    if kind == "fixed":
        return np.full(n, float(median))
    if high < low:
        raise PodsimError(f"uniform {what}: high{unit} {high} < low{unit} {low}")
    return rng.uniform(low, high, size=n)


def _short(name: str) -> AliasChoices:
    """`median_s` may be written `median` (the scenario file's form, whose values carry units)."""
    return AliasChoices(name, name.removesuffix("_s"))


class ArrivalSpec(_Spec):
    """Poisson arrivals at `rate_per_h`, or a fixed list of inter-arrival gaps repeated."""

    kind: Literal["poisson", "given"] = "poisson"
    rate_per_h: Annotated[Rate, AfterValidator(q.ARRIVAL_RATE.check)] | None = Field(None, description="mean arrivals per hour (poisson), e.g. 4, '2/h', '48/d'")
    gaps_s: tuple[q.JOB_GAP.duration, ...] = Field((), description="inter-arrival gaps, cycled (given), e.g. ['10min', '1h'] or seconds")

    @model_validator(mode="after")
    def _check(self):
        if self.kind == "poisson" and self.rate_per_h is None:
            raise ValueError("poisson arrivals need rate_per_h")
        if self.kind == "given" and (not self.gaps_s or min(self.gaps_s) < 0):
            raise ValueError("given arrivals need a non-empty list of non-negative gaps_s")
        return self

    def times(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "poisson":
            gaps = rng.exponential(3600.0 / self.rate_per_h, size=n)
        else:
            gaps = np.resize(np.array(self.gaps_s, float), n)
        return np.cumsum(gaps)


class DurationSpec(_Spec):
    """Run time of a job on the slice it asked for.

    lognormal: median_s and sigma (of the underlying normal) — job lengths in production
    clusters are heavy-tailed; exponential: mean_s; fixed: median_s; uniform: [low_s, high_s].
    Durations take units ('3h'); a scenario file writes them without the suffix (`median: 3h`).
    """

    kind: Literal["lognormal", "exponential", "fixed", "uniform"] = "lognormal"
    median_s: q.JOB_DURATION.duration = Field(3 * 3600.0, validation_alias=_short("median_s"))
    sigma: q.DURATION_SIGMA.type = 1.0
    mean_s: q.JOB_DURATION.duration = Field(3 * 3600.0, validation_alias=_short("mean_s"))
    low_s: q.JOB_DURATION.duration = Field(600.0, validation_alias=_short("low_s"))
    high_s: q.JOB_DURATION.duration = Field(86400.0, validation_alias=_short("high_s"))
    max_s: q.JOB_DURATION.duration | None = Field(None, validation_alias=_short("max_s"), description="cap on any single duration")

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "exponential":
            d = rng.exponential(self.mean_s, size=n)
        else:
            d = _draw(rng, n, self.kind, self.median_s, self.sigma, self.low_s, self.high_s, "durations", "_s")
        # a lognormal tail is unbounded: no draw past the longest job podsim takes (a century)
        return np.minimum(d, self.max_s or q.JOB_DURATION.high)


class StepsSpec(_Spec):
    """Length of a job in training steps: lognormal (median, sigma), fixed (median) or uniform."""

    kind: Literal["lognormal", "fixed", "uniform"] = "lognormal"
    median: q.TRAINING_STEPS.type = Field(10000, description="median number of steps")
    sigma: q.STEPS_SIGMA.type = 0.5
    low: q.TRAINING_STEPS.type = 1000
    high: q.TRAINING_STEPS.type = 100000

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        s = _draw(rng, n, self.kind, self.median, self.sigma, self.low, self.high, "steps", "")
        # a lognormal tail is unbounded: clip to the range (an int64 past 2^63 would wrap negative)
        return np.clip(np.rint(s), 1, q.TRAINING_STEPS.high).astype(np.int64)


class SyntheticSpec(_Spec):
    """A synthetic job stream for one generation.

    Jobs last `duration` of run time, or, when `models` is given, a number of `steps` of a
    model drawn from `models` (the cluster simulation turns steps into time with a step-time
    model for the slice each job is actually given).
    """

    generation: str = "tpu-v4"
    jobs: JobCount = Field(200, description="number of jobs to draw")
    arrival: ArrivalSpec = ArrivalSpec(rate_per_h=4.0)
    slice_mix: dict[str, Weight] = Field(default_factory=lambda: dict(V4_SLICE_POPULARITY),
                                        description="shape[_T|_NT] -> weight; default: the TPU v4 paper's popularity table")
    duration: DurationSpec = DurationSpec()
    priorities: dict[Priority, Weight] = Field(default_factory=lambda: {0: 1.0}, description="priority -> weight")
    models: dict[str, Weight] = Field(default_factory=dict, description="model preset -> weight; empty: durations in time")
    steps: StepsSpec = StepsSpec()
    slices: dict[q.JOB_SLICES.type, Weight] = Field(default_factory=lambda: {1: 1.0},
                                     description="slices per job -> weight (multislice jobs; default: all single-slice)")
    span_sites: bool = Field(False, description="multislice jobs may be split over data centres")


def generate_jobs(spec: SyntheticSpec, seed: int) -> list[Job]:
    """Draw `spec.jobs` jobs; the same spec and seed give the same jobs."""
    gen = get_generation(spec.generation)
    try:
        mix = SliceMix.from_table(gen, spec.slice_mix)
    except PodsimError as exc:
        if spec.slice_mix == V4_SLICE_POPULARITY:
            raise PodsimError(f"the default slice mix is the TPU v4 paper's popularity table, which has no {gen.id} shapes; "
                              f"give one (e.g. mix=2x2:1;4x8:1 in --synthetic, slice_mix in YAML)") from exc
        raise
    rng = np.random.default_rng(seed)
    n = spec.jobs
    times = spec.arrival.times(rng, n)
    shapes = mix.sample(rng, n)
    durations = spec.duration.sample(rng, n)
    prios = np.array(list(spec.priorities), int)
    weights = np.array(list(spec.priorities.values()), float)
    if (weights < 0).any() or weights.sum() <= 0:
        raise PodsimError("priorities: weights must be >= 0 and not all zero")
    prio = rng.choice(prios, size=n, p=weights / weights.sum())
    if not spec.models:
        return _multislice(spec, rng, [
            Job(id=f"job{i:05d}", submit_s=float(times[i]), shape=shape, twisted=tw, priority=int(prio[i]),
                duration_s=float(durations[i]))
            for i, (shape, tw) in enumerate(shapes)
        ])
    names = list(spec.models)
    mw = np.array([spec.models[m] for m in names], float)
    if (mw < 0).any() or mw.sum() <= 0:
        raise PodsimError("models: weights must be >= 0 and not all zero")
    for name in names:
        get_model(name)  # an unknown preset is an error now, not in the middle of a simulation
    model = rng.choice(len(names), size=n, p=mw / mw.sum())
    steps = spec.steps.sample(rng, n)
    return _multislice(spec, rng, [
        Job(id=f"job{i:05d}", submit_s=float(times[i]), shape=shape, twisted=tw, priority=int(prio[i]),
            steps=int(steps[i]), model=names[model[i]])
        for i, (shape, tw) in enumerate(shapes)
    ])


def _multislice(spec: SyntheticSpec, rng: np.random.Generator, jobs: list[Job]) -> list[Job]:
    """Draw each job's slice count from `spec.slices` (after every other draw, so a spec without
    multislice jobs gives the same stream as before)."""
    if spec.slices == {1: 1.0} and not spec.span_sites:
        return jobs
    counts = np.array(list(spec.slices), int)
    w = np.array(list(spec.slices.values()), float)
    if (counts < 1).any() or (w < 0).any() or w.sum() <= 0:
        raise PodsimError(f"slices {spec.slices}: slice counts must be >= 1 and weights >= 0, not all zero")
    n = rng.choice(counts, size=len(jobs), p=w / w.sum())
    return [dataclasses.replace(j, slices=int(k), span_sites=spec.span_sites and k > 1) for j, k in zip(jobs, n, strict=True)]
