"""The fuzz tier: a seeded generator of hostile command lines and input files over every verb
and every format podsim reads, driven through the CLI in-process.

Each case must answer with exit 0 (a result) or 2 (one line on stderr, `error: ...`), never a
traceback or "internal error"; write nothing outside its output folder and leave every hostile
output path as it was (a FIFO, a socket, a device node and a link made in the fuzz root, never
/dev; a folder of someone else's files); put no NaN or infinity in its JSON output or its output
files; and finish within CASE_LIMIT_S (a hang fails the case). Issue 35's classes are drawn
too: traces run on another slice than they were made for, degenerate tier ratios, tiny CVs and
availabilities, keys given twice, numbers where a boolean goes.
The seed, the case count and the time limit are fixed for CI and can be changed for a longer
hunt: PODSIM_FUZZ_SEED, PODSIM_FUZZ_CASES (per run, split over the verbs), PODSIM_FUZZ_CASE_S.
A failure prints the case's argv and files so it reproduces.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import signal
import socket
import stat
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml
from helpers import run_podsim

SEED = int(os.environ.get("PODSIM_FUZZ_SEED", "26"))
CASES = int(os.environ.get("PODSIM_FUZZ_CASES", "1100"))
SUCCESS_FLOOR_CASES = 20  # a verb given this many cases must run at least one to a result
CASE_LIMIT_S = float(os.environ.get("PODSIM_FUZZ_CASE_S", "30"))
DATA = Path(__file__).parent / "data"
ASTRA = DATA / "astra-sim"

pytestmark = pytest.mark.slow  # ~2 minutes: in `make test`, not in the quick tier

# Values a hostile or careless user types --------------------------------------------------------
NUMBERS = ["nan", "inf", "-inf", "-1", "0", "-0", "1e308", "1e-300", "1e400", str(2**64), "99999999999999999999",
           "abc", "", "1,5", "0x10", "true", "3.5", "1_000", " 7", "1e6", "2", "1", "0.5", "10"]
DURATIONS = ["1ns", "0", "-1h", "1e300s", "nan", "inf", "3h", "1s", "2d", "1e9h", "abc", "", "90", "1min", "6h"]
SIZES = ["1MiB", "0", "-1", "1e308", "nan", "1PB", "2PB", "abc", "", "4096", "1e15", "1e16", "1KiB"]
TEXT = ["", " ", "../x", "../../escape", "/abs/path", "a/b", "..", ".", ".hidden", "x" * 300, "🙂", "--json", "-1",
        "ok", "NUL\\x00"]
SHAPES = ["2x2x2", "4x4x4", "0x2x2", "2x2", "8", "1024x1024x1024", "64x64x64", "-1x2x2", "2x2x2x2", "abc", "",
          "4x4x8", "1x1x1"]
SCALARS = [float("nan"), float("inf"), -1, 0, 1, 2.5, 1e308, 1e-300, 2**64, -(2**63), True, False, None, "", "abc",
           "1e400", "3h", "2/h", "99%", [], {}, [1, 2], {"a": 1}, "x" * 200]


def _pick(rng: random.Random, values):
    return values[rng.randrange(len(values))]


# The input files every case may name -----------------------------------------------------------
OK_TRACE = {"podsim_trace": 1, "name": "t", "ops": [
    {"id": "c", "kind": "compute", "flops": 1e9, "hbm_bytes": 1e6},
    {"id": "a", "kind": "all_reduce", "bytes": 1048576, "group": "x", "deps": ["c"]},
    {"id": "s", "kind": "send_recv", "bytes": 4096, "axis": "y", "deps": ["a"]}]}
REQUESTS = [{"id": "a", "shape": "2x2x2"}, {"id": "b", "shape": "4x4x4", "priority": 1}, {"id": "c", "shape": "1x1x2"}]
FAILED = {"hosts": [3], "cubes": [], "ocs": [], "chips": [5]}
SCENARIO = {"name": "fuzz", "topology": {"generation": "tpu-v5e", "wiring": "static"},
            "workload": {"synthetic": {"jobs": 4, "rate": "2/h", "mix": {"2x2": 1}}}, "horizon": "4h", "seed": 1}
SYNTHETIC = {"jobs": 4, "arrival": {"rate_per_h": 2}, "slice_mix": {"2x2": 1}}
NETWORK = "topology: [Ring]\nnpus_count: [8]\nbandwidth: [50]\nlatency: [500]\n"
JOBS_CSV = "job_id,submission_time,duration,num_gpu\nj1,0,600,4\nj2,60,1200,8\nj3,90,300,1\n"
# exact shapes and twists (the v4 paper's notation), under other column names (--columns)
SHAPES_CSV = "jid,t,dur,n,shp,tw\nj1,0,600,8,2x2x2,false\nj2,60,1200,64,4x4x4_T,\nj3,90,300,16,,\nj4,100,300,32,4x4x2,yes\n"
TIERS = {"tor": {"radix": 64, "gbps": 800, "oversubscription": 1}, "aggregation": {"radix": 2048, "gbps": 800},
         "spine": {"radix": 2048, "gbps": 800, "count": 32}}
SYSTEM = {"all-reduce-implementation": ["ring"], "all-gather-implementation": ["ring"], "reduce-scatter-implementation": ["ring"],
          "all-to-all-implementation": ["direct"], "roofline-enabled": 1, "peak-perf": 123, "local-mem-bw": 800, "endpoint-delay": 10}
SERVING = {"name": "sv", "topology": {"generation": "tpu-v5e", "wiring": "static"}, "seed": 1,
           "workload": {"serving": {"slice": "2x4", "model": {"model": "llama2-70b", "overrides": {"n_layers": 2},
                                                              "precision": {"weights": "int8"}},
                                    "batch": {"kind": "continuous", "token_budget": 512},
                                    "requests": {"arrivals": {"kind": "poisson", "rate": "3/s"},
                                                 "prompt": {"kind": "fixed", "mean": 256}, "output": {"kind": "fixed", "mean": 16}},
                                    "slo": {"ttft": "2s", "tpot": "100ms"}, "duration": "10s"}}}
TIERS_SPECS = ["tor=40x200/33:7,aggregation=800x200,spine=800x200*20", "tor=0x200,aggregation=800x200,spine=800x200*20",
               "tor=40x1e308,aggregation=800x200,spine=800x200*2", "tor=40x200/0:7,aggregation=800x200,spine=800x200*20",
               f"tor=40x200,aggregation=800x200,spine=800x200*{2**64}", "tor=40x200,tor=40x200,aggregation=800x200,spine=800x200*2",
               "tor=2x200,aggregation=2x200,spine=2x200*1", "tor=40x0.0001,aggregation=800x200,spine=800x200*2", "bogus", "",
               "spine=800x200*20", "tor=40x200,,aggregation=800x200,spine=800x200*2",
               "tor=40x200/33:0,aggregation=800x200,spine=800x200*20", "tor=40x200/33:0.0001,aggregation=800x200,spine=800x200*20",
               "tor=40x200/0:0,aggregation=800x200,spine=800x200*20", "tor=40x200/1e-300:1,aggregation=800x200,spine=800x200*20"]
# issue 35's classes: a trace made for one slice, numbers where a boolean goes, keys given twice
MADE_2X2X2 = {**OK_TRACE, "meta": {"slice": "2x2x2", "generation": "tpu-v4"}}
NONBOOL_REQUESTS = [{"id": "a", "shape": "2x2x2", "allow_degraded": 1}, {"id": "b", "shape": "1x1x2", "twisted": "yes"}]
HOSTILE_OUTS = ("fifo", "fifo.json", "fifo.html", "sock", "sock.json", "link.html", "link.json", "theirs", "nulldev", "nulldev.json",
                "nulldev.html")


def _set(data: dict, path: tuple, value) -> dict:
    """A copy of `data` with the value at `path` (keys) replaced."""
    out = json.loads(json.dumps(data))
    node = out
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return out
FAILURES_CSV = "time_s,component,id,repair_s\n100,host,1,600\n"


def _mutate(rng: random.Random, data):
    """A copy of `data` with one hostile change at a random place: a value replaced by a hostile
    scalar, a key dropped, an unknown key added, or a list emptied or grown."""
    data = json.loads(json.dumps(data))
    paths = []

    def walk(x, path):
        paths.append(path)
        if isinstance(x, dict):
            for k, v in x.items():
                walk(v, (*path, k))
        elif isinstance(x, list):
            for i, v in enumerate(x):
                walk(v, (*path, i))

    walk(data, ())
    path = _pick(rng, paths[1:] or paths)
    parent = data
    for p in path[:-1]:
        parent = parent[p]
    key = path[-1] if path else None
    op = rng.randrange(5)
    if key is None:
        return _pick(rng, SCALARS)
    if op == 0 and isinstance(parent, dict):
        del parent[key]
    elif op == 1 and isinstance(parent, dict):
        parent[_pick(rng, ["bogus", "x", "", "id", "ops"])] = _pick(rng, SCALARS)
    elif op == 2 and isinstance(parent[key], list):
        parent[key] = [] if rng.random() < 0.5 else parent[key] * rng.choice((2, 50))
    else:
        parent[key] = _pick(rng, SCALARS)
    return data


def _dump(rng: random.Random, data, suffix: str) -> str:
    """YAML or JSON text of `data` (NaN and infinities as each format spells them), sometimes
    with a key duplicated or the text cut short."""
    if suffix == ".json":
        text = json.dumps(data)  # NaN, Infinity: refused by the reader
    else:
        text = yaml.safe_dump(data, sort_keys=False)
    r = rng.random()
    if r < 0.08 and text.count(":") > 1:
        line = text.splitlines()[min(1, len(text.splitlines()) - 1)]
        text = text + ("\n" + line + "\n" if suffix != ".json" else "")
        if suffix == ".json":
            text = text.replace('{"', '{"name": 1, "name": 2, "', 1)
    elif r < 0.14:
        text = text[: rng.randrange(1, max(2, len(text)))]
    return text


class Inputs:
    """The fuzz root: `in/` holds the files (valid ones, hostile ones, and mutated ones written
    per case); each case runs in `work/<n>/` and may write only there."""

    def __init__(self, root: Path):
        self.root = root
        self.dir = root / "in"
        self.dir.mkdir()
        self.static: dict[str, Path] = {}
        w = self._write
        w("ok.json", json.dumps(OK_TRACE))
        w("ok.yaml", yaml.safe_dump(OK_TRACE))
        w("requests.yaml", yaml.safe_dump(REQUESTS))
        w("failed.yaml", yaml.safe_dump(FAILED))
        w("scenario.yaml", yaml.safe_dump(SCENARIO))
        w("synthetic.yaml", yaml.safe_dump(SYNTHETIC))
        w("sweep.yaml", "sweep: fz\nbase: scenario.yaml\ngrid: {seed: [1, 2]}\n")
        w("network.yml", NETWORK)
        w("jobs.csv", JOBS_CSV)
        w("failures.csv", FAILURES_CSV)
        w("shapes.csv", SHAPES_CSV)
        w("tiers.yaml", yaml.safe_dump(TIERS))
        w("system.json", json.dumps(SYSTEM))
        w("serving.yaml", yaml.safe_dump(SERVING))
        w("requests.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,374,44\n"
                          "2023-11-16 18:15:50.99,396,109\n2023-11-16 18:15:51.5,100,10\n")
        w("empty.yaml", "")
        w("random.bin", bytes(random.Random(SEED).getrandbits(8) for _ in range(3000)))
        w("nul.txt", "DATA\n1\nl1\x00 -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 8 1\n")
        w("deep.json", "[" * 5000 + "]" * 5000)
        w("deep.yaml", "[" * 3000 + "]" * 3000)
        w("nan.yaml", "podsim_trace: 1\nops:\n- {id: c, kind: compute, duration_s: .nan}\n")
        w("dup.json", '{"podsim_trace": 1, "podsim_trace": 1, "ops": []}')
        w("latin1.yaml", "name: caf\xe9\n".encode("latin-1"))
        w("made2x2x2.json", json.dumps(MADE_2X2X2))
        w("nonbool.yaml", yaml.safe_dump(NONBOOL_REQUESTS))
        w("odd.yaml", yaml.safe_dump({**SCENARIO, "topology": {"generation": "tpu-v4"}, "workload": {"odd": {"jobs": 3, "max_chips": 10**9}}}))
        w("odd2.yaml", yaml.safe_dump({**SCENARIO, "topology": {"generation": "tpu-v4"}, "workload": {"odd": {"jobs": 3, "max_chips": 4_000_000}}}))
        w("drain1.yaml", yaml.safe_dump({**SCENARIO, "drain": 1}))
        w("encoder.yaml", yaml.safe_dump(_set(SERVING, ("workload", "serving", "model", "model"), "bert-large")))
        w("flood.yaml", yaml.safe_dump(_set(SERVING, ("workload", "serving", "requests", "arrivals", "rate"), "1e9/s")))
        w("tinyavail.yaml", yaml.safe_dump({**SCENARIO, "failures": {"host": {"availability": 1e-300}}}))
        self.hostile_outputs()
        shutil.copy(ASTRA / "text-workloads" / "microAllReduce.txt", self.dir / "astra.txt")
        self.static["astra.txt"] = self.dir / "astra.txt"
        os.mkfifo(self.dir / "fifo.yaml")
        self.static["fifo.yaml"] = self.dir / "fifo.yaml"
        (self.dir / "folder.json").mkdir()
        self.static["folder.json"] = self.dir / "folder.json"
        self.static["missing.yaml"] = self.dir / "missing.yaml"
        self.count = 0

    def hostile_outputs(self) -> None:
        """Output paths that are not podsim's, in `in/out/`: FIFOs, a socket, links to a file, a
        folder of someone else's files, and device nodes with /dev/null's numbers where this
        user may make one (made here: nothing under /dev is ever named)."""
        d = self.dir / "out"
        d.mkdir()
        (d / "target.txt").write_text("keep me\n")
        self.outs: dict[str, Path] = {}
        self._socks = []
        for name in HOSTILE_OUTS:
            p = d / name
            try:
                if name.startswith("fifo"):
                    os.mkfifo(p)
                elif name.startswith("sock"):
                    self._socks.append(socket.socket(socket.AF_UNIX))
                    self._socks[-1].bind(str(p))
                elif name.startswith("link"):
                    p.symlink_to(d / "target.txt")
                elif name == "theirs":
                    p.mkdir()
                    (p / "notes.txt").write_text("keep me\n")
                else:
                    os.mknod(p, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
            except OSError:  # no device nodes for this user: the others stand in
                continue
            self.outs[name] = p
        self.kinds = {n: stat.S_IFMT(os.lstat(p).st_mode) for n, p in self.outs.items()}

    def out(self, rng: random.Random, suffix: str = "") -> str:
        """A hostile output path, with `suffix` where one is made with it (a writer checks it)."""
        names = [n for n in self.outs if n.endswith(suffix)] if suffix else [n for n in self.outs if "." not in n]
        return str(self.outs[_pick(rng, names or sorted(self.outs))])

    def check_outs(self, where: str) -> None:
        """Every hostile output path is still what it was."""
        for n, p in self.outs.items():
            assert stat.S_IFMT(os.lstat(p).st_mode) == self.kinds[n], f"{where}: {p.name} was replaced"
        assert (self.dir / "out" / "target.txt").read_text() == "keep me\n", f"{where}: a link's target was written"
        assert sorted(p.name for p in self.outs["theirs"].iterdir()) == ["notes.txt"], f"{where}: wrote into someone else's folder"
        assert (self.outs["theirs"] / "notes.txt").read_text() == "keep me\n", f"{where}: someone else's file was written"

    def _write(self, name: str, data) -> Path:
        path = self.dir / name
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        self.static[name] = path
        return path

    def chakra(self) -> list[Path]:
        """Chakra .et files of the valid trace on a 2x2x2 slice (made once)."""
        et = sorted(self.dir.glob("ok.*.et"))
        if not et:
            from podsim.trace import load_trace
            from podsim.trace.chakra_export import chakra_files

            for r, data in enumerate(chakra_files(load_trace(self.static["ok.json"]), (2, 2, 2), generation="tpu-v4")):
                (self.dir / f"ok.{r}.et").write_bytes(data)
            et = sorted(self.dir.glob("ok.*.et"))
        return et

    def mutated(self, rng: random.Random, data, suffix: str) -> Path:
        self.count += 1
        path = self.dir / f"m{self.count}{suffix}"
        path.write_text(_dump(rng, _mutate(rng, data) if rng.random() < 0.8 else data, suffix))
        return path

    def file(self, rng: random.Random, valid: str, data=None, suffix: str | None = None) -> str:
        """A file argument: mostly `valid` or a mutation of `data`, sometimes a hostile file."""
        r = rng.random()
        if data is not None and r < 0.55:
            return str(self.mutated(rng, data, suffix or Path(valid).suffix))
        if r < 0.75:
            return str(self.static[valid])
        return str(self.static[_pick(rng, sorted(self.static))])


def _opt(rng: random.Random, flag: str, valid: list[str], hostile: list[str], p_hostile: float = 0.3) -> list[str]:
    return [flag, _pick(rng, hostile if rng.random() < p_hostile else valid)]


def _sprinkle(rng: random.Random, argv: list[str], optional: list[list[str]], k: int = 3, stray: bool = True) -> list[str]:
    """argv with up to k optional option groups, sometimes (`stray`) an unknown option or a dropped token."""
    extra = [o for o in optional if rng.random() < k / max(len(optional), 1)]
    out = [*argv, *(t for o in extra for t in o)]
    r = rng.random() if stray else 1.0
    if r < 0.05:
        out.append(_pick(rng, ["--bogus", "--slcie", "--jsn", "-Z", "--max-ops"]))
    elif r < 0.09 and len(out) > 2:
        del out[rng.randrange(1, len(out))]
    return out


# One generator per verb: argv for a case, writing the files it needs ---------------------------
def g_topology(rng, inp):
    gen = _pick(rng, ["tpu-v4", "tpu-v5e", "tpu-v5p", "gpu-h100", "tpu-v9", ""])
    opts = [_opt(rng, "--slice", ["2x2x2", "4x4x4"] if gen != "tpu-v5e" else ["4x4", "2x4"], SHAPES), ["--twisted"], ["--no-ocs"],
            ["--json"], ["--detail"], _opt(rng, "--pods", ["2", "4"], NUMBERS), _opt(rng, "--sites", ["2"], NUMBERS),
            _opt(rng, "--dcn", ["eps", "ocs"], TEXT), _opt(rng, "--oversubscription", ["2", "4"], NUMBERS),
            _opt(rng, "--wan-latency-ms", ["5"], NUMBERS), _opt(rng, "--wan-gbps", ["800"], NUMBERS),
            _opt(rng, "--dcn-tiers", ["fat-tree-k64", "fat-tree-k40-4.7to1", inp.file(rng, "tiers.yaml", TIERS)], TIERS_SPECS, 0.6)]
    return _sprinkle(rng, ["topology", gen], opts, 2)


def g_place(rng, inp):
    opts = [_opt(rng, "--failed", [inp.file(rng, "failed.yaml", FAILED)], [inp.file(rng, "random.bin")]),
            _opt(rng, "--solver", ["greedy", "greedy", "cpsat"], TEXT), _opt(rng, "--policy", ["best", "first"], TEXT),
            _opt(rng, "--time-limit", ["0.2"], NUMBERS), _opt(rng, "--seed", ["3"], NUMBERS), _opt(rng, "--pods", ["2"], NUMBERS),
            _opt(rng, "--block-cubes", ["4"], NUMBERS), _opt(rng, "--now", ["10"], NUMBERS), ["--no-ocs"], ["--json"],
            _opt(rng, "--max-requests", ["2", "100"], NUMBERS), ["--wall-clock"], ["--spare-ports"]]
    requests = inp.file(rng, "nonbool.yaml") if rng.random() < 0.1 else inp.file(rng, "requests.yaml", REQUESTS)
    return _sprinkle(rng, ["place", "-g", _pick(rng, ["tpu-v4", "tpu-v4", "tpu-v5e"]), "-r", requests, "--solver", "greedy"], opts, 2)


MULTISLICE = ["straggler=false", "ecmp_collisions=false", "straggler_cv=0.01"]  # podsim.study.multislice's switches
MULTISLICE_BAD = ["bogus=1", "straggler_cv=2", "straggler_cv=nan", "straggler=maybe", "=", "straggler"]


def g_steptime(rng, inp):
    if rng.random() < 0.5:
        base = ["steptime", "--generation", "tpu-v4", "--slice", _pick(rng, ["2x2x2", "2x2x2", *SHAPES]),
                "--collective", _pick(rng, ["all_reduce", "all_gather", "all-to-all", "send_recv", "bogus"]),
                "--bytes", _pick(rng, ["1MiB", "64KiB", *SIZES])]
        opts = [_opt(rng, "--group", ["x", "x,y", "all"], ["z:3", "q", "", "x:0", "dcn"]),
                _opt(rng, "--algorithm", ["auto", "ring"], TEXT), ["--json"], ["--no-fast-path"],
                _opt(rng, "--routing", ["shortest_paths"], TEXT), _opt(rng, "--compute-efficiency", ["0.5"], NUMBERS),
                _opt(rng, "--slices", ["2"], NUMBERS), _opt(rng, "--ecmp", ["hash"], TEXT), _opt(rng, "--dcn-tiers", ["fat-tree-k64"], TEXT),
                _opt(rng, "--system", [inp.file(rng, "system.json")], TEXT), _opt(rng, "--option", ["recompute=full"], TEXT)]
    elif rng.random() < 0.3:  # a generated step: a preset on a plan, with generator options
        base = ["steptime", "--model", _mostly(rng, ["llama2-70b", "gpt3-175b", "mixtral-8x7b"], ["bogus", "resnet50"]),
                "--generation", "tpu-v4", "--slice", _mostly(rng, ["4x4x4"], SHAPES), "--set", "n_layers=1"]
        opts = [_opt(rng, "-p", ["fsdp=64", "fsdp=16,tensor=4", "fsdp=auto,tensor=4"], ["fsdp=8,", "data=0", "tensor=3", "", "bogus=2"]),
                _opt(rng, "--option", ["recompute=full", "collective_matmul=true", "sequence_parallel=true", "attention=materialized"],
                     ["microbatches=1e308", "capacity_factor=nan", "replicas_per_chip=3", "bogus=1", "=", "recompute", "grad_bytes=true",
                      "sequence_parallel=1", "sequence_parallel=yes", "combine_grad_reduce=0"]),
                ["--set", "n_layers=2"], ["--option", "recompute=full", "--option", "recompute=none"],
                _opt(rng, "--slices", ["2"], NUMBERS), _opt(rng, "--dcn", ["eps", "ocs"], TEXT), _opt(rng, "--ecmp", ["split", "hash"], TEXT),
                _opt(rng, "--dcn-tiers", ["fat-tree-k64", inp.file(rng, "tiers.yaml", TIERS)], TIERS_SPECS, 0.5),
                _opt(rng, "--max-flows", ["100", "10000000"], NUMBERS), _opt(rng, "--compute-efficiency", ["0.5"], NUMBERS), ["--json"],
                _opt(rng, "--system", [inp.file(rng, "system.json")], TEXT, 0.0), _opt(rng, "--multislice", MULTISLICE, MULTISLICE_BAD)]
    else:
        src = _pick(rng, ["ok.json", "ok.yaml", "astra.txt", "chakra", "mut", "made2x2x2.json"])
        files = ([str(p) for p in inp.chakra()] if src == "chakra" else [inp.file(rng, "ok.json", OK_TRACE)] if src == "mut"
                 else [inp.file(rng, src)])
        base = ["steptime", *(t for f in files for t in ("--trace", f))]
        astra = src == "astra.txt" and rng.random() < 0.5
        base += ["--network", inp.file(rng, "network.yml")] if astra else \
            ["--generation", "tpu-v4", "--slice", _pick(rng, ["2x2x2", "2x2x2", *SHAPES])]
        if astra and rng.random() < 0.6:
            base += ["--system", inp.file(rng, "system.json", SYSTEM)]
        opts = [_opt(rng, "--compute-efficiency", ["0.5"], NUMBERS), _opt(rng, "--slices", ["2"], NUMBERS),
                _opt(rng, "--dcn", ["eps", "ocs"], TEXT), _opt(rng, "--oversubscription", ["2"], NUMBERS),
                _opt(rng, "--sites", ["2"], NUMBERS), _opt(rng, "--wan-gbps", ["100"], NUMBERS), ["--json"],
                _opt(rng, "--timeline", ["tl.json"], ["tl.txt", "../tl.json", "/proc/tl.json", inp.out(rng, ".json"), "", "/"]),
                _opt(rng, "--max-ops", ["2", "1000"], NUMBERS),
                _opt(rng, "--ecmp", ["hash"], TEXT), _opt(rng, "--max-flows", ["10", "100000"], NUMBERS),
                _opt(rng, "--dcn-tiers", ["fat-tree-k64"], TIERS_SPECS), _opt(rng, "-p", ["fsdp=8"], TEXT)]
    return _sprinkle(rng, base, opts, 2)


def _mostly(rng: random.Random, valid: list[str], hostile: list[str], p_hostile: float = 0.2) -> str:
    return _pick(rng, hostile if rng.random() < p_hostile else valid)


def g_generate(rng, inp):
    model = _mostly(rng, ["gpt3-175b", "llama2-70b", "resnet50", "mixtral-8x7b"], ["bogus", ""])
    plan = {"gpt3-175b": "fsdp=2,tensor=4", "llama2-70b": "fsdp=8", "resnet50": "data=8", "mixtral-8x7b": "data=1,expert=8"}.get(model, "data=8")
    sets = ["n_layers=1", _pick(rng, ["n_layers=100000", f"n_layers={2**64}", "global_batch=0", "seq_len=1e9", "bogus=1",
                                      "n_layers=true", "d_model=-1", "global_batch=64"])] if model != "resnet50" else ["global_batch=64"]
    base = ["trace", "generate", model, "--slice", _mostly(rng, ["2x2x2"], SHAPES), "-p", _mostly(rng, [plan], ["fsdp=8,", "data=0", "tensor=3", ""]),
            "-o", _mostly(rng, ["t.json", "t.yaml"], ["t.txt", "../t.json", "sub/t.json", "", "/", inp.out(rng, ".json")])]
    base += [t for s in sets[: 2 if rng.random() < 0.25 else 1] for t in ("--set", s)]
    opts = [_opt(rng, "--microbatches", ["2"], NUMBERS), _opt(rng, "--recompute", ["full", "minimal"], TEXT),
            _opt(rng, "--precision", ["int8"], TEXT), _opt(rng, "--capacity-factor", ["1.25"], NUMBERS),
            _opt(rng, "--grad-bytes", ["4"], NUMBERS), _opt(rng, "--bn-group", ["2"], NUMBERS), ["--json"],
            _opt(rng, "--no-overlap", ["dcn"], TEXT), _opt(rng, "--map", ["fsdp=x,y"], TEXT), ["--collective-matmul"],
            ["--sequence-parallel"], ["--combine-grad-reduce"], _opt(rng, "--attention", ["flash", "materialized"], TEXT),
            _opt(rng, "--input-pipeline", ["none", "jpeg"], TEXT), _opt(rng, "--input-rate", ["5000", "1e6"], NUMBERS),
            _opt(rng, "--replicas-per-chip", ["1", "2"], NUMBERS), _opt(rng, "--mesh-order", ["tensor,fsdp,data", "fsdp"],
                                                                           ["bogus", ",", "fsdp,fsdp", "tensor,,fsdp", *TEXT])]
    return _sprinkle(rng, base, opts, 2)


def g_import(rng, inp):
    src = _pick(rng, ["astra.txt", "chakra", "ok.json", "random.bin", "nul.txt", "mut"])
    files = ([str(p) for p in inp.chakra()] if src == "chakra" else [inp.file(rng, "ok.json", OK_TRACE)] if src == "mut"
             else [inp.file(rng, src)])
    base = ["trace", "import", *files, "-o", _pick(rng, ["i.json", "i.yaml", "i.bin", "../i.json", inp.out(rng, ".json")])]
    opts = [_opt(rng, "--slice", ["2x2x2", "8"], SHAPES), _opt(rng, "--group", ["x"], TEXT), _opt(rng, "--rank", ["1"], NUMBERS),
            _opt(rng, "--clock-ghz", ["2"], NUMBERS), ["--keep-cpu-ops"], ["--json"], _opt(rng, "--max-input", ["1MiB"], SIZES)]
    return _sprinkle(rng, base, opts, 2)


def g_export(rng, inp):
    src = inp.file(rng, "made2x2x2.json") if rng.random() < 0.15 else inp.file(rng, "ok.json", OK_TRACE)
    base = ["trace", "export", src, "-o", _pick(rng, ["ex", "ex", "ex/sub", "", ".", "/", inp.out(rng), inp.out(rng)]),
            "--slice", _pick(rng, ["2x2x2", "2x2x2", "2x2x1", *SHAPES])]
    base += ["--generation", _mostly(rng, ["tpu-v4"], ["tpu-v5e", "bogus", ""])] if rng.random() < 0.8 else []
    opts = [_opt(rng, "--compute-efficiency", ["0.5"], NUMBERS), _opt(rng, "--prefix", ["t", "run.a"], TEXT, 0.6),
            _opt(rng, "--format", ["chakra", "astra-sim", "astra-sim"], TEXT), ["--no-extras"], ["--extras"], ["--json"],
            _opt(rng, "--max-files", ["4", "100"], NUMBERS), _opt(rng, "--algorithm", ["ring", "direct", "halving_doubling"],
                                                                  ["auto", "hierarchical", *TEXT]), ["--force"]]
    return _sprinkle(rng, base, opts, 2)


def g_show(rng, inp):
    src = _pick(rng, ["ok.json", "ok.yaml", "astra.txt", "chakra", "nan.yaml", "dup.json", "deep.json", "deep.yaml", "mut", "mut",
                      "made2x2x2.json"])
    files = ([str(p) for p in inp.chakra()] if src == "chakra" else
             [inp.file(rng, "ok.json", OK_TRACE, _pick(rng, [".json", ".yaml"]))] if src == "mut" else [inp.file(rng, src)])
    opts = [_opt(rng, "--generation", ["tpu-v4"], TEXT), _opt(rng, "--slice", ["2x2x2"], SHAPES), _opt(rng, "--clock-ghz", ["2"], NUMBERS),
            ["--json"], _opt(rng, "--max-ops", ["1", "100"], NUMBERS)]
    return _sprinkle(rng, ["trace", "show", *files], opts, 2)


def g_models(rng, inp):
    return _sprinkle(rng, ["trace", "models"], [["--json"], ["--bogus"]], 1)


def g_scaling(rng, inp):
    base = ["scaling", "llama2-70b", "--slice", _mostly(rng, ["4x4x4"], SHAPES, 0.1),
            "-p", _mostly(rng, ["fsdp=64", "fsdp=16,tensor=4"], ["fsdp=64,dcn=2", "x", "fsdp=64,", ""], 0.1),
            "--slices", _mostly(rng, ["1,2", "1,2,4"], ["0,1", "2,1", "1,100000", "a,b", "", "1,,2"], 0.1),
            "--batch-per-slice", _mostly(rng, ["64"], ["8", *NUMBERS], 0.1), "--set", "n_layers=1"]
    opts = [_opt(rng, "--dcn", ["eps", "ocs"], TEXT), _opt(rng, "--sites", ["2"], NUMBERS), _opt(rng, "--wan-gbps", ["100"], NUMBERS),
            _opt(rng, "--wan-latency-ms", ["2"], NUMBERS), ["--json"], _opt(rng, "--plot", ["p.html"], ["p.txt", "../p.html", inp.out(rng, ".html")]),
            _opt(rng, "--set", ["seq_len=512"], ["global_batch=5", "n_layers=0", "bogus=1"]), _opt(rng, "--oversubscription", ["2"], NUMBERS),
            _opt(rng, "--ecmp", ["split", "hash"], TEXT), _opt(rng, "--dcn-tiers", ["fat-tree-k64", inp.file(rng, "tiers.yaml", TIERS)], TIERS_SPECS, 0.5),
            _opt(rng, "--option", ["recompute=full"], ["bogus=1", "microbatches=0", "="]), ["--static"],
            _opt(rng, "--max-flows", ["100000000"], NUMBERS), _opt(rng, "--compute-efficiency", ["0.5"], NUMBERS),
            _opt(rng, "--multislice", MULTISLICE, MULTISLICE_BAD)]
    return _sprinkle(rng, base, opts, 2)


def g_plan(rng, inp):
    """Small searches (one layer, 8 to 64 chips, one plan confirmed) so a case answers in seconds."""
    base = ["plan", _mostly(rng, ["llama2-70b", "mixtral-8x7b", "gpt3-175b"], ["resnet50", "bogus", ""], 0.1),
            "-g", _mostly(rng, ["tpu-v5p", "tpu-v4", "tpu-v5e"], ["gpu-h100", "bogus", ""], 0.1), "--set", "n_layers=1",
            "--top", _mostly(rng, ["1"], ["0", "-1", "99", *NUMBERS], 0.1)]
    if rng.random() < 0.75:
        base += ["--chips", _mostly(rng, ["8", "16", "32", "64"], ["100", "0", "1e9", *NUMBERS], 0.2)]
    else:
        base += ["--slice", _mostly(rng, ["2x2x2", "2x4", "4x4x4"], SHAPES, 0.3)]
    opts = [_opt(rng, "--slices", ["2"], NUMBERS), _opt(rng, "--global-batch", ["64"], NUMBERS),
            _opt(rng, "--tokens-per-step", ["256K"], ["0", "1T", "abc", "1e400", ""]),
            _opt(rng, "--option", ["precision=int8", "attention=materialized"], ["recompute=full", "overlap_dcn=false", "bogus=1", "="]),
            _opt(rng, "--recompute", ["none,full", "minimal"], ["some", "", "none,,full"]),
            _opt(rng, "--microbatches", ["1,2"], ["0", "a", "1,,2", ""]),
            _opt(rng, "--collective-matmul", ["chunked", "exposed,all_gather"], ["hidden", "bogus", ""]),
            _opt(rng, "--tokens", ["1B", "1e9"], ["0", "-1T", "1e400", "abc", ""]), _opt(rng, "--days", ["30", "1"], NUMBERS),
            _opt(rng, "--max-chips", ["256"], NUMBERS), _opt(rng, "--host-availability", ["0.999"], NUMBERS),
            _opt(rng, "--mtbf", ["5000h"], DURATIONS), _opt(rng, "--mttr", ["1h"], DURATIONS),
            _opt(rng, "--checkpoint-interval", ["30min"], DURATIONS), _opt(rng, "--restart-overhead", ["5min"], DURATIONS),
            _opt(rng, "--price-per-chip-hour", ["4.2"], NUMBERS), _opt(rng, "--power-per-chip", ["500"], NUMBERS),
            ["--json"], _opt(rng, "--max-ops", ["1000000"], NUMBERS), _opt(rng, "--max-flows", ["100000000"], NUMBERS),
            _opt(rng, "--generation", ["tpu-v4"], TEXT)]
    return _sprinkle(rng, base, opts, 2)


def g_cluster(rng, inp):
    if rng.random() < 0.6:
        stream = ["--synthetic", _pick(rng, ["jobs=4,rate=2/h,mix=2x2:1"] * 6 + ["jobs=2.5,rate=2/h,mix=2x2:1",
                                             "jobs=4,rate=0/h,mix=2x2:1", "jobs=4,rate=2/h,mix=2x2:1e308;2x4:1e308",
                                             "jobs=4,gaps=10min;,mix=2x2:1", "jobs=4,rate=2/h,mix=2x2:1,models=llama2-70b:1,steps=1e300",
                                             "jobs=4,rate=2/h,mix=2x2:nan", "rate=2/h", "jobs=1e9,rate=2/h,mix=2x2:1", "", "bogus=1",
                                             "jobs=4,jobs=7,rate=2/h,mix=2x2:1", "jobs=4,rate=2/h,mix=2x2:1;2x2:3",
                                             "jobs=4,rate=2/h,mix=2x2:1,span_sites=1",
                                             inp.file(rng, "synthetic.yaml", SYNTHETIC)])]
    elif rng.random() < 0.5:
        stream = ["--trace", inp.file(rng, "jobs.csv")]
    else:  # exact shapes and twists under other column names
        stream = ["--trace", inp.file(rng, "shapes.csv"), "--columns", _mostly(rng, [
            "id=jid,submit=t,duration=dur,accelerators=n,shape=shp,twisted=tw"], [
            "id=jid,submit=t,duration=dur,accelerators=n,shape=tw", "id=jid,bogus=x", "id=jid,,submit=t", "shape", "",
            "id=jid,submit=t,duration=dur,accelerators=n,shape=shp,twisted=tw,time_scale=1e308"], 0.4)]
    v4 = "shapes.csv" in " ".join(stream)
    base = ["cluster", "-g", "tpu-v4" if v4 else "tpu-v5e", *([] if v4 else ["--no-ocs"]), "--horizon", _mostly(rng, ["4h"], DURATIONS), *stream]
    opts = [_opt(rng, "--mtbf", ["500h"], DURATIONS), _opt(rng, "--mttr", ["1h"], DURATIONS), _opt(rng, "--host-availability", ["0.99"], [*NUMBERS, "1e-300", "0.999999999999"]),
            _opt(rng, "--weibull-shape", ["1.5"], NUMBERS), _opt(rng, "--link-mtbf", ["1000h"], DURATIONS),
            _opt(rng, "--policy", ["backfill", "priority"], TEXT), _opt(rng, "--seed", ["2"], NUMBERS), _opt(rng, "--pods", ["2"], NUMBERS),
            _opt(rng, "--checkpoint-interval", ["1h"], DURATIONS), _opt(rng, "--restart-overhead", ["5min"], DURATIONS),
            _opt(rng, "--sample", ["10min"], DURATIONS), _opt(rng, "--failure-trace", [inp.file(rng, "failures.csv")], [inp.file(rng, "jobs.csv")]),
            _opt(rng, "--limit", ["2"], NUMBERS), _opt(rng, "--compute-efficiency", ["0.5"], NUMBERS), ["--json"],
            _opt(rng, "--max-events", ["10", "1000"], NUMBERS), _opt(rng, "--arrival-scale", ["0.9"], NUMBERS),
            _opt(rng, "--ocs-mtbf", ["1000h"], DURATIONS), _opt(rng, "--ocs-mttr", ["2h"], DURATIONS), _opt(rng, "--link-mttr", ["2h"], DURATIONS),
            ["--ocs"], _opt(rng, "--degraded-placement", ["off", "requested", "all"], TEXT), _opt(rng, "--degraded-slowdown", ["1.5"], NUMBERS),
            ["--spare-ports"], _opt(rng, "--fold", ["none", "allowed"], TEXT), _opt(rng, "--placement", ["best", "first", "hilbert"], TEXT),
            _opt(rng, "--slowdown-model", ["llama2-70b"], ["bogus", "resnet50", ""]), _opt(rng, "--decision-time-limit", ["0.5"], NUMBERS),
            ["--drain"], _opt(rng, "--solver", ["greedy", "cpsat"], TEXT)]
    return _sprinkle(rng, base, opts, 2)


def g_run(rng, inp):
    r = rng.random()
    scenario = (inp.file(rng, "scenario.yaml", SCENARIO) if r < 0.6 else inp.file(rng, "serving.yaml", SERVING) if r < 0.85
                else inp.file(rng, "sweep.yaml"))
    out = _pick(rng, ["o", "o", "o/deeper", str(inp.static["ok.json"])]) if rng.random() < 0.85 else _pick(rng, [inp.out(rng), "", "/"])
    base = ["run", scenario, "--no-report", "-o", out]
    opts = [["--overwrite"], ["--json"], _opt(rng, "--store", ["s.duckdb"], [str(inp.static["ok.json"]), "folder/", inp.out(rng)]),
            _opt(rng, "--max-events", ["10"], NUMBERS), ["--force"], _opt(rng, "--max-flows", ["1000"], NUMBERS)]
    return _sprinkle(rng, base, opts, 1)


def g_sweep(rng, inp):
    text = _pick(rng, ["sweep: fz\nbase: scenario.yaml\ngrid: {seed: [1, 2]}\n",
                       "sweep: fz\nbase: scenario.yaml\ngrid: {seed: [1, 2], horizon: [1ns]}\n",
                       "sweep: ../../fz\nbase: scenario.yaml\ngrid: {seed: [1]}\n",
                       "sweep: fz\nbase: missing.yaml\ngrid: {seed: [1]}\n",
                       "sweep: fz\nbase: scenario.yaml\ngrid: {" + ", ".join(f"targets.x{i}: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]" for i in range(6)) + "}\n",
                       "sweep: fz\nsweep: fz2\nbase: scenario.yaml\ngrid: {seed: [1]}\n",
                       "sweep: fz\nbase: scenario.yaml\ngrid: {bogus.field: [1]}\n",
                       "sweep: fz\nbase: scenario.yaml\ngrid: {workload.synthetic.jobs: [true, 2.5]}\n",
                       "sweep: fz\nbase: scenario.yaml\ngrid: {topology.pods: [1, 2]}\npoints: [{label: a, topology.pods: 3}]\n",
                       "sweep: fz\nbase: scenario.yaml\ncapacity: {field: seed, low: 1, high: 4}\n",
                       "sweep: fz\nbase: scenario.yaml\ngrid: {seed: [1, 2]}\nshow: [utilization, bogus]\n"])
    inp.count += 1
    path = inp.dir / f"sw{inp.count}.yaml"
    path.write_text(text if rng.random() < 0.8 else _dump(rng, _mutate(rng, yaml.safe_load(text)), ".yaml"))
    base = ["sweep", str(path) if rng.random() < 0.9 else inp.file(rng, _pick(rng, ["fifo.yaml", "empty.yaml", "deep.yaml"])),
            "--no-report", "-o", "sw" if rng.random() < 0.85 else _pick(rng, [inp.out(rng), "", "/"])]
    opts = [_opt(rng, "--executor", ["serial"], TEXT), _opt(rng, "--workers", ["2"], NUMBERS), ["--resume"], ["--restart"], ["--json"],
            _opt(rng, "--address", ["tcp://127.0.0.1:1"], TEXT), _opt(rng, "--max-flows", ["1000"], NUMBERS), ["--report"]]
    return _sprinkle(rng, base, opts, 1)


def g_report(rng, inp, store):
    base = ["report", "--store", _pick(rng, [str(store), str(store), str(inp.static["ok.json"]), "missing.duckdb", inp.out(rng)])]
    mode = rng.random()
    if mode < 0.4:
        base += ["--list"] + (["--json"] if rng.random() < 0.5 else [])
    else:
        base += ["-o", _pick(rng, ["r.html", "r.html", "sub/r.html", str(inp.static["folder.json"]), inp.out(rng, ".html"), "", "/"])]
    opts = [_opt(rng, "--last", ["2"], NUMBERS), _opt(rng, "--runs", ["bogus-id"], TEXT), _opt(rng, "--sweep", ["nope"], TEXT), ["--json"]]
    return _sprinkle(rng, base, opts, 1)


def g_metrics(rng, inp):
    return _sprinkle(rng, ["metrics"], [_opt(rng, "--kind", ["cluster", "step"], TEXT), ["--json"]], 1)


def g_serve(rng, inp):
    """Half the cases are well-formed (valid values, only the options of the mode they pick, no
    stray token), so the fuzz reaches the serving run itself, not only the flag checks; the
    other half are as hostile as the other verbs' (any value, any option)."""
    h = 1.0 if rng.random() < 0.5 else 0.0  # scales every chance of a hostile pick: 0 in a well-formed case

    def opt(flag, valid, hostile, p=0.3):
        return _opt(rng, flag, valid, hostile, p * h)

    def mostly(valid, hostile, p=0.2):
        return _mostly(rng, valid, hostile, p * h)

    base = ["serve", "-g", mostly(["tpu-v5e"], ["tpu-v4", "gpu-h100", "bogus"], 0.05), "--slice", mostly(["2x4"], SHAPES, 0.1),
            "--model", mostly(["llama2-70b"], ["resnet50", "bogus", "bert-large"], 0.05), "--override", "n_layers=2", "--weights", "int8",
            "--duration", mostly(["20s"], ["1ns", "0", "-1h", "1e300s", "nan", "abc", "", "1e9h", "100d", "1s"], 0.1),
            "--prompt", mostly(["fixed:256", "uniform:low=10,high=300", "lognormal:mean=200,cv=1"],
                               ["fixed:0", "fixed:1e12", "lognormal:mean=nan,cv=1", "bogus", "", "trace"], 0.1),
            "--output", mostly(["fixed:32"], ["fixed:-1", "fixed:99999999999", "uniform:5", "", "trace"], 0.1)]
    arrivals = mostly(["poisson", "poisson", "bursty", "trace", "offline"], ["bogus", ""], 0.05)
    base += ["--arrivals", arrivals]
    if arrivals in ("poisson", "bursty") or rng.random() < 0.1 * h:
        base += ["--rate", mostly(["3/s"], ["0/s", "-1/s", "1e308/s", "nan/s", "abc", ""])]
    if arrivals == "trace" or rng.random() < 0.05 * h:
        base += ["--trace", mostly(["azure-conv", "azure-code", inp.file(rng, "requests.csv")],
                                   [inp.file(rng, _pick(rng, ["jobs.csv", "fifo.yaml", "random.bin", "folder.json"])), "bogus"])]
    if arrivals == "offline" or rng.random() < 0.05 * h:
        base += ["--requests", mostly(["10"], NUMBERS)]
    any_mode = h > 0  # a hostile case may give options of another mode (refused); a well-formed one does not
    opts = [opt("--replicas", ["2"], NUMBERS), opt("--beams", ["1", "2"], NUMBERS), opt("--page-tokens", ["16"], NUMBERS),
            opt("--hbm-reserve", ["0.1"], NUMBERS), opt("--seed", ["3"], NUMBERS), opt("--slo-ttft", ["1s"], DURATIONS),
            opt("--slo-tpot", ["50ms"], DURATIONS), opt("--warmup", ["5s"], DURATIONS), opt("--drain", ["10s"], DURATIONS),
            opt("--tensor", ["8"] if h == 0 else ["8", "4"], NUMBERS), opt("--expert", ["1"], NUMBERS), opt("--kv-cache", ["int8", "fp8"], TEXT),
            opt("--matmul", ["bf16", "int8"], TEXT), ["--parallel-block"], opt("--kv", ["paged", "reserve"], TEXT),
            opt("--replicates", ["2"], NUMBERS), opt("--clients", ["4"], NUMBERS), ["--json"],
            opt("--engine", ["auto", "ideal", "jetstream", "saxml"], ["vllm", "tensorrt-llm", "bogus", ""])]
    if any_mode or arrivals == "bursty":
        opts.append(opt("--cv", ["3"], [*NUMBERS, "1e-300", "0.001"]))
    if any_mode or arrivals == "trace":
        opts.append(opt("--time-scale", ["2"], NUMBERS))
    batch = mostly(["continuous", "static"], TEXT, 0.05)
    base += ["--batch", batch]
    batcher = _pick(rng, ["idle", "saxml"])
    if any_mode or batch == "continuous":
        opts += [opt("--token-budget", ["512"], NUMBERS), opt("--max-seqs", ["32"], NUMBERS), opt("--prefill", ["chunked", "separate"], TEXT),
                 opt("--prefill-seqs", ["1", "4"], NUMBERS)]
    opts += [opt("--buckets", ["256,512"], ["512,,1024", "1e308", "0,-1", "x", *TEXT]),
             opt("--batch-sizes", ["8,16,32"], ["4", "8,,16", "1e9", "x"])]
    if any_mode or batch == "static":
        opts += [opt("--max-batch", ["8"], NUMBERS), opt("--max-wait", ["1s"], DURATIONS), opt("--batcher", [batcher], TEXT)]
    if any_mode or (batch == "static" and batcher == "saxml" and "--batcher" in [t for o in opts for t in o]):
        opts += [opt("--max-live-batches", ["2"], NUMBERS), opt("--batcher-depth", ["1", "2"], NUMBERS),
                 opt("--decode-segments", ["32,64,128"], ["64,32", "8,,16", "1e308", "0,-1", "x"])]
    disaggregated = rng.random() < 0.2 and (any_mode or batch == "continuous")  # disaggregated pools batch continuously
    if disaggregated:
        base += ["--disaggregated", mostly(["1:1"], ["0:1", "1:0", "x", "1e9:1", ""])]
        opts.append(opt("--transfer", ["dcn", "ici"], TEXT))
    capacity = rng.random() < 0.2 and (any_mode or arrivals in ("poisson", "bursty"))  # the search sets a rate
    if capacity:
        base += ["--capacity-rate", mostly(["3/s"], ["0/s", "1e308/s", "nan/s"]), "--capacity-replicas", mostly(["1:2"], ["2:1", "0:9", "x", "1:99999999999"]),
                 "--capacity-replicates", mostly(["1"], NUMBERS)]
        opts += [opt("--capacity-slices", ["2x4", "2x4,4x4"], ["2x4,,", "bogus", *SHAPES]), opt("--judge", ["mean"], ["interval", *TEXT])]
    elif any_mode:
        opts += [_opt(rng, "--capacity-slices", ["2x4"], SHAPES, 0.0), _opt(rng, "--judge", ["mean"], TEXT, 0.0)]  # refused: no search
    if any_mode or disaggregated or capacity:
        opts.append(opt("--router", ["round_robin"], TEXT))
    return _sprinkle(rng, base, opts, 2, stray=any_mode)


