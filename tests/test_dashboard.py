"""The dashboard under Streamlit's AppTest: every page loads, its key widgets change what it shows,
and the figures shown are the library's (values checked, not only "no exception").

AppTest runs the app script in-process; `.run()` follows every widget change. Results are cached
with st.cache_data across the tests of one process, as in a server.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import run_podsim
from streamlit.testing.v1 import AppTest
from test_trace_native import README_EXAMPLE

from podsim.scenario import load_scenario, run_scenario
from podsim.store import append_run, list_runs
from podsim.sweep import load_sweep, open_executor, run_sweep

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "app.py"
SCENARIOS = ROOT / "tests" / "data" / "scenarios"
NATIVE_TRACE = README_EXAMPLE.encode()  # the README's native trace example


def make_store(folder: Path) -> Path:
    """A results store as `podsim run` and `podsim sweep` leave it: a job-stream run, a step study,
    a 4-point grid sweep (2 rates x 2 replicates) and the tests' capacity sweep (about 1 s)."""
    store = folder / "results.duckdb"
    for name in ("tiny.yaml", "tiny_step.yaml"):
        append_run(store, run_scenario(load_scenario(SCENARIOS / name)))
    grid = folder / "rates.yaml"
    grid.write_text(f"sweep: rates\nbase: {SCENARIOS / 'tiny.yaml'}\n"
                    "grid:\n  workload.synthetic.rate: [1/h, 3/h]\nreplicates: 2\nseed: 3\n")
    with open_executor("serial") as handle:
        run_sweep(load_sweep(grid), handle, store)
        run_sweep(load_sweep(SCENARIOS / "capacity.yaml"), handle, store)
    return store


def ok(at: AppTest) -> AppTest:
    """No exception and no error box on the page."""
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def open_page(page: str, **state) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=120)
    for key, value in state.items():
        at.session_state[key] = value
    at.switch_page(f"app_pages/{page}.py")
    return at.run()


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def deltas(at: AppTest) -> dict[str, str]:
    return {m.label: m.proto.delta for m in at.metric}


def chart(at: AppTest, key: str) -> dict:
    """The plotly figure (as JSON) of the chart with this key."""
    found = [c for c in at.get("plotly_chart") if c.proto.id.endswith(f"-{key}")]
    assert len(found) == 1, f"no chart {key!r}"
    return json.loads(found[0].proto.spec)


def traces(fig: dict) -> dict[str, dict]:
    return {t.get("name"): t for t in fig["data"]}


def numbers(values) -> np.ndarray:
    """Plotly's JSON may hold arrays as lists or as typed buffers ({'dtype', 'bdata'})."""
    if isinstance(values, dict):
        import base64
        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"]).astype(float)
    return np.array([np.nan if v is None else v for v in values], float)


def test_app_is_navigation_only():
    """app.py declares the pages and runs the navigation; the library never imports streamlit."""
    text = APP.read_text()
    assert "st.navigation(" in text and ".run()" in text
    assert "podsim" not in text.split('"""', 2)[-1].replace("app_pages", "")
    code = "import sys, podsim.cli, podsim.cluster, podsim.engine, podsim.placement, podsim.trace; assert 'streamlit' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


# --- Topology ------------------------------------------------------------------------------------

def test_topology_page_figures_and_3d_view():
    at = ok(open_page("topology"))
    assert at.title[0].value == "Topology"
    m = metrics(at)
    assert m["Chips"] == "128" and m["Cubes"] == "2" and m["OCS circuits"] == "96"
    assert m["Bisection bandwidth"] == "1.44 TB/s" and m["Diameter"] == "8 hops"  # 32 links x 45 GB/s; 2+2+4
    assert m["All-reduce bandwidth"] == "34.56 TB/s"  # 128 chips x 6 ports x 45 GB/s
    fig = traces(chart(at, "torus"))
    assert {"cube 0", "cube 1", "copper ICI: 288 cables", "optical ICI via OCS: 16 cables",
            "optical ICI via OCS wraparound: 80 cables"} <= set(fig)
    assert len(numbers(fig["cube 0"]["x"])) == len(numbers(fig["cube 1"]["x"])) == 64
    circuits = at.dataframe[-1].value
    assert len(circuits) == 96 and set(circuits["face A"]) == {"+"}

    at.checkbox(key="twisted").check().run()
    ok(at)
    m, d = metrics(at), deltas(at)
    assert m["Diameter"] == "6 hops" and d["Diameter"] == "-2 vs plain"  # the v4 paper's twisted 4x4x8
    assert m["Bisection bandwidth"] == "2.88 TB/s" and d["Bisection bandwidth"] == "+100% vs plain"

    at.toggle(key="ocs").set_value(False).run()  # static wiring: the slice is a mesh on fixed fibers
    ok(at)
    m = metrics(at)
    assert m["OCS circuits"] == "0" and m["Diameter"] == "13 hops" and m["Bisection bandwidth"] == "720 GB/s"
    assert "optical ICI (fixed fibers): 16 cables" in traces(chart(at, "torus"))
    assert "fixed fibers" in at.info[0].value


