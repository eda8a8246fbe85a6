"""One validator for every placement any solver returns.

`validate_placement(state, result)` checks, independently of how the placement was found:
- every request is answered once: placed with exactly its chips, or not placed with a reason;
- the slice is the one asked for: same shape (a static box may be rotated), same twist;
- no chip, cube or OCS port is used twice (within the batch or against the state's jobs);
- no failed host, cube, OCS unit or OCS port is used, and a cube-level slice's circuits only
  use its own cubes' ports;
- every slice forms the topology it asked for: the fabric is wired with every circuit (the
  state's and the batch's) and `check_slice_topology` compares each slice's live ICI links with
  the torus, twisted torus or mesh it requested;
- a degraded cube-level slice (circuits on down OCS units left dark) was allowed by its
  request, is dark on down units only, and its surviving links still join every chip;
- a multislice request holds all its N slices or none, each checked as a slice of its own
  (id 'job/k'), and they are in one site unless the request allows `span_sites`.

It returns each placed slice's view in that wired fabric (a degraded slice without its dark
cables), for figures such as bisection.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from podsim.errors import InternalError, PodsimError
from podsim.placement.degraded import check_degraded, dark_circuits
from podsim.placement.multislice import site_of_pod
from podsim.topology.fabric import build_fabric
from podsim.topology.slices import SliceView, check_slice_topology, slice_view


class InvalidPlacement(InternalError):
    """A solver's placement breaks a rule: a bug in podsim, not bad input (the CLI exits 1 and
    asks for a report). The message names the request and the rule."""


def validate_placement(state, result, requests: Sequence | None = None, sites: int | None = None) -> dict[str, SliceView]:
    """Raise InvalidPlacement unless `result` (a PlacementResult or its placements) is valid
    on `state` (the state before the batch). Returns {request id: SliceView} of placed slices
    ('job/k' for slice k of a multislice request). `sites` defaults to the result's."""
    placements = list(getattr(result, "placements", result))
    sites = sites if sites is not None else getattr(result, "sites", 1)
    lay = state.layout
    ids = [p.request.id for p in placements]
    if len(set(ids)) != len(ids):
        raise InvalidPlacement("a request is answered twice")
    if requests is not None and ids != [r.id for r in requests]:
        raise InvalidPlacement("the placements do not answer the requests one for one, in order")
    for p in placements:
        _check_gang(p, lay, sites)
    placements = [m for p in placements for m in p.members]
    if len({p.request.id for p in placements}) != len(placements):
        raise InvalidPlacement("a multislice member id ('job/k') is also the id of another request")
    placed = [p for p in placements if p.slice is not None]
    for p in placements:
        _check_request(p, lay)
    if not placed:
        return {}
    chips = np.concatenate([np.asarray(p.slice.chips) for p in placed])
    if chips.min() < 0 or chips.max() >= lay.n_chips:
        raise InvalidPlacement("a slice names a chip that does not exist")
    owner = np.repeat(np.arange(len(placed)), [len(p.slice.chips) for p in placed])
    uniq, counts = np.unique(chips, return_counts=True)
    if (counts > 1).any():
        c = int(uniq[counts > 1][0])
        names = [placed[k].request.id for k in owner[chips == c]]
        raise InvalidPlacement(f"chip {c} is given to two slices: {names[0]!r} and {names[1]!r}")
    held = state.chip_job[chips] >= 0
    if held.any():
        k = int(np.flatnonzero(held)[0])
        raise InvalidPlacement(f"request {placed[owner[k]].request.id!r} uses chip {int(chips[k])}, held by a running job")
    bad = state.chip_failed[chips]
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        c = int(chips[k])
        where = f"host {int(lay.host_of_chip[c])}" + (f", cube {int(lay.cube_of_chip[c])}" if lay.has_cubes else "")
        raise InvalidPlacement(f"request {placed[owner[k]].request.id!r} uses failed chip {c} ({where})")
    for p in placed:
        _check_pod_and_cubes(p, lay)
    if lay.ocs:
        _check_ports(state, placed)
    return _check_topologies(state, placed)


def _check_gang(p, lay, sites: int) -> None:
    """All or none of a multislice request's slices, in one site unless it may span sites."""
    req, n = p.request, p.request.slices
    got = len(p.all_slices)
    if n == 1:
        if p.slices and (len(p.slices) != 1 or p.slices[0] is not p.slice):
            raise InvalidPlacement(f"request {req.id!r} asked for one slice, got {len(p.slices)}")
        return
    if p.slice is None:
        if p.slices:
            raise InvalidPlacement(f"request {req.id!r} is not placed but holds {len(p.slices)} slices")
        return
    if got != n or p.slices[0] is not p.slice:
        raise InvalidPlacement(f"request {req.id!r} asked for {n} slices, all or none; got {got}")
    if sites < 1 or lay.pods % sites:
        raise InvalidPlacement(f"sites {sites} does not divide the {lay.pods} pod(s)")
    site = site_of_pod(lay, sites)
    spanned = {int(site[s.pod]) for s in p.slices}
    if len(spanned) > 1 and not req.span_sites:
        raise InvalidPlacement(f"request {req.id!r} spans sites {sorted(spanned)} without span_sites")


