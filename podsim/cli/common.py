"""Output helpers shared by the sub-commands: JSON to stdout, tables with rich.

`console` (a rich Console on stdout) is made on first use, so a `--json` command does not
import rich (start-up time, benchmarks/bench_startup.py)."""

from __future__ import annotations

import json
import math
from functools import cache
from typing import Any

import numpy as np


@cache
def _console():
    from rich.console import Console

    return Console()


def __getattr__(name: str):
    if name == "console":
        return _console()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _default(o: Any):
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (set, tuple)):
        return list(o)
    raise TypeError(f"cannot serialise {type(o).__name__}")


def to_json(obj: Any) -> str:
    """JSON with numpy values converted; NaN/inf become null so any parser reads it."""

    def clean(x):
        if isinstance(x, float) and not math.isfinite(x):
            return None
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        return x

    return json.dumps(clean(json.loads(json.dumps(obj, default=_default))), indent=2)


def emit_json(obj: Any) -> None:
    print(to_json(obj))


def table(title: str, rows: list[tuple[str, str]]) -> None:
    from rich.table import Table

    t = Table(title=title, show_header=False, title_justify="left")
    t.add_column("figure", style="bold")
    t.add_column("value")
    for k, v in rows:
        t.add_row(k, v)
    _console().print(t)
