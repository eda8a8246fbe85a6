"""The physical layout of one or more pods: chips, hosts, cubes and OCS ports.

Numbering (global ids, pod-major):
- OCS generations: chip = pod * chips_per_pod + cube_in_pod * 64 + local row-major index, so a
  cube's chips are contiguous; hosts likewise cube by cube.
- Static pods: chip = pod * chips_per_pod + row-major index of its coordinate.
- OCS units ([ISCA23] §2.2): one per (dimension, face-link index), so the '+' and '-' links of
  the same dimension and index meet on the same OCS; cube c of a pod uses port 2c for its '+'
  face link and 2c + 1 for its '-' face link. Ports above 2 x cubes are spares.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from podsim.errors import PodsimError
from podsim.topology.generations import Generation

PLUS, MINUS = 0, 1


def _row_major(shape: tuple[int, ...]) -> np.ndarray:
    """All coordinates of `shape` in row-major order, as an (N, len(shape)) int array."""
    return np.stack(np.unravel_index(np.arange(math.prod(shape)), shape), axis=1).astype(np.int32)


@dataclass(frozen=True, eq=False)
class PodLayout:
    """Chips, hosts, cubes and OCS ports of `pods` pods of one generation (no links)."""

    generation: Generation
    pods: int = 1
    ocs: bool = True

    def __post_init__(self):
        if self.pods < 1:
            raise PodsimError(f"pods must be >= 1, got {self.pods}")
        if not self.generation.has_ocs:
            object.__setattr__(self, "ocs", False)

    # Sizes --------------------------------------------------------------------------------
    @property
    def dims(self) -> int:
        return self.generation.dims

    @property
    def chips_per_pod(self) -> int:
        return self.generation.pod_chips

    @property
    def n_chips(self) -> int:
        return self.pods * self.chips_per_pod

    @property
    def chips_per_host(self) -> int:
        return int(self.generation.chips_per_host.value)

    @property
    def hosts_per_pod(self) -> int:
        return self.chips_per_pod // self.chips_per_host

    @property
    def n_hosts(self) -> int:
        return self.pods * self.hosts_per_pod

    @property
    def has_cubes(self) -> bool:
        return self.generation.cube_shape is not None

    @cached_property
    def cubes_per_pod(self) -> int:
        return math.prod(self.generation.cube_grid) if self.has_cubes else 0

    @property
    def n_cubes(self) -> int:
        return self.pods * self.cubes_per_pod

    @property
    def links_per_face(self) -> int:
        return int(self.generation.ocs.links_per_face.value) if self.generation.ocs else 0

    @property
    def ocs_per_pod(self) -> int:
        return self.dims * self.links_per_face if self.ocs else 0

    @property
    def n_ocs(self) -> int:
        return self.pods * self.ocs_per_pod

    @property
    def ports_per_ocs(self) -> int:
        return int(self.generation.ocs.ports.value) if self.ocs else 0

    # Chip and host arrays -----------------------------------------------------------------
    @cached_property
    def _chip_tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(coord, host_of_chip, cube_of_chip) for the chips of one pod, in chip-id order."""
        gen = self.generation
        if self.has_cubes:
            cube = gen.cube_shape
            grid = _row_major(gen.cube_grid)  # cube positions in the home arrangement
            local = _row_major(cube)
            coord = (grid[:, None, :] * np.array(cube) + local[None, :, :]).reshape(-1, self.dims)
            host_grid = tuple(c // h for c, h in zip(cube, gen.host_shape, strict=True))
            host_local = np.ravel_multi_index(tuple((local // np.array(gen.host_shape)).T), host_grid)
            hosts_per_cube = math.prod(host_grid)
            cube_of_chip = np.repeat(np.arange(len(grid)), len(local))
            host_of_chip = (cube_of_chip * hosts_per_cube + np.tile(host_local, len(grid))).astype(np.int32)
            return coord.astype(np.int32), host_of_chip, cube_of_chip.astype(np.int32)
        coord = _row_major(gen.pod_shape)
        host_grid = tuple(p // h for p, h in zip(gen.pod_shape, gen.host_shape, strict=True))
        host_of_chip = np.ravel_multi_index(tuple((coord // np.array(gen.host_shape)).T), host_grid).astype(np.int32)
        return coord, host_of_chip, np.full(len(coord), -1, np.int32)

    @cached_property
    def coord(self) -> np.ndarray:
        """(n_chips, dims) coordinate of each chip within its pod's home arrangement."""
        return np.tile(self._chip_tables[0], (self.pods, 1))

    @cached_property
    def pod_of_chip(self) -> np.ndarray:
        return np.repeat(np.arange(self.pods, dtype=np.int32), self.chips_per_pod)

    @cached_property
    def host_of_chip(self) -> np.ndarray:
        return (self.pod_of_chip * self.hosts_per_pod + np.tile(self._chip_tables[1], self.pods)).astype(np.int32)

    @cached_property
    def cube_of_chip(self) -> np.ndarray:
        if not self.has_cubes:
            return np.full(self.n_chips, -1, np.int32)
        return (self.pod_of_chip * self.cubes_per_pod + np.tile(self._chip_tables[2], self.pods)).astype(np.int32)

    @cached_property
    def chip_at(self) -> np.ndarray:
        """(pods, *pod_shape) array: the chip id at each home coordinate."""
        out = np.empty((self.pods, *self.generation.pod_shape), np.int32)
        idx = (self.pod_of_chip, *self.coord.T)
        out[idx] = np.arange(self.n_chips, dtype=np.int32)
        return out

    @cached_property
    def chips_of_host(self) -> np.ndarray:
        """(n_hosts, chips_per_host) chip ids, ascending."""
        order = np.argsort(self.host_of_chip, kind="stable")
        return order.reshape(self.n_hosts, self.chips_per_host).astype(np.int32)

    @cached_property
    def cube_of_host(self) -> np.ndarray:
        return self.cube_of_chip[self.chips_of_host[:, 0]]

    # Cubes and OCS ------------------------------------------------------------------------
    @cached_property
    def cube_chips(self) -> np.ndarray:
        """(n_cubes, 64) chip ids of each cube in local row-major order."""
        if not self.has_cubes:
            return np.empty((0, 0), np.int32)
        return np.arange(self.n_chips, dtype=np.int32).reshape(self.n_cubes, -1)

    @cached_property
    def cube_grid_pos(self) -> np.ndarray:
        """(n_cubes, dims) position of each cube in its pod's home arrangement."""
        if not self.has_cubes:
            return np.empty((0, self.dims), np.int32)
        return np.tile(_row_major(self.generation.cube_grid), (self.pods, 1))

    @cached_property
    def pod_of_cube(self) -> np.ndarray:
        return np.repeat(np.arange(self.pods, dtype=np.int32), self.cubes_per_pod)

    @cached_property
    def hosts_of_cube(self) -> np.ndarray:
        """(n_cubes, hosts_per_cube) host ids."""
        if not self.has_cubes:
            return np.empty((0, 0), np.int32)
        return np.arange(self.n_hosts, dtype=np.int32).reshape(self.n_cubes, -1)

    @cached_property
    def face_chip(self) -> np.ndarray:
        """(n_cubes, dims, 2, links_per_face): the chip behind each optical face link.

        Sign 0 is the '+' face (local coordinate cube-1), sign 1 the '-' face (0); the face
        index is the row-major index of the two other local coordinates.
        """
        cube = self.generation.cube_shape
        assert cube is not None and self.dims == 3
        local = _row_major(cube)
        out = np.empty((self.n_cubes, 3, 2, cube[0] * cube[1]), np.int32)
        for d in range(3):
            others = [o for o in range(3) if o != d]
            for sign, edge in ((PLUS, cube[d] - 1), (MINUS, 0)):
                sel = np.flatnonzero(local[:, d] == edge)
                index = np.ravel_multi_index(tuple(local[sel][:, others].T), tuple(cube[o] for o in others))
                out[:, d, sign, index] = self.cube_chips[:, sel]
        return out

    def ocs_port(self, cube: int | np.ndarray, dim: int | np.ndarray, sign: int | np.ndarray, index: int | np.ndarray):
        """(ocs id, port) of a cube's face link; vectorised over numpy arrays."""
        pod = np.asarray(cube) // self.cubes_per_pod
        local = np.asarray(cube) % self.cubes_per_pod
        ocs = pod * self.ocs_per_pod + np.asarray(dim) * self.links_per_face + np.asarray(index)
        return np.broadcast_arrays(ocs, 2 * local + np.asarray(sign))

    def port_owner(self, ocs: int | np.ndarray, port: int | np.ndarray):
        """(cube, dim, sign, index) behind an OCS port; cube -1 for a spare port."""
        ocs, port = np.asarray(ocs), np.asarray(port)
        pod, rem = np.divmod(ocs, self.ocs_per_pod)
        dim, index = np.divmod(rem, self.links_per_face)
        local, sign = np.divmod(port, 2)
        cube = np.where(local < self.cubes_per_pod, pod * self.cubes_per_pod + local, -1)
        return cube, dim, sign, index

    def check_ocs_port(self, ocs: int, port: int) -> None:
        if not (0 <= ocs < self.n_ocs):
            raise PodsimError(f"OCS {ocs} does not exist; this fabric has OCS 0..{self.n_ocs - 1}")
        if not (0 <= port < self.ports_per_ocs):
            raise PodsimError(f"port {port} does not exist on OCS {ocs}; ports are 0..{self.ports_per_ocs - 1}")
