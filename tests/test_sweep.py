"""Sweeps: points and seeds, storing as points finish, failures kept, resume after SIGINT and
after a killed Dask worker (no finished point lost, none repeated), the Dask executor giving
the serial executor's results, capacity bisection against a linear scan."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pytest
from helpers import run_podsim

from podsim.errors import PodsimError
from podsim.store import list_runs, load_run, stored_points
from podsim.sweep import answer_text, load_sweep, open_executor, probe_text, run_sweep
from podsim.sweep.run import _probes

DATA = Path(__file__).parent / "data" / "scenarios"
VOLATILE = ("wall", "placement_s")  # timings differ between runs; every other figure must not


def figures(metrics: dict) -> dict:
    """The metrics that must not change between runs (NaN as None: NaN != NaN)."""
    return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in metrics.items()
            if not any(w in k for w in VOLATILE)}


def store_rows(store: Path) -> list[tuple]:
    with duckdb.connect(str(store), read_only=True) as con:
        return con.execute("SELECT point_key, status, computed, attempts FROM runs ORDER BY point_key").fetchall()


def test_points_seeds_and_keys():
    """16 points = 4 rates x 2 availabilities x 2 replicates; common seeding gives every
    variant the replicate's child of SeedSequence(11)."""
    sw = load_sweep(DATA / "sweep16.yaml")
    assert len(sw.points) == 16 and len({p.key for p in sw.points}) == 16
    children = [int(c.generate_state(1, np.uint32)[0]) for c in np.random.SeedSequence(11).spawn(2)]
    assert {p.seed for p in sw.points if p.replicate == 0} == {children[0]}
    assert {p.seed for p in sw.points if p.replicate == 1} == {children[1]}
    assert sw.points[0].overrides == {"workload.synthetic.rate": "1/h", "failures.host.availability": "99%"}
    again = load_sweep(DATA / "sweep16.yaml")
    assert [p.key for p in again.points] == [p.key for p in sw.points] and again.sweep_id == sw.sweep_id


def test_independent_seeding(tmp_path):
    text = (DATA / "sweep16.yaml").read_text().replace("seed: 11", "seed: 11\nseeding: independent")
    (tmp_path / "tiny.yaml").write_text((DATA / "tiny.yaml").read_text())
    (tmp_path / "s.yaml").write_text(text)
    sw = load_sweep(tmp_path / "s.yaml")
    assert len({p.seed for p in sw.points}) == 16


@pytest.mark.parametrize("body,line,needle", [
    ("sweep: x\nbase: tiny.yaml\ngrid:\n  topology.generation: [tpu-v5e, tpu-v9]\n", 4, "topology.generation: unknown generation 'tpu-v9'"),
    ("sweep: x\nbase: tiny.yaml\npoints:\n  - {label: a, horizon: 2 moons}\n", 4, "horizon: duration '2 moons'"),
    ("sweep: x\nbase: nowhere.yaml\n", 2, "base: file 'nowhere.yaml' does not exist"),
    ("sweep: x\nbase: tiny.yaml\ngird: {}\n", 3, "unknown field 'gird'"),
    ("sweep: x\nbase: tiny.yaml\ncapacity: {field: topology.pods, low: 5, high: 2}\n", 3, "low 5 > high 2"),
])
def test_broken_sweep_files(tmp_path, body, line, needle):
    """A bad value set by the sweep file is reported at its line in the sweep file."""
    (tmp_path / "tiny.yaml").write_text((DATA / "tiny.yaml").read_text())
    path = tmp_path / "s.yaml"
    path.write_text(body)
    with pytest.raises(PodsimError) as e:
        load_sweep(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}:{line}: ") and needle in msg and "\n" not in msg, msg


def test_a_base_error_points_at_the_base_file(tmp_path):
    """A value from the base file that a point makes wrong is reported at the base file's line."""
    (tmp_path / "tiny.yaml").write_text((DATA / "tiny.yaml").read_text())
    (tmp_path / "s.yaml").write_text("sweep: x\nbase: tiny.yaml\npoints: [{topology.generation: tpu-v4}]\n")
    with pytest.raises(PodsimError) as e:
        load_sweep(tmp_path / "s.yaml")
    assert str(e.value).startswith(f"{tmp_path / 'tiny.yaml'}:10: workload.synthetic.mix.2x2: ")


