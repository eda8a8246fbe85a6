"""A wired fabric: pods + their ICI links (copper, OCS circuits) + the DCN, as compiled arrays.

Two views of one fabric (DESIGN.md): numpy arrays for the engine — every link is directed and
has a capacity in bytes/s per direction and a latency in seconds — and a networkx MultiGraph
(`to_networkx`) for people and checks, with one edge per cable, so a size-2 torus axis keeps
its two cables.

Node ids: chips first (0..n_chips-1), then NVSwitches (GPU nodes), NICs, DCN leaves, spines.
The DCN's spec, and which leaf and site each host belongs to, are podsim.topology.dcn's.
"""

from __future__ import annotations

import enum
import itertools
import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from podsim.errors import PodsimError
from podsim.topology.circuits import Circuit, home_torus_circuits
from podsim.topology.dcn import DcnSpec, check_sites, leaf_sites, ocs_dcn_circuits, tiered_map
from podsim.topology.pod import MINUS, PLUS, PodLayout

if TYPE_CHECKING:
    import networkx as nx


class NodeKind(enum.IntEnum):
    CHIP = 0
    NVSWITCH = 1
    NIC = 2
    LEAF = 3  # the switch hosts attach to (untiered DCN), or an aggregation block (tiered)
    SPINE = 4
    TOR = 5  # a top-of-rack switch between NICs and their aggregation block (tiered DCN)


class LinkKind(enum.IntEnum):
    COPPER = 0  # ICI inside a cube / a static pod
    OPTICAL = 1  # ICI through an OCS circuit (or a fixed fiber between cubes)
    NVLINK = 2  # GPU to its node's NVSwitch
    PCIE = 3  # chip to its host NIC
    NIC = 4  # NIC to DCN leaf (or to its ToR on a tiered DCN)
    DCN = 5  # leaf to spine, or leaf to leaf through the OCS DCN
    WAN = 6  # spine of one site to the same-numbered spine of another site
    TOR = 7  # ToR to its aggregation block (tiered DCN)

