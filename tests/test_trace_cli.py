"""`podsim trace generate|import|show|models` as a user meets them: files, JSON, exit codes,
one-line errors and no partial output."""

from __future__ import annotations

import json

import pytest
from helpers import run_podsim as run
from test_trace_import import samples

from podsim.trace import PRESETS, load_trace


def test_generate_then_show(tmp_path, capsys):
    out = tmp_path / "gpt3.json"
    code, stdout, err = run(capsys, "trace", "generate", "gpt3-175b", "--slice", "8x16x16", "-p", "data=8,fsdp=16,tensor=16", "-o", str(out), "--json")
    assert code == 0, err
    s = json.loads(stdout)
    assert s["output"] == str(out) and set(s["collectives"]) == {"all_gather", "all_reduce", "reduce_scatter"}
    assert load_trace(out, shape=(8, 16, 16)).meta["mesh"] == {"tensor": "y", "fsdp": "z", "data": "x"}
    code, stdout, err = run(capsys, "trace", "show", str(out), "--generation", "tpu-v4", "--json")
    assert code == 0, err
    s = json.loads(stdout)
    cfg = PRESETS["gpt3-175b"]
    assert s["flops_vs_model"] == pytest.approx(1.0, abs=1e-3)
    # compute at peak is at least the model FLOPs spread over the chips at 275 TFLOP/s
    assert s["compute_s_at_peak"] >= cfg.training_flops_per_step() / (2048 * 275e12)
    code, stdout, _ = run(capsys, "trace", "show", str(out))
    assert code == 0 and "all_reduce" in stdout and "mesh" in stdout


def test_generate_options_reach_the_trace(tmp_path, capsys):
    out = tmp_path / "m.yaml"
    code, _, err = run(capsys, "trace", "generate", "mixtral-8x7b", "--slice", "4x4x4", "-p", "data=8,expert=8", "-o", str(out),
                       "--set", "global_batch=512", "--recompute", "full", "--capacity-factor", "1.25", "--map", "expert=x,y:2", "--map", "data=y:2:2,z")
    assert code == 0, err
    t = load_trace(out)
    assert t.meta["config"]["global_batch"] == 512 and t.meta["recompute"] == "full" and t.meta["mesh"]["expert"] == "x,y:2"


def test_import_microbenchmark_and_ascii_workload(tmp_path, capsys):
    files = sorted(str(p) for p in (samples() / "microbench-8npu-1MB" / "et").glob("reduce_scatter.*.et"))
    out = tmp_path / "rs.yaml"
    code, stdout, err = run(capsys, "trace", "import", *files, "--slice", "8", "-o", str(out), "--json")
    assert code == 0, err
    assert json.loads(stdout)["collectives"] == {"reduce_scatter": {"ops": 1, "bytes": 1048576.0}}
    out2 = tmp_path / "resnet.json"
    code, _, err = run(capsys, "trace", "import", str(samples() / "text-workloads" / "Resnet50_DataParallel.txt"), "--slice", "4x8", "--clock-ghz", "0.94", "-o", str(out2))
    assert code == 0, err
    assert load_trace(out2).meta["clock_hz"] == pytest.approx(0.94e9)


def test_models_lists_presets(capsys):
    code, stdout, _ = run(capsys, "trace", "models", "--json")
    assert code == 0 and set(json.loads(stdout)) == set(PRESETS)


BAD = {
    "cycle.yaml": ("podsim_trace: 1\nops:\n  - {id: a, kind: compute, flops: 1e12, deps: [b]}\n  - {id: b, kind: all_reduce, bytes: 1MiB, group: x, deps: [a]}\n", "the dependencies form a cycle through op 'a'"),
    "kind.yaml": ("podsim_trace: 1\nops:\n  - {id: s, kind: all_shuffle, bytes: 8, group: x}\n", "op 's': unknown op kind 'all_shuffle'"),
    "negative.json": ('{"podsim_trace": 1, "ops": [{"id": "n", "kind": "all_gather", "bytes": -5, "group": "x"}]}', "op 'n': bytes -5.0 is negative"),
    "axis.yaml": ("podsim_trace: 1\nops:\n  - {id: r, kind: reduce_scatter, bytes: 4096, group: 'x,z'}\n", "op 'r': group axis 'z' is not an axis of this slice (x, y)"),
}


@pytest.mark.parametrize("case", [*BAD, "truncated.0.et", "corrupt.0.et"])
def test_bad_input_exits_2_with_one_line_and_no_output(tmp_path, capsys, case):
    """The issue's error cases, through the console entry point: exit 2, one line naming the op or
    byte offset, no traceback, and no output file (nor temporary file) left behind."""
    src = tmp_path / case
    if case.endswith(".et"):
        data = (samples() / "microbench-8npu-1MB" / "et" / "all_reduce.0.et").read_bytes()
        src.write_bytes(data[:60] if case.startswith("truncated") else data[:8] + b"\x48" + b"\xff" * 72)
        needle = "byte offset 8: record is truncated" if case.startswith("truncated") else "byte offset 8: not a valid Chakra Node record"
    else:
        content, needle = BAD[case]
        src.write_text(content)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    args = ["trace", "import", str(src), "-o", str(out_dir / "t.json")] + (["--slice", "16x16"] if case == "axis.yaml" else [])
    r = run(capsys, *args)
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in r.err, r.err
    assert list(out_dir.iterdir()) == []


def test_generate_bad_plan_exits_2(tmp_path, capsys):
    code, _, err = run(capsys, "trace", "generate", "gpt3-175b", "--slice", "4x4x4", "-p", "data=32", "-o", str(tmp_path / "t.json"))
    assert code == 2 and "uses 32 chips per slice but slice 4x4x4 has 64" in err
    assert list(tmp_path.iterdir()) == []
    code, _, err = run(capsys, "trace", "generate", "gpt3-175b", "--slice", "4x4x4", "-p", "data=64", "-o", str(tmp_path / "t.csv"))
    assert code == 2 and "must end in .json, .yaml or .yml" in err