def test_a_failed_point_is_stored_with_its_error_and_the_sweep_goes_on(tmp_path):
    """A point that fails while it runs (its job trace asks for 100000 chips, more than a v5e
    slice can have: found when the trace is read, not when the file is validated) is stored as
    failed with its error; the other point finishes; --resume runs the failed one again."""
    (tmp_path / "tiny.yaml").write_text((DATA / "tiny.yaml").read_text())
    (tmp_path / "jobs.csv").write_text("job_id,submission_time,duration,num_gpu\na,0,3600,4\nb,60,3600,100000\n")
    (tmp_path / "s.yaml").write_text("sweep: fails\nbase: tiny.yaml\npoints:\n  - {label: ok}\n"
                                     "  - {label: bad, workload: {trace: {path: jobs.csv}}}\n")
    sw = load_sweep(tmp_path / "s.yaml")
    store = tmp_path / "r.duckdb"
    with open_executor("serial") as h:
        out = run_sweep(sw, h, store)
    assert (out.ran, out.failed) == (1, 1)
    bad = [r for r in out.points if r["status"] == "failed"][0]
    assert bad["label"] == "bad" and "100000" in bad["error"] and "\n" not in bad["error"]
    rows = {r["point_label"]: r for r in list_runs(store, sweep_id=sw.sweep_id)}
    assert rows["bad"]["status"] == "failed" and rows["ok"]["status"] == "ok"
    with open_executor("serial") as h:
        again = run_sweep(sw, h, store, resume=True)
    assert (again.ran, again.skipped, again.failed) == (0, 1, 1)
    assert stored_points(store, sw.sweep_id)[bad["key"]]["attempts"] == 2


def test_a_failed_capacity_probe_gives_no_answer_not_a_miss(tmp_path):
    """A capacity probe that crashes judges nothing: the cell stops with no answer and the
    error, instead of counting the crash as a missed target and bisecting on."""
    (tmp_path / "tiny.yaml").write_text((DATA / "tiny.yaml").read_text())
    (tmp_path / "jobs.csv").write_text("job_id,submission_time,duration,num_gpu\na,0,3600,100000\n")
    (tmp_path / "s.yaml").write_text("sweep: cap-fails\nbase: tiny.yaml\npoints:\n  - {workload: {trace: {path: jobs.csv}}}\n"
                                     "capacity: {field: topology.pods, low: 1, high: 4}\n")
    sw = load_sweep(tmp_path / "s.yaml")
    with open_executor("serial") as h:
        out = run_sweep(sw, h, tmp_path / "r.duckdb")
    (cell,) = out.capacity
    assert cell["answer"] is None and "100000" in cell["error"]
    assert [probe_text(v) for v in cell["evaluated"].values()] == ["failed"]
    assert answer_text(cell).startswith("no answer: a point failed")


def test_a_stored_sweep_needs_resume_or_restart(tmp_path, capsys):
    out = tmp_path / "o"
    args = ("sweep", str(DATA / "capacity.yaml"), "-o", str(out), "--no-report")
    code, stdout, _ = run_podsim(capsys, *args)
    assert code == 0 and "smallest topology.pods meeting the targets" in stdout
    code, _, err = run_podsim(capsys, *args)
    assert code == 2 and "--resume" in err and len(err.strip().splitlines()) == 1
    code, stdout, _ = run_podsim(capsys, *args, "--resume")
    assert code == 0 and "0 run" in stdout


def test_capacity_bisection_matches_a_linear_scan(tmp_path):
    """The bisected answer is the smallest pod count whose run meets the targets, checked by
    running every count; bisection needs fewer runs than the scan."""
    sw = load_sweep(DATA / "capacity.yaml")
    with open_executor("serial") as h:
        out = run_sweep(sw, h, tmp_path / "r.duckdb")
    (cell,) = out.capacity
    met = {}
    for n in range(1, 7):
        p = sw.point(0, 0, {"topology.pods": n})
        from podsim.sweep.run import run_point
        met[n] = bool(run_point(sw.base, sw.base_dir, p.overrides, p.seed).targets_met)
    smallest = next((n for n in range(1, 7) if met[n]), None)
    assert cell["answer"] == smallest and smallest is not None and smallest > 1
    assert all(met[n] for n in range(smallest, 7))  # more capacity never misses here
    assert len(cell["evaluated"]) < 6
    assert {int(k): v["met"] for k, v in cell["evaluated"].items()} == {int(k): met[int(k)] for k in cell["evaluated"]}


@pytest.mark.slow  # issue 24: the quick tier under 2 min of 2 cores; runs in make test
def test_capacity_with_replicates_judges_each_size_on_their_mean(tmp_path):
    """With 2 replicates every probed size runs both seeds; a size meets the targets when the
    replicates' mean does (checked by running each size's replicates here), and the answer says
    how many replicates judged it. `judge: interval` asks the whole 95% interval to meet them."""
    sw = load_sweep(DATA / "capacity.yaml")
    spec = sw.spec.model_copy(update={"replicates": 2, "seed": 4})
    from podsim.stats import replicate_seeds
    from podsim.sweep.run import run_point
    from podsim.sweep.spec import Sweep

    sw = Sweep(spec, sw.source, sw.base, sw.base_dir, sw.sweep_id + "-r2", sw.cells, replicate_seeds(4, 2))
    with open_executor("serial") as h:
        out = run_sweep(sw, h, tmp_path / "r.duckdb")
    (cell,) = out.capacity
    assert cell["replicates"] == 2 and "2 replicates, targets on the mean" in answer_text(cell)
    means = {}
    for n in range(1, 7):
        runs = [run_point(sw.base, sw.base_dir, sw.point(0, r, {"topology.pods": n}).overrides, sw.point(0, r).seed) for r in (0, 1)]
        means[n] = {k: np.mean([r.metrics[k] for r in runs]) for k in ("wait_p95_s", "goodput")}
    met = {n: means[n]["wait_p95_s"] <= 7200 and means[n]["goodput"] >= 0.9 for n in means}
    assert cell["answer"] == next(n for n in range(1, 7) if met[n])
    for k, ev in cell["evaluated"].items():
        assert ev["met"] == met[int(k)] and len(ev["run_ids"]) == 2
        assert ev["metrics"]["goodput"] == pytest.approx(means[int(k)]["goodput"])
        assert ev["intervals"]["goodput"]["n"] == 2


