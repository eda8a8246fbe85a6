"""Output helpers shared by the sub-commands: JSON to stdout, tables with rich.

`console` (a rich Console on stdout) is made on first use, so a `--json` command does not
import rich (start-up time, benchmarks/bench_startup.py)."""

from __future__ import annotations

import datetime
import functools
import inspect
import json
import math
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import Annotated, Any

import numpy as np
import typer

from podsim.bounds import BUDGET_FLAGS, BUDGET_HELP, Budget, budgets
from podsim.errors import PodsimError


@cache
def _console():
    from rich.console import Console

    return Console()


def __getattr__(name: str):
    if name == "console":
        return _console()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def comma_list(text: str | None, flag: str, example: str) -> list[str]:
    """The comma-separated entries of a flag's value ('' or None: none); an empty entry (a stray
    comma) is refused, not dropped."""
    if not text or not text.strip():
        return []
    items = [x.strip() for x in text.split(",")]
    if not all(items):
        raise PodsimError(f"{flag} {text!r} has an empty entry (a stray comma?); give e.g. {example}")
    return items


def comma_counts(text: str | None, flag: str, example: str, quantity=None) -> list[int]:
    """comma_list of whole numbers, each in `quantity`'s range when given."""
    out = []
    for item in comma_list(text, flag, example):
        try:
            n = int(item)
        except ValueError:
            raise PodsimError(f"{flag} {text!r}: {item!r} is not a whole number; give e.g. {example}") from None
        out.append(quantity.check(n, flag) if quantity is not None else n)
    return out


def _default(o: Any):
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (set, tuple)):
        return list(o)
    if isinstance(o, (datetime.datetime, datetime.date)):  # a store's created_at: ISO 8601
        return o.isoformat()
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


PROGRESS_EVERY_S = 5.0


def progress_lines(label: str, every_s: float = PROGRESS_EVERY_S) -> Callable[[float, float, str], None]:
    """Without a terminal (a progress bar would not show): a line on stderr every `every_s`
    seconds saying how far long work has got, so a batch log shows it is alive."""
    t0 = time.monotonic()
    due = [t0 + every_s]

    def update(done: float, total: float, text: str = "") -> None:
        now = time.monotonic()
        if now < due[0]:
            return
        due[0] = now + every_s
        frac = f"{done / total:.0%}" if total else "?"
        print(f"{label}: {frac}{' (' + text + ')' if text else ''}, {now - t0:.0f} s elapsed", file=sys.stderr, flush=True)

    return update