def test_topology_page_static_pod_and_bad_shape():
    at = ok(open_page("topology", gen="tpu-v5e", whole_pod=True))
    m = metrics(at)
    assert m["Chips"] == "256" and m["Bisection bandwidth"] == "1.6 TB/s"  # documented v5e pod figures
    assert m["All-reduce bandwidth"] == "51.2 TB/s" and m["Diameter"] == "16 hops"
    assert "copper ICI wraparound: 32 cables" in traces(chart(at, "torus"))

    at.checkbox(key="whole_pod").uncheck().run()
    at.text_input(key="shape_tpu-v5e").input("8x9").run()
    assert not at.exception
    assert "8x9 is not a tpu-v5e shape" in at.error[0].value and not at.metric


# --- Placement -----------------------------------------------------------------------------------

def test_placement_page_default_batch_map_and_stats():
    at = ok(open_page("placement"))
    m = metrics(at)
    assert m["Placed"] == "4 of 5" and m["Chips placed"] == "3,716" and m["Utilisation"] == "90.7%"
    assert m["Solver"] == "OPTIMAL" and m["Largest placeable after"] == "4x4x8"
    results = at.dataframe[1].value.set_index("id")
    assert results.loc["train-a", "topology"] == "twisted torus" and results.loc["train-a", "OCS circuits"] == 96
    assert results.loc["dev-1", "where"] == "cube 1 at (0, 0, 0)"
    assert "needs 16 healthy cubes" in results.loc["big", "reason"] and not results.loc["big", "placed"]
    fig = traces(chart(at, "pod_map"))
    assert {"free", "failed", "train-a", "train-b", "dev-1", "huge"} <= set(fig)
    assert len(numbers(fig["huge"]["x"])) == 48 and len(numbers(fig["train-b"]["x"])) == 8
    assert len(numbers(fig["failed"]["x"])) == 1  # cube 5
    assert len(numbers(fig["failed parts (hosts, chips, OCS ports)"]["x"])) == 3  # cubes 1, 3 (OCS port), 18
    stats = dict(at.dataframe[2].value.values)
    assert stats["solver"] == "cpsat (OPTIMAL)" and stats["kept greedy hint / completed by greedy"] == "False / 0"


def test_placement_page_edits_solver_and_bad_input():
    at = ok(open_page("placement"))
    # delete 'huge' (row 4) and shrink 'big' to a plain 8x8x16 torus: both then fit
    at.session_state["requests_default-tpu-v4"] = {"edited_rows": {3: {"twisted": False}}, "added_rows": [],
                                                    "deleted_rows": [4]}
    ok(at.run())
    m = metrics(at)
    assert m["Placed"] == "4 of 4" and m["Chips placed"] == str(f"{128 + 512 + 4 + 1024:,}")
    at.radio(key="solver").set_value("greedy").run()
    ok(at)
    stats = dict(at.dataframe[2].value.values)
    assert stats["solver"].startswith("greedy") and stats["objective / bound"] == "n/a (greedy)"
    assert metrics(at)["Placed"] == "4 of 4"

    at.text_area(key="failures_tpu-v4").input("hosts: [99999]").run()
    assert not at.exception and "hosts" in at.error[0].value and "does not exist" in at.error[0].value


