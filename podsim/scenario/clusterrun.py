"""A scenario's job stream as the library's ClusterRun: what `podsim run` simulates and what
`podsim validate` builds before it (below run.py and check.py, which both use it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from podsim.scenario.schema import POLICY_FIELDS, SOLVER_FIELDS, Scenario
from podsim.topology import Generation

if TYPE_CHECKING:
    from podsim.cluster import ClusterRun


def cluster_run(s: Scenario, gen: Generation, cpsat_workers_cap: int | None = None) -> ClusterRun:
    """The scenario's job stream as the library's ClusterRun (what `podsim cluster` flags build too)."""
    from podsim.cluster import ClusterConfig, ClusterRun, FailureModel

    sections = {c: getattr(s.policy, n) for n, c in POLICY_FIELDS.items()} | {c: getattr(s.solver, n) for n, c in SOLVER_FIELDS.items()}
    if cpsat_workers_cap is not None:
        sections["cpsat_workers"] = min(s.solver.workers, cpsat_workers_cap)
    failures = FailureModel.of(s.failures.host, s.failures.ocs, s.failures.link)
    config = ClusterConfig(
        generation=gen.id, pods=s.topology.pods, sites=s.dcn.sites, ocs=s.topology.wiring == "ocs", **sections,
        horizon_s=s.horizon, warmup_s=s.warmup, drain=s.drain, drain_limit_s=s.drain_limit, failures=failures,
        sample_interval_s=s.horizon / s.samples)
    w = s.workload
    return ClusterRun(config=config, synthetic=w.synthetic.spec(gen.id) if w.synthetic is not None else None,
                      trace=w.trace, odd=w.odd, failure_trace=s.failures.trace, compute_efficiency=s.step_time.compute_efficiency, seed=s.seed)
