"""Slice placement on TPU-style pods: which cubes or chips each job gets, and its OCS circuits.

The face exports `__all__` (PodState, SliceRequest, SolverParams, place, validate_placement); the
other names below import from their modules (state, requests, place, validate, space, fit, ...).

State (mutable, cheap to update; what a scheduler keeps between events):
    PodState(layout) / PodState.empty("tpu-v4")   chips, hosts, cubes, OCS units and ports
    state.allocate(job_id, placement)             take a slice (checks it is free and healthy)
    state.release(job_id)                         give it back
    state.fail(hosts=, cubes=, ocs=, ocs_ports=)  -> ids of the jobs hit; state.repair(...)

Requests and files:
    SliceRequest(id, shape, twisted=False, priority=0, arrival_s=0.0)
    load_requests(path, gen), load_failures(path, layout)   YAML files (see docs/placement.md)

Placement (the state is never changed by these):
    place(state, requests, solver="cpsat"|"greedy", policy="best"|"first",
          params=SolverParams(...), settings=PlacementSettings(...), now_s=0.0) -> PlacementResult
    place_one(state, request)       the fast greedy path for one request (no solver)
    SliceRequest(..., slices=N, span_sites=False)   a multislice request: N slices, all or none,
                                    fewest sites then pods (greedy: multislice.py; CP-SAT:
                                    jointly, cpsat_gang.py; PlacementSettings(sites=M));
                                    result.placements[i].all_slices
    validate_placement(state, result) -> {id: SliceView}   run on every result; raises InvalidPlacement
    placement_report(result, views)   per-request dicts with realised topology and bisection

Fitting one request on free space (a scheduler's fast path between events; no state change):
    opts, reason = options_or_reason(layout, request, rotate)   the ways it may be realised, or why never
    space = FreeSpace.of(state)     a cheap, mutable copy of the free chips (space.take(chips) to keep off)
    a = fit_request(space, opts, policy, settings)              an Assignment, or None
    space.chips_of(a), to_slice(layout, opts, a)                its chip ids; its Slice with OCS circuits
    darken(state, slice)            a degraded-allowed slice without its circuits on down OCS units

Fragmentation figures:
    largest_placeable(state), count_fitting(state, shape), free_space_summary(state)
    pod_map(state)                  cubes (or chips) with their jobs and failures, for drawing

Models (podsim.placement.cpsat_model; hinted, solved and read in podsim.placement.cpsat):
cube-level selection on OCS pods, sub-cube 3-D packing by enumeration, static rectangles
(add_no_overlap_2d) and OCS-less cube boxes, batch admission by priority-weighted chips with an
age term; greedy first/best fit for each (podsim.placement.greedy).
"""

from typing import TYPE_CHECKING

from podsim._lazy import lazy_face

if TYPE_CHECKING:  # the face's names, each imported on first use (podsim._lazy: start-up)
    from podsim.placement.cpsat import SolverParams
    from podsim.placement.place import place
    from podsim.placement.requests import SliceRequest
    from podsim.placement.state import PodState
    from podsim.placement.validate import validate_placement

__all__ = ["PodState", "SliceRequest", "SolverParams", "place", "validate_placement"]

lazy_face(__name__)
