"""Job-level cluster simulation: arrivals, queue policies, placement, failures, goodput.

    from podsim.cluster import ClusterConfig, FailureModel, simulate
    from podsim.cluster.failures import FailureProcess
    result = simulate(ClusterConfig(generation="tpu-v4", pods=1, policy="backfill", horizon_s=7 * 86400,
                                    failures=FailureModel(host=FailureProcess.from_availability(0.995))),
                      jobs, seed=1)
    result.metrics   # utilisation, goodput, wait_p95_s, ... (podsim.cluster.result)

Modules: run (ClusterRun: what a scenario, the CLI and the dashboard build; run_cluster), config
(ClusterConfig), simulate (the SimPy model), jobqueue (the queue, by kind), policies (fifo,
backfill, priority), search (where jobs fit, pod by pod; fits, podviews, reserve), runtime (steps
-> run time, reshape slowdowns), accounting (chip-seconds per job), failures (MTBF/MTTR
processes, traces), outages, remedies, links (ICI link ids and what a failed link disables),
gang (multislice jobs), observe (samples, audit), result (metrics), breakdown (per shape, where
the goodput gap goes, the checkpoint closed form), goodput (the v4 paper's Fig. 4).
"""

from typing import TYPE_CHECKING

from podsim._lazy import lazy_face

if TYPE_CHECKING:  # the face's names, each imported on first use (podsim._lazy: start-up)
    from podsim.cluster.config import ClusterConfig, make_config
    from podsim.cluster.failures import FailureModel, load_failure_trace
    from podsim.cluster.result import ClusterResult
    from podsim.cluster.run import ClusterRun, make_run, run_cluster
    from podsim.cluster.simulate import simulate

__all__ = ["ClusterConfig", "ClusterResult", "ClusterRun", "FailureModel", "load_failure_trace", "make_config", "make_run", "run_cluster", "simulate"]

lazy_face(__name__)
