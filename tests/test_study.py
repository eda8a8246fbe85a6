"""One step study (issue 24): a `StepStudy` is the one request for "this step on these slices" and
`run_study` the one way it is simulated. Every face builds a study and hands it over, so the same
study gives bit-identical step results through the CLI, the dashboard's page function, a scenario,
the scaling study, the cluster's step-time model and the validation table; a face that dropped an
option, or assembled the pipeline its own way, would differ here."""

from __future__ import annotations

import json

import pytest
from helpers import run_podsim

from podsim.engine import build_job, simulate_step, step_summary
from podsim.errors import PodsimError
from podsim.scenario import load_scenario_text, run_scenario
from podsim.study import EngineStepTime, RooflineStepTime, StepStudy, run_study
from podsim.study.multislice import MultisliceSpec, with_terms
from podsim.study.scaling import scaling_study
from podsim.study.study import study_plan, study_trace
from podsim.topology import DcnSpec, get_generation
from podsim.trace import GenerateOptions, generate_trace, save_trace

V4 = get_generation("tpu-v4")
SMALL = {"n_layers": 2, "global_batch": 32}
STEP = ("step_time_s", "compute_s", "comm_s", "exposed_comm_s")


def two_slices(**kw) -> StepStudy:
    """A 2-slice Llama-2 step (2 layers) with non-default routing, DCN and options: every face must
    pass each of them through."""
    fields = {"model": "llama2-70b", "plan": "fsdp=16,tensor=4", "model_overrides": SMALL, "slices": 2,
              "routing": "shortest_paths", "dcn": DcnSpec(oversubscription=2.0), "options": GenerateOptions(recompute="full")}
    return StepStudy("tpu-v4", "4x4x4", **{**fields, **kw})


def same_step(a, b) -> None:
    """Bit-identical step figures (== on floats, not approx)."""
    for k in STEP:
        got = a[k] if isinstance(a, dict) else getattr(a, k)
        want = b[k] if isinstance(b, dict) else getattr(b, k)
        assert got == want, (k, got, want)


def test_run_study_is_the_pipeline_it_replaces():
    """trace -> build_job -> simulate, by hand, gives exactly run_study's step."""
    s = two_slices()
    trace = generate_trace("llama2-70b", "4x4x4", "fsdp=16,tensor=4,dcn=2", generation=V4, overrides=SMALL,
                           options=GenerateOptions(recompute="full"))
    job = build_job(trace, V4, "4x4x4", 2, dcn=DcnSpec(oversubscription=2.0))
    r = run_study(s)
    engine = simulate_step(None, job, routing="shortest_paths")
    # several slices: the engine's step plus what the multislice terms add (podsim.study.multislice)
    same_step(r, with_terms(engine, s.multislice))
    assert r.step_time_s == engine.step_time_s + r.multislice["added_s"] and r.multislice["added_s"] > 0
    off = MultisliceSpec(straggler=False, ecmp_collisions=False)
    same_step(run_study(two_slices(multislice=off)), engine)
    assert study_plan(s) == "fsdp=16,tensor=4,dcn=2" and r.trace.meta["recompute"] == "full"
    assert r.fabric.dcn.oversubscription == 2.0 and r.slices == 2 and len(r.views) == 2


def test_cli_steptime_runs_the_same_study(tmp_path, capsys):
    """`podsim steptime --model` (and `--trace` of the same step saved to a file) is run_study."""
    s = two_slices()
    args = ("steptime", "--model", "llama2-70b", "-p", "fsdp=16,tensor=4", "--set", "n_layers=2", "--set", "global_batch=32",
            "--option", "recompute=full", "--generation", "tpu-v4", "--slice", "4x4x4", "--slices", "2",
            "--routing", "shortest_paths", "--oversubscription", "2", "--json")
    r = run_podsim(capsys, *args)
    assert r.code == 0, r.err
    cli = json.loads(r.out)["metrics"]
    direct = run_study(s)
    same_step(cli, direct)
    assert cli["parallelism"] == "fsdp=16,tensor=4,dcn=2" and cli["routing"] == "shortest_paths"
    save_trace(study_trace(s), tmp_path / "t.json")
    r = run_podsim(capsys, *args[:1], "--trace", str(tmp_path / "t.json"), *args[11:])
    assert r.code == 0, r.err
    same_step(json.loads(r.out)["metrics"], direct)


