"""OCS circuits: the type of one circuit, and the circuits that join cubes into a torus.

Below fabric.py (which builds links from circuits) and slices.py (which plans a slice's cubes),
so both, and the block splitter, import it without a circle.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from podsim.topology.pod import MINUS, PLUS, PodLayout, _row_major
from podsim.topology.shapes import twist_vectors


class Circuit(tuple):
    """An OCS circuit `(ocs, port_a, port_b)`: port_a is a cube's '+' face port, port_b a '-'."""

    __slots__ = ()

    def __new__(cls, ocs: int, port_a: int, port_b: int):
        return super().__new__(cls, (int(ocs), int(port_a), int(port_b)))

    @property
    def ocs(self) -> int:
        return self[0]

    @property
    def port_a(self) -> int:
        return self[1]

    @property
    def port_b(self) -> int:
        return self[2]


def cube_circuits(layout: PodLayout, cube_grid: Sequence[int], cubes: Sequence[int], twisted: bool) -> list[Circuit]:
    """OCS circuits joining `cubes` (row-major over `cube_grid`) into a torus.

    For each cube and dimension, every '+' face link goes to the '-' face link with the same
    index of the next cube along that dimension (itself when the slice is one cube long), on
    the OCS of that dimension and index. In a twisted torus the wraparound also advances the
    other cube coordinates by the twist ([ISCA23] §2.8) - only the circuit map changes.
    """
    grid = np.array(cube_grid)
    cubes = np.asarray(cubes)
    cube_shape = np.array(layout.generation.cube_shape)
    twist = np.array(twist_vectors(tuple(grid * cube_shape))) // cube_shape if twisted else np.zeros((3, 3), int)
    pos = _row_major(tuple(grid))
    idx = np.arange(layout.links_per_face)
    out: list[Circuit] = []
    for d in range(3):
        nxt = pos.copy()
        nxt[:, d] += 1
        wrapped = nxt[:, d] == grid[d]
        nxt[wrapped, d] = 0
        nxt[wrapped] = (nxt[wrapped] + twist[d]) % grid
        cube_a = cubes[np.ravel_multi_index(tuple(pos.T), tuple(grid))]
        cube_b = cubes[np.ravel_multi_index(tuple(nxt.T), tuple(grid))]
        ocs, port_a = layout.ocs_port(cube_a[:, None], d, PLUS, idx[None, :])
        _, port_b = layout.ocs_port(cube_b[:, None], d, MINUS, idx[None, :])
        out.extend(map(Circuit, ocs.ravel().tolist(), port_a.ravel().tolist(), port_b.ravel().tolist()))
    return out


def home_torus_circuits(layout: PodLayout) -> tuple[Circuit, ...]:
    """Circuits that join every pod's cubes, in their home arrangement, into one full torus."""
    gen = layout.generation
    out: list[Circuit] = []
    for pod in range(layout.pods):
        cubes = np.arange(pod * layout.cubes_per_pod, (pod + 1) * layout.cubes_per_pod)
        out.extend(cube_circuits(layout, gen.cube_grid, cubes, twisted=False))
    return tuple(out)
