"""Every face that shows a step time shows its error band (issue 32, build 6): the typical error
the validation corpus measured for runs of its kind, "8.1 s (typical error ±7% over 31 runs of
this kind)", and, where the corpus has no or too few runs of the kind (a GPU, or a generation
without rows), which broader kind the figure is for, or that the error is unknown: never a band
made up for a kind the corpus does not hold. Faces: `podsim steptime` (text, --json), `podsim
scaling` (text, --json), `podsim run` (text) and its report (HTML: the step's key figures, time
to train, the scaling section), the cluster's step-time table, and the dashboard's Step time and
capacity pages."""

from __future__ import annotations

import json
import math
from pathlib import Path

from helpers import run_podsim
from streamlit.testing.v1 import AppTest

from podsim.report import render_report
from podsim.scenario import load_scenario, run_scenario
from podsim.scenario.steptime import RecordingStepTime
from podsim.study import EngineStepTime, RooflineStepTime, StepStudy
from podsim.validation.bands import ErrorBand, step_band

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "tests" / "data" / "scenarios"
SMALL = ["--set", "n_layers=2", "--set", "global_batch=16"]
V4 = ["--model", "llama2-70b", "-p", "fsdp=16,tensor=4", *SMALL, "--generation", "tpu-v4", "--slice", "4x4x4"]
GPU = ["--model", "llama2-70b", "-p", "fsdp=2,tensor=4", *SMALL, "--generation", "gpu-h100", "--slice", "8"]


def _cells(out: str) -> str:
    """The text without whitespace and table borders: the CLI's table wraps long cells."""
    return "".join(ch for ch in out if not ch.isspace() and ch != "│")


def test_steptime_text_and_json_carry_the_band(capsys):
    v4 = step_band("tpu-v4")
    assert v4.covered  # the corpus holds single-slice v4 steps
    r = run_podsim(capsys, "steptime", *V4)
    assert r.code == 0, r.err
    text = _cells(r.out)
    assert _cells(f"({v4.text()})") in text and _cells(f"(±{v4.typical:.0%}, as the step time)") in text
    doc = json.loads(run_podsim(capsys, "steptime", *V4, "--json").out)["metrics"]
    assert doc["step_time_error_text"] == v4.text() and doc["step_time_error"] == v4.typical


def test_a_kind_the_corpus_lacks_says_so(capsys):
    """A GPU step: no row of the corpus is on a GPU, so the figure is the broader kind's and the
    text names the kind it lacks; a kind with no row at all is 'error unknown', no figure."""
    gpu = step_band("gpu-h100")
    assert not gpu.covered and gpu.typical is not None
    text = _cells(run_podsim(capsys, "steptime", *GPU).out)
    assert _cells("none or too few of single-slice steps on gpu-h100") in text
    doc = json.loads(run_podsim(capsys, "steptime", *GPU, "--json").out)["metrics"]
    assert doc["step_time_error_kind"] == "step/single-slice" and "gpu-h100" in doc["step_time_error_text"]
    none = ErrorBand(("step", "single-slice", "tpu-7x"), (), None, 0)
    assert none.text() == "no validation runs of this kind: error unknown" and math.isnan(none.interval(1.0)[0])


def test_scaling_text_and_json_carry_each_rows_band(capsys):
    args = ["scaling", "llama2-70b", "--slice", "4x4x4", "-p", "fsdp=16,tensor=4", "--slices", "1,2",
            "--batch-per-slice", "16", "--set", "n_layers=1", "--compute-efficiency", "0.6"]
    r = run_podsim(capsys, *args)
    assert r.code == 0, r.err
    assert "step time error" in r.out and f"1 slice(s): {step_band('tpu-v4').text()}" in r.out
    assert f"2 slice(s): {step_band('tpu-v4', 2).text()}" in r.out
    doc = json.loads(run_podsim(capsys, *args, "--json").out)
    assert doc["step_time_error_text"] == [step_band("tpu-v4", n).text() for n in (1, 2)]


def test_run_text_report_and_time_to_train_carry_the_band(capsys, tmp_path):
    r = run_podsim(capsys, "run", str(SCENARIOS / "tiny_step.yaml"), "-o", str(tmp_path / "out"))
    assert r.code == 0, r.err
    band = step_band("tpu-v4", 2)
    assert _cells(band.text()) in _cells(r.out)
    html = (tmp_path / "out" / "report.html").read_text()
    assert f"({band.text()})" in html  # the step time's key figure
    assert "(1,000 steps) (±" in html  # time to train scales with the step time: its band beside it


def test_report_scaling_section_names_each_kinds_band():
    run = run_scenario(load_scenario(SCENARIOS / "tiny_scaling.yaml"))
    html = render_report(run)
    assert "Step time error" in html and f"1 slice: {step_band('tpu-v4').text()}" in html
    assert f"2, 4 slices: {step_band('tpu-v4', 2).text()}" in html
    assert run.metrics["scaling_step_time_error_text"] == step_band("tpu-v4", 4).text()


def test_the_clusters_step_time_table_carries_the_band():
    """A job stream's step times (the step_times table the report draws): the engine's answers
    carry their kind's band; a roofline, which times no communication, is not what the corpus
    validates, and says so."""
    study = StepStudy("tpu-v4", "4x4x4", model="llama2-70b", plan="fsdp=16,tensor=4",
                      model_overrides={"n_layers": 1, "global_batch": 16}, compute_efficiency=0.6)
    eng, roof = RecordingStepTime(EngineStepTime()), RecordingStepTime(RooflineStepTime())
    eng.estimate(study)
    roof.estimate(study)
    assert eng.table()["step_time_error_text"] == [step_band("tpu-v4").text()]
    assert math.isnan(roof.table()["step_time_error"][0]) and "error unknown" in roof.table()["step_time_error_text"][0]


def test_dashboard_step_time_page_shows_the_band():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.session_state["model"] = "llama2-70b"
    at.switch_page("app_pages/steptime.py")
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    captions = [c.value for c in at.caption]
    band = step_band("tpu-v4")
    assert any(c.startswith("Step time ") and f"({band.text()})" in c and "MFU ±" in c for c in captions), captions
    assert [m for m in at.metric if m.label == "Step time"][0].proto.help == band.text()


def test_dashboard_capacity_page_step_time_cell():
    from app_pages.common import step_time_cell  # what the capacity page's runs table shows

    assert step_time_cell({"kind": "step", "step_time_s": 8.1, "step_time_error": 0.07}) == "8.1 s ±7%"
    assert "error unknown" in step_time_cell({"kind": "step", "step_time_s": 8.1, "step_time_error": float("nan")})
    assert step_time_cell({"kind": "cluster", "step_time_s": None, "step_time_error": None}) == "n/a"
