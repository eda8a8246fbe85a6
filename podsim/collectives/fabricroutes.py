"""A job's placement on a fabric for routing: its slices, the routing policy inside them and the
parts that failed; each flow's links between global chips (ICI inside a slice by the policy,
`ecmp_routes` over the DCN between slices, detours around failed links and chips).

`Placement` is what `routes.Router` routes patterns on (crossing.py and dcnfold.py read its
slices the same way).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import numpy as np

from podsim.collectives.routeparts import RoutePart, _subset, join_parts
from podsim.errors import PodsimError
from podsim.topology.degraded import detour_routes
from podsim.topology.fabric import Fabric
from podsim.topology.multipath import ROUTING_POLICIES, path_dag, split_routes
from podsim.topology.routing import ecmp_routes, slice_routes
from podsim.topology.slices import SliceView


@dataclass(frozen=True, eq=False)
class Placement:
    """A fabric with the slices of one job (or of several jobs sharing it), the routing policy
    inside slices (`dimension_order`, `shortest_paths`, `adaptive`) and the ICI links and chips
    that failed (fabric link / chip ids; a link fails with its reverse, a chip with its links):
    flows whose route would touch one go around (podsim.topology.degraded)."""

    fabric: Fabric
    views: tuple[SliceView, ...]
    routing: str = "dimension_order"
    failed_links: tuple[int, ...] = ()
    failed_chips: tuple[int, ...] = ()
    slice_of_chip: np.ndarray = field(init=False, repr=False)
    local_of_chip: np.ndarray = field(init=False, repr=False)
    link_failed: np.ndarray = field(init=False, repr=False)
    chip_failed: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        check_routing(self.routing)
        fab = self.fabric
        for name, ids, n in (("failed_links", self.failed_links, fab.n_links), ("failed_chips", self.failed_chips, fab.n_chips)):
            bad = [int(i) for i in ids if not 0 <= int(i) < n]
            if bad:
                raise PodsimError(f"{name}: {bad[0]} is not an id of this fabric (0..{n - 1})")
        chip_failed = np.zeros(fab.n_chips, bool)
        chip_failed[list(self.failed_chips)] = True
        link_failed = np.zeros(fab.n_links, bool)
        link_failed[list(self.failed_links)] = True
        link_failed |= link_failed[fab.link_reverse]
        ends = (fab.link_src < fab.n_chips) & (fab.link_dst < fab.n_chips)
        link_failed[ends] |= chip_failed[fab.link_src[ends]] | chip_failed[fab.link_dst[ends]]
        object.__setattr__(self, "link_failed", link_failed)
        object.__setattr__(self, "chip_failed", chip_failed)
        s = np.full(self.fabric.n_chips, -1, np.int64)
        loc = np.full(self.fabric.n_chips, -1, np.int64)
        for i, v in enumerate(self.views):
            s[v.chips] = i
            loc[v.chips] = np.arange(v.n)
        object.__setattr__(self, "slice_of_chip", s)
        object.__setattr__(self, "local_of_chip", loc)

    def route_parts(self, src: np.ndarray, dst: np.ndarray, periods: tuple[int, ...] | None = None) -> list[RoutePart]:
        """Flows between global chips in parts: per slice (ICI, by the routing policy) and
        across slices (DCN). With `periods` (a translation symmetry of the one slice),
        multipath routes come folded onto representative links (see `split_routes`)."""
        src = np.asarray(src, np.int64)
        dst = np.asarray(dst, np.int64)
        ss, sd = self.slice_of_chip[src], self.slice_of_chip[dst]
        parts = []
        for i, v in enumerate(self.views):
            sel = np.flatnonzero((ss == i) & (sd == i))
            if not len(sel):
                continue
            ls, ld = self.local_of_chip[src[sel]], self.local_of_chip[dst[sel]]
            multipath = self.routing != "dimension_order" and v.slice.spec.kind != "gpu"
            if multipath and v.slice.form == "scatter":
                raise PodsimError("a scattered slice (hilbert allocation) is routed dimension-order over its pod; "
                                  f"routing {self.routing!r} is not modelled for it")
            if multipath:
                part = RoutePart(sel, *split_routes(v, ls, ld, periods), partial(path_dag, v, ls, ld))
            elif v.slice.spec.kind == "gpu":  # across nodes over the DCN, spread as dcn.ecmp says
                part = RoutePart(sel, *ecmp_routes(self.fabric, v.chips[ls], v.chips[ld], switched=True))
            else:
                r = slice_routes(v, ls, ld)
                part = RoutePart(sel, r.indptr, r.links.astype(np.int64), None)
            parts.extend(self._around_failures(v, part, ls, ld, multipath))
        sel = np.flatnonzero((ss != sd) | (ss < 0))
        if len(sel):
            parts.append(RoutePart(sel, *ecmp_routes(self.fabric, src[sel], dst[sel])))
        return parts

    @property
    def degraded(self) -> bool:
        return bool(self.link_failed.any())

    def _around_failures(self, view: SliceView, part: RoutePart, ls: np.ndarray, ld: np.ndarray,
                         multipath: bool) -> list[RoutePart]:
        """The part as is, or split: flows that touch a failed part routed around it."""
        if not self.degraded or view.slice.spec.kind == "gpu":
            return [part]
        hops = np.diff(part.indptr)
        hit = np.zeros(len(hops), bool)
        hit[np.repeat(np.arange(len(hops)), hops)[self.link_failed[part.links]]] = True
        hit |= self.chip_failed[view.chips[ls]] | self.chip_failed[view.chips[ld]]
        if not hit.any():
            return [part]
        out = []
        keep = np.flatnonzero(~hit)
        if len(keep):
            ip, lk, fr = _subset(part.indptr, part.links, part.frac, keep)
            out.append(RoutePart(part.sel[keep], ip, lk, fr,
                                 partial(path_dag, view, ls[keep], ld[keep]) if part.dag is not None else None))
        bad = np.flatnonzero(hit)
        ip, lk, fr = detour_routes(view, ls[bad], ld[bad], self.link_failed, self.chip_failed, multipath)
        out.append(RoutePart(part.sel[bad], ip, lk, fr))
        return out

    def route(self, src: np.ndarray, dst: np.ndarray):
        """(indptr, links, frac) of flows between global chips: ICI inside a slice, DCN between."""
        return join_parts(len(np.asarray(src)), self.route_parts(src, dst))


def check_routing(routing: str) -> None:
    if routing not in ROUTING_POLICIES:
        raise PodsimError(f"routing {routing!r} is not known; use one of: {', '.join(ROUTING_POLICIES)}")
