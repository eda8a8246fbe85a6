"""Set-up for a newcomer (issue 25): `make demo` installs podsim's runtime dependencies only, and
`make test`, where it cannot install Chromium itself, says in one line what to install."""

from __future__ import annotations

import re
import shutil
import subprocess
from importlib.metadata import PackageNotFoundError, distribution, requires
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
# (jsonschema is not among them: streamlit needs it through altair)
TEST_TOOLS = {"pytest", "pytest-xdist", "hypothesis", "ruff", "playwright", "dask", "distributed", "mlc-chakra"}


def _closure(name: str, seen: set[str]) -> set[str]:
    """Every distribution `name` needs at run time (no extras), as installed here."""
    key = re.sub(r"[-_.]+", "-", name).lower()
    if key in seen:
        return seen
    seen.add(key)
    try:
        reqs = requires(name) or []
    except PackageNotFoundError:
        return seen
    for text in reqs:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue  # an extra's, or another platform's
        _closure(req.name, seen)
    return seen


def test_the_runtime_dependencies_pull_in_no_test_tool():
    """What `pip install -e .` (make demo) brings: podsim's own requirements and theirs, none of
    the test tools (those are the dev and dask extras and the Makefile's Chakra reader)."""
    distribution("podsim")
    needed = _closure("podsim", set())
    assert "numpy" in needed and "streamlit" in needed and "scipy" in needed
    assert not needed & TEST_TOOLS, needed & TEST_TOOLS


def test_make_demo_installs_without_the_test_extras():
    text = (ROOT / "Makefile").read_text()
    runtime = re.search(r"^\$\(VENV\)/\.runtime:.*?\n((?:\t.*\n)+)", text, re.M).group(1)
    assert "pip install --quiet -e ." in runtime and "[dev" not in runtime
    assert re.search(r"^demo: \$\(VENV\)/\.runtime$", text, re.M)


def test_make_browser_says_in_one_line_what_to_install_where_it_cannot(tmp_path):
    """No Chromium on PATH, not root, no apt-get: exit non-zero with one line naming the packages."""
    make = shutil.which("make")
    assert make is not None
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_id = bin_dir / "id"
    fake_id.write_text("#!/bin/sh\necho 1000\n")
    fake_id.chmod(0o755)
    out = subprocess.run([make, "-s", "-C", str(ROOT), "browser"], capture_output=True, text=True,
                         env={"PATH": str(bin_dir), "HOME": str(tmp_path)}, timeout=60)
    lines = [line for line in out.stderr.splitlines() if line.strip() and not line.startswith("make: ")]
    assert out.returncode != 0 and len(lines) == 1, out.stderr
    assert "chromium" in lines[0] and "apt-get install chromium chromium-driver" in lines[0]
