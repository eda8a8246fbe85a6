"""A multislice job in the cluster simulation: its N slices held, released and failed together.

The pod state holds each slice on its own under the member id 'job/k' (so every chip, cube
and OCS port check of `PodState.allocate` applies to each), and the simulation sees the gang
as one holder (`GangSlice`: all chips, cubes and circuits) and one fit (`GangFit`). A failure
that hits any slice stops the whole job, once; it restarts on a fresh placement of all N.
"""

from __future__ import annotations

import numpy as np

from podsim.placement import PodState
from podsim.placement.degraded import darken
from podsim.placement.multislice import dcn_span
from podsim.placement.result import SlicePlacement


class _Gang:
    """What a gang of slices (`members`: Slices or Fits, one per slice) shows as one holder."""

    __slots__ = ()

    @property
    def chips(self) -> np.ndarray:
        return np.concatenate([np.asarray(m.chips) for m in self.members])

    @property
    def shape(self) -> tuple[int, ...]:
        return self.members[0].shape

    @property
    def twisted(self) -> bool:
        return self.members[0].twisted

    @property
    def pods(self) -> list[int]:
        return sorted({int(m.pod) for m in self.members})


class GangSlice(_Gang):
    """The slices of a running multislice job, as one holder of chips, cubes and circuits."""

    __slots__ = ("slices",)

    def __init__(self, slices):
        self.slices = tuple(slices)

    @property
    def members(self) -> tuple:
        return self.slices

    @property
    def cubes(self) -> tuple[int, ...]:
        return tuple(int(c) for s in self.slices for c in s.cubes)

    @property
    def circuits(self) -> tuple:
        return tuple(c for s in self.slices for c in s.circuits)


class GangFit(_Gang):
    """Where a multislice job would go now: one placement-search `Fit` per slice."""

    __slots__ = ("parts",)

    def __init__(self, parts):
        self.parts = tuple(parts)

    @property
    def members(self) -> tuple:
        return self.parts

    @property
    def circuits(self) -> bool:
        return any(p.circuits for p in self.parts)

    @property
    def slice(self) -> GangSlice:
        return GangSlice(p.slice for p in self.parts)


def sites_spanned(slc, layout, sites: int) -> int:
    """Data centres a job's slice(s) sit in (placement's `dcn_span` over `site_of_pod`): 1 for
    one slice, else the sites of the gang's pods."""
    if not isinstance(slc, GangSlice | GangFit) or sites == 1:
        return 1
    return dcn_span(layout, slc.pods, sites)[0]


def slice_of(state: PodState, where):
    """The slice (or GangSlice) a Fit, GangFit or SlicePlacement gives, darkened for down OCS units."""
    slices = getattr(where, "slices", None)
    if isinstance(where, SlicePlacement) and len(slices) > 1:
        where = GangSlice(slices)
    slc = where.slice if not isinstance(where, GangSlice) else where
    if isinstance(slc, GangSlice):
        return GangSlice(darken(state, s) for s in slc.slices)
    return darken(state, slc)


def placement_of(request, slc) -> SlicePlacement:
    """The placement record of a job's slice, for `validate_placement`."""
    if isinstance(slc, GangSlice):
        return SlicePlacement(request, slc.slices[0], slices=slc.slices)
    return SlicePlacement(request, slc)


def allocate(state: PodState, rid: str, slc) -> None:
    """Give the job its slice; a gang's slices as 'rid/k', all or none (the state checks each)."""
    if not isinstance(slc, GangSlice):
        state.allocate(rid, slc)
        return
    done = []
    try:
        for k, s in enumerate(slc.slices):
            state.allocate(f"{rid}/{k}", s)
            done.append(f"{rid}/{k}")
    except Exception:
        for m in done:
            state.release(m)
        raise


def release(state: PodState, rid: str, slc) -> None:
    if not isinstance(slc, GangSlice):
        state.release(rid)
        return
    for k in range(len(slc.slices)):
        state.release(f"{rid}/{k}")


def jobs_hit(hit) -> list[int]:
    """Job indices of the holders a failure hit ('7' or '7/2'), each once, in order."""
    out: list[int] = []
    for rid in hit:
        idx = int(str(rid).split("/")[0])
        if idx not in out:
            out.append(idx)
    return out
