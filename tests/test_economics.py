"""Spine economics (podsim.economics, issue 17): part counts against hand counts on small
fabrics, the OCS spine's power against the published per-unit figures, and the EPS spine
re-bought exactly when the link speed outgrows it."""

from __future__ import annotations

import math

import pytest

from podsim.economics import spine_counts, spine_timeline
from podsim.economics.assumptions import DEFAULTS, assumptions
from podsim.economics.timeline import Period
from podsim.economics.useful import add_useful_cost, useful_fraction
from podsim.errors import PodsimError
from podsim.scenario import load_scenario_text
from podsim.scenario.check import check_scenario
from podsim.topology import DcnSpec, PodLayout, get_generation
from podsim.topology.fabric import build_fabric

SWITCH_GBPS = DEFAULTS["eps_switch_gbps"].value  # 51,200 (eps.2)
OCS_PORTS = int(DEFAULTS["ocs_usable_ports"].value)  # 128 (ocs.4)


def fabric(gen: str, kind: str, hosts_per_leaf: int, spines: int = 2, oversubscription: float = 1.0):
    dcn = DcnSpec(kind=kind, hosts_per_leaf=hosts_per_leaf, spines=spines, oversubscription=oversubscription)
    return build_fabric(PodLayout(get_generation(gen)), circuits=None, dcn=dcn)


def test_eps_counts_match_hand_count_v5e():
    """v5e pod: 32 hosts x 200 Gbps (v5e.10). 8 hosts per leaf -> 4 leaves, 1.6 Tbps up each;
    2 spines -> 800 Gbps per leaf-spine link = 4 ports of 200G at each end: 32 leaf ports,
    32 spine ports, 64 transceivers, 32 duplex fibres (64 strands); a spine plane has
    4 x 4 x 200G = 3.2 Tbps -> one 51.2T ASIC; each leaf 1.6 + 1.6 Tbps -> one ASIC."""
    c = spine_counts(fabric("tpu-v5e", "eps", 8), 200, SWITCH_GBPS, OCS_PORTS)
    assert (c.leaves, c.leaf_switches, c.spine_switches, c.ocs) == (4, 4, 2, 0)
    assert (c.uplink_ports, c.spine_ports, c.transceivers, c.fibre_strands) == (32, 32, 64, 64)
    assert c.uplink_gbps == pytest.approx(4 * 1600)
    assert c.leaf_port_gbps == pytest.approx(4 * (1600 + 1600)) and c.spine_port_gbps == pytest.approx(32 * 200)


def test_ocs_counts_match_hand_count_v5e():
    """Same pod as an OCS DCN: 8 uplink ports of 200G per leaf, each one transceiver and one
    fibre strand into an OCS port (circulators); 32 ports fit one 128-port OCS; no spine."""
    c = spine_counts(fabric("tpu-v5e", "ocs", 8), 200, SWITCH_GBPS, OCS_PORTS)
    assert (c.leaves, c.leaf_switches, c.spine_switches, c.ocs) == (4, 4, 0, 1)
    assert (c.uplink_ports, c.spine_ports, c.transceivers, c.fibre_strands) == (32, 32, 32, 32)
    assert c.spine_port_gbps == 0


def test_counts_round_ports_up_and_follow_oversubscription():
    """2:1 oversubscription halves the uplinks (800 Gbps per leaf, 400 per spine link); at
    300G a 400 Gbps spine link needs ceil(4/3) = 2 ports (16 leaf ports), an 800 Gbps OCS
    uplink ceil(8/3) = 3 per leaf."""
    c = spine_counts(fabric("tpu-v5e", "eps", 8, oversubscription=2), 300, SWITCH_GBPS, OCS_PORTS)
    assert c.uplink_gbps == pytest.approx(4 * 800)
    assert c.uplink_ports == 4 * 2 * 2 and c.transceivers == 32
    o = spine_counts(fabric("tpu-v5e", "ocs", 8, oversubscription=2), 300, SWITCH_GBPS, OCS_PORTS)
    assert o.uplink_ports == 4 * math.ceil(800 / 300)


