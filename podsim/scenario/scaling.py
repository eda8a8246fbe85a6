"""A scenario's `scaling` section: the weak-scaling study (podsim.study.scaling) of its model on
the scenario's generation (with overrides), wiring, routing and DCN."""

from __future__ import annotations

from typing import TYPE_CHECKING

from podsim.scenario.studies import scaling_base
from podsim.study.scaling import scaling_study
from podsim.topology import Generation
from podsim.trace.plans import resolve_plan
from podsim.validation.bands import step_band

if TYPE_CHECKING:
    from podsim.scenario.schema import Scenario


def with_bands(study: dict[str, list], generation: str) -> dict[str, list]:
    """The scaling study with each row's error band (podsim.validation.bands: single-slice or
    multislice steps on the generation): `step_time_error` (NaN where the corpus has no run of the
    kind) and `step_time_error_text`."""
    bands = [step_band(generation, int(n)) for n in study["slices"]]
    return {**study, "step_time_error": [b.typical if b.typical is not None else float("nan") for b in bands],
            "step_time_error_text": [b.text() for b in bands]}


def scenario_scaling(s: Scenario, gen: Generation) -> tuple[dict, dict[str, list]]:
    """The `scaling_*` key figures (at the most slices) and the `scaling` table."""
    sc = s.scaling
    base = scaling_base(s, gen)
    plan = resolve_plan(sc.parallelism, sc.model, base.chips)
    study = with_bands(scaling_study(base, sc.slices, sc.batch_per_slice), gen.id)
    metrics = {"scaling_slices_max": study["slices"][-1], "scaling_parallel_efficiency": study["parallel_efficiency"][-1],
               "scaling_mfu": study["mfu"][-1], "scaling_step_time_s": study["step_time_s"][-1],
               "scaling_step_time_error": study["step_time_error"][-1],
               "scaling_step_time_error_text": study["step_time_error_text"][-1], "scaling_parallelism": plan}
    return metrics, study