@dataclass(frozen=True, eq=False)
class Fabric:
    """Compiled arrays of one wired fabric. Build with `build_fabric`."""

    layout: PodLayout
    dcn: DcnSpec
    circuits: tuple[Circuit, ...]
    node_kind: np.ndarray
    link_src: np.ndarray
    link_dst: np.ndarray
    link_capacity_bytes_per_s: np.ndarray
    link_latency_s: np.ndarray
    link_kind: np.ndarray
    port_link: np.ndarray  # (n_chips, dims, 2): outgoing ICI link of each chip port, -1 if none
    port_peer: np.ndarray  # (n_chips, dims, 2): chip at the other end, -1 if none
    nic_of_chip: np.ndarray  # NIC node each chip uses for DCN traffic
    leaf_of_nic: np.ndarray  # indexed by NIC number (0..n_nics-1)
    # Lookup tables for routing (link ids, -1 where absent)
    chip_up: np.ndarray  # chip -> its NIC
    chip_down: np.ndarray  # NIC -> chip
    nic_up: np.ndarray  # NIC -> leaf (by NIC number)
    nic_down: np.ndarray
    leaf_spine: np.ndarray  # (leaves, spines) leaf -> spine
    spine_leaf: np.ndarray  # (spines, leaves)
    leaf_leaf: np.ndarray  # (leaves, leaves) direct OCS-DCN links
    nvlink_up: np.ndarray  # GPU -> NVSwitch
    nvlink_down: np.ndarray
    first_nic: int
    site_of_leaf: np.ndarray = field(default_factory=lambda: np.empty(0, np.int32))
    wan: np.ndarray = field(default_factory=lambda: np.empty((0, 0, 0), np.int32))  # (sites, sites, spines) WAN links
    # Tiered DCN: the ToR of each NIC (by NIC number) and each ToR's link up to its block and back (empty untiered)
    tor_of_nic: np.ndarray = field(default_factory=lambda: np.empty(0, np.int32))
    tor_up: np.ndarray = field(default_factory=lambda: np.empty(0, np.int32))
    tor_down: np.ndarray = field(default_factory=lambda: np.empty(0, np.int32))
    meta: dict = field(default_factory=dict)

    @property
    def generation(self):
        return self.layout.generation

    @property
    def n_nodes(self) -> int:
        return len(self.node_kind)

    @property
    def n_links(self) -> int:
        return len(self.link_src)

    @property
    def n_chips(self) -> int:
        return self.layout.n_chips

    @property
    def tiered(self) -> bool:
        """Whether the DCN has ToRs below its aggregation blocks (DcnSpec.tiers)."""
        return len(self.tor_up) > 0

    @cached_property
    def dcn_tiers(self) -> tuple[tuple[str, ...], np.ndarray]:
        """(tier names from the hosts up, the tier index of every link or -1 off the DCN): a
        link belongs to the tier of the switch it climbs into (and back down from): `leaf`
        (NIC <-> leaf, untiered) or `tor` (NIC <-> ToR) and `aggregation` (ToR <-> block),
        then `spine` (leaf <-> spine) or `ocs` (block <-> block circuits), and `wan`."""
        names = ("tor", "aggregation") if self.tiered else ("leaf",)
        names += ("ocs" if self.dcn.kind == "ocs" else "spine", "wan")
        tier = np.full(self.n_links, -1, np.int8)
        kinds = {LinkKind.NIC: names[0], LinkKind.TOR: "aggregation", LinkKind.DCN: names[-2], LinkKind.WAN: "wan"}
        for kind, name in kinds.items():
            if name in names:
                tier[self.link_kind == kind] = names.index(name)
        return names, tier

    @property
    def link_reverse(self) -> np.ndarray:
        """Every link is built next to its reverse: 2i <-> 2i+1."""
        return np.arange(self.n_links) ^ 1

    def to_networkx(self, nodes: np.ndarray | None = None) -> nx.MultiGraph:
        """MultiGraph with one edge per cable (key = its forward link id); optionally only
        the cables with both ends in `nodes`."""
        import networkx as nx  # here, not at import: it costs start-up time (bench_startup.py)

        g = nx.MultiGraph()
        keep = np.ones(self.n_nodes, bool) if nodes is None else np.isin(np.arange(self.n_nodes), nodes)
        lay = self.layout
        for n in np.flatnonzero(keep):
            attrs = {"kind": NodeKind(self.node_kind[n]).name.lower()}
            if n < lay.n_chips:
                attrs.update(coord=tuple(int(v) for v in lay.coord[n]), host=int(lay.host_of_chip[n]),
                             cube=int(lay.cube_of_chip[n]), pod=int(lay.pod_of_chip[n]))
            g.add_node(int(n), **attrs)
        fwd = np.arange(0, self.n_links, 2)
        sel = fwd[keep[self.link_src[fwd]] & keep[self.link_dst[fwd]]]
        g.add_edges_from(
            (int(self.link_src[i]), int(self.link_dst[i]), int(i),
             {"kind": LinkKind(self.link_kind[i]).name.lower(), "bytes_per_s": float(self.link_capacity_bytes_per_s[i]),
              "latency_s": float(self.link_latency_s[i]), "links": (int(i), int(i) + 1)})
            for i in sel
        )
        return g


class _LinkBuilder:
    """Collects cables; each cable becomes link 2i (a -> b) and link 2i+1 (b -> a)."""

    def __init__(self):
        self.parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]] = []
        self.n = 0

    def add(self, a, b, capacity, latency, kind: LinkKind) -> np.ndarray:
        """Add cables a[i] <-> b[i]; returns the forward link ids (reverse = forward + 1)."""
        a = np.asarray(a, np.int32).ravel()
        b = np.asarray(b, np.int32).ravel()
        cap = np.broadcast_to(np.asarray(capacity, float).ravel() if np.ndim(capacity) else capacity, a.shape)
        lat = np.broadcast_to(np.asarray(latency, float).ravel() if np.ndim(latency) else latency, a.shape)
        ids = 2 * (self.n + np.arange(len(a), dtype=np.int32))
        self.parts.append((a, b, cap, lat, int(kind)))
        self.n += len(a)
        return ids

    def arrays(self):
        src, dst, cap, lat, kind = [], [], [], [], []
        for a, b, c, lt, k in self.parts:
            src.append(np.stack([a, b], 1).ravel())
            dst.append(np.stack([b, a], 1).ravel())
            cap.append(np.repeat(c, 2))
            lat.append(np.repeat(lt, 2))
            kind.append(np.full(2 * len(a), k, np.int8))
        cat = lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.empty(0, dt)  # noqa: E731
        return cat(src, np.int32), cat(dst, np.int32), cat(cap, float), cat(lat, float), cat(kind, np.int8)