@contextmanager
def progress_reporter(label: str) -> Iterator[Callable[..., None]]:
    """A progress callback `update(done, total, text, line=text)` for long work: a transient rich
    bar on stderr when it is a terminal (showing `text`), else progress_lines (saying `line`)."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    err = Console(stderr=True)
    with Progress(TextColumn(label), BarColumn(), TextColumn("{task.fields[t]}"), TimeElapsedColumn(),
                  console=err, transient=True, disable=not err.is_terminal) as bar:
        task = bar.add_task(label, total=1.0, t="")
        lines = None if err.is_terminal else progress_lines(label)

        def update(done: float, total: float, text: str = "", line: str | None = None) -> None:
            bar.update(task, completed=done / total if total else 1.0, t=text)
            if lines is not None:
                lines(done, total, text if line is None else line)

        yield update


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


def check_timeline_path(path: str | None) -> None:
    """Refuse a --timeline path that is not a .json file podsim may write, before any simulation runs."""
    from pathlib import Path

    from podsim.files import output_file

    if path is not None:
        output_file(path, "--timeline")
        if Path(path).suffix.lower() != ".json":
            raise PodsimError(f"--timeline {path!r}: the trace-event file must end in .json (Perfetto opens .json)")


def write_timeline(path: str, result: Any, link_load: Any, title: str = "") -> None:
    """Write a simulated step as Chrome trace-event JSON (podsim.engine.timeline) to a .json file."""
    from podsim.engine.timeline import build_timeline, timeline_json
    from podsim.files import write_text_atomic

    check_timeline_path(path)
    write_text_atomic(path, timeline_json(build_timeline(result, link_load=link_load, title=title)), make_parents=True,
                      what="--timeline")


def warn_inferred_shapes(metrics: dict) -> None:
    """One warning line on stderr when a replayed trace's slices were inferred from accelerator
    counts (and how many were rounded up to more chips): the run is not of the shapes asked for."""
    n = metrics.get("jobs_shape_inferred") or 0
    if not n:
        return
    up = metrics.get("jobs_rounded") or 0
    extra = metrics.get("rounded_extra_chip_h") or 0.0
    rounded = (f", {up} rounded up to a shape with more chips (+{extra:,.0f} chip-hours held beyond their counts)"
               if up else ", none rounded up")
    print(f"warning: {n} of {metrics.get('jobs_total', n)} trace jobs have no shape, so their accelerator counts were "
          f"mapped to {metrics.get('generation', 'the generation')}'s shapes{rounded}; a shape column replays exact shapes",
          file=sys.stderr)


def _budget_value(kind: str):
    def check(value: str | None):
        if value is None:
            return None
        from podsim.quantities import BUDGETS
        from podsim.units import parse_bytes

        flag = BUDGET_FLAGS[kind]
        try:
            number = parse_bytes(value) if kind == "input_bytes" else float(str(value).replace("_", "").replace(",", ""))
        except (PodsimError, ValueError):
            raise PodsimError(f"{flag} {value!r} is not a number" + (" of bytes (e.g. 512MiB)" if kind == "input_bytes" else "")) from None
        return BUDGETS[kind].check(number, flag)
    return check


def _budget_default(kind: str) -> str:
    value = getattr(Budget(), kind)
    return "the format's cap: 16 MiB YAML, 64 MiB JSON and text, 1 GiB CSV and Chakra" if value is None else f"{value:,}"


def with_budgets(*kinds: str) -> Callable:
    """Give a command the work-budget options of `kinds` (podsim.bounds.Budget fields: --max-ops,
    --max-flows, --max-requests, --max-events, --max-files, --max-input) and run it inside
    `budgets(...)`, so the library refuses work past a budget with the flag that raises it."""
    known = {f for f in Budget.__dataclass_fields__}
    assert set(kinds) <= known, kinds

    def deco(fn: Callable) -> Callable:
        sig = inspect.signature(fn, eval_str=True)
        extra = [inspect.Parameter(f"budget_{k}", inspect.Parameter.KEYWORD_ONLY, default=None,
                                   annotation=Annotated[str | None, typer.Option(
                                       BUDGET_FLAGS[k], metavar="N" if k != "input_bytes" else "SIZE",
                                       help=f"budget: at most this many {BUDGET_HELP[k]} (default {_budget_default(k)})",
                                       callback=_budget_value(k))])
                 for k in kinds]

        @functools.wraps(fn)
        def run(*args, **kwargs):
            given = {k: kwargs.pop(f"budget_{k}", None) for k in kinds}
            with budgets(**given):
                return fn(*args, **kwargs)

        run.__signature__ = sig.replace(parameters=[*sig.parameters.values(), *extra])
        run.__annotations__ = {p.name: p.annotation for p in run.__signature__.parameters.values()
                               if p.annotation is not inspect.Parameter.empty}
        del run.__wrapped__  # typer reads the signature above, not the wrapped function's
        return run

    return deco


def given_options(ctx) -> set[str]:
    """The parameters of the running command the user gave (command line or environment),
    as opposed to the defaults: what "an option that does not apply is refused" checks."""
    out = set()
    for name in ctx.params:
        source = ctx.get_parameter_source(name)
        if source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT"):
            out.add(name)
    return out


def _flag(ctx, name: str) -> str:
    for p in ctx.command.params:
        if p.name == name:
            longs = [o for o in (*p.opts, *p.secondary_opts) if o.startswith("--")]
            return longs[0] if longs else p.opts[0]
    return name


def refuse_options(ctx, names, why: str) -> None:
    """One line naming the first of `names` the user gave: it does not apply `why` (e.g. 'without
    --pods'), so it would be ignored; podsim refuses it instead."""
    hits = [n for n in names if n in given_options(ctx)]
    if hits:
        raise PodsimError(f"{_flag(ctx, hits[0])} does not apply {why}; drop it (an option podsim would ignore is refused)")
