"""Multislice requests: N slices of one shape, all or none, on as few pods and sites as possible.

The slices of a multislice job talk over the DCN (a slice is the unit the ICI joins). Traffic
between two slices in one pod stays under that pod's part of the DCN, between pods of one data
centre it crosses the site's spine, and between sites it crosses a WAN link (ms of latency,
far less capacity: ../shared/DESIGN.md, issue 13). So a placement is ranked by

    (sites spanned, pods spanned)      fewer DCN hops first: same pod, then same site

Pods are disjoint, so the slices one pod can hold do not depend on what another holds: per pod,
the greedy fits slices one after another in that pod alone (`fit_request` on the free space
with every other pod masked off), up to N. Then:
- one pod holds N: take it (best fit: the one with the fewest free chips, so big pods stay free);
- else one site holds N: in the site needing the fewest pods, take pods holding the most first
  (for a fixed site, largest-first is the fewest pods);
- else, only if the request says `span_sites`: the fewest sites (most capacity first), then
  pods holding the most first across them.
A request that cannot get all N slices gets none.

`gang_first` is the greedy for a whole batch (an expanded problem, `expand_gangs`): the
multislice requests first, largest weight first, then the one-slice requests around them. It is
the greedy solver's answer, the CP-SAT model's hint, and what CP-SAT falls back to.

Sites are consecutive pods in equal numbers, as in `DcnSpec.sites`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from podsim.errors import PodsimError
from podsim.placement.greedy import Policy, fit_request, greedy_assign
from podsim.placement.problem import PlacementSettings, Problem
from podsim.placement.requests import SliceRequest, processing_order
from podsim.placement.space import Assignment, FreeSpace, Option


def check_sites(layout, sites: int) -> None:
    """One-line error unless `sites` splits the layout's pods into equal consecutive groups."""
    if not isinstance(sites, int) or isinstance(sites, bool) or sites < 1 or layout.pods % sites:
        raise PodsimError(f"sites {sites!r} must be a whole number >= 1 that divides the {layout.pods} pod(s)")


def site_of_pod(layout, sites: int) -> np.ndarray:
    """(pods,) the data centre of every pod: consecutive pods, equal numbers per site."""
    check_sites(layout, sites)
    return np.arange(layout.pods) // (layout.pods // sites)


@dataclass(frozen=True)
class MultiFit:
    """Where the N slices go (an Assignment each, in pod order), or why they do not fit."""

    assignments: tuple[Assignment, ...]
    reason: str = ""

    @property
    def pods(self) -> tuple[int, ...]:
        return tuple(sorted({a.pod for a in self.assignments}))


def _pod_only(space: FreeSpace, pod: int) -> FreeSpace:
    """A copy of `space` in which only `pod`'s chips may be free."""
    out = space.copy()
    out.chip_free[space.layout.pod_of_chip != pod] = False
    return out


def per_pod_fits(space: FreeSpace, opts: Sequence[Option], n: int, policy: Policy,
                 settings: PlacementSettings) -> list[list[Assignment]]:
    """For every pod, up to n slices of `opts` the greedy fits in that pod alone."""
    return [fill(_pod_only(space, pod), opts, n, policy, settings) for pod in range(space.layout.pods)]


def fill(space: FreeSpace, opts: Sequence[Option], n: int, policy: Policy, settings: PlacementSettings) -> list[Assignment]:
    """Up to n slices of `opts` the greedy fits one after another in `space` (each taken from it)."""
    got: list[Assignment] = []
    while len(got) < n:
        a = fit_request(space, opts, policy, settings)
        if a is None:
            break
        space.take(space.chips_of(a))
        got.append(a)
    return got


def _take_pods(fits: list[list[Assignment]], pods: Sequence[int], n: int) -> tuple[Assignment, ...]:
    """n slices from `pods`, most-holding pod first; fewer than n if they do not hold n."""
    chosen: list[Assignment] = []
    for p in sorted(pods, key=lambda p: (-len(fits[p]), p)):
        chosen.extend(fits[p][: n - len(chosen)])
        if len(chosen) == n:
            break
    return tuple(chosen)


