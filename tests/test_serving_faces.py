"""Serving on every face: `podsim serve`, a scenario's workload.serving (validation, replicates,
targets), the capacity search, a sweep over serving fields, the report and the dashboard page."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from helpers import run_podsim
from streamlit.testing.v1 import AppTest

from podsim.report import render_report
from podsim.scenario import load_scenario_text, run_scenario
from podsim.serving import ServingConfig, serving_capacity
from podsim.serving.spec import CapacitySearch
from podsim.sweep import load_sweep, open_executor, run_sweep

APP = Path(__file__).resolve().parent.parent / "app.py"
SMALL = {"model": "llama2-70b", "overrides": {"n_layers": 8}, "precision": {"weights": "int8"}}
FLAGS = ("serve", "-g", "tpu-v5e", "--slice", "2x4", "--model", "llama2-70b", "--override", "n_layers=8", "--weights", "int8",
         "--rate", "3/s", "--duration", "20s", "--prompt", "lognormal:mean=600,cv=1", "--output", "lognormal:mean=100,cv=1",
         "--seed", "5")
SCENARIO = """
name: serve-small
topology: {generation: tpu-v5e, wiring: static}
workload:
  serving:
    slice: 2x4
    model: {model: llama2-70b, overrides: {n_layers: 8}, precision: {weights: int8}}
    requests: {arrivals: {kind: poisson, rate: 3/s}, prompt: {kind: lognormal, mean: 600, cv: 1}, output: {kind: lognormal, mean: 100, cv: 1}}
    duration: 20s
