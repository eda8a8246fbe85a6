"""Collective times for the analytic estimate: podsim.collectives' alpha-beta closed forms on the
job's own slices and DCN, without simulating a flow.

A `Pricer` holds one job layout (generation, slice shape, slices, DCN): the fabric `build_job`
would give it (`build_slice` for one slice, `place_slices` for several) and a RouterPool over its
slices, built once. `time_s(kind, group, bytes)` is what `plan_collective(..., "auto")` prices:
every applicable algorithm's closed form on those routes (hop latencies plus the busiest link's
bytes per phase), the fastest taken, the choice the engine makes for the same op. Each
algorithm's closed form is affine in the bytes on a fixed group (every phase's bytes scale with
it, its routes do not), so one group is priced at two sizes per algorithm and every later size is
two multiplications (`_Affine`); the engine's choice among them by size follows.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass, field
from functools import lru_cache

from podsim.collectives import plan_collective
from podsim.collectives.groups import group_layout
from podsim.collectives.routes import Placement, RouterPool
from podsim.engine.jobs import place_slices
from podsim.errors import PodsimError
from podsim.topology import DcnSpec, Generation, build_slice, get_generation
from podsim.topology.slices import slice_view
from podsim.trace.model import parse_group

MIRRORED = {"all_gather": ("reduce_scatter", 1.0), "all_reduce": ("reduce_scatter", 2.0)}
"""Every algorithm's all-gather is its reduce-scatter's phases in reverse, and its all-reduce the
two in turn (podsim.collectives.algorithms; the hierarchical all-reduce's DCN part is itself an
all-reduce of the shard, twice its reduce-scatter), so their closed forms are the reduce-scatter's
x1 and x2 at every size and the fastest algorithm is the same: priced once
(tests/test_plan_estimate.py checks the identity)."""
PROBE_BYTES = (1 << 20, 1 << 25, 1 << 30)
"""The sizes each (kind, group, algorithm) is priced at; its closed form is taken as affine between
two (exactly so where every phase's slowest flow is the same at all sizes: rings, direct; within
a few percent for a multi-stream torus_all_links, tests/test_plan_estimate.py) and beyond the ends."""


@dataclass(frozen=True)
class _Affine:
    """One algorithm's closed form on one group, affine between the probe sizes (and beyond the
    ends, on the end segments): latency_s[i] + bytes x s_per_byte[i] on segment i."""

    algorithm: str
    latency_s: tuple[float, ...]
    s_per_byte: tuple[float, ...]

    def at(self, nbytes: float) -> float:
        i = bisect_left(PROBE_BYTES, nbytes, 1, len(PROBE_BYTES) - 1) - 1  # the segment holding nbytes; the end ones beyond
        return max(self.latency_s[i] + nbytes * self.s_per_byte[i], 0.0)


@dataclass
class Pricer:
    """Closed-form collective times on one job layout (see the module docstring)."""

    generation: Generation
    shape: tuple[int, ...]
    slices: int = 1
    dcn: DcnSpec = field(default_factory=DcnSpec)
    _pool: RouterPool | None = field(default=None, repr=False)
    _views: tuple = field(default=(), repr=False)
    _forms: dict = field(default_factory=dict, repr=False)
    laid: dict = field(default_factory=dict, repr=False)  # podsim.plan.estimate.Layout's shared laid-out collectives
    mappings: dict = field(default_factory=dict, repr=False)  # mesh mappings by (shape, plan, order)

    def _placement(self) -> RouterPool:
        if self._pool is None:
            if self.slices == 1:
                built = build_slice(self.generation, self.shape, dcn=self.dcn)
                fabric, views = built.fabric, (built.view,)
            else:
                fabric, placed = place_slices(self.generation, self.shape, self.slices, self.dcn)
                views = tuple(slice_view(fabric, s) for s in placed)
            self._views = views
            self._pool = RouterPool(Placement(fabric, views))
        return self._pool

    def _affine(self, kind: str, group: str) -> tuple[_Affine, ...]:
        """Every algorithm `auto` would weigh for `kind` on `group`, each as an affine form."""
        key = (kind, group)
        if key not in self._forms:
            pool = self._placement()
            layout = group_layout(self._views, parse_group(group))
            plans = [plan_collective(kind, layout, n, "auto", pool) for n in PROBE_BYTES]
            forms = []
            for alg in dict.fromkeys(a for pl in plans for a in pl.candidates_s):
                times = []
                try:  # priced at some sizes only: the others ruled it out by its bound; price it there too
                    for n, pl in zip(PROBE_BYTES, plans, strict=True):
                        t = pl.candidates_s.get(alg)
                        times.append(t if t is not None else plan_collective(kind, layout, n, alg, pool).closed_form_s)
                except PodsimError:  # more flows than podsim simulates: the engine would not take it either
                    continue
                slopes = tuple((t1 - t0) / (n1 - n0) for n0, n1, t0, t1 in zip(PROBE_BYTES, PROBE_BYTES[1:], times, times[1:], strict=False))
                forms.append(_Affine(alg, tuple(t0 - n0 * k for n0, t0, k in zip(PROBE_BYTES, times, slopes, strict=False)), slopes))
            self._forms[key] = tuple(forms)
        return self._forms[key]

    def time_s(self, kind: str, group: str, nbytes: float) -> float:
        """The closed-form time of one collective (kind, group as in a trace, bytes in the
        nccl-tests convention), the fastest algorithm at this size."""
        if nbytes <= 0:
            return 0.0
        kind, k = MIRRORED.get(kind, (kind, 1.0))
        return k * min(f.at(nbytes) for f in self._affine(kind, group))

    def algorithm(self, kind: str, group: str, nbytes: float) -> str:
        """The algorithm `time_s` takes at this size."""
        kind, _ = MIRRORED.get(kind, (kind, 1.0))
        return min(self._affine(kind, group), key=lambda f: f.at(nbytes)).algorithm


def pricer(generation: str | Generation, shape: tuple[int, ...], slices: int, dcn: DcnSpec) -> Pricer:
    """The pricer of one job layout, shared by every plan searched on it (and across searches):
    keyed by the generation itself, so a scenario's figure overrides get their own."""
    return _pricer(get_generation(generation), tuple(shape), slices, dcn)


@lru_cache(maxsize=64)
def _pricer(gen: Generation, shape: tuple[int, ...], slices: int, dcn: DcnSpec) -> Pricer:
    if math.prod(shape) < 1:
        raise ValueError(f"empty slice {shape}")
    return Pricer(gen, shape, slices, dcn)
