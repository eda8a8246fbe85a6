"""Degraded cube-level slices: a torus on a pod with down OCS units, their circuits left dark.

Every cube-level torus has one circuit on every OCS of its pod (ocs.7), so a down OCS unit
blocks every cube-level slice there. A request with `allow_degraded` may still take the cubes:
`darken(state, slice)` drops the circuits on down OCS units, and the slice runs on what is
left, a torus missing one (dimension, face index) line of optical cables per down unit, which
the engine routes around (podsim.topology.degraded). `check_degraded` is validate_placement's
check of such a slice: its circuits are the planned ones minus exactly those on down units, the
request allowed it, and the surviving ICI graph still joins every chip.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from podsim.topology.degraded import _bfs, live_ports, ocs_failed_links
from podsim.topology.slices import Slice, plan_slice


def planned_circuits(layout, slc: Slice) -> tuple:
    """The circuits of the full torus on the slice's cubes (in its cube order)."""
    if slc.spec.kind != "cubes" or slc.form != "native" or not layout.ocs:
        return tuple(slc.circuits)
    return plan_slice(layout, slc.spec, cubes=list(slc.cubes), pod=slc.pod).circuits


def darken(state, slc: Slice) -> Slice:
    """`slc` without its circuits on down OCS units (the same slice if none is down)."""
    if not slc.circuits or not state.ocs_failed.any():
        return slc
    kept = tuple(c for c in slc.circuits if not state.ocs_failed[c[0]])
    return slc if len(kept) == len(slc.circuits) else replace(slc, circuits=kept)


def dark_circuits(layout, slc: Slice) -> tuple:
    """Planned circuits the slice does not have: empty for a full torus, and for a slice with a
    circuit its torus does not plan (miswired, not degraded: the topology check rejects it)."""
    have = set(map(tuple, slc.circuits))
    planned = planned_circuits(layout, slc)
    if not have <= set(map(tuple, planned)):
        return ()
    return tuple(c for c in planned if tuple(c) not in have)


def check_degraded(state, request, slc: Slice, view_full) -> str:
    """'' if `slc` is a full torus or an allowed degraded one, else what is wrong.

    `view_full` is the slice's view in a fabric wired with its planned circuits; the dark ones'
    cables are taken out and the rest must still join every chip."""
    lay = state.layout
    planned = {tuple(c) for c in planned_circuits(lay, slc)}
    have = {tuple(c) for c in slc.circuits}
    if not have <= planned:
        return "has a circuit that is not part of its torus"
    dark = planned - have
    if not dark:
        return ""
    if not getattr(request, "allow_degraded", False):
        return f"is missing {len(dark)} of its torus's circuits but does not allow a degraded torus"
    up = [c for c in dark if not state.ocs_failed[c[0]]]
    if up:
        return f"leaves circuit {up[0]} dark although OCS {up[0][0]} is up"
    fabric = view_full.fabric
    failed = np.zeros(fabric.n_links, bool)
    down = sorted({int(c[0]) for c in dark})
    ids = np.array(ocs_failed_links(fabric, ocs=down), np.int64)
    failed[ids] = True
    failed[ids ^ 1] = True  # a cable's two directions
    live = live_ports(view_full, failed)
    dist, _ = _bfs(view_full.port_peer.astype(np.int64), live, np.array([0]))
    if (dist < 0).any():
        return f"is cut apart by the dark circuits of OCS {', '.join(map(str, down))}"
    return ""
