"""The recorder that keeps every answer of a job stream's step-time model for the report (the
`step_times` table): each row one job step the cluster simulation asked about."""

from __future__ import annotations

from podsim.scenario.result import TABLES
from podsim.study import StepStudy, StepTimeModel
from podsim.study.steptime import StepEstimate
from podsim.topology import format_shape
from podsim.validation.bands import step_band


def band_of(study: StepStudy, e: StepEstimate) -> tuple[float, str]:
    """The error band of an estimate (podsim.validation.bands): the engine's steps are what the
    validation corpus measures; a roofline, which times no communication, has no runs of its kind."""
    if not e.source.startswith("engine"):
        return float("nan"), "no validation runs of this kind (a roofline: no communication timed): error unknown"
    band = step_band(study.generation.id, study.slices)
    return (band.typical if band.typical is not None else float("nan")), band.text()


class RecordingStepTime:
    """Wraps a step-time model; keeps one row per job step asked (a row of the `step_times` result
    table). The steps a placement is priced with (studies `on` a built slice) are not job steps."""

    def __init__(self, inner: StepTimeModel):
        self.inner = inner
        self.rows: list[dict] = []

    @property
    def prices_placement(self) -> bool:
        return bool(getattr(self.inner, "prices_placement", False))

    def estimate(self, study: StepStudy) -> StepEstimate:
        e = self.inner.estimate(study)
        if study.on is None:
            err, text = band_of(study, e)
            self.rows.append({"model": study.model_name, "shape": format_shape(study.shape), "twisted": bool(study.twisted),
                              "slices": int(study.slices), "sites": int(study.sites),
                              "step_time_s": float(e.step_time_s), "compute_s": e.compute_s,
                              "exposed_comm_s": e.exposed_comm_s, "source": e.source,
                              "step_time_error": err, "step_time_error_text": text})
        return e

    def table(self) -> dict[str, list]:
        return {c: [r[c] for r in self.rows] for c in TABLES["step_times"]}