def fit_multislice(space: FreeSpace, request: SliceRequest, opts: Sequence[Option], policy: Policy = "best",
                   settings: PlacementSettings | None = None) -> MultiFit:
    """Where `request`'s N slices (`opts`, its options) would go in `space` now, fewest sites
    (of `settings.sites`; more than one only with its `span_sites`) then fewest pods; all or none."""
    settings = settings or PlacementSettings()
    if not opts:
        return MultiFit((), f"{request.slices} slices of {request.name}: the shape can never be placed here")
    fits = per_pod_fits(space, opts, request.slices, policy, settings)
    lay = space.layout
    return choose_pods(lay, fits, lambda: np.bincount(lay.pod_of_chip[space.chip_free], minlength=lay.pods),
                       request, policy, settings)


def choose_pods(layout, fits: Sequence[Sequence[Assignment]], free_per_pod, request: SliceRequest,
                policy: Policy, settings: PlacementSettings) -> MultiFit:
    """The N slices from each pod's own greedy fits (`fits[pod]`, up to N): fewest sites, then
    fewest pods; `free_per_pod()` gives each pod's free chips (best fit among pods that hold all N)."""
    n, sites, span_sites = request.slices, settings.sites, request.span_sites
    lay = layout
    site = site_of_pod(lay, sites)
    what = f"{n} slices of {request.name}"
    held = np.array([len(f) for f in fits])
    whole = np.flatnonzero(held >= n)
    if len(whole):
        if policy == "first":
            pod = int(whole[0])
        else:
            free = free_per_pod()
            pod = int(min(whole, key=lambda p: (free[p], p)))
        return MultiFit(tuple(fits[pod][:n]))
    best_site = None
    for s in range(sites):
        pods = np.flatnonzero(site == s)
        counts = np.sort(held[pods])[::-1]
        if counts.sum() >= n:
            k = int(np.searchsorted(np.cumsum(counts), n) + 1)  # fewest pods of this site that hold n
            if best_site is None or k < best_site[0]:
                best_site = (k, s)
    if best_site is not None:
        return MultiFit(_take_pods(fits, np.flatnonzero(site == best_site[1]), n))
    per_site = np.bincount(site, weights=held, minlength=sites).astype(int)
    most = int(per_site.max()) if sites else 0
    if held.sum() < n:
        return MultiFit((), f"{what}: {int(held.sum())} fit in the free space of all {lay.pods} pod(s)")
    if not span_sites:
        return MultiFit((), f"{what}: at most {most} fit in one site ({int(held.sum())} over all {sites} sites); "
                            "set span_sites: true to let it cross the WAN")
    order = sorted(range(sites), key=lambda s: (-per_site[s], s))
    used, total = [], 0
    for s in order:
        used.append(s)
        total += per_site[s]
        if total >= n:
            break
    return MultiFit(_take_pods(fits, np.flatnonzero(np.isin(site, used)), n))


def dcn_span(layout, pods: Sequence[int], sites: int = 1) -> tuple[int, int]:
    """(sites spanned, pods spanned) of a placement's pods: the ranking of DCN hops."""
    site = site_of_pod(layout, sites)
    return len({int(site[p]) for p in pods}), len(set(pods))


def gang_first(problem: Problem, policy: Policy = "best", start: Sequence | None = None) -> list[Assignment | None]:
    """Greedy for an expanded problem: multislice requests all or none (in `processing_order`:
    largest weight first; by `fit_multislice`), then the one-slice requests. `start` keeps
    earlier assignments."""
    space = problem.space.copy()
    out: list[Assignment | None] = list(start) if start is not None else [None] * problem.n
    for a in out:
        if a is not None:
            space.take(space.chips_of(a))
    gangs = problem.gangs
    for gang in (gangs[k] for k in processing_order([g.request for g in gangs], [g.weight for g in gangs])):
        if any(out[c] is not None for c in gang.copies):
            continue
        mf = fit_multislice(space, gang.request, problem.options[gang.copies[0]], policy, problem.settings)
        for c, a in zip(gang.copies, mf.assignments, strict=False):
            space.take(space.chips_of(a))
            out[c] = a
    return greedy_assign(problem, policy, start=out, skip={c for g in problem.gangs for c in g.copies})
