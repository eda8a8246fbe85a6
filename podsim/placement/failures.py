"""The failures file: which hosts, cubes, OCS units, OCS ports (and chips) are broken.

Ids are those `podsim topology GEN --json --detail` lists: hosts and cubes by number, OCS
units by number, OCS ports as "OCS:PORT" strings (port 2c is cube c's '+' face link, 2c+1
its '-' link), single chips by chip id. Every field is optional. Example::

    hosts: [17, 300]
    cubes: [5]
    ocs: []
    ocs_ports: ["12:6", "40:7"]
    chips: [1234]
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, ValidationError, field_validator

from podsim.errors import PodsimError, first_error
from podsim.files import read_structured
from podsim.quantities import NoBoolNumbers
from podsim.topology import PodLayout


class Failures(NoBoolNumbers):
    """Failed parts of a pod by id. Empty lists mean healthy."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    hosts: tuple[int, ...] = Field((), description="failed host ids (a host's chips become unusable)")
    cubes: tuple[int, ...] = Field((), description="failed cube ids (every chip of the cube unusable)")
    ocs: tuple[int, ...] = Field((), description="OCS units that are down")
    ocs_ports: tuple[tuple[int, int], ...] = Field((), description='failed OCS ports as "OCS:PORT"')
    chips: tuple[int, ...] = Field((), description="single failed chips (most failures take the whole host, av.1)")

    @field_validator("ocs_ports", mode="before")
    @classmethod
    def _ports(cls, v: Any) -> Any:
        if v is None:
            return ()
        out = []
        for item in v:
            if isinstance(item, str):
                m = re.fullmatch(r"\s*(\d+)\s*:\s*(\d+)\s*", item)
                if not m:
                    raise ValueError(f'OCS port {item!r} is not of the form "OCS:PORT", e.g. "12:6"')
                out.append((int(m.group(1)), int(m.group(2))))
            else:
                out.append(item)
        return out

    @field_validator("hosts", "cubes", "ocs", "chips", mode="before")
    @classmethod
    def _none_is_empty(cls, v: Any) -> Any:
        return () if v is None else v

    def check(self, layout: PodLayout) -> None:
        """One-line error for an id this pod does not have."""
        def bad(what: str, ids, n: int, hint: str) -> None:
            for i in ids:
                if not 0 <= i < n:
                    raise PodsimError(f"failures field '{what}': id {i} does not exist; {hint}")
        bad("chips", self.chips, layout.n_chips, f"chips are 0..{layout.n_chips - 1}")
        bad("hosts", self.hosts, layout.n_hosts, f"hosts are 0..{layout.n_hosts - 1}")
        if self.cubes and not layout.has_cubes:
            raise PodsimError(f"failures field 'cubes': {layout.generation.id} has no cubes")
        bad("cubes", self.cubes, layout.n_cubes, f"cubes are 0..{layout.n_cubes - 1}")
        if (self.ocs or self.ocs_ports) and not layout.ocs:
            raise PodsimError(f"failures fields 'ocs'/'ocs_ports': this {layout.generation.id} pod has no OCS")
        bad("ocs", self.ocs, layout.n_ocs, f"OCS units are 0..{layout.n_ocs - 1}")
        for o, p in self.ocs_ports:
            if not (0 <= o < layout.n_ocs and 0 <= p < layout.ports_per_ocs):
                raise PodsimError(f"failures field 'ocs_ports': port \"{o}:{p}\" does not exist; "
                                  f"OCS 0..{layout.n_ocs - 1}, ports 0..{layout.ports_per_ocs - 1}")


def parse_failures(raw: Any, layout: PodLayout, source: str = "failures") -> Failures:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise PodsimError(f"{source}: expected a YAML mapping with hosts, cubes, ocs, ocs_ports, chips")
    try:
        failures = Failures.model_validate(raw)
    except ValidationError as exc:
        fld, msg = first_error(exc)
        if msg == "unknown field":
            msg = "unknown field (allowed: hosts, cubes, ocs, ocs_ports, chips)"
        raise PodsimError(f"failures field '{fld}': {msg}") from None
    failures.check(layout)
    return failures


def load_failures(path: str | Path, layout: PodLayout) -> Failures:
    """Read and check a failures file against the pod's ids."""
    return parse_failures(read_structured(path, "failures"), layout, source=str(path))