def _ici_cables_static(layout: PodLayout):
    """Every pod a full torus over its home coordinates (static pods, the no-OCS baseline), but
    for the axes the generation leaves open (`axis_wraps`: a mesh line along them)."""
    gen = layout.generation
    shape = np.array(gen.pod_shape)
    chips = np.arange(layout.n_chips)
    a_all, b_all, d_all = [], [], []
    for d in range(layout.dims):
        if shape[d] == 1:
            continue
        src = chips if gen.axis_wraps_at(d) else chips[layout.coord[:, d] < shape[d] - 1]  # an open axis: no wraparound cable
        nxt = layout.coord[src].copy()
        nxt[:, d] = (nxt[:, d] + 1) % shape[d]
        peer = layout.chip_at[(layout.pod_of_chip[src], *nxt.T)]
        a_all.append(src)
        b_all.append(peer)
        d_all.append(np.full(len(src), d))
    a, b, d = np.concatenate(a_all), np.concatenate(b_all), np.concatenate(d_all)
    optical = layout.cube_of_chip[a] != layout.cube_of_chip[b] if layout.has_cubes else np.zeros(len(a), bool)
    return a, b, d, optical


def _ici_cables_ocs(layout: PodLayout, circuits: tuple[Circuit, ...]):
    """Copper meshes inside cubes plus one optical cable per OCS circuit."""
    gen = layout.generation
    cube = gen.cube_shape
    local = layout.coord % np.array(cube)
    strides = [math.prod(cube[d + 1:]) for d in range(3)]
    chips = np.arange(layout.n_chips)
    a_all, b_all, d_all, opt_all = [], [], [], []
    for d in range(3):
        sel = chips[local[:, d] < cube[d] - 1]
        a_all.append(sel)
        b_all.append(sel + strides[d])
        d_all.append(np.full(len(sel), d))
        opt_all.append(np.zeros(len(sel), bool))
    if circuits:
        c = np.array(circuits, dtype=np.int64).reshape(-1, 3)
        for col in (1, 2):
            bad = (c[:, 0] < 0) | (c[:, 0] >= layout.n_ocs) | (c[:, col] < 0) | (c[:, col] >= layout.ports_per_ocs)
            if bad.any():
                o, p = c[bad][0, 0], c[bad][0, col]
                layout.check_ocs_port(int(o), int(p))
        used = np.concatenate([c[:, 0] * layout.ports_per_ocs + c[:, 1], c[:, 0] * layout.ports_per_ocs + c[:, 2]])
        uniq, counts = np.unique(used, return_counts=True)
        if (counts > 1).any():
            dup = int(uniq[counts > 1][0])
            raise PodsimError(f"OCS {dup // layout.ports_per_ocs} port {dup % layout.ports_per_ocs} is used by two circuits")
        cube_a, dim, sign_a, idx = layout.port_owner(c[:, 0], c[:, 1])
        cube_b, _, sign_b, _ = layout.port_owner(c[:, 0], c[:, 2])
        if (cube_a < 0).any() or (cube_b < 0).any():
            raise PodsimError("a circuit uses a spare OCS port that no cube face is cabled to")
        swap = sign_a == MINUS
        if (sign_a == sign_b).any():
            k = int(np.flatnonzero(sign_a == sign_b)[0])
            raise PodsimError(f"circuit {tuple(int(v) for v in c[k])} joins two '{'+-'[sign_a[k]]}' face ports; a circuit joins a '+' port to a '-' port")
        cube_a, cube_b = np.where(swap, cube_b, cube_a), np.where(swap, cube_a, cube_b)
        a_all.append(layout.face_chip[cube_a, dim, PLUS, idx])
        b_all.append(layout.face_chip[cube_b, dim, MINUS, idx])
        d_all.append(dim)
        opt_all.append(np.ones(len(c), bool))
    return np.concatenate(a_all), np.concatenate(b_all), np.concatenate(d_all), np.concatenate(opt_all)

