"""The Cluster page's widgets as the library's ClusterRun, the object `podsim cluster` flags and a
scenario file build too (no Streamlit here, so a test builds exactly what the page runs)."""

from __future__ import annotations

from pathlib import Path

from podsim.cluster import ClusterRun, FailureModel, make_config, make_run
from podsim.cluster.failures import FailureSpec
from podsim.errors import PodsimError
from podsim.workload import TraceSpec, parse_synthetic


def job_stream(kind: str, text: str, path: Path | None, generation: str) -> dict:
    """{'synthetic': SyntheticSpec} from KEY=VALUE text or a YAML upload, or {'trace': TraceSpec} from a CSV."""
    if kind == "synthetic":
        return {"synthetic": parse_synthetic(text, generation)}
    suffix = path.suffix.lower() if path is not None else ""
    if suffix == ".csv":
        return {"trace": TraceSpec(path=path)}
    if suffix in (".yaml", ".yml", ".json"):
        return {"synthetic": parse_synthetic(str(path), generation)}
    raise PodsimError(f"{text}: upload a job-stream YAML (SyntheticSpec fields) or a job trace CSV "
                      "(job_id, submission_time, duration, num_gpu)")


def page_run(generation: str, pods: int, ocs: bool, policy: str, stream: dict, horizon_d: float,
             availability: float, mttr_h: float, checkpoint_h: float, seed: int) -> ClusterRun:
    """One run of the page: hosts fail with `availability` (1.0: never) and repair in `mttr_h`;
    every other setting is ClusterConfig's and ClusterRun's default, as for `podsim cluster`."""
    host = FailureSpec(availability=availability, mttr=f"{mttr_h}h") if availability < 1 else None
    config = make_config(generation=generation, pods=pods, ocs=ocs, policy=policy, horizon_s=horizon_d * 86400,
                         checkpoint_interval_s=f"{checkpoint_h}h", failures=FailureModel.of(host=host))
    return make_run(config=config, seed=seed, **stream)