def test_placement_page_uploaded_requests_on_a_static_pod():
    at = ok(open_page("placement", gen="tpu-v5e"))
    assert metrics(at)["Placed"].endswith("of 5")
    fig = chart(at, "pod_map")
    assert sum(len(numbers(t["x"])) for t in fig["data"] if not t["name"].startswith("failed parts")) == 256
    at.file_uploader(key="requests_file").upload(
        "reqs.yaml", b"- {id: a, shape: 16x16}\n- {id: b, shape: 2x2, priority: 1}\n").run()
    ok(at)
    assert list(at.dataframe[0].value["id"]) == ["a", "b"]
    m = metrics(at)
    assert m["Placed"] == "1 of 2" and m["Chips placed"] == "4"  # host 3 is down: no full 16x16
    at.file_uploader(key="requests_file").upload("reqs.yaml", b"- {id: a, shape: 3x5}\n").run()
    assert not at.exception and "field 'shape'" in at.error[0].value


# --- Step time -----------------------------------------------------------------------------------

def test_steptime_page_preset_model():
    at = ok(open_page("steptime", model="resnet50"))
    m = metrics(at)
    assert m["Model FLOPs utilisation"].endswith("%")
    # no recomputation: hardware FLOPs are the model's plus the optimiser's
    assert float(m["Model FLOPs utilisation"][:-1]) <= float(m["Hardware FLOPs utilisation"][:-1]) < float(m["Model FLOPs utilisation"][:-1]) + 0.5
    gantt = chart(at, "gantt")
    bars = sum(len(numbers(t["x"])) for t in gantt["data"])
    heading = at.subheader[0].value
    assert heading.startswith("resnet50") and f": {bars} ops" in heading  # one bar per op of the step
    assert {t["name"] for t in gantt["data"]} == {"compute", "all_reduce"}
    assert [b.proto.label for b in at.get("download_button")] == ["Download the timeline for Perfetto"]
    brk = traces(chart(at, "breakdown"))
    compute_s, exposed_s = numbers(brk["compute"]["x"])[0], numbers(brk["exposed communication"]["x"])[0]
    ends = [float(b + w) for t in gantt["data"] for b, w in zip(numbers(t["base"]), numbers(t["x"]), strict=True)]
    assert math.isclose(compute_s + exposed_s, max(ends), rel_tol=1e-6)  # step = compute + exposed = last op's end
    heat = chart(at, "heatmap")["data"][0]
    assert heat["y"] == ["x+", "x-", "y+", "y-", "z+", "z-"] and len(heat["x"]) == 128
    z = np.array([numbers(row) for row in heat["z"]]) if isinstance(heat["z"], list) else numbers(heat["z"])
    assert np.nanmax(z) <= 100 and np.nanmax(z) > 0
    # the constants the per-op model read, with their basis, as `podsim steptime` prints them
    assert any("compute constants: tpu-v4:matmul:bf16 0.905 (calibrated on a validation row), tpu-v4:hbm" in c.value
               for c in at.caption)

    at.checkbox(key="flat").check().run()
    at.slider(key="efficiency").set_value(1.0).run()
    assert not any("compute constants" in c.value for c in at.caption)  # a flat efficiency reads none
    faster = numbers(traces(chart(ok(at), "breakdown"))["compute"]["x"])[0]
    # the per-op model is slower than 100% of peak with nothing padded or memory-bound
    assert faster < compute_s * 0.99


@pytest.mark.slow  # every preset model through the page (make test)
def test_steptime_page_default_fits_and_every_preset_opens():
    """The page's default step is a run that can happen (it fits the chip's HBM); a batch that
    cannot fit gets the warning; every preset opens (two had no default plan and raised)."""
    at = ok(open_page("steptime"))
    assert not at.warning and at.subheader[0].value.startswith("llama2-70b")
    at.number_input(key="batch_llama2-70b").set_value(1024).run()
    assert "GiB of HBM per chip" in ok(at).warning[0].value
    for model in ("bert-large", "palm-540b"):
        at = ok(open_page("steptime", model=model, **{f"batch_{model}": 128}))
        assert at.subheader[0].value.startswith(model)


