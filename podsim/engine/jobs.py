"""A job for the engine: a step trace run SPMD on one or more placed slices of one fabric."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from podsim.errors import PodsimError
from podsim.topology import (
    Built,
    DcnSpec,
    Fabric,
    PodLayout,
    Slice,
    SliceView,
    build_fabric,
    check_slice_topology,
    get_generation,
    plan_slice,
    slice_view,
    validate_shape,
)
from podsim.trace.model import StepTrace


@dataclass(frozen=True, eq=False)
class Job:
    """A training job: `trace` on `slices` of `fabric`, repeated for `steps` steps.

    Several slices make a multislice job: collective groups that name `dcn` span them (ICI
    inside each slice, DCN between). Several jobs passed to `simulate_jobs` must share one
    fabric (build it with `build_fabric(layout, circuits=a.circuits + b.circuits, ...)`).
    `compute_efficiency` (fraction of peak FLOP/s reached by compute ops that do not set
    their own) falls back to the simulate call's default when None.
    """

    trace: StepTrace
    fabric: Fabric
    slices: tuple[Slice, ...]
    name: str = "job"
    steps: int = 1
    compute_efficiency: float | None = None
    views: tuple[SliceView, ...] = field(init=False, repr=False)

    def __post_init__(self):
        slices = tuple(self.slices) if not isinstance(self.slices, Slice) else (self.slices,)
        object.__setattr__(self, "slices", slices)
        if not slices:
            raise PodsimError(f"job {self.name!r} has no slice")
        if self.steps < 1:
            raise PodsimError(f"job {self.name!r}: steps must be >= 1, got {self.steps}")
        if self.compute_efficiency is not None and not 0 < self.compute_efficiency <= 1:
            raise PodsimError(f"job {self.name!r}: compute_efficiency {self.compute_efficiency} must be in (0, 1]")
        shapes = {s.shape for s in slices}
        if len(shapes) > 1:
            raise PodsimError(f"job {self.name!r}: the slices of one job must have one shape; got {sorted(shapes)}")
        chips = np.concatenate([s.chips for s in slices])
        if (chips < 0).any() or (chips >= self.fabric.n_chips).any():
            raise PodsimError(f"job {self.name!r}: a slice uses chips outside the fabric (0..{self.fabric.n_chips - 1})")
        if len(np.unique(chips)) != len(chips):
            raise PodsimError(f"job {self.name!r}: two of its slices share chips")
        views = tuple(slice_view(self.fabric, s) for s in slices)
        for v in views:
            check_slice_topology(v)
        object.__setattr__(self, "views", views)

    @classmethod
    def on(cls, built: Built, trace: StepTrace, **kw) -> Job:
        """The job that runs `trace` on the one slice of `build_slice(...)`."""
        return cls(trace, built.fabric, (built.slice,), **kw)


def place_slices(gen_id: str, shape: str, count: int, dcn: DcnSpec | None = None) -> tuple[Fabric, tuple[Slice, ...]]:
    """`count` slices of `shape` on consecutive cubes of one OCS pod, wired into one fabric
    with `dcn`: the shared fabric for several jobs or a multislice job (slice i takes cubes
    i*k .. i*k+k-1 for a k-cube shape)."""
    gen = get_generation(gen_id)
    layout = PodLayout(gen)
    spec = validate_shape(gen, shape)
    if spec.kind != "cubes" or not layout.ocs:
        raise PodsimError(f"place_slices places whole-cube slices on an OCS pod; {gen_id} {shape} is not one")
    per = spec.chips // gen.chips_per_cube
    if count < 1 or count * per > layout.cubes_per_pod:
        raise PodsimError(f"{count} slices of {shape} need {count * per} cubes; a {gen_id} pod has {layout.cubes_per_pod}")
    slices = tuple(plan_slice(layout, spec, cubes=range(i * per, (i + 1) * per)) for i in range(count))
    fabric = build_fabric(layout, circuits=tuple(c for s in slices for c in s.circuits), dcn=dcn)
    return fabric, slices
