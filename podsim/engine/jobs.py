"""A job for the engine: a step trace run SPMD on one or more placed slices of one fabric.

`build_job` is the one way a trace becomes a job on N slices (the CLI, the dashboard and
scenario step studies all use it): one slice via `build_slice`, several via `place_slices`,
packed pod by pod behind one data-centre network.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from podsim._arrays import has_duplicates, unique
from podsim.errors import PodsimError
from podsim.topology import DcnSpec, Generation, PodLayout, build_slice, get_generation
from podsim.topology.fabric import Fabric, build_fabric
from podsim.topology.shapes import validate_shape
from podsim.topology.slices import Slice, SliceView, check_slice_topology, plan_slice, slice_view
from podsim.topology.summary import Built
from podsim.trace.mesh import parse_parallelism
from podsim.trace.model import DCN_AXIS, SLICE_AXES, Collective, SendRecv, StepTrace


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
        if has_duplicates(chips):
            raise PodsimError(f"job {self.name!r}: two of its slices share chips")
        views = tuple(slice_view(self.fabric, s) for s in slices)
        for v in views:
            check_slice_topology(v)
        object.__setattr__(self, "views", views)
        check_groups_exist(self.trace, len(slices), len(views[0].shape), self.name)

    @classmethod
    def on(cls, built: Built, trace: StepTrace, **kw) -> Job:
        """The job that runs `trace` on the one slice of `build_slice(...)`."""
        return cls(trace, built.fabric, (built.slice,), **kw)




def declared_slices(trace: StepTrace) -> int | None:
    """The slice count a trace was made for: `meta.slices`, else the `dcn` size of the
    generator's `meta.parallelism`; None when the trace does not say."""
    meta = trace.meta or {}
    if "slices" in meta:
        n = meta["slices"]
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise PodsimError(f"trace meta.slices {n!r} is not a whole number >= 1")
        return n
    if meta.get("parallelism"):
        return parse_parallelism(str(meta["parallelism"])).dcn
    return None


def _op_axes(op) -> tuple[str, ...]:
    if isinstance(op, Collective | SendRecv):
        return tuple(g.axis for g in op.group)
    return ()


def check_groups_exist(trace: StepTrace, n_slices: int, dims: int, job: str = "job") -> None:
    """Every collective group exists on the job's fabric, so none silently costs nothing: its
    slice axes are axes of the slice, and `dcn` spans as many slices as the trace was made for
    (a trace that names `dcn` without saying how many slices must not run on one)."""
    axes = SLICE_AXES[:max(dims, 1)]
    declared = declared_slices(trace)
    if declared is not None and declared != n_slices:
        raise PodsimError(f"job {job!r}: trace {trace.name or '(unnamed)'!r} is for {declared} slice(s) (dcn={declared}) "
                          f"but the job runs on {n_slices}; run it on {declared} slices (--slices {declared})")
    for op in trace.ops:
        names = _op_axes(op)
        bad = [a for a in names if a != DCN_AXIS and a not in axes]
        if bad:
            raise PodsimError(f"op {op.id!r}: group axis {bad[0]!r} does not exist on a {dims}-D slice (axes: {', '.join(axes)}, dcn)")
        if DCN_AXIS in names and n_slices == 1 and declared is None:
            raise PodsimError(f"op {op.id!r}: group dcn spans the slices of a multislice job, but the trace does not say how many "
                              f"and the job has one slice; give the slice count (--slices N, or meta.slices in the trace)")


