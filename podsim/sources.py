"""Source ids: every figure podsim uses names where it comes from, and each id resolves here.

An id is a row of the project's reference sheets (`podsim/data/reference/hardware.md`: `v4.10`,
`ocs.17`, `perf.3` ...; `measurements.md`: the measured training runs `M1` ...;
`serving_measurements.md`: measured serving runs `sv.1` ..., serving-model figures `ov.1`, `lp.1`,
`cl.1`, `md.1` ...; `efficiency.md`: microbenchmarks of achievable matmul and HBM rates `eff.1` ...), or a named
source of `generations.yaml` (`CACM20`, `NV-H100`, `assumption` ...). `lookup(id)` gives the
row (fact, value, unit, stated or derived), the publications its source column cites, expanded
from the sheet's Sources section, with links, and the generation figures that cite it:

    lookup("v4.10")["value"]      # '4.5e10 one-way / 9e10 bidir'
    lookup("v4.10")["links"]      # ['https://github.com/jax-ml/scaling-book/tree/0819a7d8...']

`podsim sources ID` prints the same. Pure: reads only the packaged sheets.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from difflib import get_close_matches
from functools import cache
from importlib import resources
from urllib.parse import quote

from podsim.errors import PodsimError

SHEETS = ("hardware.md", "measurements.md", "serving_measurements.md", "efficiency.md")
_KEY = re.compile(r"\[([A-Z][A-Z0-9-]+)\]")
_URL = re.compile(r"https?://[^\s;,)`'\"]+")
# `owner/repo@commit[:path]` in backticks (the path may hold spaces) or bare (it may not)
_REPO = re.compile(r"`([A-Za-z0-9][\w.-]*/[\w.-]+)@([0-9a-f]{7,40})(?::([^`]+))?`"
                   r"|(?<![\w/`])([A-Za-z0-9][\w.-]*/[\w.-]+)@([0-9a-f]{7,40})(?::([^\s`;,)]+))?")


@dataclass(frozen=True)
class SourceRow:
    """One row of a reference sheet."""

    id: str
    sheet: str
    line: int
    cells: dict[str, str]  # column header -> cell text
    keys: tuple[str, ...] = field(default=())  # publication keys its source column cites ([ISCA23] ...)


def _sheet_text(name: str) -> str:
    return resources.files("podsim").joinpath(f"data/reference/{name}").read_text(encoding="utf-8")


def _cells(line: str) -> list[str]:
    body = line.strip()[1:-1] if line.strip().endswith("|") else line.strip()[1:]
    return [c.strip() for c in re.split(r"(?<!\\)\|", body)]


@cache
def _parse() -> tuple[dict[str, SourceRow], dict[str, str], dict[str, str]]:
    """(rows by id, publication keys -> text, measurements' repo prefixes R06 -> URL base)."""
    rows: dict[str, SourceRow] = {}
    keys: dict[str, str] = {}
    prefixes: dict[str, str] = {}
    for sheet in SHEETS:
        header: list[str] | None = None
        text = _sheet_text(sheet)
        for n, line in enumerate(text.splitlines(), 1):
            if line.startswith("| id |"):
                header = _cells(line)
                continue
            if line.startswith("|") and header and not line.startswith("|---"):
                cells = _cells(line)
                rid = cells[0]
                if re.fullmatch(r"[A-Za-z][\w-]*\.\d+[a-z]?|M\d+", rid):
                    row = dict(zip(header, cells, strict=False))
                    rows[rid] = SourceRow(rid, sheet, n, row, tuple(dict.fromkeys(_KEY.findall(row.get("source", "")))))
                continue
            if not line.startswith("|"):
                header = None if not line.strip() else header
            if line.startswith("* ["):  # the Sources section: "* [KEY] text ; [KEY2] text ..."
                for part in re.split(r"\s*;\s*(?=\[[A-Z][A-Z0-9-]+\])", line[2:]):
                    m = re.match(r"((?:\[[A-Z][A-Z0-9-]+\](?:,\s*)?)+)\s*:?\s*(.*)", part)
                    if m:  # "[A], [B]: text" gives both keys the text
                        for key in _KEY.findall(m.group(1)):
                            keys.setdefault(key, m.group(2).strip().rstrip(";").strip())
        for m in re.finditer(r"\|\s*training_results_v([\d.]+)\s*\|\s*([0-9a-f]{40})\s*\|", text):
            version, commit = m.groups()
            tag = "R" + version.replace(".", "")[:2].ljust(2, "0")
            prefixes[tag] = f"https://github.com/mlcommons/training_results_v{version}/blob/{commit}/"
    return rows, keys, prefixes


@cache
def _key_sheets() -> dict[str, str]:
    """Publication key -> the first sheet whose Sources section (`* [KEY] ...` lines) names it."""
    out: dict[str, str] = {}
    for sheet in SHEETS:
        for line in _sheet_text(sheet).splitlines():
            if line.startswith("* ["):
                for key in _KEY.findall(line):
                    out.setdefault(key, sheet)
    return out


def _key_sheet(key: str) -> str:
    return _key_sheets().get(key, "hardware.md")


def links(text: str, prefixes: dict[str, str] | None = None) -> list[str]:
    """URLs a source text gives: plain https links, `owner/repo@commit[:path]` as GitHub links,
    and the measurements sheet's `R06: path` shorthands."""
    out = [u.rstrip(".") for u in _URL.findall(text)]
    out += [f"https://arxiv.org/abs/{a}" for a in re.findall(r"arXiv[: ]?(\d{4}\.\d{4,5})", text)]
    out += [f"https://doi.org/{d.rstrip('.;,')}" for d in re.findall(r"\bdoi[: ]?(10\.\d{4,}/\S+)", text)]
    for m in _REPO.finditer(text):
        repo, commit, path = m.group(1, 2, 3) if m.group(1) else m.group(4, 5, 6)
        if "." in repo.split("/")[0] and "github" not in repo:  # a host name, not an owner
            continue
        path = quote(path.strip()) if path else ""
        out.append(f"https://github.com/{repo}/blob/{commit}/{path}" if path else f"https://github.com/{repo}/tree/{commit}")
    for tag, base in (prefixes or {}).items():
        for m in re.finditer(rf"\b{tag}:\s*`([^`]+)`", text):
            out.append(base + m.group(1).lstrip("/"))
    return list(dict.fromkeys(out))


def _generation_sources() -> dict[str, str]:
    from podsim.topology.generations import sources

    return dict(sources())


def cited_by(source_id: str) -> list[str]:
    """The generation figures whose source is this id (`tpu-v4 ici_link_bandwidth` ...)."""
    from podsim.topology.generations import generations

    out = []
    for gid, gen in generations().items():
        for name, fig in gen.figures().items():
            if fig.source == source_id or (fig.alt is not None and getattr(fig.alt, "source", None) == source_id):
                out.append(f"{gid} {name}")
    return out


def known_ids() -> list[str]:
    rows, keys, _ = _parse()
    return [*rows, *_generation_sources(), *keys]


def lookup(source_id: str) -> dict:
    """What an id says: `id`, `kind` (row, source, publication), `fact`, `value`, `unit`, `how`
    (stated or derived), `source` (the row's source text), `publications` (key -> text, with
    links), `links`, `sheet` and `line`, and `cited_by`. A one-line error names near ids."""
    rows, keys, prefixes = _parse()
    sid = source_id.strip().strip("[]")
    if sid in rows:
        row = rows[sid]
        c = row.cells
        pubs = {k: keys.get(k, "not expanded in the sheet") for k in row.keys}
        fact = c.get("fact") or " / ".join(v for k, v in c.items() if k in ("system", "model") and v)
        value = c.get("value") or c.get("derived step time") or c.get("measured", "")
        src = c.get("source", "")
        all_links = links(src, prefixes) + [u for t in pubs.values() for u in links(t, prefixes)]
        return {"id": sid, "kind": "row", "sheet": row.sheet, "line": row.line, "fact": fact, "value": value,
                "unit": c.get("unit", ""), "how": c.get("stated/derived", ""), "source": src, "publications": pubs,
                "links": list(dict.fromkeys(all_links)), "cited_by": cited_by(sid)}
    gens = _generation_sources()
    if sid in gens or sid in keys:
        text = keys.get(sid) or gens[sid]  # the sheet's entry is the fuller one
        return {"id": sid, "kind": "source" if sid in gens else "publication", "sheet": "generations.yaml" if sid in gens else _key_sheet(sid),
                "line": None, "fact": "", "value": "", "unit": "", "how": "", "source": text, "publications": {},
                "links": links(text, prefixes), "cited_by": cited_by(sid)}
    near = get_close_matches(sid, known_ids(), n=4, cutoff=0.6)
    raise PodsimError(f"unknown source id {source_id!r}; ids are reference-sheet rows (v4.10, ocs.17, perf.3, M1 ...) "
                      f"or named sources (CACM20, assumption ...)" + (f"; did you mean {', '.join(near)}?" if near else ""))


def rows() -> list[dict]:
    """Every reference-sheet row: id, sheet, fact (for `podsim sources` without an id)."""
    out = []
    for r in _parse()[0].values():
        fact = r.cells.get("fact") or " / ".join(r.cells.get(k, "") for k in ("system", "model"))
        out.append({"id": r.id, "sheet": r.sheet, "fact": fact})
    return out


def resolves(source_id: str) -> bool:
    try:
        lookup(source_id)
    except PodsimError:
        return False
    return True