def test_the_cli_and_the_dashboard_name_each_multislice_terms_source():
    """One text of what the slices add (podsim.study.multislice.terms_text): the dashboard reads the
    study's notes, the CLI the run's *_source metrics, and both name every term's source (a renamed
    note key once left the dashboard's ECMP source empty)."""
    from podsim.cli.steptime import multislice_text
    from podsim.scenario.run import step_metrics
    from podsim.study.multislice import terms_text

    s = two_slices()
    r = run_study(s)
    ms = r.multislice
    page = terms_text(ms["straggler_wait_s"], ms["dcn_tail_s"], ms["ecmp_collision_s"], ms["notes"])
    assert ms["notes"]["straggler"] in page and ms["notes"]["ecmp_collision"] in page and "(off)" not in page
    assert multislice_text(step_metrics(s, r)) == page


def test_dashboard_step_page_runs_the_same_study():
    """The Step time page's widgets become a StepStudy (app_pages.step_run.page_study, no Streamlit);
    what it shows is that study's run."""
    from app_pages.step_run import page_study, step_view

    study = page_study("tpu-v4", "4x4x4", False, None, 2, "eps", 2.0, 1, "shortest_paths", model="bert-large",
                       plan="fsdp=16,tensor=4", global_batch=32, recompute="full")
    assert study.routing == "shortest_paths" and study.dcn.oversubscription == 2.0 and study.slices == 2
    shown = step_view(study)["summary"]
    direct = step_summary(run_study(two_slices(model="bert-large", model_overrides={"global_batch": 32})))
    same_step(shown, direct)


SCENARIO = """
name: llama2-70b
topology: {generation: tpu-v4, wiring: ocs, routing: shortest_paths}
dcn: {oversubscription: 2}
workload:
  step: {model: llama2-70b, slice: 4x4x4, slices: 2, parallelism: "fsdp=16,tensor=4",
         model_overrides: {n_layers: 2, global_batch: 32}, options: {recompute: full}}
"""


def test_scenario_step_study_runs_the_same_study():
    m = run_scenario(load_scenario_text(SCENARIO)).metrics
    same_step(m, run_study(two_slices()))
    assert m["parallelism"] == "fsdp=16,tensor=4,dcn=2" and m["dcn_oversubscription"] == 2.0


def test_scaling_study_runs_the_same_study_per_count(capsys):
    """The library's scaling study, `podsim scaling` and a scenario's scaling section: each row is
    run_study of the base study on that many slices, its batch per slice fixed."""
    base = two_slices(slices=1, model_overrides={"n_layers": 2})
    rows = scaling_study(base, [1, 2], 16)
    for i, n in enumerate((1, 2)):
        r = run_study(base.replace(slices=n, model_overrides={"n_layers": 2, "global_batch": 16 * n}))
        assert rows["step_time_s"][i] == r.step_time_s and rows["exposed_comm_s"][i] == r.exposed_comm_s
    cli = run_podsim(capsys, "scaling", "llama2-70b", "--slice", "4x4x4", "-p", "fsdp=16,tensor=4", "--slices", "1,2",
                     "--batch-per-slice", "16", "--set", "n_layers=2", "--option", "recompute=full",
                     "--routing", "shortest_paths", "--oversubscription", "2", "--json")
    assert cli.code == 0, cli.err
    assert json.loads(cli.out)["step_time_s"] == rows["step_time_s"]
    text = SCENARIO + \
        "scaling: {model: llama2-70b, slice: 4x4x4, slices: [1, 2], batch_per_slice: 16, parallelism: 'fsdp=16,tensor=4',\n" \
        "          model_overrides: {n_layers: 2}, options: {recompute: full}}\n"
    t = run_scenario(load_scenario_text(text)).tables["scaling"]
    assert list(t["step_time_s"]) == rows["step_time_s"]


CLUSTER = """
name: c
topology: {{generation: tpu-v4, pods: 1, routing: shortest_paths}}
workload: {{synthetic: {{jobs: 2, rate: 4/h, mix: {{4x4x4: 1}}, slices: {{2: 1}}, models: {{bert-large: 1}},
                       steps: {{kind: fixed, median: 100}}}}}}
step_time: {{model: {model}, parallelism: {{bert-large: "tensor=4,fsdp=auto"}}}}
horizon: 1d
"""