def g_sources(rng, inp):
    ident = _pick(rng, ["", "v4.10", "ocs.17", "perf.3", "CACM20", "bogus", "../x", "x" * 300])
    return _sprinkle(rng, ["sources", *([ident] if ident else [])], [["--json"]], 1)


def g_validate(rng, inp):
    r = rng.random()
    if r < 0.1:
        f = str(inp.static[_pick(rng, ["odd.yaml", "odd2.yaml", "drain1.yaml", "encoder.yaml", "flood.yaml", "tinyavail.yaml"])])
    elif r < 0.2:
        f = inp.file(rng, _pick(rng, sorted(inp.static)))
    elif r < 0.4:
        f = inp.file(rng, "serving.yaml", SERVING)
    else:
        f = inp.file(rng, "scenario.yaml", SCENARIO)
    return _sprinkle(rng, ["validate", f], [["--json"], _opt(rng, "--max-events", ["10"], NUMBERS)], 1)


def g_demo(rng, inp):
    # The demo's hostile outputs only (a full demo run is the README tour's test): a file in the
    # way, a folder under a file, a place nobody may write, an unknown option.
    out = _pick(rng, [str(inp.static["ok.json"]), str(inp.static["ok.json"]) + "/x", "/proc/podsim-demo", inp.out(rng), inp.out(rng),
                      "", "/", "."])
    argv = ["demo", "-o", out]
    return argv + (["--bogus"] if rng.random() < 0.2 else [])


