"""Hostile and careless input, in-process: every case exits 2 with one stderr line that names the
field or file (never a traceback, a hang or a silently wrong figure). The table follows issue 16's
list: tracebacks, hangs (with small inputs that would have hung), silently wrong results,
writes outside the output folder and non-atomic outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_podsim
from helpers import small_scenario as _scenario

DATA = Path(__file__).parent / "data"
ASTRA = DATA / "astra-sim"
TINY = (DATA / "scenarios" / "tiny.yaml").read_text()


def _scenario_with_a_short_csv_row(tmp_path: Path) -> dict:
    """The test scenario reading a job trace whose line 2 has 3 fields of the header's 4."""
    bad_csv = tmp_path / "jobs.csv"
    bad_csv.write_text("job_id,submission_time,duration,num_gpu\nj1,0,100\n")
    base = json.loads(_scenario())
    base["workload"] = {"trace": {"path": str(bad_csv)}}
    return base


@pytest.fixture(scope="module")
def d(tmp_path_factory) -> Path:
    """The hostile files, written once."""
    root = tmp_path_factory.mktemp("hostile")
    files = {
        "bad_utf8.yaml": b"name: \xff\xfe broken\n",
        "bad_utf8.yml": b"topology: [Ring]\n\xff\n",
        "bad_utf8.csv": b"job_id,submission_time,duration,num_gpu\n\xff,1,2,3\n",
        "deep.json": b"[" * 100_000 + b"]" * 100_000,
        "deep.yaml": b"[" * 3000 + b"]" * 3000,
        "laughs.yaml": ("a: &a [x, x, x, x, x, x, x, x, x]\n"
                        + "".join(f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n"
                                  for p, c in zip("abcdefgh", "bcdefghi", strict=True))).encode(),
        "requests.yaml": b"- {id: a, shape: 2x2x2}\n",
        "requests_prio.yaml": b"- {id: a, shape: 2x2x2, priority: 9223372036854775807}\n",
        "jobs_short_row.csv": b"job_id,submission_time,duration,num_gpu\nj1,0,100,4\nj2,10,100\n",
        "failures_short_row.csv": b"time_s,component,id,repair_s\n10,host,0\n",
        "net_nan.yml": b"topology: [Ring]\nnpus_count: [8]\nbandwidth: [.nan]\nlatency: [500]\n",
        "net_zero.yml": b"topology: [Ring]\nnpus_count: [8]\nbandwidth: [0]\nlatency: [500]\n",
        "trace_nan.json": b'{"podsim_trace": 1, "ops": [{"id": "c", "kind": "compute", "duration_s": NaN}]}',
        "trace_inf.yaml": b"podsim_trace: 1\nops:\n- {id: c, kind: compute, duration_s: .inf}\n",
        "trace_ok.json": b'{"podsim_trace": 1, "ops": [{"id": "c", "kind": "compute", "duration_s": 0.001}]}',
        "a_file": b"not a folder\n",
        "s_seed.yaml": _scenario(seed=1e30).encode(),
        "s_jobs.yaml": _scenario(workload__synthetic__jobs=1e9).encode(),
        "s_pods.yaml": _scenario(topology__pods=1e12).encode(),
        "s_horizon_inf.yaml": _scenario().replace('"6h"', ".inf").encode(),
        "s_horizon_huge.yaml": _scenario(horizon=1e300).encode(),
        "s_mix_nan.yaml": _scenario().replace('{"2x2": 1}', '{"2x2": .nan}').encode(),
        "s_prio_nan.yaml": _scenario().replace('"mix"', '"priorities": {"0": .nan}, "mix"').encode(),
        "s_mtbf_tiny.yaml": _scenario(failures={"host": {"mtbf": "1min", "mttr": "1s"}}, horizon="3650d").encode(),
        "sweep_huge.yaml": ("sweep: huge\nbase: s_ok.yaml\ngrid:\n"
                            + "".join(f"  targets.x{i}: [{', '.join(str(v) for v in range(10))}]\n" for i in range(10))).encode(),
        "s_ok.yaml": _scenario().encode(),
    }
    for name, data in files.items():
        (root / name).write_bytes(data)
    (root / "a_folder").mkdir()
    (root / "dir.json").mkdir()
    (root / "a_folder" / "keep").write_text("x")
    return root


