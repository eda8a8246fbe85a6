"""Job-level cluster simulation: arrivals, queue policies, placement, failures, goodput.

    from podsim.cluster import ClusterConfig, simulate
    result = simulate(ClusterConfig(generation="tpu-v4", pods=1, policy="backfill", horizon_s=7 * 86400,
                                    failures=FailureModel(host=FailureProcess.from_availability(0.995))),
                      jobs, seed=1)
    result.metrics   # utilisation, goodput, wait_p95_s, ... (podsim.cluster.result)

Modules: run (ClusterRun: what a scenario, the CLI and the dashboard build; run_cluster), config (ClusterConfig), simulate (the SimPy model), policies (fifo, backfill,
priority), failures (MTBF/MTTR processes, traces), links (ICI link ids and what a failed link
disables), steptime (steps -> run time), result (metrics), breakdown (per shape), goodput (the v4 paper's Fig. 4).
"""

from typing import TYPE_CHECKING

from podsim._lazy import lazy_face

if TYPE_CHECKING:  # the face's names, each imported on first use (podsim._lazy: start-up)
    from podsim.cluster.breakdown import by_shape, chip_hour_breakdown
    from podsim.cluster.config import ClusterConfig, make_config
    from podsim.cluster.failures import (
        FailureEvent,
        FailureModel,
        FailureProcess,
        FailureSpec,
        draw_failures,
        draw_fleet_failures,
        failure_model,
        load_failure_trace,
    )
    from podsim.cluster.goodput import GoodputPoint, fig4_goodput, fitting_slices
    from podsim.cluster.links import IciLinks
    from podsim.cluster.policies import QUEUE_POLICIES, Scheduler
    from podsim.cluster.result import ClusterResult, JobOutcome
    from podsim.cluster.run import ClusterRun, make_run, run_cluster
    from podsim.cluster.simulate import simulate

__all__ = [
    "QUEUE_POLICIES", "Scheduler", "by_shape", "chip_hour_breakdown", "ClusterConfig", "ClusterResult", "FailureEvent", "FailureModel", "FailureProcess", "FailureSpec", "ClusterRun", "make_run", "run_cluster",
    "GoodputPoint", "IciLinks", "JobOutcome", "draw_failures",
    "draw_fleet_failures", "failure_model", "make_config", "fig4_goodput", "fitting_slices", "load_failure_trace", "simulate",
]

lazy_face(__name__)
