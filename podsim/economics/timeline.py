"""A DCN over a fleet's life: what is bought and what it draws each year, per spine kind.

Rules (issue 17): the leaves and an EPS spine are electrical packet switches built for one link
speed, so they are bought again (all of them) the year the link speed outgrows the speed they
were bought for; an OCS is indifferent to the data rate (apo.3, apo.8, jup.6) and is kept, only
new units bought when the fabric needs more ports. Transceivers are bought again whenever the
link speed changes; fibre is kept. Otherwise only growth is bought. Every part draws its power
all year. Electrical switches are priced (eps_usd_per_gbps) and powered (eps_switch_w over
eps_switch_gbps) per Gbps of ports in use — or at a generation's own figures, the power those of
the generation the switches were bought in — an OCS per whole unit.
"""

from __future__ import annotations

from dataclasses import dataclass

from podsim.economics.assumptions import Assumption
from podsim.economics.counts import SpineCounts
from podsim.errors import PodsimError


@dataclass(frozen=True)
class Period:
    """One year of the fleet: the link speed of new optics and their price and power."""

    year: int
    link_gbps: float
    host_gbps: float
    transceiver_usd: float
    transceiver_w: float
    eps_usd_per_gbps: float | None = None  # this generation's electrical switch ports (None: the assumption)
    eps_w_per_gbps: float | None = None


def spine_timeline(periods: list[Period], counts: list[SpineCounts], a: dict[str, Assumption]) -> list[dict]:
    """One row per year for one spine: what was bought, capex, power and energy (see module)."""
    if len(periods) != len(counts) or not periods:
        raise PodsimError(f"spine timeline: {len(periods)} periods but {len(counts)} fabrics counted")
    eps_w = None  # W per Gbps of the electrical switches owned: the generation they were bought in
    ocs_usd = a["ocs_ports"].value * a["ocs_usd_per_port"].value
    hours = a["hours_per_year"].value
    own = {"leaf": 0.0, "spine": 0.0, "ocs": 0, "tx": 0, "fibre": 0}
    switch_gbps = tx_gbps = None
    rows, cum = [], 0.0
    for p, c in zip(periods, counts, strict=True):
        first = switch_gbps is None
        rebuy = first or p.link_gbps > switch_gbps
        new_optics = tx_gbps is None or p.link_gbps != tx_gbps
        need = {"leaf": c.leaf_port_gbps, "spine": c.spine_port_gbps, "ocs": c.ocs, "tx": c.transceivers,
                "fibre": c.fibre_strands}
        again = {"leaf": rebuy, "spine": rebuy, "ocs": False, "tx": new_optics, "fibre": False}
        buy = {k: need[k] if again[k] else max(0, need[k] - own[k]) for k in need}
        own = {k: need[k] if again[k] else max(own[k], need[k]) for k in need}
        eps_usd = p.eps_usd_per_gbps or a["eps_usd_per_gbps"].value
        if rebuy:
            switch_gbps = p.link_gbps
            eps_w = p.eps_w_per_gbps or a["eps_switch_w"].value / a["eps_switch_gbps"].value
        tx_gbps = p.link_gbps
        capex = {
            "leaf": buy["leaf"] * eps_usd,
            "spine": buy["spine"] * eps_usd + buy["ocs"] * ocs_usd,
            "optics": buy["tx"] * p.transceiver_usd,
            "fibre": buy["fibre"] * a["fibre_usd"].value,
        }
        power = {
            "leaf": own["leaf"] * eps_w,
            "spine": own["spine"] * eps_w + own["ocs"] * a["ocs_w"].value,
            "optics": own["tx"] * p.transceiver_w,
        }
        total_capex = sum(capex.values())
        energy_kwh = sum(power.values()) * hours / 1000.0
        cum += total_capex + energy_kwh * a["usd_per_kwh"].value
        rows.append({
            "year": p.year, "spine": c.kind, "link_gbps": p.link_gbps, "host_gbps": p.host_gbps,
            "spine_rebought": bool(rebuy and not first and c.spine_port_gbps > 0),
            "leaf_switches": c.leaf_switches, "spine_switches": c.spine_switches, "ocs": own["ocs"],
            "uplink_ports": c.uplink_ports, "transceivers": own["tx"], "fibre_strands": own["fibre"],
            "capex_leaf_usd": capex["leaf"], "capex_spine_usd": capex["spine"], "capex_optics_usd": capex["optics"],
            "capex_fibre_usd": capex["fibre"], "capex_usd": total_capex,
            "power_leaf_w": power["leaf"], "power_spine_w": power["spine"], "power_optics_w": power["optics"],
            "power_w": sum(power.values()), "energy_kwh": energy_kwh,
            "energy_usd": energy_kwh * a["usd_per_kwh"].value, "cumulative_usd": cum,
            "uplink_bytes_per_s": c.uplink_gbps * 1e9 / 8,
        })
    return rows
