"""An assignment's topology Slice: its chips, cubes and OCS circuits (native, split or folded).

Below the fits that need it (a fold's box is realised to lay the asked torus onto its chips) and
the placement that returns it."""

from __future__ import annotations

import dataclasses

import numpy as np

from podsim.placement.space import Assignment
from podsim.topology.shapes import asked_spec
from podsim.topology.slices import Slice, plan_slice


def to_slice(layout, problem_options, a: Assignment, lazy_circuits: bool = False) -> Slice:
    """The topology Slice (chips, cubes, OCS circuits) of an assignment (native or reshaped);
    `lazy_circuits`: a cube-level slice's circuits made only when read (`CircuitColumns`)."""
    if a.kind == "reshaped":  # a fold: the asked topology on another box's chips, with its circuits
        chips, circuits, spec = a.detail[:3]
        return Slice(spec, np.asarray(chips, np.int32), a.pod, tuple(a.cubes), tuple(circuits), form=a.form)
    if a.kind == "blocks" and a.form == "split":
        return dataclasses.replace(plan_slice(layout, asked_spec(layout.generation, a.shape, False, True),
                                              cubes=list(a.cubes), origin=a.origin, pod=a.pod), form="split")
    spec = next(o.spec for o in problem_options if o.shape == a.shape)
    if a.kind == "blocks":
        return plan_slice(layout, spec, cubes=list(a.cubes), origin=a.origin, pod=a.pod)
    if a.kind == "cubes":
        return plan_slice(layout, spec, cubes=list(a.cubes), pod=a.pod, lazy_circuits=lazy_circuits)
    if a.kind == "subcube":
        return plan_slice(layout, spec, cubes=list(a.cubes), origin=a.origin)
    return plan_slice(layout, spec, origin=a.origin, pod=a.pod)
