"""Failure events as parts of the fleet going down and coming back.

A failure event takes down parts: a host, an OCS unit, or an optical link's chips and the OCS
port its fiber is on now (perhaps a spare). Failures overlap: a part is down while any event
holding it is unrepaired, so `DownParts` counts holders and reports only the parts that change
state (newly down, or back up).
"""

from __future__ import annotations

from collections.abc import Sequence

from podsim.cluster.failures import FailureEvent
from podsim.cluster.links import IciLinks
from podsim.errors import PodsimError
from podsim.placement import PodState
from podsim.topology import PodLayout

Part = tuple[str, object]  # (PodState.fail/repair keyword, id)


def check_failures(failures: Sequence[FailureEvent], layout: PodLayout, links: IciLinks) -> None:
    """A one-line error for an event naming a component this fleet does not have."""
    limits = {"host": (layout.n_hosts, "hosts"), "ocs": (layout.n_ocs, "OCS units"), "link": (links.n_ports, "links")}
    for ev in failures:
        n, what = limits[ev.component]
        if ev.component == "ocs" and n == 0:
            raise PodsimError(f"failure at {ev.time_s:g} s: OCS {ev.id}, but this {layout.generation.id} fleet has no OCS")
        if not 0 <= ev.id < n:
            raise PodsimError(f"failure at {ev.time_s:g} s: {ev.component} {ev.id} does not exist; {what} are 0..{n - 1}")
        if ev.component == "link":
            links.parts(ev.id)  # a link on a length-1 axis is an error too


def event_parts(ev: FailureEvent, links: IciLinks, state: PodState) -> list[Part]:
    """The parts the event takes down, on the state as it is now."""
    if ev.component == "host":
        return [("hosts", ev.id)]
    if ev.component == "ocs":
        return [("ocs", ev.id)]
    parts = links.parts(ev.id)  # an optical link fails the port its fiber is on now (maybe a spare)
    ports = [(int(o), state.physical_port(int(o), int(p))) for o, p in parts["ocs_ports"]]
    return [("chips", c) for c in parts["chips"]] + [("ocs_ports", p) for p in ports]


class DownParts:
    """How many unrepaired events hold each part down."""

    def __init__(self):
        self._down: dict[Part, int] = {}

    def fail(self, parts: list[Part]) -> dict[str, list]:
        """Count the parts down; the ones newly down, by kind (PodState.fail's keywords)."""
        newly: dict[str, list] = {"hosts": [], "ocs": [], "ocs_ports": [], "chips": []}
        for part in parts:
            n = self._down.get(part, 0)
            self._down[part] = n + 1
            if n == 0:
                newly[part[0]].append(part[1])
        return newly

    def repair(self, parts: list[Part]) -> dict[str, list]:
        """Count one holder less; the parts back up, by kind (PodState.repair's keywords)."""
        fixed: dict[str, list] = {"hosts": [], "ocs": [], "ocs_ports": [], "chips": []}
        for part in parts:
            n = self._down[part] - 1
            self._down[part] = n
            if n == 0:
                fixed[part[0]].append(part[1])
        return fixed
