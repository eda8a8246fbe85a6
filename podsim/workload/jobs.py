"""A job as the cluster simulation sees it: when it arrives, which slice it asks for, how long."""

from __future__ import annotations

import math
from dataclasses import dataclass

from podsim.topology.shapes import slice_name


@dataclass(frozen=True)
class Job:
    """One training job.

    Its length is `duration_s` of run time on the slice it asked for, or `steps` of the
    model `model` whose step time the engine estimates on the slice actually given. A step
    is one step of the model preset's `global_batch` for the whole job: N slices split it,
    data parallel across the DCN (as a step study with `slices: N`).
    """

    id: str
    submit_s: float
    shape: tuple[int, ...]
    twisted: bool = False
    priority: int = 0
    duration_s: float | None = None
    steps: int | None = None
    model: str | None = None
    accelerators: int | None = None  # as requested in a replayed trace, before rounding to a shape
    allow_degraded: bool = False  # may run on a cube-level torus missing a down OCS unit's circuits
    slices: int = 1  # a multislice job: this many slices of `shape`, all or none, joined over the DCN
    span_sites: bool = False  # its slices may be split over data centres

    def __post_init__(self):
        if (self.duration_s is None) == (self.steps is None):
            raise ValueError(f"job {self.id}: give exactly one of duration_s or steps")
        if not isinstance(self.slices, int) or isinstance(self.slices, bool) or self.slices < 1:
            raise ValueError(f"job {self.id}: slices {self.slices!r} must be an integer >= 1")

    @property
    def chips(self) -> int:
        """Chips of all its slices."""
        return math.prod(self.shape) * self.slices

    @property
    def shape_name(self) -> str:
        return slice_name(self.shape, self.twisted)
