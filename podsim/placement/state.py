"""Mutable pod state: who holds each chip and OCS port, and which parts are broken.

`PodState` is what a scheduler keeps for the whole run and updates at every event. Each update
is numpy work proportional to the job or the failed part (no solver, no fabric build):

    state = PodState.empty("tpu-v4")
    hit = state.fail(hosts=[17])            # job ids whose slices lost a part
    state.allocate("job-1", placement)      # a SlicePlacement or a topology Slice
    state.release("job-1")
    state.repair(hosts=[17])

A chip is usable when no job holds it and neither it, its host nor its cube has failed. A cube can
join a cube-level (OCS) slice when all its chips are usable, its 96 OCS ports are healthy and
unused, and every OCS unit of its pod is up: a cube-level torus needs one circuit per
(dimension, face-link index), i.e. a port pair on every OCS of the pod ([ISCA23] §2.2, ocs.7).
A request that allows a degraded torus (`allow_degraded`) may also take a cube whose ports on
down OCS units are unusable (`cube_ocs_degraded_ok`): those circuits are left dark.

A scheduler of many pods reads one pod at a time (`pod_space`): every update keeps the free
chips, the failed chips and each cube's ports in use up to date in place (work in proportion
to the job or the part) and bumps `pod_version` of the pods it touched, so a reader can tell
which pods changed; the whole-fleet masks (`chip_free`, `cube_ocs_ok`, ...) are snapshots made
on first read after an update.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterable, Mapping

import numpy as np

from podsim.errors import PodsimError
from podsim.topology import PodLayout, get_generation
from podsim.topology.slices import Slice


class PodState:
    """Chips, hosts, cubes and OCS ports of a pod (or several), with jobs and failures: what
    placement reads and changes (`allocate`, `release`, `fail`, `repair`).

    Parameters
    ----------
    layout : PodLayout
        The pods' generation, count and wiring; `PodState.empty(gen_id, pods, ocs)` builds one.

    Examples
    --------
    >>> from podsim import PodState
    >>> state = PodState.empty("tpu-v4")
    >>> state.n_healthy_chips, state.n_busy_chips
    (4096, 0)
    """

    def __init__(self, layout: PodLayout):
        if layout.generation.slice_rule == "gpu_nodes":
            raise PodsimError(f"placement models TPU pods; {layout.generation.id} is a switched GPU cluster")
        self.layout = layout
        self.chip_job = np.full(layout.n_chips, -1, np.int32)
        self.chip_down = np.zeros(layout.n_chips, bool)  # a chip failed on its own
        self.host_failed = np.zeros(layout.n_hosts, bool)
        self.cube_failed = np.zeros(layout.n_cubes, bool)
        self.ocs_failed = np.zeros(layout.n_ocs, bool)
        self.port_failed = np.zeros((layout.n_ocs, layout.ports_per_ocs), bool)
        self.port_job = np.full((layout.n_ocs, layout.ports_per_ocs), -1, np.int32)
        self.port_remap = np.full((layout.n_ocs, layout.ports_per_ocs), -1, np.int32)  # face port -> its spare
        self._slices: dict[str, Slice] = {}
        self._ports: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # job -> its circuits' (ocs, port)
        self._index: dict[str, int] = {}  # job id -> its number in chip_job / port_job
        self._job_at: dict[int, str] = {}
        self._free_index: list[int] = []
        self._next_index = 0
        self._cache: dict[str, np.ndarray] = {}  # derived masks; cleared by every update
        self._health_cache: dict[str, np.ndarray] = {}  # masks of chip, host and cube failures; cleared by fail/repair
        self._port_cache: dict[str, np.ndarray] = {}  # masks of OCS unit and port failures (and spares); cleared when those change
        # kept up to date in place by every update (read through the snapshots and `pod_space`)
        self._failed = np.zeros(layout.n_chips, bool)  # chip_failed
        self._free = np.ones(layout.n_chips, bool)  # chip_free
        self._cube_ports_used = np.zeros(layout.n_cubes if layout.has_cubes else 0, np.int32)  # face ports held per cube
        self._n_failed = 0
        self.pod_version = np.zeros(layout.pods, np.int64)  # bumped for each pod an update touches
        self.version = 0  # bumped by every update

    @classmethod
    def empty(cls, gen_id: str, pods: int = 1, ocs: bool = True) -> PodState:
        """A healthy, idle pod of generation `gen_id` (`ocs=False`: the static baseline)."""
        return cls(PodLayout(get_generation(gen_id), pods=pods, ocs=ocs))

    def copy(self) -> PodState:
        """An independent copy (arrays copied; slices and cached read-only masks shared)."""
        out = copy.copy(self)
        for name in ("chip_job", "chip_down", "host_failed", "cube_failed", "ocs_failed", "port_failed", "port_job", "port_remap",
                     "_failed", "_free", "_cube_ports_used", "pod_version"):
            setattr(out, name, getattr(self, name).copy())
        out._slices = dict(self._slices)
        out._ports = dict(self._ports)
        out._cache = dict(self._cache)
        out._health_cache = dict(self._health_cache)
        out._port_cache = dict(self._port_cache)
        out._index = dict(self._index)
        out._job_at = dict(self._job_at)
        out._free_index = list(self._free_index)
        return out

    # Derived masks (read-only, cached until the next update; update through the methods) -------
    def _cached(self, name: str, compute, cache: dict | None = None) -> np.ndarray:
        """`compute()` once, read-only, in `cache` (default `_cache`, cleared by every update;
        `_health_cache`, `_port_cache` for masks of failures only)."""
        cache = self._cache if cache is None else cache
        arr = cache.get(name)
        if arr is None:
            arr = compute()
            arr.setflags(write=False)
            cache[name] = arr
        return arr

    @property
    def chip_failed(self) -> np.ndarray:
        """Chips down on their own or on a failed host or cube."""
        return self._cached("chip_failed", self._failed.copy, self._health_cache)

    @property
    def chip_free(self) -> np.ndarray:
        """Chips a new slice may use: unheld and healthy."""
        return self._cached("chip_free", self._free.copy)

    def _failed_of(self, chips: np.ndarray) -> np.ndarray:
        """Whether each of `chips` is down on its own or on a failed host or cube (from the part arrays)."""
        lay = self.layout
        bad = self.chip_down[chips] | self.host_failed[lay.host_of_chip[chips]]
        return bad | self.cube_failed[lay.cube_of_chip[chips]] if lay.has_cubes else bad

    def _per_cube(self, port_mask: np.ndarray) -> np.ndarray:
        """(n_cubes,) any of the cube's face ports set in an (n_ocs, ports) mask."""
        lay = self.layout
        per_pod = 2 * lay.cubes_per_pod
        by_pod = port_mask[:, :per_pod].reshape(lay.pods, lay.ocs_per_pod * lay.cubes_per_pod, 2).any(axis=2)
        return by_pod.reshape(lay.pods, lay.ocs_per_pod, lay.cubes_per_pod).any(axis=1).ravel()

    @property
    def cube_ports_healthy(self) -> np.ndarray:
        """(n_cubes,) every OCS port of the cube healthy and every OCS of its pod up, whoever
        uses them. Depends on failures only, so it survives allocate and release.

        All True on a layout without OCS (the static baseline has fixed fibers instead)."""
        def compute():
            lay = self.layout
            if not lay.ocs:
                return np.ones(lay.n_cubes, bool)
            ocs_down = self.ocs_failed.reshape(lay.pods, lay.ocs_per_pod).any(axis=1)
            return ~self._per_cube(self.face_port_failed) & np.repeat(~ocs_down, lay.cubes_per_pod)
        return self._cached("cube_ports_healthy", compute, self._port_cache)

    @property
    def cube_ocs_ok(self) -> np.ndarray:
        """(n_cubes,) every OCS port of the cube healthy and unused, every OCS of its pod up."""
        def compute():
            if not self.layout.ocs:
                return self.cube_ports_healthy.copy()
            return self.cube_ports_healthy & (self._cube_ports_used == 0)
        return self._cached("cube_ocs_ok", compute)

    @property
    def cube_ports_degraded_healthy(self) -> np.ndarray:
        """(n_cubes,) as `cube_ports_healthy`, but ports on down OCS units do not count: a slice
        that allows a degraded torus leaves those circuits dark. A pod qualifies only while each
        dimension keeps an OCS up (else its cubes would be cut apart along that dimension)."""
        def compute():
            lay = self.layout
            if not lay.ocs:
                return np.ones(lay.n_cubes, bool)
            per_dim_up = (~self.ocs_failed).reshape(lay.pods, lay.dims, lay.links_per_face).any(axis=2).all(axis=1)
            return ~self._per_cube(self.face_port_failed & ~self.ocs_failed[:, None]) & np.repeat(per_dim_up, lay.cubes_per_pod)
        return self._cached("cube_ports_degraded_healthy", compute, self._port_cache)

    @property
    def cube_ocs_degraded_ok(self) -> np.ndarray:
        """(n_cubes,) `cube_ports_degraded_healthy` and no port of the cube in use."""
        def compute():
            if not self.ocs_failed.any():  # nothing to leave dark: the strict mask (shared, read-only)
                return self.cube_ocs_ok
            return self.cube_ports_degraded_healthy & (self._cube_ports_used == 0)
        return self._cached("cube_ocs_degraded_ok", compute)

    @property
    def port_ok(self) -> np.ndarray | None:
        """(n_ocs, ports) OCS ports that are healthy on a live unit (None without OCS): the ports
        a piece of a block may put a circuit on (its own chips' face ports are free with them)."""
        if not self.layout.ocs:
            return None
        return self._cached("port_ok", lambda: ~self.face_port_failed & ~self.ocs_failed[:, None], self._port_cache)

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
        if chips.size == 0 or chips.min() < 0 or chips.max() >= lay.n_chips or _repeats(chips):
            raise PodsimError(f"job {job_id!r}: slice chips must be distinct ids in 0..{lay.n_chips - 1}")
        held = self.chip_job[chips] >= 0
        if held.any():
            c = int(chips[held][0])
            raise PodsimError(f"job {job_id!r}: chip {c} is held by job {self._job_of(self.chip_job[c])!r}")
        broken = self._failed[chips]
        if broken.any():
            c = int(chips[broken][0])
            raise PodsimError(f"job {job_id!r}: chip {c} (host {int(lay.host_of_chip[c])}) has failed or is on a failed host/cube")
        ocs, ports = self._circuit_ports(slc)
        if len(ocs):
            if not lay.ocs:
                raise PodsimError(f"job {job_id!r}: the slice has OCS circuits but this pod has no OCS")
            for arr, what in ((self.ocs_failed[ocs], "is down"), (self.face_port_failed[ocs, ports], "has failed"),
                              (self.port_job[ocs, ports] >= 0, "is in use")):
                if arr.any():
                    k = int(np.flatnonzero(arr)[0])
                    unit = f"OCS {int(ocs[k])}" if what == "is down" else f"OCS port {int(ocs[k])}:{int(ports[k])}"
                    raise PodsimError(f"job {job_id!r}: {unit} {what}")
            if _repeats(ocs * lay.ports_per_ocs + ports):
                raise PodsimError(f"job {job_id!r}: the slice's circuits use an OCS port twice")
        idx = self._free_index.pop() if self._free_index else self._take_index()
        self._index[job_id] = idx
        self._job_at[idx] = job_id
        self._slices[job_id] = slc
        self._ports[job_id] = (ocs, ports)
        self.chip_job[chips] = idx
        self._free[chips] = False
        if len(ocs):
            self.port_job[ocs, ports] = idx
            self._count_ports(ocs, ports, 1)
        self._touch(lay.pod_of_chip[chips])
        self._cache.clear()

    def release(self, job_id: str) -> Slice:
        """Free the job's chips and OCS ports; returns its slice."""
        job_id = str(job_id)
        if job_id not in self._slices:
            raise PodsimError(f"job {job_id!r} holds no slice")
        slc = self._slices.pop(job_id)
        idx = self._index.pop(job_id)
        del self._job_at[idx]
        chips = np.asarray(slc.chips)
        self.chip_job[chips] = -1
        self._free[chips] = ~self._failed[chips]
        ocs, ports = self._ports.pop(job_id)
        if len(ocs):
            self.port_job[ocs, ports] = -1
            self._count_ports(ocs, ports, -1)
        self._touch(self.layout.pod_of_chip[chips])
        self._free_index.append(idx)
        self._cache.clear()
        return slc

    def _touch(self, pods: np.ndarray) -> None:
        """Bump the version of these pods (repeats allowed) and the state's."""
        self.pod_version[pods] += 1
        self.version += 1

    def _count_ports(self, ocs: np.ndarray, ports: np.ndarray, sign: int) -> None:
        """Keep `_cube_ports_used` (face ports held, per cube) up to date for circuits taken or given back."""
        lay = self.layout
        cabled = ports < 2 * lay.cubes_per_pod
        cubes = (ocs[cabled] // lay.ocs_per_pod) * lay.cubes_per_pod + ports[cabled] // 2
        if len(cubes):
            lo = int(cubes.min())
            counts = np.bincount(cubes - lo)
            self._cube_ports_used[lo:lo + len(counts)] += sign * counts.astype(np.int32)

    # One pod at a time -------------------------------------------------------------------
    def pod_arrays(self, pod: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """The pod's (free chips, cube_ocs_ok, cube_ocs_degraded_ok, port_ok rows), current and
        read-only, in the pod's own chip, cube and OCS order (what a one-pod layout numbers 0..):
        work in proportion to the pod, not the fleet. Valid until the next update."""
        lay = self.layout
        lo, hi = pod * lay.chips_per_pod, (pod + 1) * lay.chips_per_pod
        free = self._free[lo:hi].view()
        free.setflags(write=False)
        if not lay.has_cubes:
            return free, np.ones(0, bool), np.ones(0, bool), None
        c0, c1 = pod * lay.cubes_per_pod, (pod + 1) * lay.cubes_per_pod
        unused = self._cube_ports_used[c0:c1] == 0
        ok = self.cube_ports_healthy[c0:c1] & unused
        if not lay.ocs:
            return free, ok, ok, None
        o0, o1 = pod * lay.ocs_per_pod, (pod + 1) * lay.ocs_per_pod
        degraded_ok = self.cube_ports_degraded_healthy[c0:c1] & unused if self.ocs_failed[o0:o1].any() else ok
        return free, ok, degraded_ok, self.port_ok[o0:o1]

    def pod_free_chips(self, pod: int) -> int:
        """Free healthy chips of one pod (work in proportion to the pod)."""
        lay = self.layout
        return int(np.count_nonzero(self._free[pod * lay.chips_per_pod:(pod + 1) * lay.chips_per_pod]))

    # Spare OCS ports ---------------------------------------------------------------------
    @property
    def face_port_failed(self) -> np.ndarray:
        """(n_ocs, ports) a cube face port's fiber sits on a failed port: its own, or the spare
        it was remapped to (`remap_spares`). Circuits keep the face port's number."""
        def compute():
            remapped = self.port_remap >= 0
            arr = self.port_failed.copy()
            rows = np.nonzero(remapped)[0]
            arr[remapped] = self.port_failed[rows, self.port_remap[remapped]]
            return arr
        return self._cached("face_port_failed", compute, self._port_cache)

    def physical_port(self, ocs: int, port: int) -> int:
        """The OCS port a cube face port's fiber is on now (itself unless remapped)."""
        r = int(self.port_remap[ocs, port])
        return port if r < 0 else r

    def remap_spares(self) -> list[tuple[int, int, int]]:
        """Move the fiber of every cube face port on a failed port to a healthy free spare of
        the same OCS (128 used + 8 spares on the v4 Palomar OCS, ocs.4), while spares last.
        A down OCS unit is not helped (its spares are down too). Returns (ocs, face port,
        spare) of each move. The move is kept after the repair (the fiber stays on the spare)."""
        lay = self.layout
        if not lay.ocs:
            return []
        cabled = 2 * lay.cubes_per_pod
        bad = self.face_port_failed[:, :cabled] & ~self.ocs_failed[:, None]
        moves = []
        for o in np.unique(np.nonzero(bad)[0]):
            taken = set(self.port_remap[o][self.port_remap[o] >= 0].tolist())
            spares = [q for q in range(cabled, lay.ports_per_ocs) if not self.port_failed[o, q] and q not in taken]
            for p in np.flatnonzero(bad[o]):
                if not spares or self.port_job[o, p] >= 0:
                    continue  # no spare left, or a job still holds the circuit (it is stopped first)
                q = spares.pop(0)
                self.port_remap[o, p] = q
                moves.append((int(o), int(p), int(q)))
        if moves:
            self._touch(np.array([m[0] for m in moves]) // lay.ocs_per_pod)
            self._cache.clear()
            self._health_cache.clear()
            self._port_cache.clear()
        return moves

    # Failures --------------------------------------------------------------------------------
    def fail(self, hosts: Iterable[int] = (), cubes: Iterable[int] = (), ocs: Iterable[int] = (),
             ocs_ports: Iterable[tuple[int, int]] = (), chips: Iterable[int] = ()) -> list[str]:
        """Mark parts failed; returns the ids of jobs whose slices use one of them (sorted).

        Jobs are not released: the caller decides (restart elsewhere, wait for repair)."""
        parts = self._parts(hosts, cubes, ocs, ocs_ports, chips)
        self._set_failed(parts, True)
        return self._jobs_using(parts)

    def repair(self, hosts: Iterable[int] = (), cubes: Iterable[int] = (), ocs: Iterable[int] = (),
               ocs_ports: Iterable[tuple[int, int]] = (), chips: Iterable[int] = ()) -> None:
        """Mark parts healthy again."""
        self._set_failed(self._parts(hosts, cubes, ocs, ocs_ports, chips), False)

    def apply_failures(self, failures) -> list[str]:
        """Apply a `Failures` record (from a failures file)."""
        return self.fail(failures.hosts, failures.cubes, failures.ocs, failures.ocs_ports, failures.chips)

    def jobs_using(self, hosts=(), cubes=(), ocs=(), ocs_ports=(), chips=()) -> list[str]:
        """Ids of jobs holding one of these chips, a chip of these hosts or cubes, or a circuit on
        these OCS units or ports."""
        return self._jobs_using(self._parts(hosts, cubes, ocs, ocs_ports, chips))

    def _set_failed(self, parts: dict[str, np.ndarray], value: bool) -> None:
        self.chip_down[parts["chips"]] = value
        self.host_failed[parts["hosts"]] = value
        self.cube_failed[parts["cubes"]] = value
        self.ocs_failed[parts["ocs"]] = value
        op = parts["ocs_ports"]
        self.port_failed[op[:, 0], op[:, 1]] = value
        lay = self.layout
        chips = [parts["chips"], lay.chips_of_host[parts["hosts"]].ravel()]
        if len(parts["cubes"]):
            chips.append(lay.cube_chips[parts["cubes"]].ravel())
        chips = np.unique(np.concatenate(chips).astype(np.int64))
        if len(chips):
            was = int(np.count_nonzero(self._failed[chips]))
            self._failed[chips] = self._failed_of(chips)
            self._n_failed += int(np.count_nonzero(self._failed[chips])) - was
            self._free[chips] = (self.chip_job[chips] < 0) & ~self._failed[chips]
            self._touch(lay.pod_of_chip[chips])
            self._health_cache.clear()
        if len(parts["ocs"]) or len(op):
            self._touch(np.concatenate([parts["ocs"], op[:, 0]]) // lay.ocs_per_pod)
            self._port_cache.clear()
        self._cache.clear()

    def _jobs_using(self, parts: dict[str, np.ndarray]) -> list[str]:
        lay = self.layout
        op = parts["ocs_ports"]
        if len(op) and (self.port_remap >= 0).any():  # a failed spare takes the face port moved onto it
            op = op[self.port_remap[op[:, 0], op[:, 1]] < 0]  # a moved face port's old port carries nothing
            o_r, p_r = np.nonzero(self.port_remap >= 0)
            hit = np.isin(o_r * lay.ports_per_ocs + self.port_remap[o_r, p_r], op[:, 0] * lay.ports_per_ocs + op[:, 1])
            op = np.concatenate([op, np.stack([o_r[hit], p_r[hit]], axis=1)])
        idx = np.concatenate([
            self.chip_job[parts["chips"]], self.chip_job[lay.chips_of_host[parts["hosts"]]].ravel(),
            self.chip_job[lay.cube_chips[parts["cubes"]]].ravel() if len(parts["cubes"]) else [],
            self.port_job[parts["ocs"]].ravel(), self.port_job[op[:, 0], op[:, 1]],
        ]).astype(np.int64)
        return sorted(self._job_of(i) for i in np.unique(idx) if i >= 0)

    # Figures ---------------------------------------------------------------------------------
    @property
    def n_free_chips(self) -> int:
        return int(np.count_nonzero(self._free))

    @property
    def n_busy_chips(self) -> int:
        return int((self.chip_job >= 0).sum())

    @property
    def n_healthy_chips(self) -> int:
        return self.layout.n_chips - self._n_failed

    # Internals -------------------------------------------------------------------------------
    def _take_index(self) -> int:
        self._next_index += 1
        return self._next_index - 1

    def _job_of(self, idx: int) -> str:
        return self._job_at[int(idx)]

    @staticmethod
    def _circuit_ports(slc: Slice) -> tuple[np.ndarray, np.ndarray]:
        if not slc.circuits:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        columns = getattr(slc.circuits, "columns", None)  # CircuitColumns: the arrays, no Circuit made
        if columns is not None:
            return np.concatenate([columns[0], columns[0]]), np.concatenate([columns[1], columns[2]])
        c = np.fromiter(itertools.chain.from_iterable(slc.circuits), np.int64, 3 * len(slc.circuits)).reshape(-1, 3)
        return np.concatenate([c[:, 0], c[:, 0]]), np.concatenate([c[:, 1], c[:, 2]])

    def _parts(self, hosts, cubes, ocs, ocs_ports, chips) -> dict[str, np.ndarray]:
        """The parts as id arrays; a one-line error (the failures file's, `Failures.check`) for
        an id this layout does not have. Checked in numpy: a scheduler fails and repairs a part
        at every failure event."""
        lay = self.layout
        out = {"chips": np.array([int(v) for v in chips], np.int64), "hosts": np.array([int(v) for v in hosts], np.int64),
               "cubes": np.array([int(v) for v in cubes], np.int64), "ocs": np.array([int(v) for v in ocs], np.int64),
               "ocs_ports": np.array([(int(a), int(b)) for a, b in ocs_ports], np.int64).reshape(-1, 2)}

        def inside(ids: np.ndarray, n: int) -> bool:
            return not len(ids) or (ids.min() >= 0 and ids.max() < n)

        op = out["ocs_ports"]
        ok = (inside(out["chips"], lay.n_chips) and inside(out["hosts"], lay.n_hosts)
              and (not len(out["cubes"]) or (lay.has_cubes and inside(out["cubes"], lay.n_cubes)))
              and (not (len(out["ocs"]) or len(op)) or (lay.ocs and inside(out["ocs"], lay.n_ocs)
                                                       and inside(op[:, 0], lay.n_ocs) and inside(op[:, 1], lay.ports_per_ocs))))
        if not ok:
            from podsim.placement.failures import Failures

            Failures(**{k: tuple(map(tuple, v.tolist())) if k == "ocs_ports" else tuple(v.tolist())
                        for k, v in out.items()}).check(lay)
        return out


def _repeats(ids: np.ndarray) -> bool:
    """Whether an id appears twice (a sort, cheaper than np.unique for a slice's chips or ports)."""
    s = np.sort(ids, kind="stable")
    return bool((s[1:] == s[:-1]).any())