def g_dashboard(rng, inp):
    argv = _sprinkle(rng, ["dashboard"], [_opt(rng, "--port", ["8600"], NUMBERS, 0.7), _opt(rng, "--address", ["127.0.0.1"], TEXT),
                                          ["--headless"], _opt(rng, "--store", ["s.duckdb"], [*TEXT, inp.out(rng)])], 2)
    return ["dashboard", "--dry-run", *argv[1:]]  # first, never dropped nor taken as a value: no case starts a server


VERBS = {  # verb -> (generator, share of the cases)
    "topology": (g_topology, 8), "place": (g_place, 6), "steptime": (g_steptime, 8), "trace generate": (g_generate, 6),
    "trace import": (g_import, 6), "trace export": (g_export, 6), "trace show": (g_show, 8), "trace models": (g_models, 2),
    "scaling": (g_scaling, 3), "plan": (g_plan, 2),
    "cluster": (g_cluster, 7), "run": (g_run, 4), "sweep": (g_sweep, 3), "report": (g_report, 5),
    "metrics": (g_metrics, 2), "sources": (g_sources, 2), "serve": (g_serve, 4), "validate": (g_validate, 12), "demo": (g_demo, 2), "dashboard": (g_dashboard, 3),
}
SHARE = sum(w for _, w in VERBS.values())


