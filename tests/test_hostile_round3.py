"""Issue 35's hostile cases, in-process: each exits 2 with one stderr line naming the option,
field or file and what is allowed, or gives the documented answer. Outputs never clobber what is
not theirs (FIFOs, sockets, device nodes and links are made here, in tmp_path: no test touches
/dev); staging a killed writer left is cleaned by the next write. A real process only where a
SIGKILL is what is tested."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import run_podsim
from helpers import small_scenario as _scenario

TRACE_OK = {"podsim_trace": 1, "name": "t", "ops": [
    {"id": "c", "kind": "compute", "flops": 1e9, "hbm_bytes": 1e6, "duration_s": 1e-3},
    {"id": "a", "kind": "all_reduce", "bytes": 1048576, "group": "x", "deps": ["c"]}]}
SERVING = {"name": "sv", "topology": {"generation": "tpu-v5e", "wiring": "static"},
           "workload": {"serving": {"slice": "2x4", "model": {"model": "llama2-70b", "overrides": {"n_layers": 2},
                                                              "precision": {"weights": "int8"}},
                                    "requests": {"arrivals": {"kind": "poisson", "rate": "3/s"}}, "duration": "20s"}}}
GEN4 = ("trace", "generate", "gpt3-175b", "--slice", "4x4x4", "-p", "fsdp=16,tensor=4", "--set", "n_layers=1")


def _one_line(res, *needles: str) -> str:
    code, _, err = res
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), res
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


KINDS = {"fifo": ("a named pipe (FIFO)", stat.S_ISFIFO), "sock": ("a socket", stat.S_ISSOCK), "nulldev": ("a device", stat.S_ISCHR),
         "link": ("a symbolic link", stat.S_ISLNK), "theirs": ("a folder", stat.S_ISDIR), "afile": ("a file", stat.S_ISREG)}


@pytest.fixture
def hostile(tmp_path) -> dict[str, Path]:
    """Things at an output path that are not podsim's, each under the names fifo, fifo.json,
    fifo.html (a writer checks its suffix first): a FIFO, a socket, a device node (when this
    user may make one), a symbolic link to a file, a folder of other files, a file."""
    d = tmp_path / "h"
    d.mkdir()
    (d / "target.txt").write_text("keep me\n")
    socks, out = [], {}
    for suffix in ("", ".json", ".html"):
        os.mkfifo(d / f"fifo{suffix}")
        socks.append(socket.socket(socket.AF_UNIX))
        socks[-1].bind(str(d / f"sock{suffix}"))
        (d / f"link{suffix}").symlink_to(d / "target.txt")
        (d / f"theirs{suffix}").mkdir()
        (d / f"theirs{suffix}" / "notes.txt").write_text("keep me\n")
        (d / f"afile{suffix}").write_text("keep me\n")
        try:  # /dev/null's numbers, as a node in tmp_path: clobbering it would harm nothing
            os.mknod(d / f"nulldev{suffix}", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
        except OSError:
            pass
        out.update({f"{k}{suffix}": d / f"{k}{suffix}" for k in KINDS if os.path.lexists(d / f"{k}{suffix}")})
    yield out
    for sock in socks:
        sock.close()


def _untouched(hostile: dict[str, Path]) -> None:
    for name, path in hostile.items():
        assert KINDS[name.split(".")[0]][1](os.lstat(path).st_mode), f"{name} was replaced"
        if name.startswith(("theirs", "afile")):
            assert (path / "notes.txt" if name.startswith("theirs") else path).read_text() == "keep me\n"
    assert (next(iter(hostile.values())).parent / "target.txt").read_text() == "keep me\n"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """A results store with one small run (written by `podsim run`)."""
    root = tmp_path_factory.mktemp("store")
    src = root / "s.yaml"
    src.write_text(_scenario())
    from podsim.cli.run import save_run
    from podsim.scenario import load_scenario, run_scenario

    _, paths = save_run(run_scenario(load_scenario(src)), root / "run", None, report=False)
    return paths["store"]


# 1. Outputs -------------------------------------------------------------------------------------
def test_file_outputs_refuse_what_is_not_a_regular_file(hostile, store, tmp_path, capsys):
    """report -o, trace generate/import -o, steptime --timeline, scaling --plot: a FIFO, a socket,
    a device, a link, a folder, '/', '.', '' and a path under a file are each one line naming
    the option, and nothing at the path changes (a regular file would be replaced: allowed)."""
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps(TRACE_OK))
    writers = {
        ("--out", ".html"): lambda o: ("report", "--store", str(store), "-o", o),
        ("--out", ".json"): lambda o: ("trace", "generate", "resnet50", "--slice", "2x2x2", "-p", "data=8", "--set", "global_batch=64", "-o", o),
        ("--out", ".json "): lambda o: ("trace", "import", str(trace), "-o", o),
        ("--timeline", ".json"): lambda o: ("steptime", "--trace", str(trace), "--generation", "tpu-v4", "--slice", "2x2x2", "--timeline", o),
        ("--plot", ".html"): lambda o: ("scaling", "llama2-70b", "--slice", "4x4x4", "-p", "fsdp=64", "--batch-per-slice", "64",
                                        "--slices", "1,2", "--plot", o),
    }
    for (flag, suffix), argv in writers.items():
        for name, path in hostile.items():
            kind = name.split(".")[0]
            if path.suffix != suffix.strip() or kind == "afile":
                continue
            _one_line(run_podsim(capsys, *argv(str(path))), f"{flag} {str(path)!r} is {KINDS[kind][0]}")
        for bad, needle in (("/", "is a folder"), (".", "is a folder"), ("", "is empty"),
                            (str(hostile["afile"] / f"x{suffix.strip()}"), "afile' is a file, not a folder")):
            _one_line(run_podsim(capsys, *argv(bad)), flag, needle)
    _untouched(hostile)


def test_folder_outputs_refuse_what_podsim_did_not_make(hostile, tmp_path, capsys):
    """run -o (also with --force), trace export -o (also with --force), sweep -o and demo --out:
    only a new or empty folder, or one podsim wrote, is an output folder; `demo --out` of a
    folder of other files is refused (it replaced the folder whole before: `demo --out ~`)."""
    src = tmp_path / "s.yaml"
    src.write_text(_scenario())
    sweep = tmp_path / "sw.yaml"
    sweep.write_text("sweep: sw\nbase: s.yaml\ngrid: {seed: [1, 2]}\n")
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps(TRACE_OK))
    writers = {
        "run": lambda o: ("run", str(src), "-o", o, "--no-report"),
        "run --force": lambda o: ("run", str(src), "-o", o, "--no-report", "--force"),
        "export": lambda o: ("trace", "export", str(trace), "--slice", "2x2x2", "-o", o),
        "export --force": lambda o: ("trace", "export", str(trace), "--slice", "2x2x2", "-o", o, "--force"),
        "sweep": lambda o: ("sweep", str(sweep), "-o", o, "--no-report"),
        "demo": lambda o: ("demo", "--out", o),
    }
    for argv in writers.values():
        for what, path in hostile.items():
            if "." in what:
                continue  # the suffixed names are the file writers'
            needle = "holds files podsim did not write" if what == "theirs" else f"is {KINDS[what][0]}, not a folder"
            _one_line(run_podsim(capsys, *argv(str(path))), f"--out {str(path)!r}", needle)
        for bad, needle in (("/", "names no folder"), ("", "is empty"), (".", "names no folder"), ("..", "names no folder"),
                            (str(hostile["afile"] / "x"), "afile' is a file, not a folder")):
            _one_line(run_podsim(capsys, *argv(bad)), needle)
    _untouched(hostile)
    assert sorted(p.name for p in hostile["theirs"].parent.iterdir() if p.name.startswith(".")) == []  # no staging left


def test_a_store_that_is_not_a_regular_file_is_refused_before_duckdb_opens_it(hostile, tmp_path, capsys):
    """report --store FIFO hung (DuckDB opens the path itself); run, sweep and dashboard --store too."""
    src = tmp_path / "s.yaml"
    src.write_text(_scenario())
    sweep = tmp_path / "sw.yaml"
    sweep.write_text("sweep: sw\nbase: s.yaml\ngrid: {seed: [1, 2]}\n")
    for what in ("fifo", "sock", "nulldev"):
        if what not in hostile:
            continue
        p = str(hostile[what])
        t0 = time.monotonic()
        _one_line(run_podsim(capsys, "report", "--store", p, "--list"), "results store", "regular files only")
        _one_line(run_podsim(capsys, "report", "--store", p, "-o", str(tmp_path / "r.html")), "results store")
        _one_line(run_podsim(capsys, "run", str(src), "-o", str(tmp_path / "o"), "--store", p), "results store")
        _one_line(run_podsim(capsys, "sweep", str(sweep), "-o", str(tmp_path / "sw"), "--store", p), "results store")
        _one_line(run_podsim(capsys, "dashboard", "--dry-run", "--store", p), "results store")
        assert time.monotonic() - t0 < 10
    notes = tmp_path / "notes.txt"  # a regular file that is no store: refused before the run, its bytes kept
    notes.write_text("keep me\n")
    _one_line(run_podsim(capsys, "run", str(src), "-o", str(tmp_path / "o"), "--store", str(notes)), "not a podsim results store")
    _one_line(run_podsim(capsys, "report", "--store", str(notes), "--list"), "not a podsim results store")
    assert notes.read_text() == "keep me\n"
    assert not (tmp_path / "o").exists() and not (tmp_path / "r.html").exists()
    _untouched(hostile)


_KILLED_STAGING = """
import os, sys
from podsim.files import staged_folder, write_new
out = sys.argv[1]
with staged_folder(out) as staging:
    write_new(staging / "rank.0.et", b"x")
    os.kill(os.getpid(), 9)
