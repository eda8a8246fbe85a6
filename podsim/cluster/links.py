"""ICI link failures: how links are numbered, and which parts a failed link takes out of service.

A link is named by a chip port it leaves: `link = (chip * dims + d) * 2 + s`, s = 0 for the
'+' port of dimension d and 1 for the '-' port. A copper cable has two ends, so two names (both
accepted; random draws use its '+' end); an optical link has one (the face chip's port).

What a failed link disables (podsim places only slices whose every link works; it does not
route around a broken link):
- an optical link of an OCS pod (a cube face port to its OCS port): that OCS port. The cube can
  no longer join cube-level slices and a slice with a circuit on that port is interrupted;
  sub-cube slices inside the cube do not use it and carry on.
- a copper link (inside a cube, or any link of a statically wired pod, including the fixed
  fibers between cubes of the OCS-less baseline and the wraparound links): both chips at its
  ends. The slices holding either chip are interrupted (a conservative choice: a slice holding
  only one end does not use the link) and neither chip is placed until the link is repaired.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from podsim.errors import PodsimError
from podsim.topology import PodLayout
from podsim.topology.pod import PLUS


@dataclass(frozen=True, eq=False)
class IciLinks:
    """The ICI links of a layout, by the numbering of the module docstring."""

    layout: PodLayout

    @property
    def n_ports(self) -> int:
        return self.layout.n_chips * self.layout.dims * 2

    @cached_property
    def _local(self) -> np.ndarray | None:
        """(n_chips, dims) coordinate of each chip inside its cube (OCS pods only)."""
        lay = self.layout
        if not (lay.ocs and lay.has_cubes):
            return None
        return lay.coord % np.array(lay.generation.cube_shape)

    def _is_optical(self, chip: np.ndarray, d: np.ndarray, s: np.ndarray) -> np.ndarray:
        local = self._local
        if local is None:
            return np.zeros(np.shape(chip), bool)
        edge = np.where(s == PLUS, np.array(self.layout.generation.cube_shape)[d] - 1, 0)
        return local[chip, d] == edge

    @cached_property
    def cable_ports(self) -> np.ndarray:
        """One port id per physical cable (the '+' end of copper links), ascending."""
        lay = self.layout
        ports = np.arange(self.n_ports)
        chip, rem = np.divmod(ports, 2 * lay.dims)
        d, s = np.divmod(rem, 2)
        keep = (s == PLUS) | self._is_optical(chip, d, s)
        sizes = np.array(lay.generation.pod_shape)
        keep &= sizes[d] > 1  # an axis of length 1 has no link
        return ports[keep]

    @property
    def n_cables(self) -> int:
        return len(self.cable_ports)

    def parts(self, link: int) -> dict[str, list]:
        """{'chips': [...], 'ocs_ports': [(ocs, port)]} that link `link` takes out of service."""
        lay = self.layout
        if not 0 <= link < self.n_ports:
            raise PodsimError(f"link {link} does not exist; links are chip ports 0..{self.n_ports - 1} ((chip * {lay.dims} + dim) * 2 + sign)")
        chip, rem = divmod(int(link), 2 * lay.dims)
        d, s = divmod(rem, 2)
        size = lay.generation.pod_shape[d]
        if size == 1:
            raise PodsimError(f"link {link}: dimension {d} of {lay.generation.id} has length 1 and no links")
        if self._is_optical(np.array(chip), np.array(d), np.array(s)):
            cube = int(lay.cube_of_chip[chip])
            row = lay.face_chip[cube, d, s]
            index = int(np.flatnonzero(row == chip)[0])
            ocs, port = lay.ocs_port(cube, d, s, index)
            return {"chips": [], "ocs_ports": [(int(ocs), int(port))]}
        coord = lay.coord[chip].copy()
        step = 1 if s == PLUS else -1
        if self._local is not None:  # copper inside a cube: the neighbour is in the same cube
            coord[d] += step
        else:  # static wiring: the home arrangement, wrapping at the pod edge
            coord[d] = (coord[d] + step) % size
        peer = int(lay.chip_at[(int(lay.pod_of_chip[chip]), *coord)])
        return {"chips": sorted({chip, peer}), "ocs_ports": []}

    def describe(self, link: int) -> str:
        parts = self.parts(link)
        if parts["ocs_ports"]:
            o, p = parts["ocs_ports"][0]
            return f"optical link to OCS port {o}:{p}"
        return "copper link between chips " + " and ".join(str(c) for c in parts["chips"])


def ports_of_cables(links: IciLinks, indices: np.ndarray) -> np.ndarray:
    """Map cable numbers 0..n_cables-1 (as drawn by a failure process) to link ids."""
    return links.cable_ports[np.asarray(indices, np.int64)]