def build_fabric(layout: PodLayout, circuits: tuple[Circuit, ...] | str | None = "torus", dcn: DcnSpec | None = None) -> Fabric:
    """Wire `layout` into a fabric.

    circuits: for OCS pods, the OCS circuits to set (`"torus"` joins each pod's cubes into its
    full home torus; `None` or `()` leaves every optical port dark). Ignored for static pods,
    whose wiring is fixed (a full torus over the pod, wraparound included).
    """
    gen = layout.generation
    dcn = dcn or DcnSpec()
    n_chips = layout.n_chips
    if layout.ocs:
        circ = home_torus_circuits(layout) if circuits == "torus" else tuple(Circuit(*c) for c in (circuits or ()))
    else:
        circ = ()
    lb = _LinkBuilder()
    port_link = np.full((n_chips, max(layout.dims, 1), 2), -1, np.int32)
    port_peer = np.full_like(port_link, -1)
    link_bw = gen.link_bytes_per_s
    hop = gen.hop_latency_s
    nvswitch_base = n_chips
    n_nvswitch = layout.n_hosts if gen.wraparound == "switched" else 0
    nvlink_up = nvlink_down = np.empty(0, np.int32)
    if gen.wraparound == "switched":
        fwd = lb.add(np.arange(n_chips), nvswitch_base + layout.host_of_chip, link_bw, hop, LinkKind.NVLINK)
        nvlink_up, nvlink_down = fwd, fwd + 1
    else:
        a, b, d, optical = _ici_cables_ocs(layout, circ) if layout.ocs else _ici_cables_static(layout)
        # per axis where the network's dimensions differ (gen.ici_axis_bandwidth), else one figure
        axis_bw = np.asarray(gen.ici_axis_bandwidth, float) if gen.ici_axis_bandwidth else None
        axis_lat = np.asarray(gen.ici_axis_latency, float) if gen.ici_axis_latency else None
        for kind, sel in ((LinkKind.COPPER, ~optical), (LinkKind.OPTICAL, optical)):
            if not sel.any():
                continue
            fwd = lb.add(a[sel], b[sel], link_bw if axis_bw is None else axis_bw[d[sel]],
                         hop if axis_lat is None else axis_lat[d[sel]], kind)
            if (port_link[a[sel], d[sel], PLUS] >= 0).any() or (port_link[b[sel], d[sel], MINUS] >= 0).any():
                raise PodsimError("two ICI cables on one chip port; the circuits do not form a valid wiring")
            port_link[a[sel], d[sel], PLUS] = fwd
            port_link[b[sel], d[sel], MINUS] = fwd + 1
            port_peer[a[sel], d[sel], PLUS] = b[sel]
            port_peer[b[sel], d[sel], MINUS] = a[sel]

    # DCN: chip -> NIC (PCIe), NIC -> leaf [via its ToR, tiered], leaf -> spine (eps) or leaf -> leaf (ocs).
    nics_per_host = int(gen.nics_per_host.value)
    n_nics = layout.n_hosts * nics_per_host
    first_nic = nvswitch_base + n_nvswitch
    host_bw = gen.dcn_bandwidth_per_host.require(f"{gen.id} DCN bandwidth per host")
    tp = dcn.tier_plan(host_bw, nics_per_host)
    if tp is None:
        hosts_per_leaf, n_tors = dcn.hosts_per_leaf, 0
        n_leaves = math.ceil(layout.n_hosts / hosts_per_leaf)
        site_of_leaf, n_sites = leaf_sites(layout, dcn, n_leaves)
    else:
        hosts_per_leaf, n_sites = tp.hosts_per_block, check_sites(layout, dcn)
        tor_of_host, leaf_of_tor, site_of_leaf = tiered_map(layout, tp, n_sites)
        n_tors, n_leaves = len(leaf_of_tor), len(site_of_leaf)
    first_tor = first_nic + n_nics
    first_leaf = first_tor + n_tors
    first_spine = first_leaf + n_leaves
    spines = dcn.spines if tp is None else tp.spines
    n_spines = spines if (dcn.kind == "eps" and (n_leaves > 1 or n_sites > 1)) else 0
    if tp is not None and n_spines and n_leaves // n_sites > tp.max_blocks:
        raise PodsimError(f"dcn tiers: the spine tier ({dcn.tiers.describe()}) reaches at most {tp.max_blocks} aggregation "
                          f"blocks; these {layout.pods} pod(s) need {n_leaves // n_sites} per site; give larger spine blocks or more of them")
    nic_bw = host_bw / nics_per_host
    slot = np.arange(n_chips) % layout.chips_per_host
    nic_number = layout.host_of_chip * nics_per_host + slot % nics_per_host
    fwd = lb.add(np.arange(n_chips), first_nic + nic_number, gen.pcie_bandwidth_per_chip.require("PCIe bandwidth"), 0.0, LinkKind.PCIE)
    chip_up, chip_down = fwd, fwd + 1
    host_of_nic = np.arange(n_nics) // nics_per_host
    if tp is None:
        tor_of_nic = tor_up = tor_down = np.empty(0, np.int32)
        leaf_of_nic = (host_of_nic // hosts_per_leaf).astype(np.int32)
        fwd = lb.add(first_nic + np.arange(n_nics), first_leaf + leaf_of_nic, nic_bw, dcn.switch_latency_s, LinkKind.NIC)
        hosts_on_leaf = np.bincount(host_of_nic[::nics_per_host] // hosts_per_leaf, minlength=n_leaves)
        uplink_bw = hosts_on_leaf * host_bw / dcn.oversubscription
    else:
        # Every uplink is its switch's ports: a ToR or block the job fills only partly keeps them all.
        tor_of_nic = tor_of_host[host_of_nic]
        leaf_of_nic = leaf_of_tor[tor_of_nic]
        fwd = lb.add(first_nic + np.arange(n_nics), first_tor + tor_of_nic, nic_bw, dcn.switch_latency_s, LinkKind.NIC)
        tor_fwd = lb.add(first_tor + np.arange(n_tors), first_leaf + leaf_of_tor, tp.tor_uplink_bytes_per_s,
                         dcn.switch_latency_s, LinkKind.TOR)
        tor_up, tor_down = tor_fwd, tor_fwd + 1
        uplink_bw = np.full(n_leaves, tp.block_uplink_bytes_per_s)
    nic_up, nic_down = fwd, fwd + 1
    leaf_spine = np.full((n_leaves, max(n_spines, 0)), -1, np.int32)
    spine_leaf = np.full((max(n_spines, 0), n_leaves), -1, np.int32)
    leaf_leaf = np.full((n_leaves, n_leaves), -1, np.int32) if dcn.kind == "ocs" else np.empty((0, 0), np.int32)
    wan = np.full((n_sites, n_sites, n_spines), -1, np.int32)
    if n_spines:
        # Spine k of site s is node first_spine + s * spines + k; leaves link to their site's.
        li, si = np.meshgrid(np.arange(n_leaves), np.arange(n_spines), indexing="ij")
        fwd = lb.add(first_leaf + li, first_spine + site_of_leaf[li] * n_spines + si, (uplink_bw / n_spines)[li],
                     dcn.switch_latency_s, LinkKind.DCN)
        leaf_spine[li, si] = fwd.reshape(li.shape)
        spine_leaf[si, li] = fwd.reshape(li.shape) + 1
        for a, b in itertools.combinations(range(n_sites), 2):
            k = np.arange(n_spines)
            fwd = lb.add(first_spine + a * n_spines + k, first_spine + b * n_spines + k, dcn.wan_gbps * 1e9 / 8 / n_spines,
                         dcn.wan_latency_s, LinkKind.WAN)
            wan[a, b], wan[b, a] = fwd, fwd + 1
    elif dcn.kind == "ocs" and n_leaves > 1:
        ia, ib, cap = ocs_dcn_circuits(dcn, uplink_bw)
        fwd = lb.add(first_leaf + ia, first_leaf + ib, cap, dcn.switch_latency_s, LinkKind.DCN)
        leaf_leaf[ia, ib] = fwd
        leaf_leaf[ib, ia] = fwd + 1

    node_kind = np.concatenate([
        np.full(n_chips, NodeKind.CHIP, np.int8), np.full(n_nvswitch, NodeKind.NVSWITCH, np.int8),
        np.full(n_nics, NodeKind.NIC, np.int8), np.full(n_tors, NodeKind.TOR, np.int8),
        np.full(n_leaves, NodeKind.LEAF, np.int8), np.full(n_spines * n_sites, NodeKind.SPINE, np.int8),
    ])
    src, dst, cap, lat, kind = lb.arrays()
    return Fabric(
        layout=layout, dcn=dcn, circuits=circ, node_kind=node_kind,
        link_src=src, link_dst=dst, link_capacity_bytes_per_s=cap, link_latency_s=lat, link_kind=kind,
        port_link=port_link, port_peer=port_peer, nic_of_chip=(first_nic + nic_number).astype(np.int32),
        leaf_of_nic=leaf_of_nic, chip_up=chip_up, chip_down=chip_down, nic_up=nic_up, nic_down=nic_down,
        leaf_spine=leaf_spine, spine_leaf=spine_leaf, leaf_leaf=leaf_leaf,
        nvlink_up=nvlink_up, nvlink_down=nvlink_down, first_nic=first_nic, site_of_leaf=site_of_leaf, wan=wan,
        tor_of_nic=tor_of_nic, tor_up=tor_up, tor_down=tor_down,
        meta={"n_nics": n_nics, "n_leaves": n_leaves, "n_spines": n_spines, "n_nvswitch": n_nvswitch, "n_sites": n_sites,
              "n_tors": n_tors, "hosts_per_leaf": hosts_per_leaf, "hosts_per_tor": tp.hosts_per_tor if tp else 0,
              "tier_plan": tp},
    )