RING8 = str(ASTRA / "configs" / "inputs_network_tpu_v3_8.yml")
ASTRA_WL = str(ASTRA / "text-workloads" / "microAllReduce.txt")
GEN = ("trace", "generate", "gpt3-175b", "--slice", "4x4x4", "-p", "fsdp=16,tensor=4", "--set", "n_layers=1")
SYN = "jobs=5,rate=2/h,mix=2x2:1"
CL = ("cluster", "-g", "tpu-v5e", "--horizon", "6h")

# (case id, argv with {d} for the hostile folder, text the one stderr line must contain)
CASES = [
    # -- tracebacks: non-UTF-8 input in every loader
    ("utf8-place-requests", ("place", "-g", "tpu-v4", "-r", "{d}/bad_utf8.yaml"), "not UTF-8"),
    ("utf8-place-failed", ("place", "-g", "tpu-v4", "-r", "{d}/requests.yaml", "-f", "{d}/bad_utf8.yaml"), "not UTF-8"),
    ("utf8-synthetic", (*CL, "--synthetic", "{d}/bad_utf8.yaml"), "not UTF-8"),
    ("utf8-job-trace", (*CL, "--trace", "{d}/bad_utf8.csv"), "not UTF-8"),
    ("utf8-failure-trace", (*CL, "--synthetic", SYN, "--failure-trace", "{d}/bad_utf8.csv"), "not UTF-8"),
    ("utf8-validate", ("validate", "{d}/bad_utf8.yaml"), "not UTF-8"),
    ("utf8-network", ("steptime", "--trace", ASTRA_WL, "--network", "{d}/bad_utf8.yml"), "not UTF-8"),
    # -- tracebacks: deep nesting, alias bombs
    ("deep-json-trace", ("trace", "show", "{d}/deep.json"), "nested deeper than 100"),
    ("deep-yaml-requests", ("place", "-g", "tpu-v4", "-r", "{d}/deep.yaml"), "nest"),  # libyaml: "maximum nesting depth"
    ("deep-yaml-validate", ("validate", "{d}/deep.yaml"), "nest"),
    ("billion-laughs", ("validate", "{d}/laughs.yaml"), "aliases expand"),
    # -- tracebacks: odd output paths
    ("out-is-folder-generate", (*GEN, "-o", "{d}/dir.json"), "is a folder"),
    ("out-parent-is-file", (*GEN, "-o", "{d}/a_file/t.json"), "a_file"),
    ("out-unwritable", ("trace", "import", ASTRA_WL, "--slice", "8", "-o", "/proc/podsim-t.json"), "/proc/podsim-t.json"),
    ("run-out-is-file", ("run", "{d}/s_ok.yaml", "-o", "{d}/a_file"), "is a file, not a folder"),
    ("report-out-is-folder", ("report", "--store", "{d}/none.duckdb", "-o", "{d}/a_folder"), "is a folder"),
    # -- tracebacks: CSV rows with missing fields
    ("csv-short-job-row", (*CL, "--trace", "{d}/jobs_short_row.csv"), "line 3: 3 fields"),
    ("csv-short-failure-row", (*CL, "--synthetic", SYN, "--failure-trace", "{d}/failures_short_row.csv"), "line 2: 3 fields"),
    # -- tracebacks: numbers past validation
    ("now-inf", ("place", "-g", "tpu-v4", "-r", "{d}/requests.yaml", "--now", "inf"), "--now"),
    ("seed-huge", ("place", "-g", "tpu-v4", "-r", "{d}/requests.yaml", "--seed", "99999999999999999999"), "--seed"),
    ("seed-negative", ("place", "-g", "tpu-v4", "-r", "{d}/requests.yaml", "--seed", "-1"), "--seed"),
    ("mtbf-zero", (*CL, "--synthetic", SYN, "--mtbf", "0h"), "MTBF"),
    ("mttr-zero", (*CL, "--synthetic", SYN, "--mtbf", "100h", "--mttr", "0"), "MTTR"),
    ("weibull-nan", (*CL, "--synthetic", SYN, "--mtbf", "100h", "--weibull-shape", "nan"), "--weibull-shape"),
    ("mix-weight-nan", (*CL, "--synthetic", "jobs=5,rate=2/h,mix=2x2:nan"), "mix"),
    ("priority-weight-nan", (*CL, "--synthetic", SYN + ",priorities=0:nan"), "priorities"),
    ("scenario-seed-1e30", ("validate", "{d}/s_seed.yaml"), "seed"),
    ("scenario-jobs-1e9", ("validate", "{d}/s_jobs.yaml"), "jobs"),
    ("scenario-pods-1e12", ("validate", "{d}/s_pods.yaml"), "pods"),
    ("synthetic-jobs-1e9", (*CL, "--synthetic", "jobs=1e9,rate=2/h,mix=2x2:1"), "jobs"),
    ("cli-pods-1e12", (*CL, "--synthetic", SYN, "--pods", "1000000000000"), "4,194,304 chips"),
    ("topology-pods-1e5", ("topology", "tpu-v4", "--pods", "100000"), "4,194,304 chips"),
    ("topology-wan-gbps-nan", ("topology", "tpu-v4", "--pods", "2", "--sites", "2", "--wan-gbps", "nan"), "--wan-gbps"),
    ("topology-oversubscription-zero", ("topology", "tpu-v4", "--pods", "2", "--oversubscription", "0"), "--oversubscription"),
    # -- hangs (each with an input that used to hang, refused before any work)
    ("network-bandwidth-nan", ("steptime", "--trace", ASTRA_WL, "--network", "{d}/net_nan.yml"), "not a finite number"),
    ("network-bandwidth-zero", ("steptime", "--trace", ASTRA_WL, "--network", "{d}/net_zero.yml"), "bandwidth 0 GB/s is out of range"),
    ("sample-1ms", (*CL, "--synthetic", SYN, "--sample", "1ms"), "samples"),
    ("horizon-inf", ("validate", "{d}/s_horizon_inf.yaml"), "horizon"),
    ("horizon-1e300", ("validate", "{d}/s_horizon_huge.yaml"), "horizon"),
    ("cli-horizon-1e300", (*CL[:-1], "1e300", "--synthetic", SYN), "--horizon"),
    ("grid-1e10-points", ("validate", "{d}/sweep_huge.yaml"), "1e+10 points"),
    ("failures-past-budget", ("validate", "{d}/s_mtbf_tiny.yaml"), "host failures"),
    # -- silently wrong results
    ("bytes-1e309", ("steptime", "--generation", "tpu-v4", "--collective", "all_reduce", "--bytes", "1e309"), "not a finite number"),
    ("group-axis-missing", ("steptime", "--generation", "tpu-v5e", "--slice", "4x4", "--group", "z",
                            "--collective", "all_reduce", "--bytes", "1MiB"), "has no z axis"),
    ("group-of-one", ("steptime", "--generation", "tpu-v4", "--slice", "1x1x2", "--group", "x",
                      "--collective", "all_reduce", "--bytes", "1MiB"), "has 1 chip"),
    ("trace-duration-nan", ("trace", "show", "{d}/trace_nan.json"), "NaN is not a finite number"),
    ("trace-duration-inf", ("trace", "show", "{d}/trace_inf.yaml"), "ops.0.duration_s"),
    ("clock-ghz-nan", ("trace", "import", ASTRA_WL, "--slice", "8", "--clock-ghz", "nan", "-o", "{d}/x.json"), "--clock-ghz"),
    ("grad-bytes-zero", (*GEN, "--grad-bytes", "0", "-o", "{d}/g.json"), "--grad-bytes"),
    ("replicas-per-chip-three", (*GEN, "--replicas-per-chip", "3", "-o", "{d}/g.json"), "--replicas-per-chip"),
    ("bn-group-zero", (*GEN, "--bn-group", "0", "-o", "{d}/g.json"), "--bn-group"),
    ("bn-group-transformer", (*GEN, "--bn-group", "8", "-o", "{d}/g.json"), "bn_group 8 is not allowed for gpt3-175b"),
    ("replicas-per-chip-transformer", (*GEN, "--replicas-per-chip", "2", "-o", "{d}/g.json"), "replicas_per_chip 2 is not allowed for gpt3-175b"),
    ("limit-zero", (*CL, "--trace", str(DATA / "elasticflow_sample.csv"), "--limit", "0"), "--limit"),
    ("limit-negative", (*CL, "--trace", str(DATA / "elasticflow_sample.csv"), "--limit", "-1"), "--limit"),
    ("weibull-zero", (*CL, "--synthetic", SYN, "--mtbf", "100h", "--weibull-shape", "0"), "--weibull-shape"),
    ("priority-int64-max", ("place", "-g", "tpu-v4", "-r", "{d}/requests_prio.yaml"), "priority"),
    ("validate-mix-nan", ("validate", "{d}/s_mix_nan.yaml"), "mix"),
    ("validate-priority-nan", ("validate", "{d}/s_prio_nan.yaml"), "priorities"),
    ("efficiency-inf", ("steptime", "--trace", "{d}/trace_ok.json", "--generation", "tpu-v4", "--slice", "2x2x2",
                        "--compute-efficiency", "inf"), "--compute-efficiency"),
]


