"""Issue 26's hostile cases, in-process: each exits 2 with one stderr line naming the field,
flag or file and what is allowed (never a traceback, a hang, a silently wrong figure or a write
outside the output folder), or gives a correct result within a documented limit. The table
follows the issue's classes; a real process only where the process is what is tested (SIGTERM)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import SMALL_SCENARIO as SMALL
from helpers import run_podsim
from helpers import small_scenario as _scenario

DATA = Path(__file__).parent / "data"
ASTRA = DATA / "astra-sim"
ASTRA_WL = str(ASTRA / "text-workloads" / "microAllReduce.txt")
RING8 = str(ASTRA / "configs" / "inputs_network_tpu_v3_8.yml")
GEN = ("trace", "generate", "gpt3-175b", "--slice", "4x4x4", "-p", "fsdp=16,tensor=4", "--set", "n_layers=1")
SYN = "jobs=5,rate=2/h,mix=2x2:1"
CL = ("cluster", "-g", "tpu-v5e", "--horizon", "6h", "--synthetic", SYN)
STEP = ("--generation", "tpu-v4", "--slice", "2x2x2")
SERVE = ("serve", "-g", "tpu-v5e", "--slice", "2x4", "--model", "llama2-70b", "--override", "n_layers=2")
TOPO2 = ("topology", "tpu-v4", "--pods", "2")
SCALE = ("scaling", "llama2-70b", "--slice", "4x4x4", "-p", "fsdp=64", "--batch-per-slice", "64", "--set", "n_layers=1",
         "--slices", "1,2")


def _trace(ops, **top) -> str:
    return json.dumps({"podsim_trace": 1, **top, "ops": ops})



AR = {"id": "a", "kind": "all_reduce", "bytes": 1e6, "group": "x"}
SERVE = ("serve", "-g", "tpu-v5e", "--slice", "2x4", "--model", "llama2-70b", "--override", "n_layers=2", "--weights", "int8",
         "--duration", "20s")
SERVING = {"name": "sv", "topology": {"generation": "tpu-v5e", "wiring": "static"},
           "workload": {"serving": {"slice": "2x4", "model": {"model": "llama2-70b", "overrides": {"n_layers": 2},
                                                              "precision": {"weights": "int8"}},
                                    "requests": {"arrivals": {"kind": "poisson", "rate": "3/s"}}, "duration": "20s"}}}


def _serving(**changes) -> str:
    out = json.loads(json.dumps(SERVING))
    out["workload"]["serving"].update(changes)
    return json.dumps(out)


@pytest.fixture(scope="module")
def d(tmp_path_factory) -> Path:
    """The hostile files, written once (FIFOs included: they are refused before any open blocks)."""
    root = tmp_path_factory.mktemp("hostile26")
    files = {
        "ok.json": _trace([{"id": "c", "kind": "compute", "duration_s": 0.001}, {**AR, "deps": ["c"]}]),
        "bytes64.json": _trace([{**AR, "bytes": 2**64}]),
        "bytes300.json": _trace([{**AR, "bytes": 1e300}]),
        "matmul.json": _trace([{"id": "c", "kind": "compute", "matmuls": [[1e9, 1e9, 1e9, 1e9, 0]]}]),
        "flops_tiny_eff.json": _trace([{"id": "c", "kind": "compute", "flops": 1e12}]),
        "ops250.json": _trace([{**AR, "id": f"a{i}", **({"deps": [f"a{i - 1}"]} if i else {})} for i in range(250)]),
        "chips_str.json": _trace([{"id": "c", "kind": "compute", "flops": 1e9}], meta={"chips": "abc", "model_flops_per_step": 1e12}),
        "shift0.json": _trace([{"id": "s", "kind": "send_recv", "bytes": 1e6, "axis": "x", "shift": 0}]),
        "shift64.json": _trace([{"id": "s", "kind": "send_recv", "bytes": 1e6, "axis": "x", "shift": 2**64}]),
        "shift_wrap.json": _trace([{"id": "s", "kind": "send_recv", "bytes": 1e6, "axis": "x", "shift": 2}]),
        "group_x3.json": _trace([{**AR, "group": "x3"}]),
        "self_dep.json": _trace([{**AR, "deps": ["a"]}]),
        "deps_dict.json": _trace([{**AR, "deps": {"a": 1}}]),
        "version_true.json": json.dumps({"podsim_trace": True, "ops": [{"id": "c", "kind": "compute", "duration_s": 0.001}]}),
        "dup.json": '{"podsim_trace": 1, "ops": [{"id": "c", "kind": "compute", "duration_s": 1, "duration_s": 0.001}]}',
        "dup.yaml": "podsim_trace: 1\nops:\n- {id: c, kind: compute, duration_s: 1, duration_s: 0.001}\n",
        "req.yaml": "- {id: a, shape: 2x2x2}\n",
        "req_prio_true.yaml": "- {id: a, shape: 2x2x2, priority: true}\n",
        "req_dup.yaml": "- {id: a, shape: 2x2x2, shape: 4x4x4}\n",
        "req60.yaml": "".join(f"- {{id: r{i}, shape: 1x1x1}}\n" for i in range(60)),
        "net1.yml": "topology: [Ring]\nnpus_count: [1]\nbandwidth: [50]\nlatency: [500]\n",
        "net_bool.yml": "topology: [Ring]\nnpus_count: [true]\nbandwidth: [50]\nlatency: [500]\n",
        "astra_comm.txt": "DATA\n1\nl1 -1 10 BOGUS 100 10 NONE 0 10 ALLREDUCE 1000 10\n",
        "astra_nul.txt": "DATA\n1\nl1\x00 -1 10 NONE 0 10 NONE 0 10 ALLREDUCE 1000 10\n",
        "astra_huge.txt": "DATA\n1\nl1 -1 10 NONE 0 10 NONE 0 10 ALLREDUCE 2000000000000000 10\n",
        "random.et": bytes(random.Random(7).getrandbits(8) for _ in range(20_000)),
        "zeros.et": b"\x00" * 5_000,  # 5,000 empty records: past the records budget of --max-ops 100
        "dupcol.csv": "job_id,submission_time,duration,num_gpu,num_gpu\nj1,0,100,4,8\n",
        "jobs_frac.csv": "job_id,submission_time,duration,num_gpu\nj1,0,100,2.5\n",
        "s_ok.yaml": _scenario(),
        "s_gaps_empty.yaml": _scenario(workload__synthetic__rate=None, workload__synthetic__gaps=[]),
        "s_ckpt0.yaml": _scenario(policy={"checkpoint_interval": 0}),
        "s_1ns.yaml": _scenario(horizon="1ns"),
        "s_price.yaml": _scenario(topology__overrides={"price_per_chip_hour": {"value": 1e300, "source": "x"}}),
        "s_chips_per_host.yaml": _scenario(topology__overrides={"chips_per_host": {"value": 1e300, "source": "x"}}),
        "s_steps.yaml": _scenario(workload__synthetic__models={"gpt3-175b": 1}, workload__synthetic__steps={"median": 1e300}),
        "s_sigma.yaml": _scenario(workload__synthetic__models={"gpt3-175b": 1}, workload__synthetic__steps={"sigma": 1000}),
        "s_mix.yaml": _scenario(workload__synthetic__mix={"2x2": 1e308, "2x4": 1e308}),
        "s_prio_true.yaml": _scenario(workload__synthetic__priorities={0: True}),
        "s_jobs_true.yaml": _scenario(workload__synthetic__jobs=True),
        "s_oversub.yaml": _scenario(dcn={"oversubscription": 1e300}),
        "s_wan.yaml": _scenario(dcn={"wan_latency_s": "1e300s"}),
        "s_restart.yaml": _scenario(policy={"restart_overhead": "1e300s"}),
        "s_weibull.yaml": _scenario(failures={"host": {"mtbf": "100h", "distribution": "weibull", "weibull_shape": 1e-300}}),
        "s_link_storm.yaml": _scenario(topology={"generation": "tpu-v4"}, workload__synthetic__mix={"4x4x4": 1},
                                       failures={"link": {"mtbf": "2min"}}, horizon="100d"),
        "s_dup.yaml": "name: a\nname: b\n" + "\n".join(f"{k}: {json.dumps(v)}" for k, v in SMALL.items() if k != "name") + "\n",
        "a_file": "x\n",
        "sv_ok.yaml": _serving(),
        "sv_max_batch.yaml": _serving(batch={"kind": "continuous", "max_batch": 4}),
        "sv_cv.yaml": _serving(requests={"arrivals": {"kind": "poisson", "rate": "3/s", "cv": 4}}),
        "sv_tpot.yaml": _serving(slo={"tpot": "1e300s"}),
        "sys_dims.json": json.dumps({"all-reduce-implementation": ["ring"] * 7}),
    }
    for name, data in files.items():
        (root / name).write_bytes(data if isinstance(data, bytes) else data.encode())
    for name in ("fifo.json", "fifo.yaml", "fifo.yml", "fifo.csv", "fifo.txt"):
        os.mkfifo(root / name)
    (root / "a_folder.yaml").mkdir()
    return root


# (case id, argv with {d} for the hostile folder, text the one stderr line must contain)
CASES = [
    # -- writes outside the output folder
    ("export-prefix-relative", ("trace", "export", "{d}/ok.json", "-o", "{d}/ex/a", "--slice", "2x2x2", "--prefix", "../../ESCAPED"), "--prefix '../../ESCAPED' must be a plain name"),
    ("export-prefix-absolute", ("trace", "export", "{d}/ok.json", "-o", "{d}/ex", "--slice", "2x2x2", "--prefix", "{d}/ABS"), "must be a plain name"),
    ("export-prefix-dotdot", ("trace", "export", "{d}/ok.json", "-o", "{d}/ex", "--slice", "2x2x2", "--prefix", ".."), "must be a plain name"),
    # -- hangs: a FIFO, a device or a folder given as any input file
    ("fifo-steptime-trace", ("steptime", "--trace", "{d}/fifo.json", *STEP), "is a named pipe (FIFO)"),
    ("fifo-place-requests", ("place", "-g", "tpu-v4", "-r", "{d}/fifo.yaml"), "is a named pipe (FIFO)"),
    ("fifo-place-failed", ("place", "-g", "tpu-v4", "-r", "{d}/req.yaml", "-f", "{d}/fifo.yaml"), "is a named pipe (FIFO)"),
    ("fifo-validate", ("validate", "{d}/fifo.yaml"), "is a named pipe (FIFO)"),
    ("fifo-trace-show", ("trace", "show", "{d}/fifo.txt"), "is a named pipe (FIFO)"),
    ("fifo-network", ("steptime", "--trace", ASTRA_WL, "--network", "{d}/fifo.yml"), "is a named pipe (FIFO)"),
    ("fifo-job-trace", ("cluster", "-g", "tpu-v4", "--horizon", "6h", "--trace", "{d}/fifo.csv"), "is a named pipe (FIFO)"),
    ("fifo-failure-trace", (*CL, "--failure-trace", "{d}/fifo.csv"), "is a named pipe (FIFO)"),
    ("fifo-synthetic-file", ("cluster", "-g", "tpu-v5e", "--horizon", "6h", "--synthetic", "{d}/fifo.yaml"), "is a named pipe (FIFO)"),
    ("device-validate", ("validate", "/dev/zero"), "is a device"),
    ("folder-validate", ("validate", "{d}/a_folder.yaml"), "is a folder"),
    # -- hangs: work of absurd size, refused up front
    ("bytes-2^64", ("steptime", "--trace", "{d}/bytes64.json", *STEP), "bytes of one op is [0 B, 1e+15 B]"),
    ("bytes-1e300", ("steptime", "--trace", "{d}/bytes300.json", *STEP), "bytes of one op is [0 B, 1e+15 B]"),
    ("matmul-absurd", ("steptime", "--trace", "{d}/matmul.json", *STEP), "FLOPs of one op per chip"),
    ("ops-past-budget", ("steptime", "--trace", "{d}/ops250.json", *STEP, "--max-ops", "100"), "250 ops, over the budget of 100 ops"),
    ("efficiency-1e-300", ("steptime", "--trace", "{d}/flops_tiny_eff.json", *STEP, "--compute-efficiency", "1e-300"), "--compute-efficiency 1e-300 is out of range"),
    ("et-random-bytes", ("trace", "show", "{d}/random.et"), "random.et: byte offset"),
    ("budget-flag-past-range", ("steptime", *STEP, "--collective", "all_reduce", "--bytes", "1MiB", "--max-flows", "1e308"),
     "--max-flows 1e+308 is out of range: a flows budget is [1, 1,000,000,000]"),
    ("budget-flag-zero", ("steptime", "--trace", "{d}/ops250.json", *STEP, "--max-ops", "0"), "--max-ops 0 is out of range: an ops budget is [1,"),
    ("budget-flag-fraction", ("place", "-g", "tpu-v4", "-r", "{d}/req60.yaml", "--max-requests", "2.5"), "--max-requests 2.5 is not a whole number"),
    # serve's flags refuse what a scenario's serving: fields refuse, with the same range (one Quantity each)
    ("serve-beams-past-range", (*SERVE, "--beams", "65"), "--beams 65 is out of range: a beam count per request is [1, 64]"),
    ("serve-hbm-reserve-past-range", (*SERVE, "--hbm-reserve", "1.5"), "--hbm-reserve 1.5 is out of range: a share of HBM the runtime keeps is [0, 1]"),
    ("serve-replicas-past-range", (*SERVE, "--replicas", "100001"), "--replicas 100,001 is out of range: a replica count is [1, 100,000]"),
    ("et-records-past-budget", ("trace", "show", "{d}/zeros.et", "--max-ops", "100"), "more than 1,000 records"),
    ("et-past-size-cap", ("trace", "import", "{d}/random.et", "-o", "{d}/imp.json", "--max-input", "1KiB"), "raise it with --max-input"),
    ("generate-layers-1e5", (*GEN[:-1], "n_layers=100000", "-o", "{d}/g.json"), "n_layers: 100,000 is out of range"),
    ("generate-layers-2^64", (*GEN[:-1], f"n_layers={2**64}", "-o", "{d}/g.json"), "a layer count is [1, 1,000]"),
    ("export-64^3", ("trace", "export", "{d}/ok.json", "-o", "{d}/ex64", "--slice", "64x64x64"), "262,144 files, over the budget of 65,536"),
    ("export-1024^3", ("trace", "export", "{d}/ok.json", "-o", "{d}/ex1k", "--slice", "1024x1024x1024"), "1,073,741,824 chips"),
    ("place-past-request-budget", ("place", "-g", "tpu-v4", "-r", "{d}/req60.yaml", "--max-requests", "50"), "60 requests, over the budget of 50"),
    ("cluster-link-mtbf-1s", ("cluster", "-g", "tpu-v4", "--horizon", "30d", "--synthetic", "jobs=5,rate=2/h,mix=4x4x4:1", "--link-mtbf", "1s"), "link MTBF (--link-mtbf): 1 s is out of range"),
    ("cluster-event-storm", ("cluster", "-g", "tpu-v4", "--horizon", "100d", "--synthetic", "jobs=5,rate=2/h,mix=4x4x4:1", "--link-mtbf", "2min"), "over the budget of 5,000,000 failure events"),
    ("validate-event-storm", ("validate", "{d}/s_link_storm.yaml"), "raise it with --max-events"),
    # -- honest internal errors that are bad input
    ("meta-chips-text", ("trace", "show", "{d}/chips_str.json"), "meta.chips 'abc' is not a number"),
    ("shift-0", ("steptime", "--trace", "{d}/shift0.json", *STEP), "shift 0 sends every chip's bytes to itself"),
    ("shift-2^64", ("steptime", "--trace", "{d}/shift64.json", *STEP), "a send/recv shift is"),
    ("shift-multiple-of-group", ("steptime", "--trace", "{d}/shift_wrap.json", *STEP), "not a multiple of the group size"),
    ("astra-network-1-npu", ("steptime", "--trace", ASTRA_WL, "--network", "{d}/net1.yml"), "npus_count 1 is out of range"),
    ("astra-network-bool", ("steptime", "--trace", ASTRA_WL, "--network", "{d}/net_bool.yml"), "a boolean"),
    ("block-cubes-2^64", ("place", "-g", "tpu-v4", "-r", "{d}/req.yaml", "--block-cubes", str(2**64)), "--block-cubes"),
    ("mix-weights-1e308", ("cluster", "-g", "tpu-v5e", "--horizon", "6h", "--synthetic", "jobs=5,rate=2/h,mix=2x2:1e308;2x4:1e308"), "a weight is [0, 1,000,000,000,000]"),
    ("priority-weights-1e308", (*CL[:-1], SYN + ",priorities=0:1e308;1:1e308"), "a weight is"),
    ("validate-mix-1e308", ("validate", "{d}/s_mix.yaml"), "mix weight of '2x2'"),
    ("steps-1e300", (*CL[:-1], SYN + ",models=gpt3-175b:1,steps=1e300"), "training steps is [1, 1,000,000,000]"),
    ("steps-sigma-1000", (*CL[:-1], SYN + ",models=gpt3-175b:1,steps_sigma=1000"), "a lognormal sigma of steps is [0, 10]"),
    ("validate-steps-1e300", ("validate", "{d}/s_steps.yaml"), "training steps is"),
    ("validate-steps-sigma", ("validate", "{d}/s_sigma.yaml"), "a lognormal sigma"),
    ("weibull-1e-300", (*CL, "--mtbf", "100h", "--weibull-shape", "1e-300"), "a Weibull shape is [0.1, 20]"),
    ("validate-weibull-1e-300", ("validate", "{d}/s_weibull.yaml"), "a Weibull shape is"),
    # -- accepted and absurd
    ("topology-oversub-2^64", (*TOPO2, "--oversubscription", str(2**64)), "an oversubscription (NIC : uplink bandwidth) is [1, 1,000]"),
    ("topology-oversub-1e300", (*TOPO2, "--oversubscription", "1e300"), "--oversubscription 1e+300 is out of range"),
    ("steptime-oversub-1e300", ("steptime", "--trace", "{d}/ok.json", *STEP, "--oversubscription", "1e300"), "--oversubscription"),
    ("validate-oversub-1e300", ("validate", "{d}/s_oversub.yaml"), "dcn.oversubscription"),
    ("topology-wan-latency-1e300", (*TOPO2, "--sites", "2", "--wan-latency-ms", "1e300"), "a one-way WAN latency is [0 ms, 1,000 ms]"),
    ("validate-wan-latency-1e300", ("validate", "{d}/s_wan.yaml"), "dcn.wan_latency_s: 3.169e+292 years is out of range"),
    ("bytes-1e308", ("steptime", *STEP, "--collective", "all_reduce", "--bytes", "1e308"), "--bytes 1e+308 B is out of range"),
    ("clock-ghz-1e-300", ("trace", "import", ASTRA_WL, "--slice", "8", "--clock-ghz", "1e-300", "-o", "{d}/c.json"), "a compute clock is [0.001 GHz, 1,000 GHz]"),
    ("time-limit-1e308", ("place", "-g", "tpu-v4", "-r", "{d}/req.yaml", "--time-limit", "1e308"), "a CP-SAT time limit is"),
    ("weibull-1e300", (*CL, "--mtbf", "100h", "--weibull-shape", "1e300"), "--weibull-shape 1e+300 is out of range"),
    ("restart-overhead-1e300s", (*CL, "--restart-overhead", "1e300s"), "--restart-overhead"),
    ("validate-restart-1e300s", ("validate", "{d}/s_restart.yaml"), "policy.restart_overhead"),
    ("validate-price-1e300", ("validate", "{d}/s_price.yaml"), "a price is [0 USD/h, 10,000 USD/h]"),
    ("validate-chips-per-host-1e300", ("validate", "{d}/s_chips_per_host.yaml"), "a chip count is"),
    ("validate-horizon-1ns", ("validate", "{d}/s_1ns.yaml"), "horizon: 1 ns is out of range"),
    ("cluster-horizon-1ns", ("cluster", "-g", "tpu-v5e", "--horizon", "1ns", "--synthetic", SYN), "--horizon 1 ns is out of range"),
    ("duplicate-key-json", ("trace", "show", "{d}/dup.json"), "key 'duration_s' is given twice"),
    ("duplicate-key-yaml", ("trace", "show", "{d}/dup.yaml"), "key 'duration_s' is given twice"),
    ("duplicate-key-requests", ("place", "-g", "tpu-v4", "-r", "{d}/req_dup.yaml"), "key 'shape' is given twice"),
    ("duplicate-key-scenario", ("validate", "{d}/s_dup.yaml"), "key 'name' is given twice"),
    ("version-true", ("trace", "show", "{d}/version_true.json"), "podsim_trace version True is not supported"),
    ("priority-true", ("place", "-g", "tpu-v4", "-r", "{d}/req_prio_true.yaml"), "a boolean where a number is expected"),
    ("scenario-priority-weight-true", ("validate", "{d}/s_prio_true.yaml"), "a boolean where a number is expected"),
    ("scenario-jobs-true", ("validate", "{d}/s_jobs_true.yaml"), "a boolean where a number is expected"),
    ("group-x3", ("trace", "show", "{d}/group_x3.json"), "group axis 'x3' is not understood"),
    ("deps-not-a-list", ("trace", "show", "{d}/deps_dict.json"), "field 'deps': Input should be a valid list"),
    ("op-depends-on-itself", ("trace", "show", "{d}/self_dep.json"), "op 'a' depends on itself"),
    ("astra-unknown-comm-type", ("trace", "show", "{d}/astra_comm.txt"), "communication type 'BOGUS' is not supported"),
    ("astra-nul-byte", ("trace", "show", "{d}/astra_nul.txt"), "a NUL byte at byte offset"),
    ("astra-bytes-past-range", ("trace", "show", "{d}/astra_huge.txt"), "bytes of one op is"),
    ("parallelism-trailing-comma", (*GEN[:5], "-p", "fsdp=16,tensor=4,", *GEN[7:], "-o", "{d}/g.json"), "has an empty entry (a stray comma?)"),
    ("csv-duplicate-column", ("cluster", "-g", "tpu-v4", "--horizon", "6h", "--trace", "{d}/dupcol.csv"), "column 'num_gpu' appears twice"),
    ("csv-fractional-accelerators", ("cluster", "-g", "tpu-v4", "--horizon", "6h", "--trace", "{d}/jobs_frac.csv"), "num_gpu '2.5' must be a whole number"),
    ("synthetic-jobs-2.5", ("cluster", "-g", "tpu-v5e", "--horizon", "6h", "--synthetic", "jobs=2.5,rate=2/h,mix=2x2:1"), "jobs='2.5': a whole number is expected"),
    ("steptime-collective-compute-efficiency", ("steptime", *STEP, "--collective", "all_reduce", "--bytes", "1MiB", "--compute-efficiency", "0.5"), "--compute-efficiency applies to a step"),
    ("steptime-collective-slices", ("steptime", *STEP, "--collective", "all_reduce", "--bytes", "1MiB", "--slices", "2"), "--slices applies to a step"),
    ("steptime-collective-dcn", ("steptime", *STEP, "--collective", "all_reduce", "--bytes", "1MiB", "--dcn", "ocs"), "--dcn applies to a step"),
    ("steptime-collective-sites", ("steptime", *STEP, "--collective", "all_reduce", "--bytes", "1MiB", "--sites", "2"), "--sites applies to a step"),
    ("scaling-oversubscription-nan", (*SCALE, "--oversubscription", "nan"), "--oversubscription nan is not a finite number"),
    ("scaling-wan-gbps-inf", (*SCALE, "--slices", "2,4", "--sites", "2", "--wan-gbps", "inf"), "--wan-gbps inf is not a finite number"),
    ("scaling-set-global-batch", (*SCALE, "--set", "global_batch=5"), "--set global_batch: leave it out"),
    ("scaling-slices-past-range", (*SCALE[:-2], "--slices", "1,100000"), "--slices 100,000 is out of range"),
    ("scaling-oversubscription-on-ocs", (*SCALE, "--dcn", "ocs", "--oversubscription", "2"), "--oversubscription applies to an EPS spine"),
    # -- the newer verbs and options: serve, ASTRA-sim system files, --dcn-tiers, generator options
    ("serve-buckets-1e308", (*SERVE, "--rate", "3/s", "--batch", "static", "--buckets", "1e308"), "'1e308' is not a whole number"),
    ("serve-buckets-stray-comma", (*SERVE, "--rate", "3/s", "--batch", "static", "--buckets", "512,,1024"), "has an empty entry (a stray comma?)"),
    ("serve-replicates-hang", (*SERVE, "--rate", "3/s", "--replicates", "99999999"), "--replicates 99,999,999 is out of range: a replicate count is [1, 1,000]"),
    ("serve-slo-tpot-1e300s", (*SERVE, "--rate", "3/s", "--slo-tpot", "1e300s"), "a time-per-output-token target is (0 s, 1 h]"),
    ("serve-slo-ttft-2d", (*SERVE, "--rate", "3/s", "--slo-ttft", "2d"), "a time-to-first-token target is (0 s, 1 d]"),
    ("serve-time-scale-1e-300", (*SERVE, "--arrivals", "trace", "--trace", "azure-conv", "--time-scale", "1e-300"), "an arrival-time scale is [1e-06, 1,000,000]"),
    ("serve-max-batch-on-continuous", (*SERVE, "--rate", "3/s", "--max-batch", "4"), "--max-batch does not apply with --batch continuous"),
    ("serve-token-budget-on-static", (*SERVE, "--rate", "3/s", "--batch", "static", "--token-budget", "512"), "--token-budget does not apply with --batch static"),
    ("serve-prefill-seqs-on-static", (*SERVE, "--rate", "3/s", "--batch", "static", "--prefill-seqs", "1"), "--prefill-seqs does not apply with --batch static"),
    ("serve-batch-sizes-short-of-max-seqs", (*SERVE, "--rate", "3/s", "--max-seqs", "64", "--batch-sizes", "32"), "the largest must hold max_seqs 64"),
    ("serve-prefill-seqs-zero", (*SERVE, "--rate", "3/s", "--prefill-seqs", "0"), "--prefill-seqs"),
    ("serve-transfer-without-pools", (*SERVE, "--rate", "3/s", "--transfer", "ici"), "--transfer does not apply without --disaggregated"),
    ("serve-judge-without-capacity", (*SERVE, "--rate", "3/s", "--judge", "interval"), "--judge does not apply without --capacity-rate"),
    ("serve-capacity-slices-stray-comma", (*SERVE, "--rate", "3/s", "--capacity-rate", "3/s", "--capacity-slices", "2x4,,"), "has an empty entry"),
    ("serve-cv-on-poisson", (*SERVE, "--rate", "3/s", "--cv", "3"), "--cv does not apply with --arrivals poisson"),
    ("serve-router-one-replica", (*SERVE, "--rate", "3/s", "--router", "round_robin"), "--router does not apply with one replica"),
    ("serve-fifo-request-trace", (*SERVE, "--arrivals", "trace", "--trace", "{d}/fifo.csv"), "is a named pipe (FIFO)"),
    ("validate-serving-max-batch-on-continuous", ("validate", "{d}/sv_max_batch.yaml"), "max_batch does not apply with batch kind continuous"),
    ("validate-serving-cv-on-poisson", ("validate", "{d}/sv_cv.yaml"), "cv does not apply with poisson arrivals"),
    ("validate-serving-tpot-1e300s", ("validate", "{d}/sv_tpot.yaml"), "a time-per-output-token target is"),
    ("astra-system-more-dimensions", ("steptime", "--trace", ASTRA_WL, "--network", RING8, "--system", "{d}/sys_dims.json"), "names 7 dimension(s); the network has 1"),
    ("astra-system-fifo", ("steptime", "--trace", ASTRA_WL, "--network", RING8, "--system", "{d}/fifo.json"), "is a named pipe (FIFO)"),
    ("astra-system-without-network", ("steptime", "--trace", ASTRA_WL, *STEP, "--system", "{d}/sys_dims.json"), "goes with --network"),
    ("export-astra-unknown-algorithm", ("trace", "export", "{d}/ok.json", "-o", "{d}/exa", "--slice", "2x2x2", "-g", "tpu-v4", "--format", "astra-sim", "--algorithm", "hierarchical"), "has no ASTRA-sim implementation"),
    ("export-astra-interior-axis-of-one", ("trace", "export", "{d}/ok.json", "-o", "{d}/exi", "--slice", "2x1x2", "-g", "tpu-v4", "--format", "astra-sim"), "an axis of one chip between others"),
    ("export-algorithm-on-chakra", ("trace", "export", "{d}/ok.json", "-o", "{d}/exc", "--slice", "2x2x2", "--algorithm", "direct"), "--algorithm does not apply with --format chakra"),
    ("dcn-tiers-without-pods", ("topology", "tpu-v4", "--dcn-tiers", "fat-tree-k64"), "--dcn-tiers does not apply without --pods"),
    ("dcn-tiers-radix-past-range", (*TOPO2, "--dcn-tiers", f"tor={10**20}x200,aggregation=800x200,spine=800x200*20"), "tor.radix"),
    ("dcn-tiers-tier-twice", (*TOPO2, "--dcn-tiers", "tor=40x200,tor=40x200,aggregation=800x200,spine=800x200*2"), "tier tor is given twice"),
    ("dcn-tiers-fifo", (*TOPO2, "--dcn-tiers", "{d}/fifo.yaml"), "is a named pipe (FIFO)"),
    ("steptime-dcn-tiers-on-collective", ("steptime", *STEP, "--collective", "all_reduce", "--bytes", "1MiB", "--dcn-tiers", "fat-tree-k64"), "--dcn-tiers applies to a step"),
    ("steptime-option-past-range", ("steptime", "--model", "llama2-70b", "-p", "fsdp=8", *STEP, "--option", "capacity_factor=1e308"), "an MoE capacity factor is [1, 64]"),
    ("generate-mesh-order-stray-comma", (*GEN, "--mesh-order", "tensor,,fsdp", "-o", "{d}/g.json"), "--mesh-order 'tensor,,fsdp' has an empty entry"),
    ("generate-mesh-order-axis-twice", (*GEN, "--mesh-order", "fsdp,fsdp", "-o", "{d}/g.json"),
     "mesh order fsdp,fsdp names 'fsdp' twice; name each logical axis at most once, heaviest first (logical axes: data, fsdp,"),
    ("generate-replicas-per-chip-3", ("trace", "generate", "resnet50", "--slice", "2x2x2", "-p", "data=8", "--replicas-per-chip", "3", "-o", "{d}/g.json"), "replicas per chip is [1, 2]"),
    ("scaling-slices-stray-comma", (*SCALE[:-2], "--slices", "1,,2"), "--slices '1,,2' has an empty entry"),
    # -- usage errors: one line with the closest suggestion
    ("unknown-command", ("topolgy", "tpu-v4"), "No such command 'topolgy'. Did you mean 'topology'?"),
    ("unknown-subcommand", ("trace", "genrate", "x"), "Did you mean 'generate'?"),
    ("unknown-option", ("topology", "tpu-v4", "--slcie", "4x4x4"), "No such option: --slcie; did you mean --slice?"),
    ("unparsable-integer", ("topology", "tpu-v4", "--pods", "two"), "Invalid value for '--pods'"),
    ("unparsable-number", ("place", "-g", "tpu-v4", "-r", "{d}/req.yaml", "--time-limit", "fast"), "Invalid value for '--time-limit'"),
    ("missing-option", ("place", "-g", "tpu-v4"), "Missing option '--requests'"),
    # -- plain bugs and silent drops
    ("report-last-negative", ("report", "--store", "{d}/none.duckdb", "--last", "-1", "-o", "{d}/r.html"), "--last -1 is out of range"),
    # -- options that do not apply where they are given: refused, never ignored
    ("topology-dcn-without-pods", ("topology", "tpu-v4", "--oversubscription", "4"), "--oversubscription does not apply without --pods"),
    ("topology-slice-with-pods", (*TOPO2, "--slice", "4x4x4"), "--slice does not apply with --pods"),
    ("topology-wan-without-sites", (*TOPO2, "--wan-gbps", "100"), "--wan-gbps does not apply without --sites > 1"),
    ("place-seed-with-greedy", ("place", "-g", "tpu-v4", "-r", "{d}/req.yaml", "--solver", "greedy", "--seed", "3"), "--seed does not apply with --solver greedy"),
    ("cluster-limit-without-trace", (*CL, "--limit", "3"), "--limit does not apply without --trace"),
    ("cluster-weibull-without-failures", (*CL, "--weibull-shape", "2"), "--weibull-shape does not apply without a failure process"),
    ("cluster-efficiency-on-timed-jobs", (*CL, "--compute-efficiency", "0.5"), "--compute-efficiency does not apply to jobs given in time"),
    ("cluster-spare-ports-without-ocs-failures", (*CL[:2], "tpu-v4", *CL[3:], "--spare-ports"), "--spare-ports does not apply without OCS failures"),
    ("cluster-degraded-without-ocs-failures", (*CL[:2], "tpu-v4", *CL[3:], "--degraded-placement", "all"), "--degraded-placement does not apply without OCS failures"),
    ("cluster-slowdown-model-exact-shapes", (*CL, "--slowdown-model", "llama2-70b"), "--slowdown-model does not apply with --fold none"),
    ("cluster-columns-key-twice", ("cluster", "-g", "tpu-v4", "--horizon", "6h", "--trace", "{d}/dupcol.csv", "--columns", "shape=a,shape=b"), "--columns names 'shape' twice"),
    ("cluster-decision-limit-greedy", (*CL, "--decision-time-limit", "2"), "--decision-time-limit does not apply with --solver greedy"),
    ("import-rank-on-astra", ("trace", "import", ASTRA_WL, "--slice", "8", "--rank", "1", "-o", "{d}/r.json"), "rank (--rank) does not apply"),
    ("show-clock-on-native", ("trace", "show", "{d}/ok.json", "--clock-ghz", "2"), "clock_hz (--clock-ghz) does not apply"),
    ("generate-capacity-factor-dense", (*GEN, "--capacity-factor", "1.25", "-o", "{d}/g.json"), "capacity_factor 1.25 does not apply to gpt3-175b"),
    ("sweep-workers-serial", ("sweep", "{d}/none.yaml", "-w", "2"), "--workers does not apply with --executor serial"),
    ("report-list-with-out", ("report", "--store", "{d}/none.duckdb", "--list", "-o", "{d}/r.html"), "--out does not apply with --list"),
]


@pytest.mark.parametrize("case,argv,needle", CASES, ids=[c[0] for c in CASES])
def test_hostile_command_exits_2_with_one_line(case, argv, needle, d, capsys):
    args = [a.replace("{d}", str(d)) for a in argv]
    before = set(d.parent.iterdir())
    t0 = time.monotonic()
    code, _, err = run_podsim(capsys, *args)
    lines = err.strip().splitlines()
    assert code == 2, f"{case}: exit {code}, stderr {err!r}"
    assert len(lines) == 1 and lines[0].startswith("error: "), f"{case}: {err!r}"
    assert needle in lines[0], f"{case}: {lines[0]!r} lacks {needle!r}"
    assert "Traceback" not in err
    assert set(d.parent.iterdir()) == before, f"{case} wrote beside the hostile folder"
    assert time.monotonic() - t0 < 30, f"{case} took {time.monotonic() - t0:.0f} s to refuse"


def test_no_export_escapes_its_folder(d, capsys):
    """The two escapes of the issue: nothing is written outside `-o` (nor anywhere at all)."""
    out = d / "ex_escape"
    for prefix in ("../../ESCAPED", str(d / "ABS"), "a/b"):
        code, _, err = run_podsim(capsys, "trace", "export", str(d / "ok.json"), "-o", str(out / "x"), "--slice", "2x2x2", "--prefix", prefix)
        assert code == 2 and "plain name" in err
    assert not list(d.parent.rglob("ESCAPED*")) and not list(d.rglob("ABS*"))


def test_the_budgets_are_limits_a_flag_raises(d, capsys):
    """Past a budget is refused with the estimate; the same work under a raised budget runs."""
    code, _, err = run_podsim(capsys, "steptime", "--trace", str(d / "ops250.json"), *STEP, "--max-ops", "300", "--json")
    assert code == 0, err
    code, _, err = run_podsim(capsys, "place", "-g", "tpu-v4", "-r", str(d / "req60.yaml"), "--solver", "greedy", "--max-requests", "60", "--json")
    assert code == 0, err


def test_default_budgets_refuse_the_issues_sizes_before_parsing_ops():
    """200,000 ops and 50,000 requests: refused on the count, before any op or request is built."""
    from podsim.errors import PodsimError
    from podsim.placement.requests import parse_requests
    from podsim.topology import get_generation
    from podsim.trace.native import trace_from_dict

    t0 = time.monotonic()
    with pytest.raises(PodsimError, match="200,000 ops, over the budget of 100,000 ops"):
        trace_from_dict({"podsim_trace": 1, "ops": [{}] * 200_000})
    with pytest.raises(PodsimError, match="50,000 requests, over the budget of 10,000"):
        parse_requests([{}] * 50_000, get_generation("tpu-v4"))
    assert time.monotonic() - t0 < 5


@pytest.mark.parametrize("name", ["s_gaps_empty.yaml", "s_ckpt0.yaml", "s_1ns.yaml", "s_weibull.yaml", "s_link_storm.yaml"])
def test_validate_and_run_refuse_alike(name, d, capsys, tmp_path):
    """`validate` runs the checks `run` makes before it simulates: the same one line from both."""
    v = run_podsim(capsys, "validate", str(d / name))
    r = run_podsim(capsys, "run", str(d / name), "-o", str(tmp_path / "o"), "--no-report")
    assert v.code == r.code == 2, (v, r)
    assert v.err == r.err and len(v.err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_report_list_json_reads_a_store(tmp_path, capsys):
    src = tmp_path / "s.yaml"
    src.write_text(_scenario())
    assert run_podsim(capsys, "run", str(src), "-o", str(tmp_path / "o"), "--no-report")[0] == 0
    code, out, err = run_podsim(capsys, "report", "--store", str(tmp_path / "o" / "results.duckdb"), "--list", "--json")
    assert code == 0, err
    listing = json.loads(out)
    assert len(listing["runs"]) == 1 and listing["runs"][0]["name"] == "small"
    assert "T" in listing["runs"][0]["created_at"]  # ISO 8601, the store's datetime


def test_export_is_staged_and_replaces_an_older_export(d, tmp_path, capsys, monkeypatch):
    """An export is staged beside --out and renamed into place: one interrupted after 3 ranks
    leaves the older export as it was; a second export into the folder is refused without
    --force, and with it replaces the folder whole (issue 35: never a mix of both)."""
    import podsim.cli.trace as cli_trace

    out = tmp_path / "ex"
    code, _, err = run_podsim(capsys, "trace", "export", str(d / "ok.json"), "-o", str(out), "--slice", "2x2x2", "--prefix", "t")
    assert code == 0, err
    assert sorted(p.name for p in out.glob("*.et")) == [f"t.{r}.et" for r in range(8)]
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    code, _, err = run_podsim(capsys, "trace", "export", str(d / "ok.json"), "-o", str(out), "--slice", "2x2x1", "--prefix", "u")
    assert code == 2 and "is not empty" in err and "--force" in err
    real = cli_trace.chakra_files

    def breaks(*a, **k):
        for i, data in enumerate(real(*a, **k)):
            if i == 3:
                raise KeyboardInterrupt
            yield data

    monkeypatch.setattr(cli_trace, "chakra_files", breaks)
    code, _, err = run_podsim(capsys, "trace", "export", str(d / "ok.json"), "-o", str(out), "--slice", "2x2x4", "--prefix", "t",
                              "--force")
    assert code == 130 and "interrupted" in err
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ex"]  # no staging left beside it
    # A smaller export under another prefix replaces the whole folder: no rank of the older one is left.
    code, _, err = run_podsim(capsys, "trace", "export", str(d / "ok.json"), "-o", str(out), "--slice", "2x2x1", "--prefix", "u",
                              "--force")
    assert code == 0, err
    assert sorted(p.name for p in out.glob("*.et")) == [f"u.{r}.et" for r in range(4)]
    code, out_json, err = run_podsim(capsys, "trace", "show", *sorted(str(p) for p in out.glob("*.et")), "--json")
    assert code == 0 and json.loads(out_json)["meta"]["ranks"] == 4


def test_upload_names_stay_inside_the_upload_folder():
    from podsim.files import safe_file_name

    for name in ("..", "../../etc/passwd.csv", "x" * 5000 + ".yaml", "/abs/t.json", "a\\b.yml", ".hidden.yaml", ""):
        safe = safe_file_name(name)
        assert safe and "/" not in safe and "\\" not in safe and safe not in (".", "..") and len(safe) <= 100
        assert not safe.startswith(".")
    assert safe_file_name("x" * 5000 + ".yaml").endswith(".yaml") and safe_file_name("run.json") == "run.json"


def _children(pid: int) -> set[int]:
    """Every descendant process of `pid` (from /proc)."""
    parents: dict[int, int] = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                parents[int(p.name)] = int((p / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    out, frontier = set(), {pid}
    while frontier:
        frontier = {c for c, ppid in parents.items() if ppid in frontier} - out
        out |= frontier
    return out


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for p in pids:
        try:
            state = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.add(p)
    return alive


@pytest.mark.slow  # issue 24: the quick tier under 2 min of 2 cores; runs in make test
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to list the worker processes")
@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_stops_a_process_sweep_and_its_workers(sig, code, tmp_path):
    """SIGTERM (or SIGINT) to `podsim sweep -e process`: the pool's workers stop with it, and
    the points already stored are said (a real process: signals are what is tested)."""
    (tmp_path / "base.yaml").write_text(_scenario(workload__synthetic__jobs=400, horizon="60d"))
    (tmp_path / "sw.yaml").write_text("sweep: slow\nbase: base.yaml\ngrid: {seed: [1, 2, 3, 4, 5, 6, 7, 8]}\n")
    proc = subprocess.Popen([sys.executable, "-m", "podsim", "sweep", str(tmp_path / "sw.yaml"), "-e", "process", "-w", "2",
                             "-o", str(tmp_path / "o"), "--no-report"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path)
    deadline = time.monotonic() + 60
    workers: set[int] = set()
    while time.monotonic() < deadline and len(workers) < 3:  # the forkserver and two workers
        time.sleep(0.2)
        workers = _children(proc.pid)
    assert workers, "the sweep started no workers"
    time.sleep(1.0)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert "Traceback" not in err and ("interrupted" in err or "terminated" in err)
    deadline = time.monotonic() + 20
    while _alive(workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(workers), f"workers left running: {_alive(workers)}"


def test_an_astra_export_of_a_flat_slice_reads_back(d, tmp_path, capsys):
    """`--format astra-sim --slice 2x2x1` wrote npus_count [2, 2, 1], which the network reader
    refuses (a dimension of one NPU): the trailing axis of one chip is no dimension now, and the
    case runs in podsim as written."""
    out = tmp_path / "ex"
    code, _, err = run_podsim(capsys, "trace", "export", str(d / "ok.json"), "-o", str(out), "--slice", "2x2x1", "-g", "tpu-v4",
                              "--format", "astra-sim")
    assert code == 0, err
    assert "npus_count: [ 2, 2 ]" in (out / "network.yml").read_text()
    assert json.loads((out / "system.json").read_text())["all-reduce-implementation"] == ["ring", "ring"]
    code, out_json, err = run_podsim(capsys, "steptime", "--trace", str(out / "workload" / "ok.*.et"), "--network",
                                     str(out / "network.yml"), "--system", str(out / "system.json"), "--json")
    assert code == 0, err
    assert json.loads(out_json)["metrics"]["step_time_s"] > 0


def test_a_refused_export_leaves_no_folder(d, tmp_path, capsys):
    """An export refused on its options removes the folders it made (it made them first)."""
    for extra in (("--format", "astra-sim", "-g", "tpu-v4", "--algorithm", "hierarchical"), ("--algorithm", "direct"),
                  ("--format", "astra-sim", "-g", "gpu-h100")):
        code, _, err = run_podsim(capsys, "trace", "export", str(d / "ok.json"), "-o", str(tmp_path / "new" / "ex"),
                                  "--slice", "2x2x2", *extra)
        assert code == 2, err
        assert not (tmp_path / "new").exists(), extra


@pytest.mark.parametrize("section,field,value,quantity", [
    ("requests", "beams", 65, "BEAMS"), ("requests", "clients", 0, "CLIENTS"), ("batch", "page_tokens", 8192, "PAGE_TOKENS"),
    ("model", "tensor", 0, "TENSOR_CHIPS"), (None, "replicas", 0, "SERVE_REPLICAS")])
def test_serving_fields_refuse_with_the_flags_range(section, field, value, quantity):
    """A scenario's serving: field and the `podsim serve` flag of the same name hold one Quantity:
    the field's refusal states the range the flag's does (the CASES above)."""
    from podsim import quantities as q
    from podsim.errors import PodsimError
    from podsim.serving.spec import ServingSetup

    fields = {"slice": "2x4", "model": {"model": "llama2-70b"}}
    if section is None:
        fields[field] = value
    else:
        fields[section] = {**fields.get(section, {}), field: value}
    with pytest.raises((PodsimError, ValueError)) as err:
        ServingSetup.model_validate(fields)
    assert f"is out of range: {getattr(q, quantity).what} is {getattr(q, quantity).allowed()}" in str(err.value)
