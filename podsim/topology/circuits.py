"""OCS circuits: the type of one circuit, and the circuits that join cubes into a torus.

Below fabric.py (which builds links from circuits) and slices.py (which plans a slice's cubes),
so both, and the block splitter, import it without a circle.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence

import numpy as np

from podsim.topology.pod import MINUS, PLUS, PodLayout, _row_major
from podsim.topology.shapes import twist_vectors


class Circuit(tuple):
    """An OCS circuit `(ocs, port_a, port_b)`: port_a is a cube's '+' face port, port_b a '-'."""

    __slots__ = ()

    def __new__(cls, ocs: int, port_a: int, port_b: int):
        return super().__new__(cls, (int(ocs), int(port_a), int(port_b)))

    @classmethod
    def from_columns(cls, ocs: list[int], port_a: list[int], port_b: list[int]) -> list[Circuit]:
        """Circuits from three lists of Python ints (numpy's `tolist()`), without a call per
        circuit: a slice of 48 cubes has 2,304 of them and a scheduler plans one at every start."""
        return list(map(tuple.__new__, itertools.repeat(cls), zip(ocs, port_a, port_b, strict=True)))

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
    return Circuit.from_columns(*(c.tolist() for c in cube_circuit_columns(layout, cube_grid, cubes, twisted)))


def cube_circuit_columns(layout: PodLayout, cube_grid: Sequence[int], cubes: Sequence[int],
                         twisted: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`cube_circuits` as three arrays: OCS, '+' port, '-' port (int64)."""
    cubes = np.asarray(cubes, np.int64)
    pod, local = np.divmod(cubes, layout.cubes_per_pod)
    a, b, ocs = _circuit_template(tuple(int(g) for g in cube_grid), tuple(layout.generation.cube_shape), twisted,
                                  layout.links_per_face)
    return pod[a] * layout.ocs_per_pod + ocs, 2 * local[a] + PLUS, 2 * local[b] + MINUS


class CircuitColumns(Sequence):
    """A slice's OCS circuits kept as three int arrays (`columns`: OCS, '+' port, '-' port) and
    read as a tuple of Circuits on first use. A scheduler that only takes and gives back the
    slice's ports never makes the thousands of Circuit objects a large cube-level torus has
    (48 per cube). Equal to and added to as that tuple."""

    __slots__ = ("columns", "_tuple")

    def __init__(self, ocs: np.ndarray, port_a: np.ndarray, port_b: np.ndarray):
        self.columns = tuple(np.asarray(c, np.int64) for c in (ocs, port_a, port_b))
        for c in self.columns:
            c.setflags(write=False)
        self._tuple: tuple[Circuit, ...] | None = None

    @property
    def circuits(self) -> tuple[Circuit, ...]:
        if self._tuple is None:
            self._tuple = tuple(Circuit.from_columns(*(c.tolist() for c in self.columns)))
        return self._tuple

    def __len__(self) -> int:
        return len(self.columns[0])

    def __getitem__(self, i):
        return self.circuits[i]

    def __iter__(self):
        return iter(self.circuits)

    def __eq__(self, other) -> bool:
        return self.circuits == (other.circuits if isinstance(other, CircuitColumns) else other)

    __hash__ = None

    def __add__(self, other):
        return self.circuits + tuple(other)

    def __radd__(self, other):
        return tuple(other) + self.circuits

    def __repr__(self) -> str:
        return repr(self.circuits)

    def __reduce__(self):
        return CircuitColumns, self.columns


@functools.lru_cache(maxsize=1024)
def _circuit_template(grid: tuple[int, ...], cube_shape: tuple[int, ...], twisted: bool,
                      links: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For the circuits of a cube-level torus, in order (dimension, cube, face index): the
    positions (in the slice's cube list) of the '+' and the '-' cube, and the OCS within the pod."""
    grid_a = np.array(grid)
    cube = np.array(cube_shape)
    twist = np.array(twist_vectors(tuple(grid_a * cube))) // cube if twisted else np.zeros((3, 3), int)
    pos = _row_major(grid)
    idx = np.arange(links)
    out_a, out_b, out_ocs = [], [], []
    for d in range(3):
        nxt = pos.copy()
        nxt[:, d] += 1
        wrapped = nxt[:, d] == grid_a[d]
        nxt[wrapped, d] = 0
        nxt[wrapped] = (nxt[wrapped] + twist[d]) % grid_a
        a = np.ravel_multi_index(tuple(pos.T), grid)
        b = np.ravel_multi_index(tuple(nxt.T), grid)
        out_a.append(np.repeat(a, links))
        out_b.append(np.repeat(b, links))
        out_ocs.append(np.tile(d * links + idx, len(a)))
    arrays = tuple(np.concatenate(x) for x in (out_a, out_b, out_ocs))
    for arr in arrays:
        arr.setflags(write=False)
    return arrays


def home_torus_circuits(layout: PodLayout) -> tuple[Circuit, ...]:
    """Circuits that join every pod's cubes, in their home arrangement, into one full torus."""
    gen = layout.generation
    out: list[Circuit] = []
    for pod in range(layout.pods):
        cubes = np.arange(pod * layout.cubes_per_pod, (pod + 1) * layout.cubes_per_pod)
        out.extend(cube_circuits(layout, gen.cube_grid, cubes, twisted=False))
    return tuple(out)