@pytest.mark.parametrize("case,argv,needle", CASES, ids=[c[0] for c in CASES])
def test_hostile_command_exits_2_with_one_line(case, argv, needle, d, capsys):
    args = [a.replace("{d}", str(d)) for a in argv]
    code, _, err = run_podsim(capsys, *args)
    lines = err.strip().splitlines()
    assert code == 2, f"{case}: exit {code}, stderr {err!r}"
    assert len(lines) == 1 and lines[0].startswith("error: "), f"{case}: {err!r}"
    if needle is not None:
        assert needle in lines[0], f"{case}: {lines[0]!r} lacks {needle!r}"
    assert "Traceback" not in err


def test_the_alias_bomb_and_deep_files_are_refused_quickly(d):
    """The readers refuse before expanding or recursing: each well under a second."""
    import time

    from podsim.errors import PodsimError
    from podsim.files import read_json, read_yaml

    for path, reader in ((d / "laughs.yaml", read_yaml), (d / "deep.yaml", read_yaml), (d / "deep.json", read_json)):
        t0 = time.perf_counter()
        with pytest.raises(PodsimError):
            reader(path)
        assert time.perf_counter() - t0 < 5.0  # ~1 s on a loaded 2-core machine; it used to recurse or expand for minutes


def test_a_bom_and_a_normal_alias_are_read(tmp_path):
    from podsim.files import read_yaml

    p = tmp_path / "ok.yaml"
    p.write_bytes("\ufeffa: &x {b: 1}\nc: *x\n".encode())
    assert read_yaml(p) == {"a": {"b": 1}, "c": {"b": 1}}


