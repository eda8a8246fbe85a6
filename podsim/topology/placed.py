"""A placed slice on a fabric of its own: what the step-time engine needs to price a non-native
placement (a fold, a split, a scattered allocation) against the slice the job asked for."""

from __future__ import annotations

import dataclasses

import numpy as np

from podsim.errors import PodsimError
from podsim.topology.dcn import DcnSpec
from podsim.topology.fabric import Circuit, build_fabric
from podsim.topology.pod import PodLayout
from podsim.topology.shapes import asked_spec, validate_shape
from podsim.topology.slices import Slice, plan_slice, slice_view
from podsim.topology.summary import Built


def built_placed(layout: PodLayout, slc: Slice, dcn: DcnSpec | None = None) -> Built:
    """The slice moved to pod 0 of a one-pod fabric wired with its own circuits (on a static pod,
    the fixed torus): the engine's view of it alone, as `build_slice` gives a native one."""
    one = PodLayout(layout.generation, pods=1, ocs=layout.ocs)
    pod = int(slc.pod)
    chips = np.asarray(slc.chips, np.int64) - pod * layout.chips_per_pod
    cubes = tuple(int(c) - pod * layout.cubes_per_pod for c in slc.cubes)
    circuits = tuple(Circuit(c.ocs - pod * layout.ocs_per_pod, c.port_a, c.port_b) for c in slc.circuits)
    moved = dataclasses.replace(slc, chips=chips.astype(np.int32), pod=0, cubes=cubes, circuits=circuits)
    fabric = build_fabric(one, circuits=circuits if one.ocs else None, dcn=dcn)
    return Built(fabric, moved, slice_view(fabric, moved))


def built_asked(gen, shape: tuple[int, ...], twisted: bool, ocs: bool, dcn: DcnSpec | None = None) -> Built:
    """The slice as asked: the generation's native slice of `shape` (on its wiring, else with
    OCS), or, for a shape the rules lack, the asked topology built of blocks on an empty pod
    (podsim.topology.shapes.asked_spec: a multiple of the cube side wraps, other sides are mesh
    lines) - what a fold or a split is compared with."""
    from podsim.topology.blocks import BlockGeometry, geometry_params

    for wiring in (ocs, True):
        try:
            spec = validate_shape(gen, shape, twisted, wiring)
        except PodsimError:
            continue
        if wiring and not gen.has_ocs:
            continue
        layout = PodLayout(gen, ocs=wiring)
        slc = plan_slice(layout, spec)
        fabric = build_fabric(layout, circuits=slc.circuits if layout.ocs else None, dcn=dcn)
        return Built(fabric, slc, slice_view(fabric, slc))
    if not gen.has_ocs or gen.cube_shape is None:
        raise PodsimError(f"slice {shape} is not a {gen.id} shape and the pod has no blocks to build it of")
    spec = asked_spec(gen, shape, False, True)
    layout = PodLayout(gen, ocs=True)
    geom = BlockGeometry(tuple(shape), gen.cube_shape[0], geometry_params(tuple(shape), gen.cube_shape[0])[0])
    if geom.n_cells > layout.cubes_per_pod:
        raise PodsimError(f"slice {shape} needs {geom.n_cells} blocks, more than a {gen.id} pod has")
    slc = plan_slice(layout, spec, cubes=list(range(geom.n_cells)), origin=geom.params)
    fabric = build_fabric(layout, circuits=slc.circuits, dcn=dcn)
    return Built(fabric, slc, slice_view(fabric, slc))