def test_probes():
    assert _probes(1, 8, 1) == [4] and _probes(1, 2, 3) == [1] and _probes(1, 8, 3) == [2, 4, 6]


@pytest.mark.slow  # two podsim processes and a process pool
def test_sigint_halfway_then_resume(tmp_path):
    """SIGINT to `podsim sweep` after 4 points: exit 130, every point reported done is in the
    store; --resume runs only the rest; in the end every point is stored once, computed once."""
    out = tmp_path / "o"
    cmd = [sys.executable, "-m", "podsim", "sweep", str(DATA / "sweep_slow.yaml"), "-e", "process", "-w", "2",
           "-o", str(out), "--no-report"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    done = []
    for line in proc.stdout:
        if ": ok:" in line:
            done.append(line.split("] ", 1)[1].split(": ok:")[0])
        if len(done) == 4:
            proc.send_signal(signal.SIGINT)
            break
    rest, err = proc.communicate(timeout=120)
    done += [ln.split("] ", 1)[1].split(": ok:")[0] for ln in rest.splitlines() if ": ok:" in ln]
    assert proc.returncode == 130, err
    assert "interrupted" in err and "--resume" in err and "Traceback" not in err
    store = out / "results.duckdb"
    stored = {r["point_label"] for r in list_runs(store) if r["status"] == "ok"}
    assert set(done) <= stored and 4 <= len(stored) < 12  # nothing finished is lost; it stopped halfway
    r = subprocess.run(cmd + ["--resume"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"{12 - len(stored)} run, {len(stored)} already stored, 0 failed" in r.stdout
    rows = store_rows(store)
    assert len(rows) == 12 and all(row[1:] == ("ok", 1, 1) for row in rows)


@pytest.fixture(scope="module")
def serial16(tmp_path_factory):
    sw = load_sweep(DATA / "sweep16.yaml")
    store = tmp_path_factory.mktemp("serial") / "r.duckdb"
    with open_executor("serial") as h:
        out = run_sweep(sw, h, store)
    return sw, store, {r["key"]: r for r in out.points}


@pytest.mark.dask
def test_sixteen_points_on_a_local_dask_cluster_equal_serial(serial16, tmp_path):
    sw, serial_store, serial = serial16
    store = tmp_path / "r.duckdb"
    with open_executor("dask", workers=2) as h:
        assert h.kind == "dask" and h.slots == 2 and h.cluster is not None
        out = run_sweep(sw, h, store)
    assert out.ran == 16 and out.failed == 0
    for row in out.points:
        assert figures(row["metrics"]) == figures(serial[row["key"]]["metrics"]), row["label"]
    a, b = load_run(store, out.points[5]["run_id"]), load_run(serial_store, serial[out.points[5]["key"]]["run_id"])
    for col in ("busy_chips", "queued_jobs", "goodput_cumulative"):
        assert np.array_equal(a.tables["timeseries"][col], b.tables["timeseries"][col], equal_nan=True)


@pytest.mark.dask
def test_killed_dask_worker_then_resume(tmp_path):
    """SIGKILL one of two Dask workers while the sweep runs: the scheduler reruns its task on a
    live worker, every point is stored exactly once (computed 1), and --resume reruns none."""
    from distributed import Client, LocalCluster

    sw = load_sweep(DATA / "sweep_slow.yaml")
    store = tmp_path / "r.duckdb"
    killed = {}
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=50) as cluster, \
            Client(cluster) as client:
        pids = client.run(os.getpid)

        def on_point(row):
            if row["status"] == "ok" and row["done"] == 3 and not killed:
                addr, pid = sorted(pids.items())[0]
                os.kill(pid, signal.SIGKILL)
                killed[addr] = pid
        with open_executor("dask", address=cluster.scheduler_address) as h:
            out = run_sweep(sw, h, store, on_point=on_point)
    assert killed and out.ran == 12 and out.failed == 0
    rows = store_rows(store)
    assert len(rows) == 12 and all(row[1:] == ("ok", 1, 1) for row in rows)
    with open_executor("serial") as h:
        again = run_sweep(sw, h, store, resume=True)
    assert (again.ran, again.skipped) == (0, 12)
    assert store_rows(store) == rows


def test_address_needs_the_dask_executor():
    with pytest.raises(PodsimError, match="--executor dask"):
        with open_executor("process", address="tcp://127.0.0.1:1"):
            pass


@pytest.mark.slow  # issue 24: the quick tier under 2 min of 2 cores; runs in make test
def test_wait_metric_is_finite(serial16):
    _, _, serial = serial16
    assert all(not math.isnan(r["metrics"]["wait_p95_with_queued_s"]) for r in serial.values())
