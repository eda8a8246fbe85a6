"""Package faces that import a name's module only when the name is first used.

A face lists its public names as usual, with its imports under `if TYPE_CHECKING:` (so readers,
linters and type checkers see where each comes from), and ends with `lazy_face(__name__)`:
the names are then looked up in those imports on first use (PEP 562), so `podsim steptime`
does not load the cluster simulation, CP-SAT or pandas because some face it passes through
re-exports them (benchmarks/bench_startup.py measures start-up).

`from podsim.cluster import simulate` keeps meaning the function even where a module of that
name (podsim/cluster/simulate.py) has been imported: the face keeps the name it exports.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
import types
from pathlib import Path


class _Face(types.ModuleType):
    """A package module whose exported names resolve on first use."""

    def __getattr__(self, name: str):
        where = self.__dict__.get("_face_names", {}).get(name)
        if where is None:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where), name)
        self.__dict__[name] = value
        return value

    def __setattr__(self, name: str, value) -> None:
        # importing the submodule podsim.x.name sets attribute `name` on the package: keep the export
        if (name in self.__dict__.get("_face_names", {}) and isinstance(value, types.ModuleType)
                and value.__name__ == f"{self.__name__}.{name}"):
            return
        super().__setattr__(name, value)

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self.__dict__.get("_face_names", {})))


def _deferred_imports(path: str, package: str) -> dict[str, str]:
    """name -> module of every `from M import name` under `if TYPE_CHECKING:` in the face's source."""
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom) and stmt.module:
                    module = stmt.module if not stmt.level else importlib.util.resolve_name(
                        "." * stmt.level + stmt.module, package)
                    out.update({a.asname or a.name: module for a in stmt.names})
    return out


def lazy_face(package: str) -> None:
    """Make the package `package` (a face: call at the end of its __init__) import the module of
    each name imported under `if TYPE_CHECKING:` when the name is first used."""
    mod = sys.modules[package]
    names = _deferred_imports(mod.__file__, package)
    missing = [n for n in getattr(mod, "__all__", ()) if n not in names and n not in mod.__dict__]
    if missing:
        raise ImportError(f"{package}.__all__ names {', '.join(missing)} but the face neither defines nor imports them")
    mod.__dict__["_face_names"] = names
    mod.__class__ = _Face