seed: 5
"""


def test_podsim_serve_and_podsim_run_give_one_result(capsys):
    """The same serving fleet as flags and as a scenario: the same JSON schema and numbers."""
    code, out, err = run_podsim(capsys, *FLAGS, "--json")
    assert code == 0, err
    cli = json.loads(out)
    run = run_scenario(load_scenario_text(SCENARIO)).summary()
    volatile = ("engine_wall_s",)
    assert cli["kind"] == run["kind"] == "serving"
    assert {k: v for k, v in cli["metrics"].items() if k not in volatile} == {k: v for k, v in run["metrics"].items() if k not in volatile}
    assert cli["metrics"]["ttft_p99_s"] > 0 and cli["cost"]["price_per_chip_h_usd"] == 1.2


@pytest.mark.parametrize(("args", "message"), [
    (("--rate", "2/s", "--weights", "int4"), "--weights/--kv-cache/--matmul (model.precision): precision weights 'int4'"),
    (("--arrivals", "bursty"), "--rate/--arrivals/--cv/--time-scale (requests.arrivals): bursty arrivals need a rate"),
    (("--rate", "2/s", "--prompt", "gamma:3"), "--prompt 'gamma:3' is not understood"),
    (("--rate", "2/s", "--tensor", "4"), "must be equal"),
    (("--rate", "2/s", "--disaggregated", "two"), "give PREFILL:DECODE"),
    (("--rate", "2/s", "--batch", "static", "--decode-segments", "32,64"), "--decode-segments does not apply with --batcher idle"),
    (("--rate", "2/s", "--batch", "static", "--batcher", "saxml", "--kv", "reserve", "--decode-segments", "64,32"),
     "decode_segments [64, 32] must be increasing"),
    (("--rate", "2/s", "--max-seqs", "8", "--prefill-seqs", "9"), "prefill_seqs 9 is more than max_seqs 8"),
])
def test_podsim_serve_bad_flags_are_one_line(capsys, args, message):
    code, out, err = run_podsim(capsys, "serve", "-g", "tpu-v5e", "--slice", "2x4", "--model", "llama2-70b", "--override",
                                "n_layers=8", *args)
    assert code == 2 and message in err and "Traceback" not in err, err


@pytest.mark.parametrize(("yaml_edit", "message"), [
    (("tensor: null", "tensor: 3"), "workload.serving: tensor=3 does not divide"),
    (("requests: {arrivals:", "requests: {beams: 4, arrivals:"), "beam search shares a prompt's pages"),
    (("wiring: static", "wiring: ocs"), "has no OCS"),
    (("seed: 5", "seed: 5\nhorizon: 1h"), "horizon shapes a job stream"),
    (("seed: 5", "seed: 5\ntargets: {goodput: '>= 90%'}"), "no target on 'goodput' for a serving fleet"),
    (("seed: 5", "seed: 5\nfailures: {host: {availability: 99%}}"), "runs no failures"),
])
def test_bad_serving_scenarios_name_the_field(yaml_edit, message):
    text = SCENARIO.replace("precision: {weights: int8}}", "precision: {weights: int8}, tensor: null}").replace(
        "duration: 20s", "duration: 20s\n    batch: {kv: paged}")
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        s = load_scenario_text(text.replace(*yaml_edit))
        from podsim.scenario.check import check_scenario

        check_scenario(s)


def test_replicates_give_means_and_intervals():
    s = load_scenario_text(SCENARIO.replace("seed: 5", "seed: 5\nreplicates: 3\ntargets: {ttft_p99_s: '<= 5s'}"))
    r = run_scenario(s)
    iv = r.intervals["ttft_p99_s"]
    assert iv["n"] == 3 and iv["low"] <= r.metrics["ttft_p99_s"] <= iv["high"]
    each = [v for n, v in zip(r.table("replicates")["metric"], r.table("replicates")["value"], strict=True) if n == "ttft_p99_s"]
    assert len(each) == 3 and r.metrics["ttft_p99_s"] == pytest.approx(sum(each) / 3)
    assert r.targets[0]["met"] and r.targets[0]["interval"]["n"] == 3


def test_capacity_search_is_the_fewest_replicas():
    """The answer meets; one replica fewer missed (the search probed it); more replicas than
    the answer meet too (monotone, as the search assumes)."""
    cfg = ServingConfig.model_validate({
        "generation": "tpu-v5e", "slice": "2x4", "model": SMALL, "duration": 30, "seed": 2, "engine": "ideal",
        "requests": {"arrivals": {"kind": "poisson", "rate": 3600}, "prompt": {"kind": "fixed", "mean": 2000},
                     "output": {"kind": "fixed", "mean": 60}}})
    search = CapacitySearch(rate="30/s", ttft_p99="1s", tpot_p99="50ms", replicas=(1, 8), replicates=2)
    ans = serving_capacity(cfg, search)
    a = ans.answer
    assert a is not None and a.met and a.chips == 8 * a.replicas
    probed = {p.replicas: p for p in ans.probes}
    assert a.replicas > 1 and not probed[a.replicas - 1].met
    assert all(p.met for n, p in probed.items() if n >= a.replicas)
    assert a.mean("ttft_p99_s") <= 1.0 and probed[a.replicas - 1].mean("ttft_p99_s") > 1.0 or "tpot" in probed[a.replicas - 1].why
    judged = serving_capacity(cfg, search.model_copy(update={"judge": "interval"}))
    assert judged.answer.replicas >= a.replicas  # the cautious judge never needs fewer


def test_sweep_over_serving_fields(tmp_path):
    """Sweeps reach the serving workload's fields like any other: slice shape, generation, batch
    policy and replicas."""
    (tmp_path / "base.yaml").write_text(SCENARIO)
    (tmp_path / "sweep.yaml").write_text(
        "sweep: serving-points\nbase: base.yaml\npoints:\n"
        "  - {label: 4x4, workload.serving.slice: 4x4}\n"
        "  - {label: v6e, topology.generation: tpu-v6e}\n"
        "  - {label: separate, workload.serving.batch.prefill: separate}\n"
        "  - {label: two, workload.serving.replicas: 2}\n"
        "show: [ttft_p99_s, tokens_per_s_per_chip]\n")
    with open_executor("serial") as h:
        out = run_sweep(load_sweep(tmp_path / "sweep.yaml"), h, tmp_path / "r.duckdb")
    assert out.ran == 4 and out.failed == 0
    m = {r["label"]: r["metrics"] for r in out.points}
    assert (m["4x4"]["chips"], m["v6e"]["generation"], m["separate"]["batch_policy"], m["two"]["chips"]) == (
        16, "tpu-v6e", "continuous/separate", 16)


def test_report_of_a_serving_run_and_of_a_comparison():
    r = run_scenario(load_scenario_text(SCENARIO))
    html = render_report(r)
    assert '<section id="serving">' in html and 'data-name="TTFT CDF"' in html and "HBM per chip of one replica" in html
    other = run_scenario(load_scenario_text(SCENARIO.replace("rate: 3/s", "rate: 6/s")))
    both = render_report([r, other], labels=["3/s", "6/s"])
    assert both.count("TTFT p50 / p95 / p99") == 1 and "3/s" in both and "6/s" in both
    assert not math.isnan(other.metrics["ttft_p99_s"]) and other.metrics["tokens_per_s"] > 1.5 * r.metrics["tokens_per_s"]


def test_dashboard_serving_page():
    at = AppTest.from_file(str(APP), default_timeout=300)
    at.session_state["sv_minutes"] = 0.5
    at.switch_page("app_pages/serving.py")
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    labels = {m.label for m in at.metric}
    assert {"TTFT p99", "TPOT p99", "SLO attainment", "Cost per M tokens"} <= labels
    assert any(c.proto.id.endswith("-ttft_cdf") for c in at.get("plotly_chart"))
    at.session_state["sv_slice"] = "3x3"
    at.run()
    assert not at.exception and "tensor=9 does not divide" in at.error[0].value


def test_every_serving_metric_is_registered():
    from podsim.metrics import METRICS

    r = run_scenario(load_scenario_text(SCENARIO.replace("duration: 20s", "duration: 20s\n    capacity: {rate: 3/s, ttft_p99: 5s, "
                                                         "tpot_p99: 1s, replicas: [1, 1], replicates: 1}")))
    assert sorted(set(r.metrics) - set(METRICS)) == []


def test_podsim_validate_a_serving_scenario(capsys):
    code, out, err = run_podsim(capsys, "validate", str(Path(__file__).resolve().parent.parent / "scenarios" / "i_serving_capacity.yaml"))
    assert code == 0 and "serving fleet: llama2-70b on 6 x 2x4, poisson arrivals for 180 s, capacity search" in out, err
