"""The Step time page's widgets as the library's StepStudy, the object `podsim steptime`, scenarios
and the cluster's step-time model build too, and what the page shows of its result (no Streamlit
here, so a test runs exactly what the page runs)."""

from __future__ import annotations

from podsim.engine import step_summary
from podsim.engine.linkload import record_link_load
from podsim.engine.summary import compute_constants_text, port_utilisation
from podsim.engine.timeline import build_timeline, timeline_json
from podsim.study import StepStudy, run_study
from podsim.topology.dcn import dcn_choice
from podsim.trace import StepTrace
from podsim.trace.generate import GenerateOptions
from podsim.validation.bands import step_band

ROUTINGS = {"dimension_order": "dimension order (one path)", "shortest_paths": "all shortest paths (even split)",
            "adaptive": "adaptive (split re-weighted by load)"}


def page_study(gen: str, shape: str, twisted: bool, efficiency: float | None, slices: int = 1, dcn: str = "eps",
               oversubscription: float = 1.0, sites: int = 1, routing: str = "dimension_order", *,
               model: str | None = None, plan: str | None = None, global_batch: int | None = None,
               recompute: str = "none", trace: StepTrace | None = None, tiers: str | None = None) -> StepStudy:
    """The page's step: a preset `model` (its `plan`, `global_batch`, `recompute`) or an uploaded
    `trace`, on `slices` slices of `shape` behind the chosen DCN (in `tiers`, when given: a preset,
    a spec or a YAML file, podsim.topology.dcntiers) over `sites` data centres."""
    spec, engineer = dcn_choice(dcn, oversubscription if dcn == "eps" and not tiers else 1.0, sites, tiers=tiers or None)
    common = {"twisted": twisted, "compute_efficiency": efficiency, "slices": slices, "dcn": spec,
              "engineer_dcn": engineer, "routing": routing}
    if trace is not None:
        return StepStudy(gen, shape, trace=trace, **common)
    overrides = {"global_batch": global_batch} if global_batch else {}
    return StepStudy(gen, shape, model=model, plan=plan, model_overrides=overrides,
                     options=GenerateOptions(recompute=recompute), **common)


def step_view(study: StepStudy) -> dict:
    """The study run once, as the page shows it: the step summary, its error band, the op timeline,
    the Perfetto file (as `steptime --timeline`) and the first slice's port utilisation."""
    with record_link_load() as load:
        result = run_study(study)
    trace = result.trace
    band = step_band(study.generation.id, study.slices)  # the typical error of runs of this kind (podsim.validation.bands)
    return {"summary": step_summary(result), "name": trace.name, "ops": len(trace.ops),
            "constants": compute_constants_text(result, study.compute_efficiency),
            "band": {"typical": band.typical, "runs": band.n_runs, "text": band.text()},
            "perfetto": timeline_json(build_timeline(result, link_load=load.last, title=trace.name)),
            "timeline": [vars(t) for t in result.timeline if t.step == 0],
            "utilisation": port_utilisation(result, result.views[0]),  # the heat map shows the first slice
            "hot_links": result.hot_links(8), "pods": result.fabric.layout.pods}
