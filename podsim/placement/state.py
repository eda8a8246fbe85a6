"""Mutable pod state: who holds each chip and OCS port, and which parts are broken.

`PodState` is what a scheduler keeps for the whole run and updates at every event. Each update
is numpy work proportional to the job or the failed part (no solver, no fabric build):

    state = PodState.empty("tpu-v4")
    hit = state.fail(hosts=[17])            # job ids whose slices lost a part
    state.allocate("job-1", placement)      # a SlicePlacement or a topology Slice
    state.release("job-1")
    state.repair(hosts=[17])

A chip is usable when no job holds it and neither its host nor its cube has failed. A cube can
join a cube-level (OCS) slice when all its chips are usable, its 96 OCS ports are healthy and
unused, and every OCS unit of its pod is up: a cube-level torus needs one circuit per
(dimension, face-link index), i.e. a port pair on every OCS of the pod ([ISCA23] §2.2, ocs.7).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping

import numpy as np

from podsim.errors import PodsimError
from podsim.topology import PodLayout, Slice, get_generation


class PodState:
    """Chips, hosts, cubes and OCS ports of a pod (or several), with jobs and failures."""

    def __init__(self, layout: PodLayout):
        if layout.generation.slice_rule == "gpu_nodes":
            raise PodsimError(f"placement models TPU pods; {layout.generation.id} is a switched GPU cluster")
        self.layout = layout
        self.chip_job = np.full(layout.n_chips, -1, np.int32)
        self.host_failed = np.zeros(layout.n_hosts, bool)
        self.cube_failed = np.zeros(layout.n_cubes, bool)
        self.ocs_failed = np.zeros(layout.n_ocs, bool)
        self.port_failed = np.zeros((layout.n_ocs, layout.ports_per_ocs), bool)
        self.port_job = np.full((layout.n_ocs, layout.ports_per_ocs), -1, np.int32)
        self._slices: dict[str, Slice] = {}
        self._index: dict[str, int] = {}
        self._free_index: list[int] = []
        self._next_index = 0

    @classmethod
    def empty(cls, gen_id: str, pods: int = 1, ocs: bool = True) -> PodState:
        """A healthy, idle pod of generation `gen_id` (`ocs=False`: the static baseline)."""
        return cls(PodLayout(get_generation(gen_id), pods=pods, ocs=ocs))

    def copy(self) -> PodState:
        """An independent copy (arrays copied, slices shared: they are immutable)."""
        out = copy.copy(self)
        for name in ("chip_job", "host_failed", "cube_failed", "ocs_failed", "port_failed", "port_job"):
            setattr(out, name, getattr(self, name).copy())
        out._slices = dict(self._slices)
        out._index = dict(self._index)
        out._free_index = list(self._free_index)
        return out

    # Derived masks --------------------------------------------------------------------------
    @property
    def chip_failed(self) -> np.ndarray:
        lay = self.layout
        bad = self.host_failed[lay.host_of_chip]
        if lay.has_cubes:
            bad = bad | self.cube_failed[lay.cube_of_chip]
        return bad

    @property
    def chip_free(self) -> np.ndarray:
        """Chips a new slice may use: unheld and healthy."""
        return (self.chip_job < 0) & ~self.chip_failed

    @property
    def cube_ocs_ok(self) -> np.ndarray:
        """(n_cubes,) every OCS port of the cube healthy and unused, every OCS of its pod up.

        All True on a layout without OCS (the static baseline has fixed fibers instead)."""
        lay = self.layout
        if not lay.ocs:
            return np.ones(lay.n_cubes, bool)
        per_pod = 2 * lay.cubes_per_pod
        bad_port = (self.port_failed | (self.port_job >= 0))[:, :per_pod]
        bad_port = bad_port.reshape(lay.pods, lay.ocs_per_pod, lay.cubes_per_pod, 2).any(axis=(1, 3))
        ocs_down = self.ocs_failed.reshape(lay.pods, lay.ocs_per_pod).any(axis=1)
        return (~bad_port & ~ocs_down[:, None]).ravel()

    def ocs_down_in_pod(self, pod: int) -> list[int]:
        lay = self.layout
        base = pod * lay.ocs_per_pod
        return [int(o) for o in np.flatnonzero(self.ocs_failed[base:base + lay.ocs_per_pod]) + base]

    # Jobs ------------------------------------------------------------------------------------
    @property
    def jobs(self) -> Mapping[str, Slice]:
        """Job id -> its slice (read-only view)."""
        return dict(self._slices)

    def __contains__(self, job_id: str) -> bool:
        return str(job_id) in self._slices

    def allocate(self, job_id: str, placement) -> None:
        """Give `placement` (a SlicePlacement or a Slice) to `job_id`.

        Raises a one-line PodsimError if a chip is held or broken, or an OCS circuit uses a
        held or failed port or a failed OCS unit; the state is unchanged then.
        """
        job_id = str(job_id)
        slc: Slice | None = getattr(placement, "slice", placement)
        if not isinstance(slc, Slice):
            raise PodsimError(f"job {job_id!r}: nothing to allocate (the request was not placed)")
        if job_id in self._slices:
            raise PodsimError(f"job {job_id!r} already holds a slice; release it first")
        lay = self.layout
        chips = np.asarray(slc.chips)
        if chips.size == 0 or chips.min() < 0 or chips.max() >= lay.n_chips or len(np.unique(chips)) != chips.size:
            raise PodsimError(f"job {job_id!r}: slice chips must be distinct ids in 0..{lay.n_chips - 1}")
        held = self.chip_job[chips] >= 0
        if held.any():
            c = int(chips[held][0])
            raise PodsimError(f"job {job_id!r}: chip {c} is held by job {self._job_of(self.chip_job[c])!r}")
        broken = self.chip_failed[chips]
        if broken.any():
            c = int(chips[broken][0])
            raise PodsimError(f"job {job_id!r}: chip {c} (host {int(lay.host_of_chip[c])}) has failed")
        ocs, ports = self._circuit_ports(slc)
        if len(ocs):
            if not lay.ocs:
                raise PodsimError(f"job {job_id!r}: the slice has OCS circuits but this pod has no OCS")
            for arr, what in ((self.ocs_failed[ocs], "is down"), (self.port_failed[ocs, ports], "has failed"),
                              (self.port_job[ocs, ports] >= 0, "is in use")):
                if arr.any():
                    k = int(np.flatnonzero(arr)[0])
                    unit = f"OCS {int(ocs[k])}" if what == "is down" else f"OCS port {int(ocs[k])}:{int(ports[k])}"
                    raise PodsimError(f"job {job_id!r}: {unit} {what}")
            if len(np.unique(ocs * lay.ports_per_ocs + ports)) != len(ocs):
                raise PodsimError(f"job {job_id!r}: the slice's circuits use an OCS port twice")
        idx = self._free_index.pop() if self._free_index else self._take_index()
        self._index[job_id] = idx
        self._slices[job_id] = slc
        self.chip_job[chips] = idx
        if len(ocs):
            self.port_job[ocs, ports] = idx

    def release(self, job_id: str) -> Slice:
        """Free the job's chips and OCS ports; returns its slice."""
        job_id = str(job_id)
        if job_id not in self._slices:
            raise PodsimError(f"job {job_id!r} holds no slice")
        slc = self._slices.pop(job_id)
        idx = self._index.pop(job_id)
        self.chip_job[slc.chips] = -1
        ocs, ports = self._circuit_ports(slc)
        if len(ocs):
            self.port_job[ocs, ports] = -1
        self._free_index.append(idx)
        return slc

    # Failures --------------------------------------------------------------------------------
    def fail(self, hosts: Iterable[int] = (), cubes: Iterable[int] = (), ocs: Iterable[int] = (),
             ocs_ports: Iterable[tuple[int, int]] = ()) -> list[str]:
        """Mark parts failed; returns the ids of jobs whose slices use one of them (sorted).

        Jobs are not released: the caller decides (restart elsewhere, wait for repair)."""
        h, c, o, op = self._parts(hosts, cubes, ocs, ocs_ports)
        self.host_failed[h] = True
        self.cube_failed[c] = True
        self.ocs_failed[o] = True
        if len(op):
            self.port_failed[op[:, 0], op[:, 1]] = True
        return self.jobs_using(h, c, o, op)

    def repair(self, hosts: Iterable[int] = (), cubes: Iterable[int] = (), ocs: Iterable[int] = (),
               ocs_ports: Iterable[tuple[int, int]] = ()) -> None:
        """Mark parts healthy again."""
        h, c, o, op = self._parts(hosts, cubes, ocs, ocs_ports)
        self.host_failed[h] = False
        self.cube_failed[c] = False
        self.ocs_failed[o] = False
        if len(op):
            self.port_failed[op[:, 0], op[:, 1]] = False

    def apply_failures(self, failures) -> list[str]:
        """Apply a `Failures` record (from a failures file)."""
        return self.fail(failures.hosts, failures.cubes, failures.ocs, failures.ocs_ports)

    def jobs_using(self, hosts=(), cubes=(), ocs=(), ocs_ports=()) -> list[str]:
        """Ids of jobs holding a chip of these hosts/cubes or a circuit on these OCS units/ports."""
        lay = self.layout
        h, c, o, op = self._parts(hosts, cubes, ocs, ocs_ports)
        idx = [self.chip_job[lay.chips_of_host[h]].ravel()]
        if len(c):
            idx.append(self.chip_job[lay.cube_chips[c]].ravel())
        if len(o):
            idx.append(self.port_job[o].ravel())
        if len(op):
            idx.append(self.port_job[op[:, 0], op[:, 1]])
        ids = np.unique(np.concatenate(idx))
        return sorted(self._job_of(i) for i in ids if i >= 0)

    # Figures ---------------------------------------------------------------------------------
    @property
    def n_free_chips(self) -> int:
        return int(self.chip_free.sum())

    @property
    def n_busy_chips(self) -> int:
        return int((self.chip_job >= 0).sum())

    @property
    def n_healthy_chips(self) -> int:
        return int((~self.chip_failed).sum())

    # Internals -------------------------------------------------------------------------------
    def _take_index(self) -> int:
        self._next_index += 1
        return self._next_index - 1

    def _job_of(self, idx: int) -> str:
        for job, i in self._index.items():
            if i == idx:
                return job
        raise KeyError(idx)

    @staticmethod
    def _circuit_ports(slc: Slice) -> tuple[np.ndarray, np.ndarray]:
        if not slc.circuits:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        c = np.asarray(slc.circuits, np.int64)
        return np.concatenate([c[:, 0], c[:, 0]]), np.concatenate([c[:, 1], c[:, 2]])

    def _parts(self, hosts, cubes, ocs, ocs_ports):
        from podsim.placement.failures import Failures

        f = Failures(hosts=tuple(int(v) for v in hosts), cubes=tuple(int(v) for v in cubes),
                     ocs=tuple(int(v) for v in ocs), ocs_ports=tuple((int(a), int(b)) for a, b in ocs_ports))
        f.check(self.layout)
        op = np.asarray(f.ocs_ports, np.int64).reshape(-1, 2)
        return (np.asarray(f.hosts, np.int64), np.asarray(f.cubes, np.int64), np.asarray(f.ocs, np.int64), op)
