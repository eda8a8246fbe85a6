"""Odd-shape job streams, like the research workloads of reshaping schedulers: job sizes drawn
from a truncated exponential over the sizes that have shapes, each job's shape a random
factorisation of its size into three sides (RFold's generator, arXiv 2510.03891: sizes from
`truncexpon(b=4, scale=len/4)` over the sorted sizes, sides multiples of 2). Seeded; every
draw from `numpy.random.default_rng(seed)`.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from podsim.errors import PodsimError
from podsim.quantities import MAX_FLEET_CHIPS, Duration, JobCount, Rate
from podsim.workload.jobs import Job

MAX_SIDE = 128  # a slice side: the longest pod side podsim knows (tpu-v3-multipod 32x128)


class OddShapeSpec(BaseModel):
    """Sizes from a truncated exponential (`skew`: RFold's b = 4), shapes their factorisations
    into three sides each a multiple of `multiple` (or 1), at most `max_side`; Poisson arrivals
    at `rate_per_h`; lognormal durations (median, sigma)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    jobs: JobCount = 200
    min_chips: int = Field(2, ge=1, le=MAX_FLEET_CHIPS)
    max_chips: int = Field(1024, ge=1, le=MAX_FLEET_CHIPS)
    multiple: int = Field(2, ge=1, le=MAX_SIDE, description="every side > 1 is a multiple of this")
    max_side: int = Field(16, ge=1, le=MAX_SIDE, description="longest side (the pod's)")
    skew: float = Field(4.0, gt=0, description="b of the truncated exponential over the sorted sizes")
    rate_per_h: Rate = Field(4.0, gt=0)
    median_s: Duration = Field(3 * 3600.0, gt=0)
    sigma: float = Field(1.0, ge=0)


def factorisations(n: int, multiple: int, max_side: int) -> list[tuple[int, int, int]]:
    """Ordered (a, b, c) with a*b*c = n, each side 1 or a multiple of `multiple`, <= max_side."""
    ok = [s for s in range(1, max_side + 1) if n % s == 0 and (s == 1 or s % multiple == 0)]
    return [(a, b, n // (a * b)) for a in ok for b in ok
            if n % (a * b) == 0 and (n // (a * b)) in ok]


def odd_sizes(spec: OddShapeSpec) -> list[int]:
    """The sizes in [min_chips, max_chips] that have a shape: none is above max_side^3, so
    max_chips: 1e9 costs what max_side^3 does; none at all is one line."""
    top = min(spec.max_chips, spec.max_side**3)
    sizes = [n for n in range(spec.min_chips, top + 1) if factorisations(n, spec.multiple, spec.max_side)]
    if not sizes:
        raise PodsimError(f"no size in {spec.min_chips}..{spec.max_chips} has a shape with sides multiples of {spec.multiple} "
                          f"and at most {spec.max_side} long")
    return sizes


def odd_shape_jobs(spec: OddShapeSpec, seed: int) -> list[Job]:
    """`spec.jobs` jobs given in time; the same spec and seed give the same jobs."""
    sizes = odd_sizes(spec)
    rng = np.random.default_rng(seed)
    n = spec.jobs
    scale = len(sizes) / spec.skew
    u = rng.random(n)
    x = -scale * np.log1p(-u * (1.0 - math.exp(-spec.skew)))  # truncated exponential on [0, b * scale)
    idx = np.clip(x.astype(int), 0, len(sizes) - 1)
    gaps = rng.exponential(3600.0 / spec.rate_per_h, size=n)
    durations = rng.lognormal(math.log(spec.median_s), spec.sigma, size=n)
    out = []
    t = 0.0
    for k in range(n):
        shapes = factorisations(sizes[idx[k]], spec.multiple, spec.max_side)
        shape = shapes[int(rng.integers(len(shapes)))]
        t += float(gaps[k])
        out.append(Job(id=f"odd{k:05d}", submit_s=t, shape=shape, duration_s=float(durations[k])))
    return out
