"""Step-time engine: collectives and step traces on a flow-level SimPy network.

Typical use::

    from podsim.topology import build_slice
    from podsim.engine import simulate_collective
    r = simulate_collective(build_slice("tpu-v4", "16x16x16"), "all_reduce", "1GiB")
    r.busbw_bytes_per_s / 1e9, r.simulated_s, r.closed_form_s   # ~267 GB/s per chip
"""

from typing import TYPE_CHECKING

from podsim._lazy import lazy_face

if TYPE_CHECKING:  # the face's names, each imported on first use (podsim._lazy: start-up)
    from podsim.engine.core import simulate_collective, simulate_jobs, simulate_step
    from podsim.engine.jobs import Job, build_job, check_groups_exist, declared_slices, place_slices
    from podsim.engine.results import CollectiveResult, OpTiming, StepResult
    from podsim.engine.summary import port_utilisation, step_summary
    from podsim.engine.validate import EngineInvariantError, validating
    from podsim.trace.model import DEFAULT_COMPUTE_EFFICIENCY  # the flat override offered (perf.3)

# The public API: simulate, the results and their summaries, and `validating()` to check every
# simulation in a block. The flow network, max-min filling and the validator's parts are
# internals (import them from their modules: engine.network, engine.validate; max-min filling is podsim.maxmin).
__all__ = [
    "DEFAULT_COMPUTE_EFFICIENCY", "CollectiveResult", "EngineInvariantError", "Job", "OpTiming", "StepResult",
    "build_job", "check_groups_exist", "declared_slices", "place_slices", "port_utilisation", "simulate_collective",
    "simulate_jobs", "simulate_step", "step_summary", "validating",
]

lazy_face(__name__)
