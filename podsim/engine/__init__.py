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
    from podsim.engine.core import simulate_collective, simulate_step
    from podsim.engine.jobs import build_job
    from podsim.engine.results import StepResult
    from podsim.engine.summary import step_summary

# The public API: simulate, the result and its summary. The rest imports from its module:
# engine.validate (`validating()` checks every simulation in a block), engine.jobs (Job,
# place_slices, declared_slices), engine.network; max-min filling is podsim.maxmin.
__all__ = ["StepResult", "build_job", "simulate_collective", "simulate_step", "step_summary"]

lazy_face(__name__)