@pytest.mark.parametrize("name,safe", [("../../etc/evil", "etc_evil"), ("/abs/path", "abs_path"), ("..", "run"),
                                       ("ok-name_1.2", "ok-name_1.2"), (".hidden", "hidden"), ("a b/c", "a_b_c")])
def test_names_from_files_become_one_safe_path_component(name, safe):
    from podsim.files import safe_component

    assert safe_component(name) == safe


def test_a_scenario_named_to_escape_writes_inside_out(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    Path("evil.yaml").write_text(_scenario(name="../../etc/evil"))
    code, _, err = run_podsim(capsys, "run", "evil.yaml", "--no-report")
    assert code == 0, err
    assert (tmp_path / "work" / "out" / "etc_evil" / "summary.parquet").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work"]


def test_a_non_empty_output_folder_is_refused_before_the_run_unless_force(tmp_path, capsys, monkeypatch):
    """`podsim run -o DIR`: a DIR that holds anything is refused in one line before any
    simulation (issue 25); --force runs and then replaces DIR whole, old files gone."""
    import podsim.cli.run as cli_run

    src = tmp_path / "s.yaml"
    src.write_text(_scenario())
    out = tmp_path / "o"
    assert run_podsim(capsys, "run", str(src), "-o", str(out), "--no-report")[0] == 0
    ran = []
    real = cli_run.run_with_progress
    monkeypatch.setattr(cli_run, "run_with_progress", lambda s: ran.append(1) or real(s))
    code, _, err = run_podsim(capsys, "run", str(src), "-o", str(out), "--no-report")
    assert code == 2 and "is not empty" in err and "--force" in err and len(err.strip().splitlines()) == 1
    assert not ran  # refused before simulating
    (out / "jobs_from_an_older_run.parquet").write_bytes(b"x")
    code, _, err = run_podsim(capsys, "run", str(src), "-o", str(out), "--no-report", "--force")
    assert code == 0, err
    assert ran == [1] and not (out / "jobs_from_an_older_run.parquet").exists()
    assert (out / "summary.parquet").is_file() and (out / "results.duckdb").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging or old folder left
    (tmp_path / "afile").write_text("x")
    code, _, err = run_podsim(capsys, "run", str(src), "-o", str(tmp_path / "afile"))
    assert code == 2 and "is a file" in err


def test_a_run_that_fails_while_saving_leaves_no_files_and_no_stored_run(tmp_path, monkeypatch):
    import podsim.cli.run as cli_run
    from podsim.scenario import load_scenario, run_scenario
    from podsim.store import list_runs

    src = tmp_path / "s.yaml"
    src.write_text(_scenario())
    result = run_scenario(load_scenario(src))

    def broken(*_a, **_k):
        raise RuntimeError("report failed")

    monkeypatch.setattr(cli_run, "render_report", broken)
    out = tmp_path / "o"
    with pytest.raises(RuntimeError):
        cli_run.save_run(result, out, None)
    assert not out.exists() and list(tmp_path.iterdir()) == [src]  # no folder, no staging left
    monkeypatch.undo()
    _, paths = cli_run.save_run(result, out, None)
    assert len(list_runs(paths["store"])) == 1


def test_a_sweep_whose_points_all_fail_exits_1_and_names_them(tmp_path, capsys):
    base = _scenario_with_a_short_csv_row(tmp_path)
    (tmp_path / "base.yaml").write_text(json.dumps(base))
    (tmp_path / "sw.yaml").write_text("sweep: all-fail\nbase: base.yaml\ngrid: {seed: [1, 2]}\n")
    code, out, err = run_podsim(capsys, "sweep", str(tmp_path / "sw.yaml"), "-o", str(tmp_path / "o"))
    assert code == 1, (out, err)
    assert "2 point(s) failed" in err and "seed=1" in err


def test_cpsat_model_invalid_is_an_error_not_a_greedy_fallback(monkeypatch, d, capsys):
    import importlib

    place_mod = importlib.import_module("podsim.placement.place")
    monkeypatch.setattr(place_mod, "solve_model", lambda pm, params: (None, "MODEL_INVALID", 0.0))
    code, out, err = run_podsim(capsys, "place", "-g", "tpu-v4", "-r", str(d / "requests.yaml"))
    assert code == 1 and "MODEL_INVALID" in err


def test_a_64_bit_seed_reaches_cpsat(d, capsys):
    """CP-SAT's seed is int32: a seed in [2^31, 2^63) is folded into it, not a crash."""
    code, _, err = run_podsim(capsys, "place", "-g", "tpu-v4", "-r", str(d / "requests.yaml"), "--seed", str(2**63 - 1))
    assert code == 0, err


def test_long_work_without_a_terminal_prints_progress_lines(capsys):
    from podsim.cli.common import progress_lines

    update = progress_lines("simulating", every_s=0.0)
    update(5.0, 10.0, "5 s of 10 s simulated")
    err = capsys.readouterr().err
    assert err.startswith("simulating: 50% (5 s of 10 s simulated)") and err.count("\n") == 1


def test_validate_reads_the_files_a_run_would_read(tmp_path, capsys):
    base = _scenario_with_a_short_csv_row(tmp_path)
    (tmp_path / "s.yaml").write_text(json.dumps(base))
    code, _, err = run_podsim(capsys, "validate", str(tmp_path / "s.yaml"))
    assert code == 2 and "jobs.csv line 2: 3 fields" in err


@pytest.mark.parametrize("figure,value,needle", [("ici_link_bandwidth", 0, "must be > 0 GB/s"),
                                                 ("peak_bf16_tflops_per_chip", 0, "must be > 0"),
                                                 ("chips_per_host", 0.5, "whole number >= 1")])
def test_an_override_that_would_hang_or_divide_by_zero_is_refused(figure, value, needle, tmp_path, capsys):
    """A zero ICI bandwidth used to hang the step engine (a flow at rate 0 never finishes)."""
    raw = {"name": "ov", "topology": {"generation": "tpu-v4", "overrides": {figure: {"value": value, "source": "test"}}},
           "workload": {"step": {"model": "llama2-70b", "model_overrides": {"n_layers": 1, "global_batch": 32},
                                 "slice": "2x2x2", "parallelism": "fsdp=8"}}}
    (tmp_path / "s.yaml").write_text(json.dumps(raw))
    code, _, err = run_podsim(capsys, "validate", str(tmp_path / "s.yaml"))
    assert code == 2 and f"topology.overrides.{figure}.value" in err and needle in err


def test_the_readers_cap_size_and_count_csv_fields(tmp_path):
    from podsim.errors import PodsimError
    from podsim.files import read_csv, read_text

    big = tmp_path / "big.yaml"
    big.write_text("a: 1\n" * 10)
    with pytest.raises(PodsimError, match=r"big.yaml' is 50 B; podsim reads inputs of at most 10 B"):
        read_text(big, "scenario", max_bytes=10)
    wide = tmp_path / "wide.csv"
    wide.write_text("a,b\n1,2\n1,2,3\n")
    header, rows = read_csv(wide)
    assert header == ["a", "b"] and next(rows) == (2, {"a": "1", "b": "2"})
    with pytest.raises(PodsimError, match=r"wide.csv line 3: 3 fields, but the header has 2 \(a, b\)"):
        next(rows)
