"""The data-centre network a fabric's hosts attach to: its spec (`DcnSpec`: EPS leaf-spine or
OCS direct-connect blocks, tiers, sites and WAN, ECMP), the user's choice of one (`dcn_choice`),
and the DCN's layout before it is wired: which leaf (or ToR and block) and site each host
belongs to, and the OCS-DCN circuits between blocks (podsim.topology.fabric wires them).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator

from podsim import quantities as q
from podsim.errors import PodsimError
from podsim.quantities import NoBoolNumbers
from podsim.topology.dcntiers import DcnTiers, TierPlan, parse_tiers, tier_plan
from podsim.topology.pod import PodLayout


class DcnSpec(NoBoolNumbers):
    """The data-centre network every host's NICs attach to.

    `eps`: an electrical packet-switched leaf-spine Clos; each leaf has one link to every spine,
    their total `oversubscription` times smaller than the hosts' NIC bandwidth below the leaf.
    `ocs`: Jupiter-style direct connect ([JUPITER22] jup.5): aggregation blocks (the leaves)
    joined pairwise by OCS circuits. Without `ocs_groups` the circuits split each block's
    uplink bandwidth evenly over every other block (a uniform mesh, right for all-to-all
    traffic). Topology engineering (jup.7) points circuits at the traffic instead: each group
    in `ocs_groups` (leaf ids) spends its blocks' whole uplinks on circuits among themselves,
    e.g. the blocks a multislice job spans; the other blocks keep a uniform mesh.

    `sites` > 1 splits the pods into that many data centres (consecutive pods, equal numbers),
    each with its own spines, joined pairwise by WAN links: spine k of one site to spine k of
    the other, `wan_gbps` per site pair and direction split over the spines, each hop
    `wan_latency_s`. Both WAN defaults are assumptions, not sourced figures: 1 ms is ~200 km of
    fibre at 5 us/km (first principles), 1.6 TB/s is 16 x 800GbE per site pair (port speed from
    eps.3). Sites are modelled on an EPS DCN.

    `ecmp` picks a cross-leaf flow's spine(s) on an EPS DCN: `hash` one spine per NIC pair by a
    deterministic hash (one sample of ECMP collisions: with few flows per leaf some uplinks carry
    twice their share), `split` an even split over the spines (the expected load of per-flow
    hashing over many flows, or of packet spraying; identical slices stay identical, so the DCN
    fold collapses their flows into a few classes).

    `tiers` builds the DCN in tiers (podsim.topology.dcntiers): NIC -> ToR -> aggregation block
    (the leaf) -> spine blocks, each tier's radix, port speed and oversubscription given (a
    preset, a spec or a file); hosts per leaf, spines and the leaf oversubscription then come
    from the tiers and are not given. On an OCS DCN the circuits join the blocks and a preset's
    spine tier is not used. Every uplink is its switch's ports: slices in one ToR or block share
    its uplinks, and one the job fills only partly keeps them all (other tenants are not
    modelled; jobs simulated together on one fabric share them).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    kind: Literal["eps", "ocs"] = Field("eps", description="eps: leaf-spine Clos; ocs: direct-connect blocks through OCS")
    hosts_per_leaf: q.HOSTS_PER_LEAF.type = Field(16, description="hosts under one leaf / aggregation block")
    spines: q.SPINES.type = Field(8, description="spine switches (eps only)")
    ecmp: Literal["hash", "split"] = Field("split", description="eps only: hash puts each NIC pair's flows on one spine "
                                           "(a deterministic hash, collisions included); split spreads every flow evenly over the spines")
    oversubscription: q.OVERSUBSCRIPTION.type = Field(1.0, description="host NIC bandwidth : leaf uplink bandwidth")
    switch_latency_s: q.SWITCH_LATENCY.duration = Field(500e-9, description="per switch traversal, e.g. 500ns; eps.11 suggests 300-600 ns")
    ocs_groups: tuple[tuple[int, ...], ...] = Field((), description="ocs only: leaf groups whose uplinks are engineered into circuits among themselves")
    sites: q.SITES.type = Field(1, description="data centres the pods are split over (consecutive pods), joined by WAN links")
    wan_latency_s: q.WAN_LATENCY.duration = Field(1e-3, description="one-way latency of a WAN hop between two sites, e.g. 1ms (assumption: ~200 km of fibre)")
    wan_gbps: q.WAN_GBPS.type = Field(12800.0, description="WAN capacity per site pair and direction, Gb/s (assumption: 16 x 800GbE)")
    tiers: DcnTiers | None = Field(None, description="NIC -> ToR -> aggregation block -> spine tiers (a preset name, a spec or a mapping)")

    @field_validator("tiers", mode="before")
    @classmethod
    def _tiers(cls, v, info: ValidationInfo):
        if v is None:
            return None
        v = parse_tiers(v)
        if info.data.get("kind") == "ocs" and v.spine is not None:  # the circuits replace the spine blocks (jup.5)
            v = v.model_copy(update={"spine": None})
        return v

    @model_validator(mode="after")
    def _tiered(self) -> DcnSpec:
        if self.tiers is None:
            return self
        derived = sorted({"hosts_per_leaf", "spines", "oversubscription"} & self.model_fields_set)
        if derived:
            raise ValueError(f"dcn {', '.join(derived)}: a tiered DCN takes them from its tiers ({self.tiers.describe()}); leave them out")
        return self

    def tier_plan(self, host_bytes_per_s: float, nics_per_host: int) -> TierPlan | None:
        """The tiers' plan for hosts of this bandwidth and NIC count; None when untiered."""
        return None if self.tiers is None else tier_plan(self.tiers, host_bytes_per_s, nics_per_host, self.kind)


