"""The fleet's greedy fit is the least-ranked fit of its pods, each found in the pod alone.

On random multi-pod states (running jobs, failed hosts, chips, cubes, OCS units and ports), for
every kind of slice (cube-level, sub-cube, static boxes, block slices, folds and splits, Hilbert
scatter) and both greedy policies: `fit_any` on the whole fleet's free space equals the least
(score, pod, tie) of `rank_any` on each `pod_space`, put back in fleet ids by `to_fleet`; and
`PodState`'s live masks equal the masks recomputed from its part arrays after every update.
"""

from __future__ import annotations

import numpy as np
import pytest

from podsim.placement import PodState, SliceRequest
from podsim.placement.greedy import fit_any, rank_any
from podsim.placement.place import place_one, to_slice
from podsim.placement.pods import pod_space, to_fleet
from podsim.placement.problem import PlacementSettings, options_or_reason
from podsim.placement.reshape import reshape_options
from podsim.placement.space import FreeSpace
from podsim.topology import PodLayout, get_generation

V4 = ["1x1x1", "1x2x2", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8", "4x4x12", "8x8x16", "12x16x16"]
V5E = ["1x1", "2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16"]
ODD = ["2x3x4", "3x3x3", "1x6x6", "5x4x4", "6x6x6", "2x2x9", "4x6x8"]
TORUS = "torus-8x8x8-b4-p6-400gbps"


def _state(gen: str, pods: int, ocs: bool, rng: np.random.Generator, shapes: list[str], settings, policy) -> PodState:
    """A fleet with random jobs (placed by the greedy itself) and random failures."""
    state = PodState(PodLayout(get_generation(gen), pods=pods, ocs=ocs))
    lay = state.layout
    n = 0
    for _ in range(int(rng.integers(10, 40))):
        req = SliceRequest(f"j{n}", shapes[int(rng.integers(len(shapes)))])
        p = place_one(state, req, policy, settings)
        if p.placed:
            state.allocate(req.id, p)
            n += 1
        if n and rng.random() < 0.2:
            state.release(sorted(state.jobs)[int(rng.integers(len(state.jobs)))])
    parts = {"hosts": rng.integers(0, lay.n_hosts, int(rng.integers(0, 6))).tolist(),
             "chips": rng.integers(0, lay.n_chips, int(rng.integers(0, 3))).tolist()}
    if lay.has_cubes:
        parts["cubes"] = rng.integers(0, lay.n_cubes, int(rng.integers(0, 2))).tolist()
    if lay.ocs:
        parts["ocs"] = rng.integers(0, lay.n_ocs, int(rng.random() < 0.3)).tolist()
        parts["ocs_ports"] = [(int(rng.integers(lay.n_ocs)), int(rng.integers(2 * lay.cubes_per_pod))) for _ in range(2)]
    for job in state.fail(**parts):
        state.release(job)
    if rng.random() < 0.5:
        state.repair(hosts=parts["hosts"][:1])
    return state


def _pod_by_pod(state: PodState, req: SliceRequest, opts, reshapes, policy, settings):
    best = None
    for pod in range(state.layout.pods):
        r = rank_any(pod_space(state, pod), opts, reshapes, policy, settings)
        if r is not None and (best is None or (r[0], pod, r[2]) < best[0]):
            best = ((r[0], pod, r[2]), to_fleet(state.layout, r[3], pod))
    return None if best is None else best[1]


CASES = [  # generation, pods, ocs, request shapes, fold, fit policies
    ("tpu-v4", 3, True, V4, "none", ("best", "first")),
    ("tpu-v4", 2, False, V4, "none", ("best", "first")),
    ("tpu-v5e", 3, False, V5E, "none", ("best", "first")),
    (TORUS, 3, True, ["2x4x8", "4x4x8", "8x8x8", "4x4x4", "2x2x2", *ODD], "allowed", ("best", "first")),
    ("tpu-v4", 2, True, [*V4[:6], "8x8x8", "8x8x16", "16x16x16", *ODD], "allowed", ("best",)),
    ("tpu-v4", 2, False, ["2x2x2", "4x4x4", "3x5x7", "8x8x8", "1x7x9", "16x16x16"], "none", ("hilbert",)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}pods-{'ocs' if c[2] else 'static'}-{c[4]}-{c[5][0]}")
def test_the_fleet_fit_is_the_least_ranked_pod_fit(case):
    gen, pods, ocs, shapes, fold, policies = case
    rng = np.random.default_rng(7)
    settings = PlacementSettings(fold=fold)
    compared = fitted = 0
    for _ in range(4):
        for policy in policies:
            state = _state(gen, pods, ocs, rng, shapes, settings, "first" if policy == "hilbert" else policy)
            space = FreeSpace.of(state)
            for shape in shapes:
                req = SliceRequest("probe", shape)
                opts, _ = options_or_reason(state.layout, req, settings.rotate)
                reshapes = reshape_options(state.layout, req, settings.fold, settings.rotate, policy)
                whole = fit_any(space, opts, reshapes, policy, settings)
                by_pod = _pod_by_pod(state, req, opts, reshapes, policy, settings)
                assert whole == by_pod, (gen, policy, shape)
                if whole is not None:  # the same slice, circuits included
                    fitted += 1
                    a, b = to_slice(state.layout, opts, whole), to_slice(state.layout, opts, by_pod)
                    assert np.array_equal(a.chips, b.chips) and a.circuits == b.circuits and a.cubes == b.cubes
                compared += 1
    assert fitted > compared // 4 and fitted < compared  # the draws exercise both answers


def test_live_masks_match_the_part_arrays_after_every_update():
    rng = np.random.default_rng(3)
    settings = PlacementSettings()
    state = _state("tpu-v4", 3, True, rng, V4, settings, "best")
    lay = state.layout
    for step in range(60):
        if step % 3 == 0:
            req = SliceRequest(f"x{step}", V4[int(rng.integers(len(V4)))])
            p = place_one(state, req, "best", settings)
            if p.placed:
                state.allocate(req.id, p)
        elif step % 3 == 1 and state.jobs:
            state.release(sorted(state.jobs)[0])
        else:
            host = int(rng.integers(lay.n_hosts))
            for job in state.fail(hosts=[host], ocs_ports=[(int(rng.integers(lay.n_ocs)), 3)]):
                state.release(job)
            if rng.random() < 0.5:
                state.repair(hosts=[host])
        failed = state.chip_down | state.host_failed[lay.host_of_chip] | state.cube_failed[lay.cube_of_chip]
        assert np.array_equal(state.chip_failed, failed)
        assert np.array_equal(state.chip_free, (state.chip_job < 0) & ~failed)
        assert state.n_healthy_chips == int((~failed).sum())
        used = (state.port_job[:, :2 * lay.cubes_per_pod] >= 0).reshape(lay.pods, lay.ocs_per_pod, lay.cubes_per_pod, 2)
        assert np.array_equal(state.cube_ocs_ok, state.cube_ports_healthy & ~used.any(axis=(1, 3)).ravel())
        for pod in range(lay.pods):
            one = pod_space(state, pod)
            chips = slice(pod * lay.chips_per_pod, (pod + 1) * lay.chips_per_pod)
            cubes = slice(pod * lay.cubes_per_pod, (pod + 1) * lay.cubes_per_pod)
            assert np.array_equal(one.chip_free, state.chip_free[chips])
            assert np.array_equal(one.cube_ocs_ok, state.cube_ocs_ok[cubes])
            assert np.array_equal(one.cube_ocs_degraded_ok, state.cube_ocs_degraded_ok[cubes])
