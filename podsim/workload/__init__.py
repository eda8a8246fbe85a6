"""Job streams for the cluster simulation: synthetic distributions or a real trace replayed.

`parse_synthetic(SPEC, generation)` reads the CLI's `--synthetic` form (KEY=VALUE pairs or a
YAML file). Every stream is a list of `Job`s sorted by submission time; every random draw comes from the
seed given (numpy Generator), so the same spec and seed give the same jobs.
"""

from typing import TYPE_CHECKING

from podsim._lazy import lazy_face

if TYPE_CHECKING:  # the face's names, each imported on first use (podsim._lazy: start-up)
    from podsim.workload.jobs import Job
    from podsim.workload.replay import TraceSpec, load_trace_csv
    from podsim.workload.spec import parse_synthetic
    from podsim.workload.synthetic import SyntheticSpec, generate_jobs

__all__ = ["Job", "SyntheticSpec", "TraceSpec", "generate_jobs", "load_trace_csv", "parse_synthetic"]

lazy_face(__name__)