def test_v4_pod_counts_with_whole_switches():
    """v4 pod: 1024 hosts x 200 Gbps (x.4); 256 hosts per leaf -> 4 leaves of 51.2 Tbps up.
    At 400G: 128 ports per leaf; 2 spines of 4 x 64 ports x 400G = 102.4T = 2 ASICs each;
    OCS: 512 ports = 4 Palomars of 128 usable ports."""
    e = spine_counts(fabric("tpu-v4", "eps", 256), 400, SWITCH_GBPS, OCS_PORTS)
    o = spine_counts(fabric("tpu-v4", "ocs", 256), 400, SWITCH_GBPS, OCS_PORTS)
    assert (e.uplink_ports, e.spine_switches, e.leaf_switches, e.transceivers) == (512, 4, 8, 1024)
    assert (o.uplink_ports, o.ocs, o.leaf_switches, o.transceivers) == (512, 4, 8, 512)


def test_one_leaf_has_no_spine():
    c = spine_counts(fabric("tpu-v5e", "eps", 32), 200, SWITCH_GBPS, OCS_PORTS)
    assert (c.leaves, c.spine_switches, c.uplink_ports, c.transceivers) == (1, 0, 0, 0)


def test_link_faster_than_the_switch_is_refused():
    with pytest.raises(PodsimError, match="exceeds the switch capacity"):
        spine_counts(fabric("tpu-v5e", "eps", 8), 102_400, SWITCH_GBPS, OCS_PORTS)


def _periods(speeds, host_gbps=None, tx_w_per_gbps=0.03):
    return [Period(y, s, (host_gbps or [s] * len(speeds))[y], s * 1.0, s * tx_w_per_gbps) for y, s in enumerate(speeds)]


def _timeline(kind, speeds, a=None, hosts_per_leaf=256):
    a = a or assumptions()
    f = fabric("tpu-v4", kind, hosts_per_leaf)
    return spine_timeline(_periods(speeds), [spine_counts(f, s, SWITCH_GBPS, OCS_PORTS) for s in speeds], a)


def test_ocs_spine_power_is_lower_by_the_published_ratio():
    """Equal link speed, no upgrades, whole switches on both sides (the v4 pod above at 400G:
    4 spine ASICs of 51.2T against 4 Palomars): the spine layer's power and energy are in the
    ratio of the published unit powers, 108 W per OCS against ~3 kW per switch (apo.7), and
    the energy is the same every year."""
    eps, ocs = _timeline("eps", [400] * 4), _timeline("ocs", [400] * 4)
    published = DEFAULTS["ocs_w"].value / DEFAULTS["eps_switch_w"].value  # 108 / 3000
    for e, o in zip(eps, ocs, strict=True):
        assert o["power_spine_w"] / e["power_spine_w"] == pytest.approx(published, rel=1e-9)
        assert o["energy_kwh"] == pytest.approx(ocs[0]["energy_kwh"])
        assert o["energy_kwh"] < e["energy_kwh"]
    # whole-fabric power by hand: same leaves; EPS spine 4 x 3 kW + 1024 transceivers, OCS 4 x 108 W + 512
    tx_w = 400 * 0.03
    leaves_w = 8 * SWITCH_GBPS * 3000 / SWITCH_GBPS
    assert eps[0]["power_w"] == pytest.approx(leaves_w + 4 * 3000 + 1024 * tx_w)
    assert ocs[0]["power_w"] == pytest.approx(leaves_w + 4 * 108 + 512 * tx_w)
    assert eps[0]["energy_kwh"] == pytest.approx(eps[0]["power_w"] * 8760 / 1000)


def test_eps_spine_rebought_exactly_when_the_speed_doubles():
    """200G for three years, 400G for three: the EPS spine (and the leaves, on both kinds) is
    bought in year 0 and again in year 3 only; the OCS is bought once; optics change with the
    speed on both."""
    speeds = [200, 200, 200, 400, 400, 400]
    eps, ocs = _timeline("eps", speeds), _timeline("ocs", speeds)
    assert [r["spine_rebought"] for r in eps] == [False, False, False, True, False, False]
    assert [r["capex_spine_usd"] > 0 for r in eps] == [True, False, False, True, False, False]
    assert [r["capex_spine_usd"] > 0 for r in ocs] == [True, False, False, False, False, False]
    assert not any(r["spine_rebought"] for r in ocs)
    for rows in (eps, ocs):
        assert [r["capex_optics_usd"] > 0 for r in rows] == [True, False, False, True, False, False]
        assert [r["capex_leaf_usd"] > 0 for r in rows] == [True, False, False, True, False, False]
        assert [r["capex_fibre_usd"] > 0 for r in rows] == [True] + [False] * 5
        assert rows[-1]["cumulative_usd"] == pytest.approx(sum(r["capex_usd"] + r["energy_usd"] for r in rows))
    # the year-3 EPS spine purchase is the whole spine at 400G, priced per Gbps of ports (eps.17)
    assert eps[3]["capex_spine_usd"] == pytest.approx(512 * 400 * DEFAULTS["eps_usd_per_gbps"].value)


