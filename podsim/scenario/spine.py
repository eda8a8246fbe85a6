"""A scenario's `spine` section: the EPS Clos and the OCS DCN over the fleet's life.

For each year: the link speed and host bandwidth of the generation in service; the DCN of both
kinds built by podsim.topology on the fleet's pods and its parts counted
(podsim.economics.counts); what is bought and drawn (podsim.economics.timeline); and the
scenario's step workload run on each kind at that year's host bandwidth (the step study of
podsim.scenario.run, once per distinct bandwidth), giving cost per useful chip-hour.
"""

from __future__ import annotations

from collections.abc import Callable

from podsim.economics import spine_counts, spine_timeline
from podsim.economics.assumptions import assumption_rows, assumptions
from podsim.economics.timeline import Period
from podsim.economics.useful import add_useful_cost
from podsim.errors import PodsimError
from podsim.scenario.check import check_scenario
from podsim.scenario.schema import FigureOverride, Scenario, SpineGeneration
from podsim.topology import Generation, PodLayout
from podsim.topology.fabric import build_fabric
from podsim.units import UNIT_SCALE

KINDS = ("eps", "ocs")
StepFn = Callable[[Scenario, Generation], dict]


def periods(s: Scenario, gen: Generation, a: dict) -> list[Period]:
    """One Period per year: the last generation arrived by then, defaults filled in."""
    sp = s.spine
    base_host_gbps = gen.dcn_bandwidth_per_host.require(f"{gen.id} DCN bandwidth per host") * 8 / 1e9
    first = sp.generations[0].link_gbps
    out = []
    for year in range(sp.years):
        g: SpineGeneration = [x for x in sp.generations if x.year <= year][-1]
        out.append(Period(
            year=year, link_gbps=g.link_gbps,
            host_gbps=g.host_gbps if g.host_gbps is not None else base_host_gbps * g.link_gbps / first,
            transceiver_usd=g.transceiver_usd or g.link_gbps * a["transceiver_usd_per_gbps"].value,
            transceiver_w=g.transceiver_w or g.link_gbps * a["transceiver_w_per_gbps"].value,
            eps_usd_per_gbps=g.eps_usd_per_gbps, eps_w_per_gbps=g.eps_w_per_gbps))
    return out


def at_bandwidth(s: Scenario, gen: Generation, kind: str, host_gbps: float) -> Scenario:
    """The scenario with DCN `kind` and `host_gbps` of DCN per host (a figure override)."""
    unit = gen.dcn_bandwidth_per_host.unit
    value = host_gbps * 1e9 / 8 / UNIT_SCALE[unit]
    over = FigureOverride(value=value, unit=unit, source="spine.generations", note=f"{host_gbps:g} Gbps per host")
    topo = s.topology.model_copy(update={"overrides": {**s.topology.overrides, "dcn_bandwidth_per_host": over}})
    return s.model_copy(update={"topology": topo, "spine": None,
                                "dcn": s.dcn.model_copy(update={"kind": kind, "ocs_groups": s.dcn.ocs_groups if kind == "ocs" else "none"})})


def spine_study(s: Scenario, gen: Generation, step_fn: StepFn) -> tuple[dict, dict[str, dict]]:
    """Key figures (`spine_*`) and the tables `spine_years` and `spine_assumptions`."""
    sp = s.spine
    if s.workload.step is None:
        raise PodsimError("spine: the performance side runs a step workload; give workload.step (a multislice step study)")
    a = assumptions({k: (f.value, f.source, f.note) for k, f in sp.assumptions.items()})
    per = periods(s, gen, a)
    pods = sp.pods or s.topology.pods
    ocs_wiring = s.topology.wiring == "ocs"
    counted, stepped, rows = {}, {}, []
    for kind in KINDS:
        counts, steps = [], []
        for p in per:
            key = (kind, p.host_gbps)
            if key not in stepped:
                s2 = at_bandwidth(s, gen, kind, p.host_gbps)
                gen2 = check_scenario(s2)
                dcn = s.dcn.spec().model_copy(update={"kind": kind, "ocs_groups": (), "sites": 1})
                counted[key] = build_fabric(PodLayout(gen2, pods=pods, ocs=ocs_wiring), circuits=None, dcn=dcn)
                stepped[key] = step_fn(s2, gen2)
            counts.append(spine_counts(counted[key], p.link_gbps, a["eps_switch_gbps"].value, int(a["ocs_usable_ports"].value)))
            steps.append(stepped[key])
        timeline = spine_timeline(per, counts, a)
        for r, m in zip(timeline, steps, strict=True):
            op_s = m["dcn_collective_op_s"]  # algbw: the bytes over the ops' summed durations (nccl-tests)
            r.update(step_time_s=m["step_time_s"], compute_s=m["compute_s"], exposed_comm_s=m["exposed_comm_s"],
                     dcn_collective_busy_s=m["dcn_collective_busy_s"],
                     dcn_algbw_bytes_per_s=m["dcn_collective_bytes"] / op_s if op_s > 0 else float("nan"))
        chips = pods * gen.pod_chips
        rows += add_useful_cost(timeline, chips, sp.busy_fraction, a["hours_per_year"].value, gen.price_per_chip_hour.value)
    return spine_metrics(rows), {"spine_years": _columns(rows), "spine_assumptions": assumption_rows(a)}


def _columns(rows: list[dict]) -> dict[str, list]:
    return {k: [r[k] for r in rows] for k in rows[0]}


def spine_metrics(rows: list[dict]) -> dict:
    """Lifetime key figures per spine and the OCS : EPS ratios."""
    m: dict = {}
    for kind in KINDS:
        mine = [r for r in rows if r["spine"] == kind]
        m[f"spine_{kind}_capex_usd"] = sum(r["capex_usd"] for r in mine)
        m[f"spine_{kind}_energy_kwh"] = sum(r["energy_kwh"] for r in mine)
        m[f"spine_{kind}_cost_usd"] = mine[-1]["cumulative_usd"]
        m[f"spine_{kind}_rebuys"] = sum(bool(r["spine_rebought"]) for r in mine)
        m[f"spine_{kind}_usd_per_useful_chip_h"] = mine[-1]["lifetime_usd_per_useful_chip_h"]
        m[f"spine_{kind}_spine_usd_per_useful_chip_h"] = mine[-1]["lifetime_spine_usd_per_useful_chip_h"]
        m[f"spine_{kind}_useful_chip_h"] = sum(r["useful_chip_h"] for r in mine)
    m["spine_years"] = len(rows) // len(KINDS)
    m["spine_capex_ratio"] = m["spine_ocs_capex_usd"] / m["spine_eps_capex_usd"]
    m["spine_energy_ratio"] = m["spine_ocs_energy_kwh"] / m["spine_eps_energy_kwh"]
    m["spine_year0_capex_ratio"] = rows[len(rows) // 2]["capex_usd"] / rows[0]["capex_usd"]
    m["spine_year0_power_ratio"] = rows[len(rows) // 2]["power_w"] / rows[0]["power_w"]
    return m
