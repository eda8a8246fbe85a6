"""Job-level cluster simulation: arrivals, queue policies, placement, failures, goodput."""

from podsim.cluster.failures import FailureEvent, FailureProcess, draw_failures, load_failure_trace

__all__ = ["FailureEvent", "FailureProcess", "draw_failures", "load_failure_trace"]
