"""Failure processes: availability, seeded draws, traces."""

import re

import numpy as np
import pytest

from podsim.cluster import load_failure_trace
from podsim.cluster.failures import (
    FailureProcess,
    FailureSpec,
    draw_failures,
    failure_model,
    host_failure_spec,
)
from podsim.errors import PodsimError


def downtime_fraction(events, count, horizon):
    down = sum(min(e.time_s + e.repair_s, horizon) - e.time_s for e in events)
    return down / (count * horizon)


@pytest.mark.parametrize("dist,shape", [("exponential", 1.0), ("weibull", 0.7), ("weibull", 2.0)])
def test_long_run_availability_matches(dist, shape):
    """Fraction of component-time down ~ 1 - mtbf/(mtbf+mttr), whatever the distribution."""
    p = FailureProcess.from_availability(0.99, mttr_s=3600.0, distribution=dist, weibull_shape=shape)
    assert p.availability == pytest.approx(0.99)
    horizon = 3600.0 * 24 * 365
    ev = draw_failures(p, "host", 400, horizon, np.random.default_rng(1))
    assert downtime_fraction(ev, 400, horizon) == pytest.approx(0.01, rel=0.08)
    assert all(0 <= e.time_s < horizon for e in ev)


def test_steady_state_start():
    """At t=0 about 1 - A of the components are already down."""
    p = FailureProcess.from_availability(0.9, mttr_s=3600.0)
    ev = draw_failures(p, "host", 20000, 10.0, np.random.default_rng(2))
    at_zero = sum(e.time_s == 0.0 for e in ev)
    assert abs(at_zero / 20000 - 0.1) < 0.01


def test_seeded():
    p = FailureProcess(mtbf_s=1e5)
    a = draw_failures(p, "ocs", 48, 1e6, np.random.default_rng(5))
    b = draw_failures(p, "ocs", 48, 1e6, np.random.default_rng(5))
    assert a == b and len(a) > 0


def test_bad_inputs(tmp_path):
    with pytest.raises(PodsimError, match="strictly between 0 and 1"):
        FailureProcess.from_availability(1.2)
    f = tmp_path / "f.csv"
    f.write_text("time_s,component,id,repair_s\n10,host,3,600\n5,gpu,1,1\n")
    with pytest.raises(PodsimError, match="line 3: component 'gpu'"):
        load_failure_trace(f)
    f.write_text("time_s,component,id,repair_s\n10,host,3,600\n5,ocs,1,1\n")
    assert [e.component for e in load_failure_trace(f)] == ["ocs", "host"]


def test_the_hosts_options_read_one_way_for_the_cluster_and_the_plan():
    """host_failure_spec (podsim plan --tokens) and failure_model's hosts (podsim cluster) are one
    reading of --host-availability / --mtbf / --mttr: the same spec, the same one-line refusals."""
    assert host_failure_spec() is None and failure_model().host is None
    spec = host_failure_spec(mtbf="100h", mttr="2h")
    assert spec == FailureSpec(mtbf_s=360000.0, mttr_s=7200.0)
    assert failure_model(mtbf="100h", mttr="2h").host == spec.process()
    assert host_failure_spec(0.999).mttr_s == 3600.0  # MTTR 1 h unless given
    for kw, needle in (({"host_availability": 0.99, "mtbf": "9h"}, "not both"), ({"mttr": "2h"}, "host MTTR '2h' (--mttr) needs an MTBF (--mtbf"),
                       ({"mtbf": "0"}, "host MTBF (--mtbf): "), ({"mtbf": "9h", "mttr": "0"}, "host MTTR (--mttr): "),
                       ({"host_availability": 1e-300}, "availability 1e-300")):
        for face in (host_failure_spec, failure_model):
            with pytest.raises(PodsimError, match=re.escape(needle)):
                face(**kw)


def test_each_failure_process_is_built_once(monkeypatch):
    """failure_model (podsim cluster's options) builds each component's process once, from its
    spec; an availability whose MTBF is out of range is still refused when the spec is read
    (it used to build the process to check it, then build it again for the model)."""
    built = []
    process = FailureSpec.process
    monkeypatch.setattr(FailureSpec, "process", lambda self: built.append(self) or process(self))
    model = failure_model(host_availability=0.99, ocs_mtbf="30d", link_mtbf="1000d")
    assert len(built) == 3 and model.host == FailureProcess.from_availability(0.99)
    built.clear()
    host_failure_spec(0.99)
    assert built == []  # read and checked; built by whoever uses it (the plan's goodput)
    with pytest.raises(PodsimError, match=re.escape("availability 1e-300 with an MTTR of 1 h means an MTBF of")):
        host_failure_spec(1e-300)


def test_fleet_failures_draw_each_part_from_its_own_stream():
    """Adding link failures leaves the host failures drawn unchanged; link events carry link ids."""
    from podsim.cluster import FailureModel
    from podsim.cluster.failures import draw_fleet_failures
    from podsim.cluster.links import IciLinks
    from podsim.topology import PodLayout, get_generation

    lay = PodLayout(get_generation("tpu-v4"))
    host = FailureProcess.from_availability(0.99, mttr_s=3600.0)
    hosts_only = draw_fleet_failures(lay, FailureModel(host=host), 86400.0 * 7, seed=4)
    both = draw_fleet_failures(lay, FailureModel(host=host, link=FailureProcess(mtbf_s=1e6)), 86400.0 * 7, seed=4)
    assert [e for e in both if e.component == "host"] == hosts_only
    links = [e for e in both if e.component == "link"]
    assert links and set(e.id for e in links) <= set(IciLinks(lay).cable_ports.tolist())
    assert both == sorted(both)
    static = PodLayout(get_generation("tpu-v4"), ocs=False)
    with pytest.raises(PodsimError, match="has no OCS"):
        draw_fleet_failures(static, FailureModel(ocs=FailureProcess(mtbf_s=1e6)), 10.0, seed=0)
