"""Cost per useful chip-hour: what the fleet and its spine cost, over the chip-hours that did
the workload's work (compute), not waited on the network."""

from __future__ import annotations

from podsim.errors import PodsimError


def useful_fraction(step_time_s: float, compute_s: float) -> float:
    """Share of a step's chip time spent computing: compute / step time (both spines run the
    same compute, so the difference is the communication the step could not hide)."""
    if not step_time_s > 0 or compute_s < 0:
        raise PodsimError(f"useful fraction: step time {step_time_s} s must be > 0 and compute {compute_s} s >= 0")
    return min(1.0, compute_s / step_time_s)


def add_useful_cost(rows: list[dict], fleet_chips: int, busy_fraction: float, hours_per_year: float,
                    chip_usd_per_h: float | None) -> list[dict]:
    """Each year's row (with `step_time_s`, `compute_s`, `capex_usd`, `energy_usd`) gains useful
    chip-hours and the cost per useful chip-hour that year and over the life so far: spine only,
    and with the chips at `chip_usd_per_h` (None: not published, so no all-in figure)."""
    chip_h = fleet_chips * hours_per_year * busy_fraction  # chip-hours running the workload, each year
    # the chips are paid for every hour of the year, busy or not
    chips_usd = fleet_chips * hours_per_year * chip_usd_per_h if chip_usd_per_h is not None else None
    out, spent, chip_spent, useful_cum = [], 0.0, 0.0, 0.0
    for r in rows:
        frac = useful_fraction(r["step_time_s"], r["compute_s"])
        useful = chip_h * frac
        spine_usd = r["capex_usd"] + r["energy_usd"]
        spent += spine_usd
        useful_cum += useful
        chip_spent += chips_usd or 0.0
        out.append({
            **r, "useful_fraction": frac, "useful_chip_h": useful,
            "spine_usd_per_useful_chip_h": spine_usd / useful,
            "lifetime_spine_usd_per_useful_chip_h": spent / useful_cum,
            "usd_per_useful_chip_h": None if chips_usd is None else (spine_usd + chips_usd) / useful,
            "lifetime_usd_per_useful_chip_h": None if chips_usd is None else (spent + chip_spent) / useful_cum,
        })
    return out
