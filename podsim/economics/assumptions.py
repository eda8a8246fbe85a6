"""Prices and powers of the DCN's parts, each with its source: a row id of the reference sheet
(../shared/reference/hardware.md), first principles, or `assumption` where the sheet has no
figure (a scenario can replace any of them; the report lists them all with their sources)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from podsim.errors import PodsimError


@dataclass(frozen=True)
class Assumption:
    """One figure of the spine model: value, unit, where it comes from."""

    value: float
    unit: str
    source: str
    note: str = ""

    @property
    def assumed(self) -> bool:
        """True where the reference sheet has no figure (the value is podsim's assumption)."""
        return self.source in ("assumption", "override")


# 16,500 USD (midpoint of the 15k-18k range of eps.17) for a 40-port x 200 Gbps switch.
_IB_USD_PER_PORT = 16_500 / 40
DEFAULTS: dict[str, Assumption] = {
    "eps_switch_gbps": Assumption(51_200, "Gbps", "eps.2",
                                  "one switch ASIC's capacity (Tomahawk 5): switch counts, and power per Gbps of ports = eps_switch_w / this"),
    "eps_switch_w": Assumption(3_000, "W", "apo.7", "electrical packet switch, 'industry typical' (secondary); taken as a full eps_switch_gbps switch"),
    "eps_usd_per_gbps": Assumption(_IB_USD_PER_PORT / 200, "USD/Gbps", "eps.17",
                                   "derived: 16,500 USD / (40 ports x 200 Gbps), a 2022 IB HDR switch"),
    "ocs_ports": Assumption(136, "ports", "ocs.4", "Palomar 136x136"),
    "ocs_usable_ports": Assumption(128, "ports", "ocs.4", "128 usable + 8 spares"),
    "ocs_w": Assumption(108, "W", "apo.7", "Palomar OCS (secondary)"),
    "ocs_usd_per_port": Assumption(_IB_USD_PER_PORT, "USD/port", "ib.4",
                                   "'no more expensive per port than an IB switch' (ib.4) at eps.17's price: an upper bound"),
    "transceiver_usd_per_gbps": Assumption(1.0, "USD/Gbps", "assumption",
                                           "not in the reference sheet; a generation may give its own price"),
    "transceiver_w_per_gbps": Assumption(0.03, "W/Gbps", "assumption",
                                         "not in the reference sheet (12 W for a 400G module); a generation may give its own"),
    "fibre_usd": Assumption(100.0, "USD/strand", "assumption", "not in the reference sheet; fibre is kept across generations"),
    "usd_per_kwh": Assumption(0.08, "USD/kWh", "assumption", "not in the reference sheet"),
    "hours_per_year": Assumption(8_760, "h", "first principles", "365 x 24; every part powered all year"),
}


def assumptions(overrides: dict[str, tuple[float, str, str]] | None = None) -> dict[str, Assumption]:
    """The defaults with `overrides` (name -> (value, source, note)) applied; a one-line error
    names an unknown figure or a value that is not > 0."""
    out = dict(DEFAULTS)
    for name, (value, source, note) in (overrides or {}).items():
        if name not in out:
            raise PodsimError(f"spine.assumptions: unknown figure {name!r}; known: {', '.join(DEFAULTS)}")
        if not value > 0:
            raise PodsimError(f"spine.assumptions.{name}: {value} must be > 0")
        out[name] = replace(out[name], value=float(value), source=source or "override", note=note)
    return out


def assumption_rows(a: dict[str, Assumption]) -> dict[str, list]:
    """The assumptions as table columns (name, value, unit, source, note, assumed)."""
    return {"name": list(a), "value": [x.value for x in a.values()], "unit": [x.unit for x in a.values()],
            "source": [x.source for x in a.values()], "note": [x.note for x in a.values()],
            "assumed": [x.assumed for x in a.values()]}