MULTISLICE_TRACE = b"""podsim_trace: 1
name: two layers on four slices
meta: {slices: 4}
ops:
  - {id: fwd, kind: compute, duration_s: 0.01}
  - {id: bwd, kind: compute, duration_s: 0.01, deps: [fwd]}
  - {id: grads, kind: all_reduce, bytes: 64MiB, group: dcn, deps: [bwd]}
"""


def test_steptime_page_multislice_prices_the_dcn():
    """A trace made for four slices runs on four (one slice is refused, not priced at zero):
    its gradient all-reduce crosses the DCN, busy and exposed after the last compute."""
    at = open_page("steptime", source="Upload a trace", **{"shape_tpu-v4": "4x4x4"})
    at.file_uploader(key="trace_files").upload("ms.yaml", MULTISLICE_TRACE).run()
    assert "is for 4 slice(s)" in at.error[0].value
    at.number_input(key="slices").set_value(4).run()
    m = metrics(ok(at))
    assert m["DCN busy"] == m["DCN exposed"] and m["DCN busy"] not in ("0 s", "0 ns")
    assert "4 Cloud TPU v4 4x4x4 slices" in at.caption[1].value


def test_steptime_page_dcn_tiers():
    """The DCN in tiers from the page (the library's spec): a 2:1 ToR halves what the four
    slices' chips get, so the DCN all-reduce takes twice as long, and the page shows it per tier;
    a bad spec is one inline line."""
    at = open_page("steptime", source="Upload a trace", **{"shape_tpu-v4": "4x4x4"})
    at.file_uploader(key="trace_files").upload("ms.yaml", MULTISLICE_TRACE).run()
    at.number_input(key="slices").set_value(4).run()
    flat = metrics(ok(at))["DCN busy"]
    at.text_input(key="dcn_tiers").set_value("tor=24x200/2,aggregation=48x200/2,spine=512x200*4").run()
    m = metrics(ok(at))
    assert float(m["DCN busy"].split()[0]) == pytest.approx(2 * float(flat.split()[0]), rel=0.01)
    tiers = at.dataframe[0].value
    assert list(tiers["tier"]) == ["tor", "aggregation", "spine"] and tiers["busy"][1] == m["DCN busy"]
    at.text_input(key="dcn_tiers").set_value("tor=24x200").run()
    assert "aggregation: Field required" in at.error[0].value


def test_steptime_page_uploaded_trace_and_bad_uploads():
    at = ok(open_page("steptime", source="Upload a trace"))
    assert "Upload a trace" in at.info[0].value
    at.file_uploader(key="trace_files").upload("example.yaml", NATIVE_TRACE).run()
    ok(at)
    assert at.subheader[0].value.startswith("two-layer example") and ": 6 ops" in at.subheader[0].value
    assert metrics(at)["Model FLOPs utilisation"] == "n/a"
    assert {t["name"] for t in chart(at, "gantt")["data"]} == {"compute", "all_reduce", "send_recv"}

    at.file_uploader(key="trace_files").upload("evil.yaml", b"podsim_trace: 1\nops: !!python/object/apply:os.system [id]\n").run()
    assert not at.exception and "could not determine a constructor" in at.error[0].value
    at.file_uploader(key="trace_files").upload("huge.json", b" " * (20 * 2**20 + 1)).run()
    assert not at.exception and "above the 20 MB upload limit" in at.error[0].value


# --- Cluster -------------------------------------------------------------------------------------