def test_slower_or_equal_speed_is_not_a_rebuy():
    eps = _timeline("eps", [400, 400, 200, 400])
    assert [r["spine_rebought"] for r in eps] == [False] * 4
    assert [r["capex_optics_usd"] > 0 for r in eps] == [True, False, True, True]


def test_useful_cost_closed_form():
    rows = [{"step_time_s": 2.0, "compute_s": 1.5, "capex_usd": 1000.0, "energy_usd": 100.0},
            {"step_time_s": 2.0, "compute_s": 1.0, "capex_usd": 0.0, "energy_usd": 100.0}]
    out = add_useful_cost(rows, fleet_chips=10, busy_fraction=0.5, hours_per_year=100, chip_usd_per_h=2.0)
    assert useful_fraction(2.0, 1.5) == 0.75
    assert out[0]["useful_chip_h"] == pytest.approx(10 * 100 * 0.5 * 0.75)
    assert out[0]["spine_usd_per_useful_chip_h"] == pytest.approx(1100 / 375)
    assert out[1]["lifetime_spine_usd_per_useful_chip_h"] == pytest.approx(1200 / (375 + 250))
    assert out[1]["lifetime_usd_per_useful_chip_h"] == pytest.approx((1200 + 2 * 1000 * 2.0) / 625)
    assert add_useful_cost(rows, 10, 1.0, 100, None)[0]["usd_per_useful_chip_h"] is None
    with pytest.raises(PodsimError):
        useful_fraction(0.0, 1.0)


def test_assumption_overrides():
    a = assumptions({"usd_per_kwh": (0.12, "a utility bill", "")})
    assert a["usd_per_kwh"].value == 0.12 and not a["usd_per_kwh"].assumed
    assert DEFAULTS["transceiver_usd_per_gbps"].assumed and not DEFAULTS["ocs_w"].assumed
    with pytest.raises(PodsimError, match="unknown figure"):
        assumptions({"nope": (1.0, "x", "")})
    with pytest.raises(PodsimError, match="must be > 0"):
        assumptions({"fibre_usd": (0.0, "x", "")})


SCENARIO = """
name: spine-bad
topology: {generation: tpu-v4}
workload: {step: {model: llama2-7b, slice: 4x4x4}}
spine:
  generations: [{year: 0, link_gbps: 200}]
"""


@pytest.mark.parametrize("change, message", [
    (("year: 0", "year: 2"), "spine.generations: the first arrives in year 2"),
    (("[{year: 0, link_gbps: 200}]", "[{year: 0, link_gbps: 200}, {year: 9, link_gbps: 400}]"), "outside the 6 years"),
    (("link_gbps: 200", "link_gbps: 0"), "link_gbps"),
    (("generations:", "assumptions: {foo: {value: 1, source: x}}\n  generations:"), "unknown figure 'foo'"),
    (("workload: {step: {model: llama2-7b, slice: 4x4x4}}",
      "workload: {synthetic: {jobs: 3, rate: 1/h}}\nhorizon: 1d"), "give workload.step"),
])
def test_bad_spine_sections_are_one_line_errors(change, message):
    with pytest.raises(PodsimError, match=message) as err:
        check_scenario(load_scenario_text(SCENARIO.replace(*change)))
    assert "\n" not in str(err.value)


def test_a_generation_s_own_switch_figures_apply_from_its_purchase():
    """A 400G generation whose switches cost and draw half as much per Gbps: its re-buy is
    priced at its figure, and the power follows the switches owned (bought in year 2)."""
    f = fabric("tpu-v4", "eps", 256)
    speeds = [200, 200, 400]
    base = _periods(speeds)
    cheap = [Period(2, 400, 400, 400.0, 12.0, eps_usd_per_gbps=DEFAULTS["eps_usd_per_gbps"].value / 2,
                    eps_w_per_gbps=3000 / SWITCH_GBPS / 2)]
    counts = [spine_counts(f, s, SWITCH_GBPS, OCS_PORTS) for s in speeds]
    a, b = spine_timeline(base, counts, assumptions()), spine_timeline(base[:2] + cheap, counts, assumptions())
    assert b[2]["capex_spine_usd"] == pytest.approx(a[2]["capex_spine_usd"] / 2)
    assert b[2]["power_spine_w"] == pytest.approx(a[2]["power_spine_w"] / 2)
    assert b[1]["power_w"] == a[1]["power_w"]