class _Hang(BaseException):  # not an Exception: the CLI's handler must not catch it as an internal error
    pass


def _alarm(signum, frame):
    raise _Hang


def _no_nonfinite_json(text: str, where: str) -> None:
    def refuse(token):
        raise AssertionError(f"{where}: {token} in the output")

    json.loads(text, parse_constant=refuse, parse_float=lambda s: (math.isfinite(float(s)) or refuse(s)) and float(s))


def _check_outputs(work: Path, where: str) -> None:
    for p in work.rglob("*"):
        if p.is_file() and p.suffix in (".json", ".yaml", ".yml") and p.stat().st_size < 20 * 2**20:
            text = p.read_text(errors="replace")
            if p.suffix == ".json":
                _no_nonfinite_json(text, f"{where}: {p.name}")
            else:
                assert not any(t in text for t in (".nan", ".inf", ".NaN", ".Inf")), f"{where}: {p.name} holds a non-finite number"


@pytest.fixture(scope="module")
def fuzz_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    inputs = Inputs(root)
    (root / "work").mkdir()
    store_dir = root / "store"
    from podsim.cli.run import save_run
    from podsim.scenario import load_scenario, run_scenario

    save_run(run_scenario(load_scenario(inputs.static["scenario.yaml"])), store_dir, None, report=False)
    return root, inputs, store_dir / "results.duckdb"


