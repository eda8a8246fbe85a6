"""Checks of a scenario that need more than one field: shapes against the generation, figure
names, model presets, what a step study or a job stream may set. Each failure names the field
(`FieldError.loc`) so the loader can point at its line in the file."""

from __future__ import annotations

import math

from pydantic import ValidationError

from podsim import quantities as q
from podsim.bounds import check_fleet
from podsim.cluster.failures import check_failure_budget
from podsim.errors import PodsimError, first_error
from podsim.metrics import target_metrics
from podsim.quantities import MAX_FLEET_CHIPS
from podsim.scenario.clusterrun import cluster_run
from podsim.scenario.fields import parse_target
from podsim.scenario.schema import Scenario
from podsim.scenario.studies import scaling_base, step_study
from podsim.study import StepStudy
from podsim.study.scaling import plan_error
from podsim.study.study import study_plan, study_trace
from podsim.topology import Generation, get_generation, parse_shape
from podsim.topology.shapes import SliceSpec, validate_shape
from podsim.trace.configs import PRESETS, get_model
from podsim.trace.generate import GenerateOptions
from podsim.trace.mesh import parse_parallelism
from podsim.trace.plans import names_dcn, plan_template, resolve_plan
from podsim.units import is_rate_unit
from podsim.workload.odd import odd_sizes
from podsim.workload.popularity import V4_SLICE_POPULARITY, SliceMix

COUNT_UNITS = ("chips", "links", "ports", "ocs", "cubes", "nics", "hosts")  # figures that count parts


class FieldError(PodsimError):
    """A bad value at `loc` (a path of field names and indices from the scenario's root)."""

    def __init__(self, loc: tuple, message: str):
        super().__init__(message)
        self.loc = tuple(loc)


def _wrap(loc: tuple, fn, *args, **kw):
    try:
        return fn(*args, **kw)
    except FieldError:
        raise
    except ValidationError as exc:  # a model built from the fields: its first error, on one line
        where, msg = first_error(exc)
        raise FieldError(loc, f"{where}: {msg}" if where else msg) from None
    except (PodsimError, ValueError) as exc:
        raise FieldError(loc, str(exc).removeprefix("Value error, ")) from None


def scenario_generation(s: Scenario) -> Generation:
    """The scenario's generation with its figure overrides applied (each keeps its source)."""
    gen = get_generation(s.topology.generation)
    if not s.topology.overrides:
        return gen
    figures = gen.figures()
    top, ocs = {}, {}
    for name, ov in s.topology.overrides.items():
        loc = ("topology", "overrides", name)
        fig = figures.get(name)
        if fig is None:
            raise FieldError(loc, f"{gen.id} has no figure {name!r}; figures: {', '.join(figures)}")
        if ov.unit is not None and ov.unit != fig.unit:
            raise FieldError(loc + ("unit",), f"{name} is given in {fig.unit}; unit {ov.unit!r} is not allowed (give the value in {fig.unit})")
        if not math.isfinite(ov.value) or ov.value < 0:
            raise FieldError(loc + ("value",), f"{name} = {ov.value} must be a finite number >= 0 ({fig.unit})")
        if fig.unit in COUNT_UNITS and (ov.value < 1 or not float(ov.value).is_integer()):
            raise FieldError(loc + ("value",), f"{name} = {ov.value} must be a whole number >= 1 ({fig.unit})")
        if is_rate_unit(fig.unit) and ov.value <= 0:
            raise FieldError(loc + ("value",), f"{name} = {ov.value} must be > 0 {fig.unit}: work divided by a zero rate never finishes")
        quantity = q.FIGURE_RANGES.get(fig.unit)
        if quantity is not None:
            _wrap(loc + ("value",), quantity.check, ov.value, name)
        note = ov.note or f"scenario override (published: {fig.value} {fig.unit}, {fig.source})"
        new = fig.model_copy(update={"value": float(ov.value), "source": ov.source, "note": note, "alt": None})
        if name.startswith("ocs."):
            ocs[name.removeprefix("ocs.")] = new
        else:
            top[name] = new
    if ocs:
        top["ocs"] = gen.ocs.model_copy(update=ocs)
    return gen.model_copy(update=top)