def test_cluster_step_time_runs_the_same_study():
    """A job stream's engine step time is run_study of the job's study: the scenario's routing and
    the model's plan included."""
    t = run_scenario(load_scenario_text(CLUSTER.format(model="engine"))).tables["step_times"]
    study = StepStudy(V4, (4, 4, 4), model="bert-large", plan="tensor=4,fsdp=auto", slices=2, routing="shortest_paths")
    r = run_study(study)
    assert set(t["step_time_s"]) == {r.step_time_s} and set(t["exposed_comm_s"]) == {r.exposed_comm_s}
    added = r.multislice["added_s"]  # two slices: the multislice terms are in the step and named in the source
    assert set(t["source"]) == {"engine (tensor=4,fsdp=16,dcn=2, 2 slices; compute by the per-op model; "
                                f"+ straggler wait and ECMP collisions {added:.3g} s)"}


def test_roofline_honours_the_plan_it_is_given():
    """The silent wrong result of issue 24: a roofline job stream with step_time.parallelism timed
    the default plan. Now the roofline runs the job's study, plan included: its step is the
    engine's compute for that plan, and it says which plan."""
    t = run_scenario(load_scenario_text(CLUSTER.format(model="roofline"))).tables["step_times"]
    study = StepStudy(V4, (4, 4, 4), model="bert-large", plan="tensor=4,fsdp=auto", slices=2)
    assert set(t["step_time_s"]) == {RooflineStepTime().estimate(study).step_time_s}
    assert set(t["source"]) == {"roofline, per-op compute (tensor=4,fsdp=16,dcn=2), 2 slices, DCN traffic not modelled"}
    eng = EngineStepTime().estimate(study)
    assert t["step_time_s"][0] == pytest.approx(eng.compute_s, rel=1e-9)
    default = RooflineStepTime().estimate(study.replace(plan=None))
    assert default.step_time_s != t["step_time_s"][0] and "fsdp=64,dcn=2" in default.source


def test_validation_rows_run_the_same_study():
    """A validation row is a StepStudy of its fields (M4: ResNet-50 on 8 v4 chips, TF1 settings: round
    0.7's CrossShardOptimizer reduces fp32 gradients)."""
    from podsim.validation import ROWS
    from podsim.validation.table import predict

    row = next(r for r in ROWS if r.id == "M4")
    study = StepStudy("tpu-v4", "2x2x2", model="resnet50", plan="data=8", model_overrides={"global_batch": 2048},
                      options=GenerateOptions(combine_grad_reduce=True, replicas_per_chip=2, grad_bytes=4), name="M4")
    same_step(predict(row), step_summary(run_study(study)))


def test_steptime_and_run_json_share_one_shape(tmp_path, capsys):
    """`podsim steptime --json` and `podsim run --json` of one step: the same fields (RunResult.summary
    with the step_kinds table), the same metric names (all registered), the same step figures."""
    from podsim.metrics import METRICS

    f = tmp_path / "s.yaml"
    f.write_text(SCENARIO)
    run = run_podsim(capsys, "run", str(f), "--out", str(tmp_path / "out"), "--no-report", "--json")
    assert run.code == 0, run.err
    step = run_podsim(capsys, "steptime", "--model", "llama2-70b", "-p", "fsdp=16,tensor=4", "--set", "n_layers=2",
                      "--set", "global_batch=32", "--option", "recompute=full", "--generation", "tpu-v4", "--slice", "4x4x4",
                      "--slices", "2", "--routing", "shortest_paths", "--oversubscription", "2", "--json")
    assert step.code == 0, step.err
    a, b = json.loads(run.out), json.loads(step.out)
    assert set(a) - {"outputs"} == set(b) and set(a["metrics"]) == set(b["metrics"])
    assert set(a["tables"]) == set(b["tables"]) == {"step_kinds", "compute_constants"} and a["tables"] == b["tables"]
    assert b["tables"]["compute_constants"]["name"] == ["tpu-v4:matmul:bf16", "tpu-v4:hbm"]
    assert not [k for k in b["metrics"] if k not in METRICS]
    assert b["metrics"]["tier_spine_busy_s"] > 0 and "tier_leaf_link_busy_s" in b["metrics"]  # the DCN's tiers too
    same = {k for k in a["metrics"] if k != "engine_wall_s"}
    assert {k: a["metrics"][k] for k in same} == {k: b["metrics"][k] for k in same}


