"""The package layout is the architecture: packages form layers, and every import between two of
them (at the top of a module or inside a function) points down. So no package cycle can form and
no low layer reaches up (the engine never runs validation; collectives never import the engine;
placement never imports the cluster's workload models). Inside a package, imports between files
form no circle either, and no module is over 500 lines. Read from the source, not from a run."""

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
def imports() -> dict[Path, list[ast.Import | ast.ImportFrom]]:
    """Every import statement of every podsim source file (any depth), read once for the checks below."""
    return {f: [n for n in ast.walk(ast.parse(f.read_text(encoding="utf-8"))) if isinstance(n, ast.Import | ast.ImportFrom)]
            for f in sorted(PODSIM.rglob("*.py"))}


@cache
def arrows() -> list[tuple[str, str, str]]:
    """(from unit, to unit, where) for every import of podsim by podsim, across units."""
    out = []
    for f, nodes in imports().items():
        rel = f.relative_to(PODSIM.parent).with_suffix("")
        here = unit_of(".".join(rel.parts))
        for node in nodes:
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


def _module_of(path: Path) -> str:
    rel = path.relative_to(PODSIM.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _is_module(name: str) -> bool:
    base = PODSIM.parent / Path(*name.split("."))
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


@cache
def file_arrows() -> dict[str, set[str]]:
    """module -> the podsim modules it imports (any import statement, under TYPE_CHECKING or inside
    a function too); `from pkg import sub` counts as an import of the submodule, not the face."""
    out: dict[str, set[str]] = {}
    for f, nodes in imports().items():
        here = _module_of(f)
        package = here if f.name == "__init__.py" else here.rpartition(".")[0]
        targets: set[str] = set()
        for node in nodes:
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([node.module] if node.module else []))
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    targets.add(sub if _is_module(sub) else base)
            elif isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
        out[here] = {t for t in targets if t.startswith("podsim") and _is_module(t) and t != here}
    return out


def test_no_import_circle_between_files():
    """Inside a package too, imports between files form no circle (a function-local import that
    closes one is a circle all the same): each file can be read after the files it imports."""
    graph = file_arrows()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert circles == [], f"import circles between files: {circles}"


def test_no_module_over_500_lines():
    """Small modules with one job each: none over 500 lines."""
    long = {str(f.relative_to(PODSIM.parent)): n for f in PODSIM.rglob("*.py")
            if (n := len(f.read_text(encoding="utf-8").splitlines())) > 500}
    assert long == {}, f"modules over 500 lines: {long}"
