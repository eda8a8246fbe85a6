"""Every source id the project cites resolves to the reference sheet it ships (podsim.sources),
and `podsim sources ID` prints a figure's value, its source and a link."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import run_podsim

from podsim.sources import links, lookup, resolves
from podsim.topology.generations import generations

ROOT = Path(__file__).parent.parent
PACKAGED = ROOT / "podsim" / "data" / "reference"
# a row id of the hardware sheet: prefix.number (v4.10, ocs.17, perf.3); MLPerf versions (v2.0, MLPerf Inference v4.0) are not ids
ROW_ID = re.compile(r"(?<![\w.])((?:v2|v3|v4|v5e|v5p|v6e|v7|ocs|eps|apo|av|col|ib|jup|ml|nccl|nsdi|perf|pr|slc|tw|x)\.\d+)(?![\w.]*\w)")


def project_texts():
    for pattern in ("podsim/**/*.py", "podsim/**/*.yaml", "app_pages/*.py", "scenarios/**/*", "docs/**/*.md",
                    "examples/**/*", "README.md", "DESIGN.md"):
        for f in ROOT.glob(pattern):
            if f.is_file() and "reference" not in f.parts and f.suffix in (".py", ".yaml", ".yml", ".md", ".json", ""):
                yield f


def test_every_figure_of_every_generation_cites_an_id_that_resolves():
    missing = [(gid, name, fig.source) for gid, gen in generations().items() for name, fig in gen.figures().items()
               if not resolves(fig.source)]
    assert not missing


def test_every_id_the_project_text_cites_resolves():
    """README, docs, DESIGN, code (help texts and comments), scenarios and examples."""
    bad = {}
    for f in project_texts():
        text = f.read_text(errors="ignore")
        for m in ROW_ID.finditer(text):
            if text[max(0, m.start() - 7):m.start()] == "MLPerf " or text[max(0, m.start() - 17):m.start()] == "MLPerf Inference ":
                continue
            if not resolves(m.group(1)):
                bad.setdefault(m.group(1), []).append(str(f.relative_to(ROOT)))
    assert not bad


# The sheets as copied from the workplace's shared reference folder (docs/reference/README.md):
# a change to a copy must be a change of the origin too, so it shows here.
SHEET_SHA256 = {"hardware.md": "801a577b05ca3203f06a62355b572afe975c7b04269395ec3e5237e37bfec69c",
                "measurements.md": "07bfda6165ae4c09f87b3ca9dce1d69f03be280d5faa9652d63810608371561f"}


@pytest.mark.parametrize("name", sorted(SHEET_SHA256))
def test_the_packaged_sheets_are_the_copied_ones(name):
    """docs/reference/README.md says where the sheets come from; the copies stay as copied."""
    import hashlib

    assert hashlib.sha256((PACKAGED / name).read_bytes()).hexdigest() == SHEET_SHA256[name]


def test_lookup_rows_publications_and_named_sources():
    d = lookup("v4.10")
    assert d["value"] == "4.5e10 one-way / 9e10 bidir" and d["unit"] == "B/s" and d["how"] == "stated"
    assert "SCALINGBOOK" in d["publications"] and d["links"][0].startswith("https://github.com/jax-ml/scaling-book/tree/0819a7d8")
    assert "tpu-v4 ici_link_bandwidth" in d["cited_by"]
    m2 = lookup("M2")
    assert m2["sheet"] == "measurements.md" and "25.1 ms" in m2["value"]
    assert any(u.startswith("https://github.com/mlcommons/training_results_v0.6/blob/f312518c") for u in m2["links"])
    assert lookup("CACM20")["kind"] == "source" and "tpu-v2 ici_link_bandwidth" in lookup("CACM20")["cited_by"]
    isca = lookup("[ISCA23]")
    assert "https://arxiv.org/abs/2304.01433" in isca["links"] and "https://doi.org/10.1145/3579371.3589350" in isca["links"]
    assert links("see `owner/repo@abcdef1:dir/a b.md`") == ["https://github.com/owner/repo/blob/abcdef1/dir/a%20b.md"]


def test_podsim_sources_prints_value_source_and_link(capsys):
    code, out, _ = run_podsim(capsys, "sources", "ocs.17")
    assert code == 0
    assert "~10 s to reconfigure the torus s (stated (secondary))" in out
    assert "source:   [KLOCKWOOD-V4]" in out and "link:     https://glennklockwood.com/garden/processors/TPUv4" in out
    assert "used by:  tpu-v4 ocs.reconfigure_time" in out
    code, out, _ = run_podsim(capsys, "sources", "pr.4", "--json")
    assert code == 0 and json.loads(out)["value"] == "3.22; 1.93"
    code, _, err = run_podsim(capsys, "sources", "v4.99")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "did you mean v4.9" in err
    code, out, _ = run_podsim(capsys, "sources")
    assert code == 0 and out.splitlines()[0].startswith("v2.1 ") and "433 rows" in out.splitlines()[-1]
