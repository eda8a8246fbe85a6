"""The package layout is the architecture: packages form layers, and every import between two of
them (at the top of a module or inside a function) points down. So no package cycle can form and
no low layer reaches up (the engine never runs validation; collectives never import the engine;
placement never imports the cluster's workload models). Read from the source, not from a run."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

PODSIM = Path(__file__).resolve().parents[1] / "podsim"

# Lowest first. Modules of the top-level package (errors, units, files, ...) are the base; a
# package may import only from layers below its own.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "_lazy", "_arrays"),
    ("units",),
    ("quantities",),
    ("bounds",),
    ("files", "metrics", "maxmin", "stats"),
    ("topology",),
    ("perf", "economics", "placement", "sources"),
    ("trace",),
    ("collectives", "workload"),
    ("engine",),
    ("study",),
    ("serving",),  # inference steps run as studies, below the validation table that checks them
    ("cluster", "validation"),
    ("plan",),  # plan search: studies, the cluster's failure figures and the error bands, below scenarios
    ("scenario",),
    ("store",),
    ("sweep",),
    ("report",),
    ("cli",),
    ("__init__", "__main__"),
)
RANK = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def unit_of(module: str) -> str:
    """podsim.engine.core -> engine; podsim.units -> units; podsim -> __init__."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


@cache
def arrows() -> list[tuple[str, str, str]]:
    """(from unit, to unit, where) for every import of podsim by podsim, across units."""
    out = []
    for f in sorted(PODSIM.rglob("*.py")):
        rel = f.relative_to(PODSIM.parent).with_suffix("")
        here = unit_of(".".join(rel.parts))
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [node.module] if node.module != "podsim" else [f"podsim.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for t in targets:
                if t == "podsim" or t.startswith("podsim."):
                    there = unit_of(t)
                    if there != here:
                        out.append((here, there, f"{rel}:{node.lineno}"))
    return out


def test_every_unit_has_a_layer():
    units = {unit_of(".".join(f.relative_to(PODSIM.parent).with_suffix("").parts)) for f in PODSIM.rglob("*.py")}
    assert sorted(units - set(RANK)) == [], "a new package or base module: give it its layer in LAYERS"


def test_every_import_points_down():
    up = [f"{where}: {a} imports {b}" for a, b, where in arrows() if RANK[b] >= RANK[a]]
    assert up == []


def test_no_package_cycle():
    """Implied by the ranks; checked on the graph itself so a mis-ranked layer cannot hide one."""
    graph: dict[str, set[str]] = {}
    for a, b, _ in arrows():
        graph.setdefault(a, set()).add(b)

    def reaches(a: str, target: str, seen: set[str]) -> bool:
        for b in graph.get(a, ()):
            if b == target or (b not in seen and (seen.add(b) or reaches(b, target, seen))):
                return True
        return False

    assert sorted(a for a in graph if reaches(a, a, set())) == []
