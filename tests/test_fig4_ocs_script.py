"""scenarios/fig4_ocs_failures.py (the README's Fig. 4 table with OCS failures) runs, small and
seeded, and says what the README says of it: degraded placement beats no remedy when OCS units
are down 1% of the time."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_fig4_ocs_script_degraded_placement_beats_no_remedy(capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "scenarios"))  # as when run: its folder is on the path
    script = runpy.run_path(str(ROOT / "scenarios" / "fig4_ocs_failures.py"))
    script["main"](["--days", "1", "--shapes", "8x8x16"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| 8x8x16 | 99.0%")]
    assert len(rows) == 1
    none, degraded, spare, both = (float(x) for x in re.findall(r"\| ([0-9.]+)%", rows[0])[1:5])
    assert degraded > none + 10 and both >= degraded - 1 and spare >= none - 1