"""

_KILLED_SWAP = """
import os, sys
from podsim.files import staged_folder, write_new
real = os.replace
def replace(a, b):  # the first rename of the swap (the old folder set aside), then SIGKILL
    real(a, b)
    os.kill(os.getpid(), 9)
with staged_folder(sys.argv[1]) as staging:
    write_new(staging / "new.txt", b"new")
    os.replace = replace
"""


def _age(path: Path, s: float = 60.0) -> None:
    """As if `path` were made `s` seconds ago (a writer killed a minute before the next write)."""
    t = time.time() - s
    os.utime(path, (t, t), follow_symlinks=False)


def test_staging_a_killed_writer_left_is_cleaned_by_the_next_write(tmp_path):
    """SIGKILL leaves a writer's staging folder (its lock dies with it): the next write into the
    same folder removes it; a live one (locked) and a hidden folder not podsim's are kept; a
    swap killed between its two renames is undone (the old folder put back, not lost)."""
    from podsim.files import MARKER, clean_stale, staged_folder, write_text_atomic

    out = tmp_path / "ex"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    r = subprocess.run([sys.executable, "-c", _KILLED_STAGING, str(out)], env=env, capture_output=True)
    assert r.returncode == -signal.SIGKILL, r.stderr
    left = [p for p in tmp_path.iterdir() if ".podsim-staging-" in p.name]
    assert len(left) == 1 and (left[0] / "rank.0.et").exists() and not out.exists()
    assert clean_stale(tmp_path) == []  # seconds old: its writer may still be taking its lock
    _age(left[0])
    (tmp_path / ".staging-not-ours").mkdir()
    _age(tmp_path / ".staging-not-ours")
    with staged_folder(tmp_path / "live") as live:  # a live writer beside, a minute old: its lock keeps it
        _age(live)
        write_text_atomic(tmp_path / "report.html", "<html></html>")
        assert live.is_dir() and not left[0].exists()
    assert (tmp_path / ".staging-not-ours").is_dir() and (tmp_path / "live" / MARKER).is_file()

    old = tmp_path / "old"
    with staged_folder(old) as staging:
        (staging / "old.txt").write_text("old")
    r = subprocess.run([sys.executable, "-c", _KILLED_SWAP, str(old)], env=env, capture_output=True)
    assert r.returncode == -signal.SIGKILL, r.stderr
    assert not old.exists()  # killed between the renames: the old folder is aside
    for p in tmp_path.iterdir():
        _age(p)
    assert clean_stale(tmp_path)
    assert (old / "old.txt").read_text() == "old" and not [p for p in tmp_path.iterdir() if ".podsim-" in p.name]


# 2. The cases of the Why list -------------------------------------------------------------
def test_validate_describes_an_odd_shape_stream(tmp_path, capsys):
    src = tmp_path / "odd.yaml"
    src.write_text(json.dumps({"name": "odd", "topology": {"generation": "tpu-v4"}, "workload": {"odd": {"jobs": 5}},
                               "horizon": "2h", "seed": 1}))
    code, out, err = run_podsim(capsys, "validate", str(src))
    assert code == 0 and "5 odd-shape jobs of 2-1024 chips" in out, err


def test_an_odd_shape_stream_with_a_huge_max_chips_answers_fast(tmp_path, capsys):
    """max_chips: 1e9 looped over 10^9 sizes; sizes stop at max_side^3 (none above has a shape),
    max_chips is bounded by the fleet, and a range with no shape is refused when it loads."""
    base = {"name": "odd", "topology": {"generation": "tpu-v4"}, "horizon": "2h", "seed": 1}
    src = tmp_path / "odd.yaml"
    src.write_text(json.dumps({**base, "workload": {"odd": {"jobs": 5, "max_chips": 4_000_000}}}))
    t0 = time.monotonic()
    code, _, err = run_podsim(capsys, "run", str(src), "-o", str(tmp_path / "o"), "--no-report")
    assert code == 0 and time.monotonic() - t0 < 20, err
    src.write_text(json.dumps({**base, "workload": {"odd": {"jobs": 5, "max_chips": 1_000_000_000}}}))
    _one_line(run_podsim(capsys, "validate", str(src)), "workload.odd.max_chips", "4194304")
    src.write_text(json.dumps({**base, "workload": {"odd": {"jobs": 5, "min_chips": 5000, "max_chips": 4_000_000}}}))
    _one_line(run_podsim(capsys, "validate", str(src)), "workload.odd.min_chips", "no size in 5000..4000000")


def test_a_moe_with_expert_one_is_timed_and_served():
    """mixtral-8x7b on a 4x4 v5e slice (tensor=16, expert=1) was KeyError: 6 (the router, a
    compute op, taken for the experts' dispatch). The step timer's closed forms equal its
    op-by-op times again."""
    from podsim.serving.costs import InferenceShard
    from podsim.serving.steptime import StepTimer
    from podsim.trace.configs import get_model

    timer = StepTimer(InferenceShard(get_model("mixtral-8x7b", {"n_layers": 6}), tensor=16), "tpu-v5e", (4, 4))
    for tokens, sampled in ((1, 1), (64, 64), (513, 17), (2048, 0)):
        assert timer._body_s(tokens, sampled) == pytest.approx(timer._body_exact_s(tokens, sampled)[0], rel=1e-12)


def test_serve_mixtral_on_4x4_int8(capsys):
    code, out, err = run_podsim(capsys, "serve", "-g", "tpu-v5e", "--slice", "4x4", "--model", "mixtral-8x7b", "--weights", "int8",
                                "--rate", "1/s", "--duration", "10s", "--json")  # the command
    assert code == 0, err
    assert json.loads(out)["metrics"]["requests_completed"] > 0


def test_a_trace_runs_only_on_the_slice_it_was_made_for(tmp_path, capsys):
    """A 4x4x4 trace ran on 1x1x1 (its communication gone), 2x2x1, 4x4x8, 8x8x8 without a word;
    the whole pod was the default slice. Now one line naming the slice it was made for, from
    steptime, trace show and trace export alike; a twisted trace's slice reads back."""
    t = tmp_path / "t.json"
    assert run_podsim(capsys, *GEN4, "-o", str(t))[0] == 0
    assert json.loads(t.read_text())["meta"]["slice"] == "4x4x4"
    for shape in ("1x1x1", "2x2x1", "4x4x8", "8x8x8"):
        _one_line(run_podsim(capsys, "steptime", "--trace", str(t), "--generation", "tpu-v4", "--slice", shape),
                  "made for a 4x4x4 slice", f"not {shape}")
    _one_line(run_podsim(capsys, "steptime", "--trace", str(t), "--generation", "tpu-v4"), "not 16x16x16")
    _one_line(run_podsim(capsys, "trace", "show", str(t), "--slice", "2x2x2"), "made for a 4x4x4 slice")
    _one_line(run_podsim(capsys, "trace", "export", str(t), "--slice", "8x8x8", "-o", str(tmp_path / "ex")), "made for a 4x4x4")
    assert run_podsim(capsys, "steptime", "--trace", str(t), "--generation", "tpu-v4", "--slice", "4x4x4", "--json")[0] == 0
    tw = tmp_path / "tw.json"
    assert run_podsim(capsys, "trace", "generate", "gpt3-175b", "--slice", "4x4x8", "--twisted", "-p", "fsdp=32,tensor=4",
                      "--set", "n_layers=1", "-o", str(tw))[0] == 0
    assert run_podsim(capsys, "trace", "show", str(tw), "--slice", "4x4x8")[0] == 0  # meta.slice 4x4x8_T read back


def test_a_group_of_one_chip_and_an_imported_trace_carry_their_slice(tmp_path, capsys):
    """A hand-written trace's all-reduce along x on a 1x2x2 slice ran in 0 s: refused as
    simulate_collective refuses it; `trace import --slice` records the slice it mapped onto."""
    src = tmp_path / "t.json"
    src.write_text(json.dumps(TRACE_OK))
    _one_line(run_podsim(capsys, "steptime", "--trace", str(src), "--generation", "tpu-v4", "--slice", "1x2x2"),
              "group x has 1 chip on the 1x2x2 slice", "x:1")
    imp = tmp_path / "i.json"
    assert run_podsim(capsys, "trace", "import", str(src), "--slice", "2x2x2", "-o", str(imp))[0] == 0
    assert json.loads(imp.read_text())["meta"]["slice"] == "2x2x2"
    _one_line(run_podsim(capsys, "steptime", "--trace", str(imp), "--generation", "tpu-v4", "--slice", "2x2x4"), "made for a 2x2x2")


def test_unchecked_arithmetic_is_refused(tmp_path, capsys):
    """Tier oversubscription 33:0 (division by zero), a burst cv of 1e-300 (Gamma shape 1/cv^2),
    host availability 1e-300 (a multi-line pydantic error about an MTBF nobody wrote)."""
    tiers = "tor=40x200/{},aggregation=800x200,spine=800x200*20"
    _one_line(run_podsim(capsys, "topology", "tpu-v4", "--pods", "2", "--dcn-tiers", tiers.format("33:0")), "the up side must be > 0")
    _one_line(run_podsim(capsys, "topology", "tpu-v4", "--pods", "2", "--dcn-tiers", tiers.format("33:0.0001")), "[1, 1,000]")
    _one_line(run_podsim(capsys, "serve", "-g", "tpu-v5e", "--slice", "2x4", "--model", "llama2-70b", "--weights", "int8",
                         "--arrivals", "bursty", "--rate", "3/s", "--cv", "1e-300"), "--cv", "[0.01, 100]")
    _one_line(run_podsim(capsys, "cluster", "-g", "tpu-v5e", "--horizon", "6h", "--synthetic", "jobs=5,rate=2/h,mix=2x2:1",
                         "--host-availability", "1e-300"), "availability 1e-300", "availability is [0.01639")
    src = tmp_path / "av.yaml"
    src.write_text(_scenario(failures__host__availability=1e-300))
    _one_line(run_podsim(capsys, "validate", str(src)), "failures.host.availability", "MTBF")


def test_keys_given_twice_are_refused(capsys):
    """--synthetic jobs=5,jobs=7 ran 7 jobs; a mix shape twice, --set and --option twice: last won."""
    cl = ("cluster", "-g", "tpu-v5e", "--horizon", "6h", "--synthetic")
    _one_line(run_podsim(capsys, *cl, "jobs=5,jobs=7,rate=2/h,mix=2x2:1"), "'jobs' is given twice")
    _one_line(run_podsim(capsys, *cl, "jobs=5,rate=2/h,mix=2x2:1;2x2:3"), "'2x2' is given twice")
    _one_line(run_podsim(capsys, "steptime", "--model", "llama2-70b", "--generation", "tpu-v4", "--slice", "2x2x2", "-p", "fsdp=8",
                         "--set", "n_layers=1", "--set", "n_layers=2"), "'n_layers' is given twice")


def test_booleans_are_true_or_false(tmp_path, capsys):
    """allow_degraded: 1 was taken as true (pydantic's lax bool): every boolean field on the
    shared base refuses 1, 'yes', 'on' (scenario, requests, nested serving model, generator
    options, --option); true and false still read."""
    req = tmp_path / "r.yaml"
    for value in ("1", '"yes"', '"on"', "0.0"):  # unquoted yes and on are YAML 1.1's own booleans
        req.write_text(f"- {{id: a, shape: 2x2x2, allow_degraded: {value}}}\n")
        _one_line(run_podsim(capsys, "place", "-g", "tpu-v4", "-r", str(req), "--solver", "greedy"),
                  "allow_degraded", "give true or false")
    req.write_text("- {id: a, shape: 2x2x2, allow_degraded: true}\n")
    assert run_podsim(capsys, "place", "-g", "tpu-v4", "-r", str(req), "--solver", "greedy", "--json")[0] == 0
    src = tmp_path / "s.yaml"
    src.write_text(_scenario(drain=1))
    _one_line(run_podsim(capsys, "validate", str(src)), "drain: 1 is not a boolean")
    src.write_text(json.dumps({"name": "b", "topology": {"generation": "tpu-v4"}, "workload": {"step": {
        "model": "llama2-70b", "slice": "2x2x2", "parallelism": "fsdp=8", "model_overrides": {"n_layers": 1},
        "options": {"sequence_parallel": 1}}}}))
    _one_line(run_podsim(capsys, "validate", str(src)), "sequence_parallel: 1 is not a boolean")
    sv = json.loads(json.dumps(SERVING))
    sv["workload"]["serving"]["model"]["parallel_block"] = 1
    src.write_text(json.dumps(sv))
    _one_line(run_podsim(capsys, "validate", str(src)), "parallel_block: 1 is not a boolean")
    _one_line(run_podsim(capsys, "steptime", "--model", "llama2-70b", "--generation", "tpu-v4", "--slice", "2x2x2", "-p", "fsdp=8",
                         "--set", "n_layers=1", "--option", "sequence_parallel=1"), "--option sequence_parallel=1")


def test_an_encoder_is_not_served(capsys):
    _one_line(run_podsim(capsys, "serve", "-g", "tpu-v5e", "--slice", "2x4", "--model", "bert-large", "--weights", "int8",
                         "--rate", "3/s", "--duration", "10s"), "'bert-large' is an encoder", "llama2-70b")


def test_validate_refuses_the_serving_rate_run_refuses(tmp_path, capsys):
    """1e9 requests/s for 20 s: validate passed what run refused when it drew the requests."""
    sv = json.loads(json.dumps(SERVING))
    sv["workload"]["serving"]["requests"]["arrivals"]["rate"] = "1e9/s"
    src = tmp_path / "sv.yaml"
    src.write_text(json.dumps(sv))
    v = _one_line(run_podsim(capsys, "validate", str(src)), "20,000,000,000 requests; at most 5,000,000")
    r = _one_line(run_podsim(capsys, "run", str(src), "-o", str(tmp_path / "o"), "--no-report"))
    assert v == r and not (tmp_path / "o").exists()


@pytest.mark.parametrize(("body", "needle"), [
    ("grid: {topology.pods: [1, 2]}\npoints: [{label: a, topology.pods: 3}]\n", "points.0.topology.pods: topology.pods is set by the grid too"),
    ("grid: {topology: [{pods: 1}]}\npoints: [{label: a, topology.pods: 3}]\n", "is set by the grid too (topology)"),
    ("points: [{label: a, topology: {pods: 2}}]\ncapacity: {field: topology.pods, low: 1, high: 3}\n", "the capacity field topology.pods"),
    ("capacity: {field: seed, low: 1, high: 8}\n", "capacity.field: 'seed' is not a fleet size"),
    ("grid: {seed: [1, 2]}\nshow: [utilization]\n", "show.0: 'utilization' is not a metric of a cluster run (closest: utilisation"),
    ("grid: {seed: [1, 2]}\nshow: [step_time_s]\n", "'step_time_s' is not a metric of a cluster run"),
])
def test_sweep_files_that_would_ignore_a_value_are_refused(body, needle, tmp_path, capsys):
    (tmp_path / "s.yaml").write_text(_scenario(targets={"wait_p95_s": "<= 1h"}))
    sw = tmp_path / "sw.yaml"
    sw.write_text("sweep: sw\nbase: s.yaml\n" + body)
    _one_line(run_podsim(capsys, "validate", str(sw)), needle)


def test_a_grid_with_points_of_other_fields_is_their_product(tmp_path, capsys):
    """points and grid over different fields stay the documented product (points x grid)."""
    (tmp_path / "s.yaml").write_text(_scenario())
    sw = tmp_path / "sw.yaml"
    sw.write_text("sweep: sw\nbase: s.yaml\ngrid: {seed: [1, 2]}\npoints: [{label: a, topology.pods: 1}, {label: b, topology.pods: 2}]\n"
                  "show: [utilisation, goodput]\n")
    code, out, err = run_podsim(capsys, "validate", str(sw))
    assert code == 0 and "4 points" in out, err


@pytest.mark.parametrize("flag,item", [("--option", "sequence_parallel=1"), ("--multislice", "straggler=1"),
                                       ("--multislice", "ecmp_collisions=yes")])
def test_a_key_value_boolean_takes_only_true_or_false(flag, item):
    """`--option` and `--multislice` read a boolean as YAML does: 1 or yes is refused in one line
    naming the key (pydantic alone would read them as true), as a scenario's multislice section is."""
    from podsim.cli.steptime import multislice_spec, step_options
    from podsim.errors import PodsimError

    parse = step_options if flag == "--option" else multislice_spec
    with pytest.raises(PodsimError, match=f"^{flag} {item}: not a boolean; give true or false$"):
        parse([item])
    assert parse([item.split("=")[0] + "=false"]) is not None