@pytest.mark.slow  # issue 24: the quick tier under 2 min of 2 cores; runs in make test
def test_cluster_page_ocs_against_static():
    at = ok(open_page("cluster"))
    m, d = metrics(at), deltas(at)
    assert m["Completed"].endswith("of 300") and d["Utilisation (OCS)"].endswith("pts vs static")
    util = float(m["Utilisation (OCS)"].rstrip("%")) / 100
    good = float(m["Goodput (OCS)"].rstrip("%")) / 100
    bars = chart(at, "goodput")
    hours = {t["name"]: numbers(t["y"]) for t in bars["data"]}
    assert list(bars["data"][0]["x"]) == ["OCS", "static"]
    fleet = sum(h for h in hours.values())
    assert np.allclose(fleet, 4096 * 7 * 24)  # every chip-hour of the week is accounted for
    idle = hours["idle while jobs waited (fragmentation, queue order)"] + hours["idle, no job waiting"]
    alloc = fleet - idle - hours["down (failed parts)"]  # every other bucket is held by a job
    assert math.isclose(hours["useful"][0] / alloc[0], good, abs_tol=0.0006)
    healthy = fleet - hours["down (failed parts)"]
    assert math.isclose(1 - idle[0] / healthy[0], util, abs_tol=0.0006)
    series = traces(chart(at, "utilisation"))  # drawn by podsim.report.figures, as in the report
    assert {"OCS", "static"} <= set(series) and len(numbers(series["OCS"]["x"])) >= 400
    u = numbers(series["OCS"]["y"])
    assert 0 <= np.nanmin(u) and np.nanmax(u) <= 1  # a fraction, as the report draws it
    assert {"OCS: queued", "static: queued"} <= set(traces(chart(at, "queue")))
    waits = traces(chart(at, "wait"))
    assert numbers(waits["OCS"]["y"])[-1] == 1  # the CDF ends at every started job
    assert {t["name"] for t in chart(at, "shape_goodput")["data"]} == {"OCS", "static"}
    assert any("never placeable" in c.value for c in at.caption)  # 4x4x32 does not fit a static pod


def test_cluster_page_form_no_failures_and_uploads():
    at = ok(open_page("cluster"))
    at.number_input(key="availability").set_value(1.0)
    at.checkbox(key="compare").uncheck()
    at.button[0].click().run()  # the form's submit button
    ok(at)
    hours = {t["name"]: numbers(t["y"]) for t in chart(at, "goodput")["data"]}
    assert list(chart(at, "goodput")["data"][0]["x"]) == ["OCS"]
    assert hours["down (failed parts)"][0] == 0 and hours["lost to failures (work since the last checkpoint)"][0] == 0

    at.text_input(key="synthetic").input("jobs=abc")
    at.button[0].click().run()
    assert not at.exception and "a number is expected" in at.error[0].value

    at.radio(key="stream_source").set_value("Upload").run()
    assert "Upload a job stream" in at.info[0].value
    csv = (ROOT / "tests" / "data" / "elasticflow_sample.csv").read_bytes()
    at.file_uploader(key="jobs_file").upload("trace.csv", csv)
    at.button[0].click().run()
    ok(at)
    n = len(csv.decode().strip().splitlines()) - 1
    assert metrics(at)["Completed"].endswith(f"of {n}")

    for name, data, message in (("jobs.csv", b"\xff\xfe\x00 binary", "jobs.csv: not UTF-8 text"),
                                ("spec.yaml", b"jobs: [1, 2]\n", "spec.yaml field 'jobs'")):
        at.file_uploader(key="jobs_file").upload(name, data)
        at.button[0].click().run()
        assert not at.exception and at.error[0].value.startswith(message), at.error[0].value  # names the upload, not a temp copy


@pytest.mark.parametrize("args, code", [(["--dry-run", "--port", "8765", "--headless"], 0),
                                        (["--dry-run", "--store", "out/x.duckdb"], 0), (["--port", "0"], 2)])
def test_dashboard_command(capsys, args, code):
    rc, out, err = run_podsim(capsys, "dashboard", *args)
    assert rc == code
    if code == 2:
        assert "--port 0 is not a TCP port" in err
        return
    assert "-m streamlit run" in out and str(APP) in out and "--browser.gatherUsageStats false" in out
    if "--store" in args:
        assert out.startswith(f"PODSIM_STORE={Path('out/x.duckdb').resolve()} ") and "--server.headless false" in out
    else:
        assert "--server.port 8765" in out and "--server.headless true" in out


# --- Capacity plan -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return make_store(tmp_path_factory.mktemp("store"))