def slices_per_pod(gen: Generation, shape: tuple[int, ...], kind: str, ocs: bool, twisted: bool = False) -> int:
    """How many slices of `shape` `place_slices` packs into one pod: whole cubes on an OCS pod,
    else tiles of the pod (one when the shape does not tile it, or for a twisted slice on a
    static pod)."""
    if kind == "cubes" and ocs and gen.has_ocs:
        return (gen.pod_chips // gen.chips_per_cube) // (math.prod(shape) // gen.chips_per_cube)
    if (twisted and not (gen.has_ocs and ocs)) or any(p % s for p, s in zip(gen.pod_shape, shape, strict=True)):
        return 1
    return math.prod(p // s for p, s in zip(gen.pod_shape, shape, strict=True))


def place_slices(gen_id: str | Generation, shape: str | tuple[int, ...], count: int, dcn: DcnSpec | None = None, *,
                 twisted: bool = False, ocs: bool = True) -> tuple[Fabric, tuple[Slice, ...]]:
    """`count` slices of `shape` packed pod by pod into as many pods as they need, all behind
    one DCN (`dcn`); the shared fabric of a multislice job or of several jobs. With
    `dcn.sites` > 1 the slices split evenly over the sites (the first ceil(count / sites) in
    site 0, ...), each site with the same number of pods. On an OCS pod
    the j-th slice of a pod takes its cubes j*k .. j*k+k-1 (a k-cube shape); on a static pod
    slices tile the pod from the origin (one per pod when the shape does not tile it)."""
    gen = get_generation(gen_id)
    spec = validate_shape(gen, shape, twisted, ocs)
    if count < 1:
        raise PodsimError(f"a job needs at least one slice, got {count}")
    if spec.kind not in ("cubes", "rectangle"):
        hint = ""
        if spec.kind == "gpu":
            n, pod = count * spec.chips, gen.pod_chips
            hint = (f": a GPU pod's nodes share one switched fabric, so give the {n} GPUs as one slice (--slice {n})" if n <= pod else
                    f"; {n} GPUs are more than the {pod} of one {gen.id} pod, the most podsim models as one job")
        raise PodsimError(f"a multislice job takes whole-cube or rectangular slices; {gen.id} {spec} is a {spec.kind} slice{hint}")
    per_pod = slices_per_pod(gen, spec.shape, spec.kind, ocs, twisted)
    sites = dcn.sites if dcn is not None else 1
    if count < sites:
        raise PodsimError(f"{count} slice(s) cannot span {sites} sites; give at least one slice per site")
    per_site = math.ceil(count / sites)
    pods_per_site = math.ceil(per_site / per_pod)
    layout = PodLayout(gen, pods=pods_per_site * sites, ocs=ocs)

    def where(i: int) -> tuple[int, int]:
        site, j = divmod(i, per_site)
        pod, slot = divmod(j, per_pod)
        return site * pods_per_site + pod, slot

    slices = []
    if spec.kind == "cubes" and layout.ocs:
        k = spec.chips // gen.chips_per_cube
        for i in range(count):
            pod, j = where(i)
            base = pod * layout.cubes_per_pod + j * k
            slices.append(plan_slice(layout, spec, cubes=range(base, base + k), pod=pod))
    else:
        tiles = [range(0, p, s) if per_pod > 1 else range(0, 1) for p, s in zip(gen.pod_shape, spec.shape, strict=True)]
        origins = list(itertools.product(*tiles))
        for i in range(count):
            pod, j = where(i)
            slices.append(plan_slice(layout, spec, origin=origins[j], pod=pod))
    circuits = tuple(c for s in slices for c in s.circuits) if layout.ocs else None
    fabric = build_fabric(layout, circuits=circuits, dcn=dcn)
    return fabric, tuple(slices)


def job_leaves(fabric: Fabric, slices: tuple[Slice, ...]) -> tuple[int, ...]:
    """The DCN leaves (aggregation blocks) a job's slices sit under."""
    chips = np.concatenate([s.chips for s in slices])
    nics = fabric.nic_of_chip[chips] - fabric.first_nic
    return tuple(int(x) for x in unique(fabric.leaf_of_nic[nics]))


def build_job(trace: StepTrace, gen: str | Generation, shape: str | tuple[int, ...] | None = None, slices: int = 1, *,
              twisted: bool = False, ocs: bool = True, dcn: DcnSpec | None = None, engineer_dcn: bool = False,
              name: str = "job", steps: int = 1) -> Job:
    """`trace` on `slices` slices of `shape` (None: a whole pod) of `gen`. One slice: the
    slice of `build_slice`. Several: `place_slices` on one DCN; with `engineer_dcn` (an OCS
    DCN) the job's aggregation blocks spend their uplinks on circuits among themselves
    (Jupiter's topology engineering, [JUPITER22] jup.7)."""
    g = get_generation(gen)
    if dcn is not None and slices < dcn.sites:
        raise PodsimError(f"{slices} slice(s) cannot span {dcn.sites} sites; give at least one slice per site")
    if slices == 1:
        built = build_slice(g, shape, twisted=twisted, ocs=ocs, dcn=dcn)
        return Job.on(built, trace, name=name, steps=steps)
    shape = g.pod_shape if shape is None else shape
    fabric, placed = place_slices(g, shape, slices, dcn, twisted=twisted, ocs=ocs)
    if engineer_dcn:
        spec = fabric.dcn
        if spec.kind != "ocs":
            raise PodsimError("engineering DCN circuits for the job needs an OCS DCN (dcn kind ocs)")
        leaves = job_leaves(fabric, placed)
        if len(leaves) > 1:
            fabric, placed = place_slices(g, shape, slices, spec.model_copy(update={"ocs_groups": (leaves,)}),
                                          twisted=twisted, ocs=ocs)
    return Job(trace, fabric, placed, name=name, steps=steps)
