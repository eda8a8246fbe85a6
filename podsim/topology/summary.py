"""Topology summaries of a pod or a slice: the library call behind `podsim topology`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from podsim.topology.dcn import DcnSpec
from podsim.topology.fabric import Fabric, LinkKind, NodeKind, build_fabric
from podsim.topology.generations import Generation, get_generation
from podsim.topology.metrics import slice_figures
from podsim.topology.pod import PodLayout
from podsim.topology.shapes import SliceSpec, format_shape, validate_shape
from podsim.topology.slices import Slice, SliceView, plan_slice, slice_view
from podsim.units import format_bytes, format_rate


def pod_spec(gen: Generation) -> SliceSpec:
    """The whole pod seen as one slice (a full torus; not necessarily a schedulable slice)."""
    if gen.slice_rule == "gpu_nodes":
        return SliceSpec(gen.id, gen.pod_shape, False, "gpu", (False,))
    kind = "cubes" if gen.cube_shape else "rectangle"
    return SliceSpec(gen.id, gen.pod_shape, False, kind, (True,) * gen.dims)


@dataclass(frozen=True, eq=False)
class Built:
    """A fabric with one slice placed on it: what summaries, the engine and tests start from."""

    fabric: Fabric
    slice: Slice
    view: SliceView


def build_slice(gen_id: str | Generation, shape: str | tuple[int, ...] | None = None, twisted: bool = False,
                ocs: bool = True, dcn: DcnSpec | None = None, pods: int = 1) -> Built:
    """A slice wired on a fabric of its own: `shape` validated (None: the whole pod), placed on
    the first cubes (or at the origin) of pod 0, its OCS circuits set.

    Parameters
    ----------
    gen_id : str or Generation
        The chip generation.
    shape : str or tuple of int, optional
        The slice shape, e.g. '4x4x8'; None: the whole pod.
    twisted : bool
        A twisted torus (k x k x 2k or k x 2k x 2k shapes of an OCS pod).
    ocs : bool
        OCS wiring; False: the cubes' fixed home arrangement.
    dcn : DcnSpec, optional
        The data-centre network the hosts attach to (default: an EPS leaf-spine Clos).
    pods : int
        Pods on the fabric.

    Returns
    -------
    Built
        `fabric` (compiled link arrays, networkx view), `slice` (its chips and circuits) and
        `view` (the slice's axes over the fabric) - what the engine runs on.

    Examples
    --------
    >>> from podsim import build_slice
    >>> built = build_slice("tpu-v4", "4x4x8", twisted=True)
    >>> built.slice.spec.chips, built.slice.spec.topology
    (128, 'twisted torus')
    """
    gen = get_generation(gen_id)
    spec = pod_spec(gen) if shape is None else validate_shape(gen, shape, twisted, ocs)
    layout = PodLayout(gen, pods=pods, ocs=ocs)
    slc = plan_slice(layout, spec)
    circuits = slc.circuits if layout.ocs else None
    fabric = build_fabric(layout, circuits=circuits, dcn=dcn)
    return Built(fabric, slc, slice_view(fabric, slc))


def topology_summary(gen_id: str | Generation, shape: str | None = None, twisted: bool = False, ocs: bool = True,
                     dcn: DcnSpec | None = None) -> dict:
    """One flat dict describing a pod (shape None) or a slice, in base units."""
    built = build_slice(gen_id, shape, twisted, ocs, dcn)
    gen = built.fabric.generation
    spec = built.slice.spec
    lay = built.fabric.layout
    out = {
        "generation": gen.id,
        "name": gen.name,
        "scope": "pod" if shape is None else "slice",
        "shape": format_shape(spec.shape),
        "topology": spec.topology,
        "twisted": spec.twisted,
        "wraparound": list(spec.wrap),
        "ocs_wiring": lay.ocs,
    }
    out.update(slice_figures(built.view))
    if shape is None:
        out["cubes"] = lay.n_cubes
        out["ocs"] = lay.n_ocs
        out["hosts"] = lay.n_hosts
    out["ocs_ports_per_unit"] = lay.ports_per_ocs
    out["dcn"] = {"kind": built.fabric.dcn.kind, "leaves": built.fabric.meta["n_leaves"],
                  "spines": built.fabric.meta["n_spines"], "oversubscription": built.fabric.dcn.oversubscription,
                  "bytes_per_s_per_host": gen.dcn_bandwidth_per_host.si}
    return out


def topology_detail(gen_id: str, ocs: bool = True) -> dict:
    """Ids of every host, cube, OCS unit and OCS port of one pod, for failure files."""
    gen = get_generation(gen_id)
    lay = PodLayout(gen, ocs=ocs)
    hosts = [{"id": int(h), "cube": int(lay.cube_of_host[h]), "chips": [int(c) for c in lay.chips_of_host[h]]}
             for h in range(lay.n_hosts)]
    cubes = [{"id": int(k), "position": [int(v) for v in lay.cube_grid_pos[k]],
              "hosts": [int(h) for h in lay.hosts_of_cube[k]]} for k in range(lay.n_cubes)]
    ocs_units = []
    if lay.ocs:
        used = 2 * lay.cubes_per_pod
        for o in range(lay.n_ocs):
            dim, index = divmod(o % lay.ocs_per_pod, lay.links_per_face)
            ocs_units.append({"id": o, "dim": "xyz"[dim], "face_index": int(index), "ports": lay.ports_per_ocs,
                              "ports_cabled": used,
                              "port_ids": f"{o}:0 .. {o}:{lay.ports_per_ocs - 1} (port 2c is cube c '+', 2c+1 cube c '-')"})
    return {"generation": gen.id, "hosts": hosts, "cubes": cubes, "ocs": ocs_units,
            "chip_coords": np.asarray(lay.coord).tolist()}


def summary_rows(s: dict) -> list[tuple[str, str]]:
    """Human-readable rows of a topology summary (the CLI table, the dashboard, the demo)."""
    wrap = "".join("xyz"[i] if w else "-" for i, w in enumerate(s["wraparound"])) if len(s["wraparound"]) > 1 else ""
    rows = [
        ("shape", f"{s['shape']} ({s['topology']}{', wraparound ' + wrap if wrap else ''})"),
        ("chips / hosts / cubes", f"{s['chips']} / {s['hosts']} / {s['cubes']}"),
        ("OCS units / circuits", f"{s['ocs']} / {s['ocs_circuits']}" + (f" ({s['ocs_ports_per_unit']} ports each)" if s["ocs_ports_per_unit"] else "")),
        ("ICI cables", f"{s['ici_links']} at {format_rate(s['link_bytes_per_s'])} per direction"),
        ("bisection bandwidth", format_rate(s["bisection_bytes_per_s"])),
        ("all-reduce bandwidth", format_rate(s["allreduce_bytes_per_s"])),
        ("diameter", f"{s['diameter_hops']} hops"),
        ("peak bf16", f"{s['peak_flops_per_s'] / 1e15:.4g} PFLOP/s"),
        ("HBM", format_bytes(s["hbm_bytes"])),
        ("DCN", f"{format_rate(s['dcn_bytes_per_s'])} over {s['hosts']} hosts ({s['dcn']['kind']}, {s['dcn']['leaves']} leaves, {s['dcn']['spines']} spines)"),
    ]
    return rows


def fleet_summary(gen_id: str | Generation, pods: int, dcn: DcnSpec | None = None, ocs: bool = True) -> dict:
    """Several pods behind one data-centre network (or `dcn.sites` of them joined by WAN
    links), in base units: sizes, the DCN's leaves, spines and capacities, the WAN."""
    gen = get_generation(gen_id)
    dcn = dcn or DcnSpec()
    fab = build_fabric(PodLayout(gen, pods=pods, ocs=ocs), circuits=None, dcn=dcn)
    lay, meta = fab.layout, fab.meta
    sites = meta["n_sites"]
    cap, kind = fab.link_capacity_bytes_per_s, fab.link_kind
    up = (kind == LinkKind.DCN) & (fab.node_kind[fab.link_src] == NodeKind.LEAF)  # leaf -> spine / leaf -> leaf
    host_bw = gen.dcn_bandwidth_per_host.si
    wan_links = kind == LinkKind.WAN
    return {
        "generation": gen.id, "name": gen.name, "pods": pods, "sites": sites, "pods_per_site": pods // sites,
        "chips": lay.n_chips, "chips_per_site": lay.n_chips // sites, "hosts": lay.n_hosts,
        "dcn": {"kind": dcn.kind, "hosts_per_leaf": meta["hosts_per_leaf"], "leaves": meta["n_leaves"],
                "spines_per_site": meta["n_spines"], "tors": meta["n_tors"], "hosts_per_tor": meta["hosts_per_tor"],
                "tiers": dcn.tiers.describe() if dcn.tiers else "",
                "oversubscription": dcn.oversubscription if meta["tier_plan"] is None else meta["tier_plan"].block_oversubscription,
                "tor_oversubscription": meta["tier_plan"].tor_oversubscription if meta["tier_plan"] else None,
                "bytes_per_s_per_host": host_bw, "nic_bytes_per_s_per_site": host_bw * lay.n_hosts / sites,
                "leaf_uplink_bytes_per_s_per_site": float(cap[up].sum()) / sites,
                "tor_uplink_bytes_per_s_per_site": float(cap[fab.tor_up].sum()) / sites,
                "switch_latency_s": dcn.switch_latency_s},
        "wan": {"site_pairs": sites * (sites - 1) // 2, "latency_s": dcn.wan_latency_s if sites > 1 else 0.0,
                "bytes_per_s_per_pair": dcn.wan_gbps * 1e9 / 8 if sites > 1 else 0.0,
                "bytes_per_s_per_chip": dcn.wan_gbps * 1e9 / 8 / (lay.n_chips / sites) if sites > 1 else 0.0,
                "links": int(wan_links.sum()), "assumed": sites > 1},
    }


def fleet_rows(s: dict) -> list[tuple[str, str]]:
    """Human-readable rows of a fleet summary."""
    d, w = s["dcn"], s["wan"]
    rows = [
        ("pods / sites", f"{s['pods']} / {s['sites']} ({s['pods_per_site']} pod(s) per site)"),
        ("chips / hosts", f"{s['chips']:,} / {s['hosts']:,} ({s['chips_per_site']:,} chips per site)"),
        ("DCN", f"{d['kind']}: {d['leaves']} leaves of {d['hosts_per_leaf']} hosts"
                + (f", {d['spines_per_site']} spines per site, {d['oversubscription']:g}:1 oversubscribed" if d["kind"] == "eps" else "")
                if not d["tiers"] else
                f"{d['kind']} in tiers ({d['tiers']}): {d['tors']} ToR(s) of up to {d['hosts_per_tor']} hosts at "
                f"{d['tor_oversubscription']:.3g}:1, {d['leaves']} aggregation block(s) of up to {d['hosts_per_leaf']} hosts at "
                f"{d['oversubscription']:.3g}:1" + (f", {d['spines_per_site']} spine blocks per site" if d["kind"] == "eps" else "")),
        ("DCN per site", f"{format_rate(d['nic_bytes_per_s_per_site'])} of host NICs, "
                         + (f"{format_rate(d['tor_uplink_bytes_per_s_per_site'])} of ToR uplinks, " if d["tiers"] else "")
                         + f"{format_rate(d['leaf_uplink_bytes_per_s_per_site'])} of {'block' if d['tiers'] else 'leaf'} uplinks"),
    ]
    if s["sites"] > 1:
        rows.append(("WAN", f"{w['site_pairs']} site pair(s), {format_rate(w['bytes_per_s_per_pair'])} each way per pair, "
                            f"{w['latency_s'] * 1e3:g} ms one way (assumed defaults unless given)"))
        rows.append(("WAN per chip", f"{format_rate(w['bytes_per_s_per_chip'])} (a site's chips all crossing at once)"))
    return rows