OUTPUT_FLAGS = ("-o", "--out", "--timeline", "--plot", "--store")


def _allowed(work: Path, argv: list[str]) -> list[Path]:
    """Where a case may write: its folder, and the paths its output options name."""
    outs = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in OUTPUT_FLAGS]
    named = [(work / v).resolve() for v in outs if v and "\x00" not in v]
    return [work, *(p for p in named if not work.is_relative_to(p))]  # '/' or '..' would allow everything below


def _tree(root: Path) -> set[Path]:
    return set(root.rglob("*"))


@pytest.mark.parametrize("verb", list(VERBS))
def test_fuzz(verb, fuzz_root, capsys, monkeypatch):
    root, inputs, store = fuzz_root
    generator, share = VERBS[verb]
    n = max(20, round(CASES * share / SHARE))
    rng = random.Random(f"{SEED}:{verb}")
    outcomes: Counter = Counter()
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        for i in range(n):
            work = root / "work" / f"{verb.replace(' ', '_')}{i}"
            work.mkdir()
            argv = generator(rng, inputs, store) if verb == "report" else generator(rng, inputs)
            monkeypatch.chdir(work)
            before = _tree(root) | set(root.parent.iterdir())
            allowed = _allowed(work, argv)
            where = f"{verb} case {i}: podsim {' '.join(repr(a) if not a or ' ' in a else a for a in argv)}"
            t0 = time.monotonic()
            signal.setitimer(signal.ITIMER_REAL, CASE_LIMIT_S)
            try:
                code, out, err = run_podsim(capsys, *argv)
            except _Hang:
                pytest.fail(f"{where}: no answer in {CASE_LIMIT_S:.0f} s")
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            wall = time.monotonic() - t0
            outcomes[code] += 1
            lines = err.strip().splitlines()
            assert "Traceback" not in err and "internal error" not in err, f"{where}: {err}"
            if verb == "sweep" and code == 1:  # failed points: named after the sweep's output
                assert "point(s) failed" in lines[-1], f"{where}: {err}"
            else:
                assert code in (0, 2), f"{where}: exit {code}: {err}"
            if code == 2:
                assert len(lines) == 1 and lines[0].startswith("error: "), f"{where}: {err!r}"
            if code == 0 and "--json" in argv and out.lstrip()[:1] in ("{", "["):
                _no_nonfinite_json(out, where)
            new = (_tree(root) | set(root.parent.iterdir())) - before
            outside = [p for p in new if not any(p.resolve().is_relative_to(a) for a in allowed)]
            assert not outside, f"{where}: wrote outside its output folder: {sorted(map(str, outside))[:3]}"
            _check_outputs(work, where)
            inputs.check_outs(where)
            assert wall < CASE_LIMIT_S, f"{where}: {wall:.1f} s"
            shutil.rmtree(work, ignore_errors=True)
    finally:
        signal.signal(signal.SIGALRM, previous)
    print(f"\n{verb}: {n} cases, exits {dict(sorted(outcomes.items()))}")
    if verb != "demo" and n >= SUCCESS_FLOOR_CASES:  # the demo's cases are hostile outputs only (g_demo)
        assert outcomes[0] > 0, f"{verb}: none of {n} cases ran to a result ({dict(outcomes)}): the generator reaches only refusals"