def _check_request(p, lay) -> None:
    req, slc = p.request, p.slice
    gen = lay.generation
    if slc is None:
        if not p.reason:
            raise InvalidPlacement(f"request {req.id!r} is not placed and gives no reason")
        return
    if p.reason:
        raise InvalidPlacement(f"request {req.id!r} is placed but carries a reason")
    if slc.spec.generation != gen.id:
        raise InvalidPlacement(f"request {req.id!r} got a {slc.spec.generation} slice on a {gen.id} pod")
    rotatable = slc.spec.kind in ("rectangle", "blocks") or (slc.spec.kind == "cubes" and not lay.ocs) or slc.form != "native"
    if (sorted(slc.shape) != sorted(req.shape)) if rotatable else (slc.shape != req.shape):
        raise InvalidPlacement(f"request {req.id!r} asked for {req.name}, got shape {slc.shape}")
    if slc.twisted != req.twisted:
        raise InvalidPlacement(f"request {req.id!r} asked for twisted={req.twisted}, got twisted={slc.twisted}")
    if len(slc.chips) != req.chips:
        raise InvalidPlacement(f"request {req.id!r} needs {req.chips} chips, got {len(slc.chips)}")


def _check_pod_and_cubes(p, lay) -> None:
    slc, rid = p.slice, p.request.id
    if (lay.pod_of_chip[slc.chips] != slc.pod).any():
        raise InvalidPlacement(f"request {rid!r}: the slice's chips are not all in pod {slc.pod}")
    if not lay.has_cubes:
        return
    cubes = np.unique(lay.cube_of_chip[slc.chips])
    if sorted(int(c) for c in slc.cubes) != [int(c) for c in cubes]:
        raise InvalidPlacement(f"request {rid!r}: reported cubes {sorted(slc.cubes)} are not the cubes of its chips {cubes.tolist()}")
    if slc.spec.kind == "cubes" and slc.form == "native" and len(slc.chips) != len(cubes) * lay.generation.chips_per_cube:
        raise InvalidPlacement(f"request {rid!r}: a cube-level slice must take whole cubes")


def _check_ports(state, placed) -> None:
    lay = state.layout
    rows = [(k, c) for k, p in enumerate(placed) for c in p.slice.circuits]
    if not rows:
        return
    who = np.array([k for k, _ in rows])
    c = np.array([c for _, c in rows], np.int64)
    ocs = np.concatenate([c[:, 0], c[:, 0]])
    port = np.concatenate([c[:, 1], c[:, 2]])
    who2 = np.concatenate([who, who])
    if ocs.min() < 0 or ocs.max() >= lay.n_ocs or port.min() < 0 or port.max() >= lay.ports_per_ocs:
        raise InvalidPlacement("a circuit names an OCS or port that does not exist")
    key = ocs * lay.ports_per_ocs + port
    uniq, counts = np.unique(key, return_counts=True)
    if (counts > 1).any():
        k = int(uniq[counts > 1][0])
        raise InvalidPlacement(f"OCS port {k // lay.ports_per_ocs}:{k % lay.ports_per_ocs} is used by two circuits")
    for mask, what in ((state.port_job[ocs, port] >= 0, "is held by a running job"),
                       (state.face_port_failed[ocs, port], "has failed"),
                       (state.ocs_failed[ocs], "is on an OCS that is down")):
        if mask.any():
            k = int(np.flatnonzero(mask)[0])
            raise InvalidPlacement(f"request {placed[who2[k]].request.id!r}: OCS port {int(ocs[k])}:{int(port[k])} {what}")
    cube, *_ = lay.port_owner(ocs, port)
    for k in range(len(placed)):
        mine = cube[who2 == k]
        if len(mine) and not np.isin(mine, placed[k].slice.cubes).all():
            raise InvalidPlacement(f"request {placed[k].request.id!r}: a circuit uses another cube's OCS port")


def _check_topologies(state, placed) -> dict[str, SliceView]:
    lay = state.layout
    circuits = None
    dark = {p.request.id: dark_circuits(lay, p.slice) for p in placed} if lay.ocs else {}
    if lay.ocs:  # a degraded slice is wired with its dark circuits too, then checked without them
        circuits = tuple(c for s in state.jobs.values() for c in s.circuits) + tuple(
            c for p in placed for c in (*p.slice.circuits, *dark[p.request.id]))
    try:
        fabric = build_fabric(lay, circuits=circuits)
    except PodsimError as exc:
        raise InvalidPlacement(f"the circuits do not wire a valid fabric: {exc}") from None
    views = {}
    for p in placed:
        view = slice_view(fabric, p.slice)
        try:
            check_slice_topology(view)
        except PodsimError as exc:
            raise InvalidPlacement(f"request {p.request.id!r}: {exc}") from None
        if dark.get(p.request.id):
            why = check_degraded(state, p.request, p.slice, view)
            if why:
                raise InvalidPlacement(f"request {p.request.id!r}: the slice {why}")
        views[p.request.id] = view
    if any(dark.values()):  # figures (bisection) of the slices as they run: without the dark cables
        live = build_fabric(lay, circuits=tuple(c for s in state.jobs.values() for c in s.circuits)
                            + tuple(c for p in placed for c in p.slice.circuits))
        views = {p.request.id: slice_view(live, p.slice) for p in placed}
    return views
