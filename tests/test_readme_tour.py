"""The README's tour runs as written (issue 25): every command of every ```sh block of README.md,
in order, from a fresh folder that holds only the checkout's examples/ and scenarios/, exits 0
with no traceback; the files it shows ship in examples/; what it writes reads back.

Three commands are run as CI can: `make demo` as the command it runs (`podsim demo`), `make
test` not at all (it is the run this test is part of), `podsim dashboard` with --dry-run (the
server itself is tests/test_dashboard_e2e.py's and test_dashboard_signals.py's).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from podsim.trace import load_trace

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow  # the whole tour: ~20 commands, each a fresh process


def readme_commands(text: str) -> list[str]:
    """The commands of the README's ```sh blocks, continuation lines joined, comments dropped."""
    out = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for cmd in block.replace("\\\n", " ").splitlines():
            cmd = re.sub(r"\s+#.*$", "", cmd).strip()  # a trailing comment (a URL has no space before #)
            if cmd and not cmd.startswith("#"):
                out.append(cmd)
    return out


def as_run(cmd: str) -> str | None:
    """The command as this test runs it (see the module docstring), or None for `make test`."""
    py = shlex.quote(sys.executable)
    if cmd.startswith("make "):
        target = cmd.split()[1]
        return {"demo": f"{py} -m podsim demo --out out/demo"}.get(target)
    cmd = re.sub(r"^\.venv/bin/podsim\b", f"{py} -m podsim", cmd)
    cmd = re.sub(r"^\.venv/bin/python\b", py, cmd)
    if " -m podsim dashboard" in cmd:
        cmd += " --dry-run"
    return cmd


def test_the_readme_names_only_shipped_inputs():
    """Every file a tour command reads is in the checkout (examples/, scenarios/, podsim/)."""
    for cmd in readme_commands((ROOT / "README.md").read_text()):
        for word in shlex.split(cmd):
            if word.startswith(("examples/", "scenarios/")) and "*" not in word:
                assert (ROOT / word).exists(), f"{cmd}: {word} does not ship"
            if "*" in word and word.startswith("examples/"):
                assert list(ROOT.glob(word)), f"{cmd}: {word} matches nothing"


def test_examples_equal_the_test_copies():
    """examples/astra-sim holds the same ASTRA-sim samples as tests/data/astra-sim (one origin)."""
    data = ROOT / "tests" / "data" / "astra-sim"
    for f in (ROOT / "examples" / "astra-sim").iterdir():
        if f.suffix == ".et":
            assert f.read_bytes() == (data / "microbench-8npu-1MB" / "et" / f.name).read_bytes()
        elif f.suffix in (".yml", ".json"):
            assert f.read_bytes() == (data / "configs" / f.name).read_bytes()


def test_every_readme_command_runs(tmp_path):
    for name in ("examples", "scenarios"):
        (tmp_path / name).symlink_to(ROOT / name)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ran, outputs, t0 = [], {}, time.perf_counter()
    for cmd in readme_commands((ROOT / "README.md").read_text()):
        run = as_run(cmd)
        if run is None:
            continue
        t = time.perf_counter()
        p = subprocess.run(["bash", "-c", run], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, f"{cmd}\nexit {p.returncode}\n{p.stderr[-2000:]}"
        assert "Traceback" not in p.stderr, f"{cmd}\n{p.stderr[-2000:]}"
        # the tour's plans fit in the chip's HBM (the summaries say so; no warning)
        assert "DOES NOT FIT" not in p.stdout and "this plan needs" not in p.stderr, f"{cmd}\n{p.stdout[-2000:]}"
        ran.append((cmd, time.perf_counter() - t))
        outputs[cmd] = p.stdout
    assert len(ran) >= 15
    tour = tmp_path / "out" / "tour"
    # the step written as an ASTRA-sim case reads back to the same ops
    assert load_trace([tour / "gpt3_back.json"]).ops == load_trace([tour / "gpt3.json"]).ops
    for f in ("network.yml", "system.json"):
        assert (tour / "astra" / f).is_file()
    assert (tour / "run" / "report.html").is_file() and (tour / "sweep" / "report.html").is_file()
    # what the README says of the scenario: three replicates, every figure a mean with its 95% interval
    (run_out,) = [out for cmd, out in outputs.items() if " run examples/cluster.yaml" in cmd]
    assert "3 replicates: mean [95% interval]" in run_out and "(95% CI, n=3)" in run_out
    assert "95% CI, n=3" in (tour / "run" / "report.html").read_text()
    (dash,) = [out for cmd, out in outputs.items() if " dashboard" in cmd]
    assert "--server.port 8501" in dash  # the README's http://localhost:8501
    assert (tour / "gpt3_timeline.json").is_file() and (tmp_path / "out" / "demo" / "report.html").is_file()
    print(f"\nREADME tour: {len(ran)} commands in {time.perf_counter() - t0:.1f} s")
    for cmd, s in sorted(ran, key=lambda r: -r[1])[:5]:
        print(f"  {s:6.1f} s  {cmd[:100]}")
