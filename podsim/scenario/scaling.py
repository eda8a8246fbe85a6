"""A scenario's `scaling` section: the weak-scaling study (podsim.study.scaling) of its model on
the scenario's generation (with overrides), wiring, routing and DCN."""

from __future__ import annotations

from typing import TYPE_CHECKING

from podsim.scenario.studies import scaling_base
from podsim.study.scaling import scaling_study
from podsim.topology import Generation
from podsim.trace.plans import resolve_plan

if TYPE_CHECKING:
    from podsim.scenario.schema import Scenario


def scenario_scaling(s: Scenario, gen: Generation) -> tuple[dict, dict[str, list]]:
    """The `scaling_*` key figures (at the most slices) and the `scaling` table."""
    sc = s.scaling
    base = scaling_base(s, gen)
    plan = resolve_plan(sc.parallelism, sc.model, base.chips)
    study = scaling_study(base, sc.slices, sc.batch_per_slice)
    metrics = {"scaling_slices_max": study["slices"][-1], "scaling_parallel_efficiency": study["parallel_efficiency"][-1],
               "scaling_mfu": study["mfu"][-1], "scaling_step_time_s": study["step_time_s"][-1],
               "scaling_parallelism": plan}
    return metrics, study
