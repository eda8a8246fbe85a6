"""Switches, ports, optics and fibre of a fabric's DCN, counted from the fabric podsim builds.

The fabric (podsim.topology.build_fabric) carries the DCN as bandwidths: every NIC's link to
its leaf, and for an EPS Clos one leaf-spine link per (leaf, spine) pair. Physical parts come
from those bandwidths at a link (port) speed:

- leaf uplink bandwidth = the NIC bandwidth under the leaf / oversubscription (the fabric's
  own rule; for EPS it equals the sum of the leaf's spine links, which is checked);
- EPS: each leaf-spine link is ceil(bandwidth / link speed) ports at each end, one transceiver
  per port end and one duplex fibre (2 strands) per port pair; a spine plane is
  ceil(its ports x link speed / switch capacity) switch ASICs (eps.2, eps.3);
- OCS (Jupiter direct connect, jup.5): each leaf has ceil(uplink / link speed) ports, each one
  transceiver and one fibre strand into an OCS port (circulators: one strand carries both
  directions, ocs.3, apo.2); OCS units = ceil(ports / usable ports per OCS) (ocs.4). The OCS is
  passive: no transceiver on its side.
- leaves (both kinds): ceil((downlink + uplink bandwidth) / switch capacity) ASICs per leaf.

Electrical switches are priced and powered per port in use (`leaf_port_gbps`,
`spine_port_gbps`: a share of a full switch), an OCS per whole unit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from podsim.errors import PodsimError
from podsim.topology.fabric import Fabric

BITS = 8.0


@dataclass(frozen=True)
class SpineCounts:
    """The DCN parts of one fabric at one link speed."""

    kind: str  # eps or ocs
    link_gbps: float
    leaves: int
    leaf_switches: int
    spine_switches: int  # EPS switch ASICs in the spine planes (0 for OCS)
    ocs: int  # OCS units (0 for EPS)
    uplink_ports: int  # leaf-side DCN ports (all leaves)
    spine_ports: int  # spine-side ports (EPS) or OCS ports in use (OCS)
    transceivers: int
    fibre_strands: int
    uplink_gbps: float  # DCN bandwidth out of all leaves together, one direction
    leaf_port_gbps: float = 0.0  # leaf switch ports in use (host-facing + uplink), Gbps
    spine_port_gbps: float = 0.0  # EPS spine switch ports in use, Gbps (0 for OCS)

    @property
    def switches(self) -> int:
        return self.leaf_switches + self.spine_switches


def leaf_bandwidths_gbps(fabric: Fabric) -> tuple[np.ndarray, np.ndarray]:
    """Per leaf: (downlink, uplink) bandwidth in Gbps, one direction, from the fabric's links."""
    n_leaves = int(fabric.meta["n_leaves"])
    nic_bw = fabric.link_capacity_bytes_per_s[fabric.nic_up]
    down = np.bincount(fabric.leaf_of_nic, weights=nic_bw, minlength=n_leaves) * BITS / 1e9
    return down, down / fabric.dcn.oversubscription


def spine_counts(fabric: Fabric, link_gbps: float, eps_switch_gbps: float, ocs_usable_ports: int) -> SpineCounts:
    """Count the DCN parts of `fabric` at `link_gbps` per port (see the module docstring)."""
    if not link_gbps > 0:
        raise PodsimError(f"link speed {link_gbps} Gbps must be > 0")
    if link_gbps > eps_switch_gbps:
        raise PodsimError(f"link speed {link_gbps:g} Gbps exceeds the switch capacity {eps_switch_gbps:g} Gbps")
    kind = fabric.dcn.kind
    if fabric.tiered:
        raise PodsimError("spine economics counts a two-tier leaf-spine DCN; a tiered DCN (dcn tiers) is not counted yet: leave the tiers out")
    down, up = leaf_bandwidths_gbps(fabric)
    n_leaves = len(up)
    leaf_switches = int(sum(math.ceil((d + u) / eps_switch_gbps - 1e-9) for d, u in zip(down, up, strict=True)))
    if n_leaves < 2:  # one leaf: no DCN above it
        return SpineCounts(kind, link_gbps, n_leaves, leaf_switches, 0, 0, 0, 0, 0, 0, 0.0, float(down.sum()))
    if kind == "eps":
        cap = fabric.link_capacity_bytes_per_s[fabric.leaf_spine] * BITS / 1e9  # (leaves, spines) Gbps
        if not np.allclose(cap.sum(axis=1), up, rtol=1e-9):
            raise PodsimError("fabric: leaf-spine links do not add up to the leaves' uplink bandwidth")
        ports = np.ceil(cap / link_gbps - 1e-9).astype(np.int64)  # per (leaf, spine) link, each end
        per_plane = ports.sum(axis=0)
        spine_sw = int(sum(math.ceil(p * link_gbps / eps_switch_gbps - 1e-9) for p in per_plane))
        total = int(ports.sum())
        return SpineCounts(kind, link_gbps, n_leaves, leaf_switches, spine_sw, 0, total, total,
                           transceivers=2 * total, fibre_strands=2 * total, uplink_gbps=float(up.sum()),
                           leaf_port_gbps=float(down.sum()) + total * link_gbps, spine_port_gbps=total * link_gbps)
    ports = np.ceil(up / link_gbps - 1e-9).astype(np.int64)
    total = int(ports.sum())
    n_ocs = math.ceil(total / ocs_usable_ports) if total else 0
    return SpineCounts(kind, link_gbps, n_leaves, leaf_switches, 0, n_ocs, total, total,
                       transceivers=total, fibre_strands=total, uplink_gbps=float(up.sum()),
                       leaf_port_gbps=float(down.sum()) + total * link_gbps)