def _check_mix(s: Scenario, gen: Generation) -> None:
    syn = s.workload.synthetic
    table = dict(V4_SLICE_POPULARITY) if syn.mix == "v4" else syn.mix
    if syn.mix == "v4" and gen.slice_rule != "cubes":
        raise FieldError(("workload", "synthetic", "mix"), f"'v4' is the TPU v4 paper's popularity table, whose shapes {gen.id} does not have; give a mapping of {gen.id} shapes")
    for name in table:
        _wrap(("workload", "synthetic", "mix", name), SliceMix.from_table, gen, {name: 1.0})
    for name in syn.models:
        _wrap(("workload", "synthetic", "models", name), get_model, name)


def _check_odd(s: Scenario, gen) -> None:
    """An odd-shape stream's sizes are a range and its sides fit the pod (a shape the pod's rules refuse is counted
    never placeable unless solver.fold allows reshaping it)."""
    odd = s.workload.odd
    if odd.max_chips < odd.min_chips:
        raise FieldError(("workload", "odd", "max_chips"), f"max_chips {odd.max_chips} is below min_chips {odd.min_chips}")
    if gen.pod_shape and odd.max_side > max(gen.pod_shape):
        raise FieldError(("workload", "odd", "max_side"), f"max_side {odd.max_side} is longer than the {gen.id} pod's "
                                                          f"longest side {max(gen.pod_shape)}")
    _wrap(("workload", "odd", "min_chips"), odd_sizes, odd)  # a range with no shape in it: refused now, not in run