def dcn_choice(kind: str, oversubscription: float, sites: int = 1, wan_latency_ms: float = 1.0,
               wan_gbps: float = 12800.0, ecmp: str = "split", tiers: str | None = None) -> tuple[DcnSpec, bool]:
    """The DCN a user picks (`--dcn eps|ocs|ocs-job`, `--oversubscription`, the WAN and ECMP
    options, `--dcn-tiers` a preset, spec or YAML file; the dashboard's same choices) ->
    (DcnSpec, engineer the OCS DCN for the job)."""
    if sites < 1 or wan_gbps <= 0 or wan_latency_ms < 0:
        raise PodsimError(f"--sites {sites}, --wan-gbps {wan_gbps:g}, --wan-latency-ms {wan_latency_ms:g}: give sites >= 1, Gb/s > 0, ms >= 0")
    if kind not in ("eps", "ocs", "ocs-job"):
        raise PodsimError(f"--dcn {kind!r} is not known; use eps (leaf-spine Clos), ocs (uniform OCS mesh) or ocs-job (OCS circuits engineered for the job)")
    if oversubscription < 1:
        raise PodsimError(f"--oversubscription {oversubscription}: must be >= 1 (NIC bandwidth : spine uplink bandwidth)")
    if kind != "eps" and oversubscription != 1:
        raise PodsimError("--oversubscription applies to an EPS spine (--dcn eps)")
    if tiers and oversubscription != 1:
        raise PodsimError("--oversubscription and --dcn-tiers: a tiered DCN takes each tier's oversubscription from its tiers; give one of them")
    if ecmp not in ("split", "hash"):
        raise PodsimError(f"--ecmp {ecmp!r} is not known; use split (each flow evenly over the spines) or hash (one spine per NIC pair)")
    if kind != "eps" and ecmp != "split":
        raise PodsimError("--ecmp hash applies to an EPS spine (--dcn eps)")
    fields = {"tiers": parse_tiers(tiers)} if tiers else {"oversubscription": oversubscription}
    spec = DcnSpec(kind="eps" if kind == "eps" else "ocs", sites=sites, ecmp=ecmp,
                   wan_latency_s=wan_latency_ms * 1e-3, wan_gbps=wan_gbps, **fields)
    return spec, kind == "ocs-job"


def ocs_dcn_circuits(dcn: DcnSpec, uplink_bw: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Leaf pairs joined by OCS-DCN circuits and each circuit's bandwidth per direction."""
    n = len(uplink_bw)
    group_of = np.full(n, -1)
    for g, leaves in enumerate(dcn.ocs_groups):
        for leaf in leaves:
            if not 0 <= leaf < n:
                raise PodsimError(f"dcn.ocs_groups: leaf {leaf} does not exist (0..{n - 1})")
            if group_of[leaf] >= 0:
                raise PodsimError(f"dcn.ocs_groups: leaf {leaf} is in two groups")
            group_of[leaf] = g
    # group -1 is every block outside the groups: a uniform mesh among them
    sizes = np.array([len(g) for g in dcn.ocs_groups] + [int((group_of < 0).sum())])
    peers = sizes[group_of] - 1
    ia, ib = np.triu_indices(n, 1)
    keep = (group_of[ia] == group_of[ib]) & (peers[ia] > 0)
    ia, ib = ia[keep], ib[keep]
    cap = np.minimum(uplink_bw[ia] / peers[ia], uplink_bw[ib] / peers[ib])
    return ia, ib, cap


def check_sites(layout: PodLayout, dcn: DcnSpec) -> int:
    """The number of sites; one-line errors for splits that do not work."""
    n = dcn.sites
    if n == 1:
        return 1
    if dcn.kind != "eps":
        raise PodsimError(f"dcn.sites {n}: several sites are modelled on an EPS DCN (kind eps), not {dcn.kind}")
    if layout.pods % n:
        raise PodsimError(f"dcn.sites {n} does not divide the {layout.pods} pod(s); each site holds the same number of pods")
    return n


def leaf_sites(layout: PodLayout, dcn: DcnSpec, n_leaves: int) -> tuple[np.ndarray, int]:
    """The site of every leaf (untiered), and the number of sites."""
    n = check_sites(layout, dcn)
    if n == 1:
        return np.zeros(n_leaves, np.int32), 1
    if layout.hosts_per_pod % dcn.hosts_per_leaf:
        raise PodsimError(f"dcn.hosts_per_leaf {dcn.hosts_per_leaf} does not divide the {layout.hosts_per_pod} hosts of a pod; "
                          "with several sites a leaf must not straddle two pods")
    pod_of_leaf = np.arange(n_leaves) * dcn.hosts_per_leaf // layout.hosts_per_pod
    return (pod_of_leaf // (layout.pods // n)).astype(np.int32), n


def tiered_map(layout: PodLayout, tp: TierPlan, sites: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ToR of every host, block of every ToR, site of every block) of a tiered DCN: hosts fill
    ToRs and ToRs fill blocks in order, each site starting its own (none straddles two sites)."""
    per_site = layout.n_hosts // sites
    tors_per_site = math.ceil(per_site / tp.hosts_per_tor)
    blocks_per_site = math.ceil(tors_per_site / tp.tors_per_block)
    host = np.arange(layout.n_hosts)
    tor_of_host = (host // per_site) * tors_per_site + (host % per_site) // tp.hosts_per_tor
    tor = np.arange(sites * tors_per_site)
    leaf_of_tor = (tor // tors_per_site) * blocks_per_site + (tor % tors_per_site) // tp.tors_per_block
    site_of_leaf = np.arange(sites * blocks_per_site) // blocks_per_site
    return tor_of_host.astype(np.int32), leaf_of_tor.astype(np.int32), site_of_leaf.astype(np.int32)
