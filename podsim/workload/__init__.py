"""Job streams for the cluster simulation: synthetic distributions or a real trace replayed.

`parse_synthetic(SPEC, generation)` reads the CLI's `--synthetic` form (KEY=VALUE pairs or a
YAML file). Every stream is a list of `Job`s sorted by submission time; every random draw comes from the
seed given (numpy Generator), so the same spec and seed give the same jobs.
"""

from typing import TYPE_CHECKING

from podsim._lazy import lazy_face

if TYPE_CHECKING:  # the face's names, each imported on first use (podsim._lazy: start-up)
    from podsim.workload.jobs import Job
    from podsim.workload.popularity import V4_SLICE_POPULARITY, SliceMix
    from podsim.workload.replay import TraceColumns, TraceSpec, load_trace_csv, shape_for_count
    from podsim.workload.spec import parse_synthetic
    from podsim.workload.synthetic import (
        ArrivalSpec,
        DurationSpec,
        StepsSpec,
        SyntheticSpec,
        generate_jobs,
    )

__all__ = [
    "ArrivalSpec", "DurationSpec", "Job", "SliceMix", "StepsSpec", "SyntheticSpec", "TraceColumns", "TraceSpec",
    "V4_SLICE_POPULARITY", "generate_jobs", "load_trace_csv", "parse_synthetic", "shape_for_count",
]

lazy_face(__name__)