def _check_failure_events(s: Scenario, gen: Generation) -> None:
    """Failures drawn over the horizon (hosts, OCS units, ICI cables) stay within the events
    budget: the estimate draw_failures checks, refused before the run rather than in it."""
    from podsim.topology import PodLayout

    parts = [("host", s.failures.host), ("ocs", s.failures.ocs), ("link", s.failures.link)]
    if not any(spec is not None for _, spec in parts):
        return
    layout = PodLayout(gen, pods=s.topology.pods, ocs=s.topology.wiring == "ocs")
    counts = {"host": layout.n_hosts, "ocs": layout.n_ocs,
              "link": layout.n_chips * int(gen.ici_links_per_chip.value) // 2}  # each cable joins two chips
    for name, spec in parts:
        if spec is not None:  # the process is built inside: an availability whose MTBF is out of range names its field
            loc = ("failures", name, "availability" if spec.availability is not None else "mtbf")
            _wrap(loc, lambda spec=spec, name=name: check_failure_budget(spec.process(), name, counts[name], s.horizon))


def _check_multislice(loc: tuple, spec: SliceSpec, gen: Generation, ocs: bool, shape: str) -> None:
    """A multislice job's slices are whole cubes of an OCS pod (place_slices joins them over the DCN)."""
    if spec.kind != "cubes" or not (gen.has_ocs and ocs):
        raise FieldError(loc, f"a multislice job takes whole-cube slices of an OCS pod; {gen.id} {shape} is not one")


def _check_step(s: Scenario, gen: Generation) -> None:
    st = s.workload.step
    loc = ("workload", "step")
    ocs = s.topology.wiring == "ocs"
    spec = _wrap(loc + ("slice",), validate_shape, gen, parse_shape(st.slice), st.twisted, ocs)
    if st.model is not None:
        _wrap(loc + ("model",), get_model, st.model, dict(st.model_overrides) or None)
    if st.slices > 1:
        _check_multislice(loc + ("slices",), spec, gen, ocs, st.slice)
        if st.twisted:
            raise FieldError(loc + ("twisted",), "multislice jobs run on plain tori here; set twisted: false")
        # Slices beyond one pod go to the next pods behind the same DCN (place_slices).
    if st.parallelism is not None:
        plan = _wrap(loc + ("parallelism",), lambda t: parse_parallelism(resolve_plan(t, st.model, spec.chips)), st.parallelism)
        if plan.ici_chips != spec.chips:
            raise FieldError(loc + ("parallelism",), f"{st.parallelism!r} uses {plan.ici_chips} chips per slice; slice {st.slice} has {spec.chips} (the sizes other than dcn must multiply to {spec.chips})")
        if plan.dcn != st.slices and names_dcn(st.parallelism):
            raise FieldError(loc + ("parallelism",), f"{st.parallelism!r} has dcn={plan.dcn} but the job has {st.slices} slice(s); "
                             f"set dcn={st.slices} or leave dcn out (the slice count sets it)")
    if st.model is not None:
        study = _wrap(loc, step_study, s, gen)
        _wrap(loc + ("parallelism",), study_plan, study)
        _check_options(loc + ("options",), study)
    if s.failures.given:
        raise FieldError(("failures",), "a step study (workload.step) has no failures; failures apply to a job stream (workload.synthetic or workload.trace)")
    if s.horizon is not None:
        raise FieldError(("horizon",), "a step study (workload.step) has no horizon; its length is workload.step.steps")


def _check_options(loc: tuple, study: StepStudy) -> None:
    """Options the generator refuses for this model and plan (a batch-norm group on a transformer,
    micro-batches that do not divide the batch, ...) fail here, under `options`, not at run time."""
    if study.options != GenerateOptions():
        _wrap(loc, study_trace, study)


def _check_scaling(s: Scenario, gen: Generation) -> None:
    """The scaling section: increasing slice counts, a whole-cube OCS slice, a plan without dcn
    that fills the slice, a batch per slice its data-parallel axes split, counts the sites split."""
    sc = s.scaling
    loc = ("scaling",)
    counts = list(sc.slices)
    if len(counts) < 2:
        raise FieldError(loc + ("slices",), f"{counts}: give two or more slice counts, increasing, e.g. [1, 2, 4, 8]")
    for i, n in enumerate(counts):
        if n < 1:
            raise FieldError(loc + ("slices", i), f"slice count {n}: give whole numbers >= 1, e.g. [1, 2, 4, 8]")
        if i and n <= counts[i - 1]:
            raise FieldError(loc + ("slices", i), f"slice counts {counts} must increase ({n} after {counts[i - 1]})")
    spec = _wrap(loc + ("slice",), validate_shape, gen, parse_shape(sc.slice), False, s.topology.wiring == "ocs")
    _check_multislice(loc + ("slice",), spec, gen, s.topology.wiring == "ocs", sc.slice)
    if counts[-1] * spec.chips > MAX_FLEET_CHIPS:
        raise FieldError(loc + ("slices", len(counts) - 1), f"{counts[-1]} slices of {spec.chips} chips are more than "
                         f"{MAX_FLEET_CHIPS:,} chips (the fleet bound)")
    if "global_batch" in sc.model_overrides:
        raise FieldError(loc + ("model_overrides", "global_batch"), "leave global_batch out: the study sets it to "
                         "batch_per_slice x slices")
    _wrap(loc + ("model",), get_model, sc.model)
    _wrap(loc + ("model_overrides",), get_model, sc.model, dict(sc.model_overrides) or None)
    ploc = loc + ("parallelism",)
    if sc.parallelism is not None and plan_error(sc.parallelism):
        raise FieldError(ploc, plan_error(sc.parallelism))
    plan = _wrap(ploc, lambda t: parse_parallelism(resolve_plan(t, sc.model, spec.chips)), sc.parallelism)
    if plan.ici_chips != spec.chips:
        raise FieldError(ploc, f"{sc.parallelism!r} uses {plan.ici_chips} chips per slice; slice {sc.slice} has {spec.chips} "
                         f"(the sizes must multiply to {spec.chips})")
    if sc.batch_per_slice % plan.batch_shards:
        raise FieldError(loc + ("batch_per_slice",), f"{sc.batch_per_slice} does not split over data x fsdp x expert = "
                         f"{plan.batch_shards} of {plan}; give a multiple of {plan.batch_shards}")
    d = s.dcn
    if d.sites > 1:
        if d.kind != "eps":
            raise FieldError(("dcn", "sites"), "several sites are modelled on an EPS DCN (kind: eps)")
        for i, n in enumerate(counts):
            if n % d.sites:
                raise FieldError(loc + ("slices", i), f"slice count {n} does not split evenly over dcn.sites = {d.sites}; "
                                 f"give multiples of {d.sites}")
    _check_options(loc + ("options",), _wrap(loc, scaling_base, s, gen))


def _check_dcn(s: Scenario) -> None:
    d = s.dcn
    if d.sites > 1:
        st = s.workload.step
        if st is None:  # a job stream: the pods split over sites; multislice jobs cross them only with span_sites
            if s.topology.pods % d.sites:
                raise FieldError(("dcn", "sites"), f"{d.sites} sites must divide topology.pods {s.topology.pods} (equal pods per site)")
            if s.step_time.model == "engine" and d.kind != "eps":
                raise FieldError(("dcn", "sites"), "the engine's step time over several sites runs on an EPS DCN (kind: eps)")
            return
        if d.kind != "eps":
            raise FieldError(("dcn", "sites"), "several sites are modelled on an EPS DCN (kind: eps)")
        if st.slices < d.sites or st.slices % d.sites:
            raise FieldError(("dcn", "sites"), f"{d.sites} sites need the job's {st.slices} slice(s) to split evenly over them")
    if d.kind == "eps" and d.ocs_groups != "none":
        raise FieldError(("dcn", "ocs_groups"), "ocs_groups apply to an OCS DCN (kind: ocs); this one is eps")
    if d.ocs_groups == "job" and (s.workload.step is None or s.workload.step.slices < 2) and s.scaling is None:
        raise FieldError(("dcn", "ocs_groups"), "'job' engineers circuits among a multislice step job's blocks; "
                                                "the workload has no such job and there is no scaling section")


# ClusterConfig's fields -> where the scenario sets them (for errors the preflight finds)
_CONFIG_LOC = {"horizon_s": ("horizon",), "checkpoint_interval_s": ("policy", "checkpoint_interval"),
               "restart_overhead_s": ("policy", "restart_overhead"), "schedule_depth": ("policy", "schedule_depth"),
               "decision_time_limit": ("solver", "decision_time_limit"), "batch_window": ("solver", "batch_window"),
               "cpsat_workers": ("solver", "workers"), "degraded_slowdown": ("solver", "degraded_slowdown"),
               "pods": ("topology", "pods"), "sites": ("dcn", "sites"), "sample_interval_s": ("samples",)}


def _preflight_cluster(s: Scenario, gen: Generation) -> None:
    """Build what `run` builds before it simulates a job stream (the ClusterConfig, the
    synthetic stream's spec, the failure model), so a scenario that loads never fails on its
    inputs inside `run`: each error is a FieldError at the field that set it."""
    if s.workload.synthetic is not None:
        try:
            s.workload.synthetic.spec(gen.id)
        except (ValidationError, PodsimError) as exc:
            where, msg = first_error(exc) if isinstance(exc, ValidationError) else ("", str(exc))
            raise FieldError(("workload", "synthetic", *[p for p in where.split(".") if p]), msg) from None
    try:
        cluster_run(s, gen)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(err["loc"])
        head = _CONFIG_LOC.get(str(loc[1]) if len(loc) > 1 and loc[0] == "config" else str(loc[0]) if loc else "", ())
        raise FieldError(head, first_error(exc)[1]) from None
    except PodsimError as exc:
        if isinstance(exc, FieldError):
            raise
        raise FieldError((), str(exc)) from None


def _check_serving_scenario(s: Scenario, gen: Generation) -> None:
    """A serving fleet: its own duration, warm-up and drain; no study that runs a training step."""
    from podsim.scenario.serving import check_serving

    for name in ("horizon", "drain_limit"):
        if getattr(s, name) is not None:
            raise FieldError((name,), f"{name} shapes a job stream; a serving workload has workload.serving.duration and drain")
    if s.warmup or s.drain:
        raise FieldError(("warmup" if s.warmup else "drain",), "a serving workload has its own workload.serving.warmup "
                                                                "and drain; leave the job stream's out")
    for name in ("spine", "scaling"):
        if getattr(s, name) is not None:
            raise FieldError((name,), f"a {name} study runs a training step; give workload.step, not workload.serving")
    if s.failures.given:
        raise FieldError(("failures",), "a serving fleet (workload.serving) runs no failures; failures apply to a job stream")
    _wrap(("workload", "serving"), check_serving, s.workload.serving, gen)


def check_scenario(s: Scenario) -> Generation:
    """Every cross-field rule, and for a job stream what `run` builds before it simulates
    (_preflight_cluster); returns the generation with overrides. Raises FieldError."""
    gen = scenario_generation(s)
    if s.topology.wiring == "ocs" and not gen.has_ocs:
        raise FieldError(("topology", "wiring"), f"{gen.id} has no OCS; use wiring: static")
    _wrap(("topology", "pods"), check_fleet, s.topology.pods, gen.pod_chips)
    if s.kind == "serving":
        _check_serving_scenario(s, gen)
    elif s.kind == "cluster":
        if gen.slice_rule == "gpu_nodes":
            raise FieldError(("topology", "generation"), f"{gen.id} is a switched GPU cluster; job streams place TPU slices")
        if s.horizon is None:
            raise FieldError(("horizon",), "a job stream needs a horizon (simulated time, e.g. 14d)")
        if s.horizon <= 0:
            raise FieldError(("horizon",), "horizon must be > 0")
        if s.warmup >= s.horizon:
            raise FieldError(("warmup",), f"warm-up {s.warmup:g} s must be shorter than the horizon {s.horizon:g} s "
                                          "(the steady-state metrics are measured after it)")
        if s.drain_limit is not None and not s.drain:
            raise FieldError(("drain_limit",), "drain_limit is how long a drain may run past the horizon; set drain: true too")
        if s.workload.synthetic is not None:
            _check_mix(s, gen)
        if s.workload.odd is not None:
            _check_odd(s, gen)
        _check_failure_events(s, gen)
    else:
        if s.warmup or s.drain:
            raise FieldError(("warmup" if s.warmup else "drain",), "warm-up and drain shape a job stream's measured "
                                                                    "window; a step study has none")
        _check_step(s, gen)
        if s.replicates > 1:
            raise FieldError(("replicates",), f"replicates {s.replicates}: a step study draws nothing at random, so every "
                                              "replicate would give the same figures; replicates repeat job streams")
    _check_dcn(s)
    if s.spine is not None and s.workload.step is None:
        raise FieldError(("spine",), "spine economics run the step workload on both spines; give workload.step (a step study)")
    if s.scaling is not None:
        _check_scaling(s, gen)
    if s.plan is not None:
        from podsim.scenario.plan import check_plan

        _wrap(("plan",), check_plan, s, gen)
    for model, plan in s.step_time.parallelism.items():
        loc = ("step_time", "parallelism", model)
        if model not in PRESETS:
            raise FieldError(loc, f"unknown model {model!r}; presets: {', '.join(PRESETS)}")
        if _wrap(loc, plan_template, plan).dcn != 1:
            raise FieldError(loc, f"{plan!r} names dcn; leave it out (each job's slice count sets dcn)")
    allowed = target_metrics(s.kind)
    for metric, value in s.targets.items():
        loc = ("targets", metric)
        if metric not in allowed:
            what = {"step": "step study", "serving": "serving fleet"}.get(s.kind, "job stream")
            raise FieldError(loc, f"no target on {metric!r} for a {what}; targets: {', '.join(allowed)}")
        _wrap(loc, parse_target, metric, value)
    if s.kind == "cluster":
        _preflight_cluster(s, gen)  # last: every field-level rule above names its own field first
    return gen
