"""A scenario's steps as the library's `StepStudy`: the step workload's, each step-based job's in
a job stream (what its step-time model is asked), and a scaling section's per slice count. The
scenario's sections embed the library's models (`dcn` is a DcnSpec, `options` GenerateOptions),
so every field reaches the study without being copied here by name."""

from __future__ import annotations

from podsim.scenario.schema import Scenario
from podsim.study import StepStudy
from podsim.study.steptime import StudyOf
from podsim.topology import Generation, format_shape, parse_shape
from podsim.trace import load_trace


def step_study(s: Scenario, gen: Generation) -> StepStudy:
    """The step workload's study on the scenario's generation (with its overrides), wiring,
    routing and DCN."""
    st = s.workload.step
    trace = load_trace(st.trace, shape=parse_shape(st.slice, gen.dims)) if st.trace is not None else None
    return StepStudy(gen, st.slice, model=st.model, trace=trace, model_overrides=st.model_overrides, plan=st.parallelism,
                     slices=st.slices, twisted=st.twisted, ocs=s.topology.wiring == "ocs", options=st.options, multislice=st.multislice,
                     compute_efficiency=st.compute_efficiency, dcn=s.dcn.spec(), engineer_dcn=s.dcn.engineered,
                     routing=s.topology.routing, name=s.name)


def job_studies(s: Scenario, gen: Generation) -> StudyOf:
    """How a job stream's step-based job becomes a study: the scenario's generation, wiring,
    routing, DCN (with the job's sites) and step_time section (compute model, the model's plan)."""
    ocs, dcn, routing = s.topology.wiring == "ocs", s.dcn.spec(), s.topology.routing
    plans, eff = dict(s.step_time.parallelism), s.step_time.compute_efficiency

    def study_of(model: str, generation: Generation, shape: tuple[int, ...], twisted: bool, slices: int,
                 sites: int) -> StepStudy:
        return StepStudy(gen, shape, model=model, plan=plans.get(model), slices=slices, twisted=twisted, ocs=ocs,
                         compute_efficiency=eff, dcn=dcn if dcn.sites == sites else dcn.model_copy(update={"sites": sites}),
                         routing=routing, name=f"{model} on {format_shape(shape)}{'_T' if twisted else ''}"
                                               + (f" x{slices}" if slices > 1 else ""))  # names its engine warnings

    return study_of


def scaling_base(s: Scenario, gen: Generation) -> StepStudy:
    """The scaling section's study on its fewest slices (the scaling study varies slices and batch)."""
    sc = s.scaling
    n = sc.slices[0]
    return StepStudy(gen, sc.slice, model=sc.model, plan=sc.parallelism, slices=n,
                     model_overrides={**sc.model_overrides, "global_batch": sc.batch_per_slice * n},
                     ocs=s.topology.wiring == "ocs", options=sc.options, multislice=sc.multislice,
                     compute_efficiency=sc.compute_efficiency,
                     dcn=s.dcn.spec(),
                     engineer_dcn=s.dcn.engineered, routing=s.topology.routing)
