"""The serving reference sheet (podsim/data/reference/serving_measurements.md): every row id and
every publication key it holds resolves through podsim.sources to that sheet's own row."""

from __future__ import annotations

import re
from pathlib import Path

from podsim.sources import lookup

SHEET = Path(__file__).parent.parent / "podsim" / "data" / "reference" / "serving_measurements.md"


def _ids_and_keys() -> tuple[list[str], list[str]]:
    """Row ids of the sheet's id tables (a table whose header starts `| id |`), and its Sources keys."""
    ids, keys, in_id_table = [], [], False
    for line in SHEET.read_text(encoding="utf-8").splitlines():
        if line.startswith("|"):
            in_id_table = line.startswith("| id |") or in_id_table
            m = re.match(r"\|\s*([a-z]+\.\d+)\s*\|", line)
            if in_id_table and m:
                ids.append(m.group(1))
        else:
            in_id_table = False
        if line.startswith("* ["):
            keys += re.findall(r"^\* \[([A-Z][A-Z0-9-]+)\]", line)
    return ids, keys


def test_every_row_and_key_of_the_serving_sheet_resolves_to_it():
    ids, keys = _ids_and_keys()
    assert len(ids) >= 25 + 20 and len(set(ids)) == len(ids), "ids missing or repeated"
    assert len([i for i in ids if i.startswith("sv.")]) >= 25
    for rid in ids:
        d = lookup(rid)
        assert d["sheet"] == "serving_measurements.md" and d["kind"] == "row", rid
        assert d["value"] and d["source"] and d["how"], rid  # a figure, where it comes from, stated or derived
    assert keys
    for key in keys:
        d = lookup(key)
        assert d["kind"] == "publication" and d["sheet"] == "serving_measurements.md" and d["source"], key
    assert any(u.startswith("https://github.com/NVIDIA/TensorRT-LLM/blob/77d24b5") for u in lookup("sv.1")["links"])
