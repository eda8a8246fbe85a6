"""A slice's ICI cables and OCS circuits as plain records: what drawings and tables show.

`slice_cables` lists each cable of a slice once (from a chip's '+' port to its peer's '-' port)
with its dimension, its kind (copper inside a cube, optical through an OCS circuit) and whether
it is a wraparound; `circuit_rows` names the cube faces behind each OCS circuit.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from podsim.errors import PodsimError
from podsim.topology.fabric import Circuit, LinkKind
from podsim.topology.pod import PLUS, PodLayout
from podsim.topology.slices import SliceView

AXES = "xyz"


def slice_cables(view: SliceView) -> dict[str, np.ndarray]:
    """Every ICI cable inside the slice once, as parallel arrays.

    `a`, `b`: slice-local chip indices (a's '+' port to b's '-' port); `dim`: the axis;
    `link`: the fabric's forward link id; `kind`: 'copper' or 'optical'; `wrap`: the cable
    closes the ring (a is on the axis's last plane, b on its first: a torus wraparound, twisted
    or not). A size-2 torus axis has two cables between the same chips, one of them a wraparound.
    """
    if view.slice.spec.kind == "gpu":
        raise PodsimError(f"{view.fabric.generation.id} slices are switched (NVLink/InfiniBand): they have no torus cables")
    plus_peer = view.port_peer[:, :, PLUS]
    a, dim = np.nonzero(plus_peer >= 0)
    b = plus_peer[a, dim]
    link = view.port_link[a, dim, PLUS]
    shape = np.asarray(view.shape)
    wrap = view.coords[a, dim] == shape[dim] - 1
    kind = np.array([LinkKind(int(k)).name.lower() for k in view.fabric.link_kind[link]], dtype=object)
    return {"a": a, "b": b.astype(np.int64), "dim": dim, "link": link.astype(np.int64), "kind": kind, "wrap": wrap}


def chip_cubes(view: SliceView) -> np.ndarray:
    """The cube id of each of the slice's chips (-1 on pods without cubes)."""
    lay = view.fabric.layout
    if not lay.has_cubes:
        return np.full(view.n, -1, np.int64)
    return lay.cube_of_chip[view.chips].astype(np.int64)


def circuit_rows(layout: PodLayout, circuits: Iterable[Circuit]) -> list[dict]:
    """Per OCS circuit: the unit, its dimension and face-link index, and the cube face behind
    each port (port 2c is cube c's '+' face link, 2c+1 its '-' link)."""
    circuits = [tuple(c) for c in circuits]
    if not circuits:
        return []
    ocs, port_a, port_b = (np.array(v) for v in zip(*circuits, strict=True))
    cube_a, dim, sign_a, index = layout.port_owner(ocs, port_a)
    cube_b, _, sign_b, _ = layout.port_owner(ocs, port_b)
    face = "+-"
    return [{"ocs": int(ocs[i]), "dim": AXES[int(dim[i])], "face_index": int(index[i]),
             "port_a": int(port_a[i]), "cube_a": int(cube_a[i]), "face_a": face[int(sign_a[i])],
             "port_b": int(port_b[i]), "cube_b": int(cube_b[i]), "face_b": face[int(sign_b[i])]}
            for i in range(len(circuits))]