@pytest.mark.slow  # issue 24: the quick tier under 2 min of 2 cores; runs in make test
def test_capacity_page_runs_side_by_side(store):
    rows = list_runs(store)
    at = ok(open_page("capacity", store=str(store)))
    m = metrics(at)
    assert m["Runs"] == "10" and m["Finished"] == "10" and m["Sweeps"] == "2"
    finished = [r for r in rows if r["targets_met"] is not None]
    assert m["Targets met"] == f"{sum(r['targets_met'] for r in finished)} of {len(finished)}"
    assert len(at.dataframe[0].value) == 10
    assert len(at.multiselect(key="picked_runs").value) == 2  # the newest two by default

    tiny = next(r for r in rows if r["name"] == "tiny" and not r["sweep_id"])
    step = next(r for r in rows if r["kind"] == "step")
    labels = [o for o in at.multiselect(key="picked_runs").options if o.endswith(tiny["run_id"][-6:]) or o.endswith(step["run_id"][-6:])]
    at.multiselect(key="picked_runs").set_value(labels).run()
    ok(at)
    key = at.dataframe[1].value.set_index("figure")
    assert sorted(key.columns) == ["tiny", "tiny-step"]
    assert key.loc["utilisation", "tiny"] == f"{tiny['utilisation']:.1%}" and key.loc["utilisation", "tiny-step"] == ""
    assert key.loc["step time", "tiny-step"] != "" and key.loc["step time", "tiny"] == ""
    targets = at.dataframe[2].value
    assert set(targets["run"]) == {"tiny", "tiny-step"} and set(targets["met"]) <= {"yes", "no"}
    assert [t.get("name") for t in chart(at, "runs-Utilisation")["data"]] == ["tiny"]  # only the job stream has a time series
    assert chart(at, "runs-Step-time breakdown")["data"]
    assert [b.proto.label for b in at.get("download_button")][0] == "Download the HTML report"


@pytest.mark.slow  # issue 24: the quick tier under 2 min of 2 cores; runs in make test
def test_capacity_page_sweeps(store):
    at = ok(open_page("capacity", store=str(store)))
    sweeps = at.selectbox(key="sweep")
    capacity = next(o for o in sweeps.options if o.startswith("tiny-capacity (capacity"))
    sweeps.set_value(capacity).run()
    answer = next(d.value for d in at.dataframe if "answer" in d.value.columns)
    assert answer.loc[0, "field"] == "topology.pods" and answer.loc[0, "answer"] == "2 (one seed)"
    assert answer.loc[0, "evaluated"].startswith("1 missed, 2 met")  # bisection: high first, then the midpoint
    wait = chart(at, "sweep-p95 wait by run, still-queued jobs counted (s)")["data"][0]
    assert list(wait["x"]) == ["heavy, pods=1", "heavy, pods=2", "heavy, pods=3", "heavy, pods=6"]
    waits = numbers(wait["y"])
    assert waits[0] > 2 * 3600 >= waits[1:].max()  # the target is p95 wait <= 2 h: one pod misses it

    grid = next(o for o in sweeps.options if o.startswith("rates (grid, 4 ok"))
    at.selectbox(key="sweep").set_value(grid).run()
    ok(at)
    bars = chart(at, "sweep-Utilisation by run")["data"][0]
    assert sorted(bars["x"]) == ["rate=1/h #1", "rate=1/h #2", "rate=3/h #1", "rate=3/h #2"]
    util = dict(zip(bars["x"], numbers(bars["y"]), strict=True))
    assert util["rate=3/h #1"] > util["rate=1/h #1"] and util["rate=3/h #2"] > util["rate=1/h #2"]  # more load, busier pod


def test_capacity_page_runs_an_uploaded_scenario(tmp_path):
    path = tmp_path / "new" / "results.duckdb"
    at = ok(open_page("capacity", store=str(path)))
    assert "No results store" in at.info[0].value
    at.file_uploader(key="scenario_file").upload("broken.yaml", (SCENARIOS / "tiny.yaml").read_bytes().replace(b"horizon: 36h", b"horizon: 3 fortnights")).run()
    at.button(key="run_scenario").click().run()
    assert not at.exception and "broken.yaml:14: horizon: duration '3 fortnights'" in at.error[0].value
    at.file_uploader(key="scenario_file").upload("tiny.yaml", (SCENARIOS / "tiny.yaml").read_bytes()).run()
    at.button(key="run_scenario").click().run()
    ok(at)
    run_id = list_runs(path)[0]["run_id"]
    assert at.success[0].value.startswith(f"Stored run {run_id} (tiny)") and path.is_file()
    assert metrics(at)["Runs"] == "1" and metrics(at)["Sweeps"] == "0"
    assert at.multiselect(key="picked_runs").value == [f"tiny · {run_id[-6:]}"]