def test_a_study_refuses_what_it_cannot_honour():
    for kw, msg in (({}, "needs a model .* or a trace"),
                    ({"model": "llama2-70b", "slices": 1, "dcn": DcnSpec(sites=2)}, "cannot span 2 sites"),
                    ({"model": "llama2-70b", "compute_efficiency": 0.0}, r"must be in \(0, 1\]"),
                    ({"model": "llama2-70b", "routing": "valiant"}, "routing 'valiant' is not known"),
                    ({"model": "llama2-70b", "engineer_dcn": True}, "needs an OCS DCN"),
                    ({"model": "gpt9"}, "unknown model 'gpt9'"),
                    ({"model": "llama2-70b", "model_overrides": {"n_layerz": 2}}, "'n_layerz' cannot be set")):
        with pytest.raises(PodsimError, match=msg):
            StepStudy("tpu-v4", "4x4x4", **kw)
    trace = generate_trace("resnet50", "2x2x2", "data=8", overrides={"global_batch": 64})
    for kw in ({"plan": "data=8"}, {"options": GenerateOptions(recompute="full")}, {"model_overrides": {"global_batch": 8}}):
        with pytest.raises(PodsimError, match="a trace already holds its ops"):
            StepStudy("tpu-v4", "2x2x2", trace=trace, **kw)
    with pytest.raises(PodsimError, match="dcn=2 but the job has 4 slice"):
        study_plan(StepStudy("tpu-v4", "4x4x4", model="llama2-70b", plan="fsdp=auto,dcn=2", slices=4))


def test_cli_steptime_refuses_options_it_would_drop(capsys, tmp_path):
    """Collective mode has no slices, DCN or compute; step mode has no collective size: each such
    flag is refused in one line instead of being ignored."""
    base = ("steptime", "--generation", "tpu-v4", "--slice", "4x4x4")
    for extra, needle in ((("--collective", "all_reduce", "--bytes", "1MiB", "--slices", "2"), "--slices applies to a step"),
                          (("--collective", "all_reduce", "--bytes", "1MiB", "--compute-efficiency", "0.5"), "--compute-efficiency applies"),
                          (("--model", "llama2-70b", "--bytes", "1MiB"), "--bytes applies to one collective"),
                          (("--model", "llama2-70b", "--option", "precision=fp16"), "--option precision: Input should be 'bf16', 'int8' or 'fp8'"),
                          (("--model", "llama2-70b", "--option", "nope=1"), "--option nope: unknown option; options: microbatches, recompute")):
        r = run_podsim(capsys, *base, *extra)
        assert r.code == 2 and needle in r.err and len(r.err.strip().splitlines()) == 1, (extra, r.err)
    save_trace(generate_trace("resnet50", "4x4x4", "data=64"), tmp_path / "t.json")
    r = run_podsim(capsys, *base, "--trace", str(tmp_path / "t.json"), "-p", "data=64")
    assert r.code == 2 and "--parallelism shapes a generated step" in r.err


def test_study_is_a_hashable_value():
    """Equal studies are one cache key (the cluster asks once per study)."""
    a, b = two_slices(), two_slices()
    assert a == b and hash(a) == hash(b) and a.replace(slices=4) != a
    assert a.replace(sites=2).dcn.sites == 2 and a.sites == 1 and a.chips == 64 and a.shape == (4, 4, 4)
    assert StepStudy("tpu-v4", None, model="resnet50").shape == V4.pod_shape


@pytest.mark.parametrize("text,needle", [
    ("step_time: {model: roofline, efficiency: 0.5}", "step_time: 'efficiency' is now spelled 'compute_efficiency'"),
    ("dcn: {wan_latency: 1ms}", "dcn: 'wan_latency' is now spelled 'wan_latency_s'"),
    ("dcn: {switch_latency: 500ns}", "dcn: 'switch_latency' is now spelled 'switch_latency_s'"),
])
def test_renamed_scenario_fields_name_the_new_spelling(text, needle):
    base = "name: x\ntopology: {generation: tpu-v4}\nworkload: {synthetic: {jobs: 2, rate: 1/h}}\nhorizon: 1d\n"
    with pytest.raises(PodsimError) as e:
        load_scenario_text(base + text, source="s.yaml")
    msg = str(e.value)
    assert needle in msg and msg.startswith("s.yaml:5:") and "\n" not in msg
