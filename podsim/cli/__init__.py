"""The `podsim` command line. Each sub-command lives in its own module and registers itself on
`app`; all of them call library functions and hold no model logic.

Start-up stays fast because the root command is lazy: `COMMANDS` names each sub-command's
module and one-line summary, `podsim --help` lists them without importing any, and a module
(with the library it needs: ortools, simpy, duckdb, plotly, ...) is imported only when its
command runs or shows its own help (benchmarks/bench_startup.py measures it).

Bad input (a PodsimError or a usage error: an unknown command or option, with the closest
match, or a value that does not parse) prints one line and exits with code 2, and so does
a file-system error (one line naming the path); a failed
check of podsim's own output (InternalError) or any other exception is a bug: the traceback,
then "internal error, please report" with the details, and exit code 1
(PODSIM_TRACEBACK=1 re-raises it instead).
"""

from __future__ import annotations

import importlib
import os
import re
import signal
import sys
import threading
import traceback
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from difflib import get_close_matches

import typer
from typer.core import TyperCommand, TyperGroup

from podsim.errors import InternalError, PodsimError, PodsimWarning

# name -> (module that registers it on `app`, its one-line summary as `podsim --help` shows it).
# tests/test_cli.py checks each summary against the command's own docstring.
COMMANDS: dict[str, tuple[str, str]] = {
    "topology": ("podsim.cli.topology", "Summarise a pod or a slice: chips, hosts, cubes, OCS, links, bisection, all-reduce, diameter; with --pods, a fleet of pods on a DCN (and --sites, data centres joined by WAN links)."),
    "place": ("podsim.cli.place", "Place slice requests on a pod: which cubes or chips each gets, and its OCS circuits."),
    "steptime": ("podsim.cli.steptime", "Simulate a collective on a slice (simulated and closed-form time, algorithm and bus bandwidth), or a whole training step (--trace FILE or --model MODEL: step time and where it goes)."),
    "trace": ("podsim.cli.trace", "Step traces: generate from a model, import Chakra / ASTRA-sim, export Chakra, show."),
    "plan": ("podsim.cli.plan", "Search parallelism plans for a model on a chip budget (analytic ranking, engine-confirmed best); with --tokens, time, chips and cost to train."),
    "scaling": ("podsim.cli.scaling", "Weak-scaling study of a multislice job: step time, MFU, DCN/WAN time, parallel efficiency."),
    "serve": ("podsim.cli.serve", "Simulate a serving fleet (TTFT, TPOT, throughput, cost per million tokens) and find the fewest chips for a rate."),
    "cluster": ("podsim.cli.cluster", "Simulate a fleet: job arrivals, a queue policy, placement, failures and checkpoint restarts."),
    "run": ("podsim.cli.run", "Run a scenario: results tables, the results store, and an HTML capacity-planning report."),
    "sweep": ("podsim.cli.sweep", "Run a sweep on one machine or a Dask cluster, storing each point as it finishes."),
    "report": ("podsim.cli.report", "Compare stored runs side by side in one self-contained HTML report."),
    "sources": ("podsim.cli.sources", "Show what a source id says: the figure, its value and unit, where it comes from, links; without ID, list the ids."),
    "metrics": ("podsim.cli.metrics", "List the metrics runs report: name, unit, definition, and whether a target may name it."),
    "validate": ("podsim.cli.validate", "Check a scenario or sweep file: one line naming the file, line and field if it is wrong."),
    "demo": ("podsim.cli.demo", "Run the demo scenario end to end and say where its report is."),
    "dashboard": ("podsim.cli.dashboard", "Start the dashboard: topology, placement, step time, cluster and capacity-plan pages."),
}


class LazyGroup(TyperGroup):
    """The root command: lists every sub-command from COMMANDS without importing it; imports a
    sub-command's module (which registers it on `app`) when the command is looked up to run."""

    _listing = False  # True while the root's help is drawn: summaries, no imports

    def list_commands(self, ctx) -> list[str]:
        return [*COMMANDS, *(n for n in self.commands if n not in COMMANDS)]

    def get_command(self, ctx, cmd_name: str) -> TyperCommand | None:
        if cmd_name in self.commands or cmd_name not in COMMANDS:
            return self.commands.get(cmd_name)
        module, summary = COMMANDS[cmd_name]
        if self._listing:
            return TyperCommand(cmd_name, help=summary, short_help=summary)
        importlib.import_module(module)
        cmd = typer.main.get_group(app).commands[cmd_name]
        self.commands[cmd_name] = cmd
        return cmd

    def format_help(self, ctx, formatter) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def resolve_command(self, ctx, args: list[str]):
        name = args[0] if args else ""
        if name and not name.startswith("-") and name not in COMMANDS and name not in self.commands:
            near = get_close_matches(name, list(COMMANDS))
            ctx.fail(f"No such command {name!r}." + (" Did you mean " + ", ".join(map(repr, near)) + "?" if near else ""))
        return super().resolve_command(ctx, args)


# The click typer runs on (typer >= 0.22 vendors its own copy): its exceptions, for main().
click = sys.modules[typer.BadParameter.__module__]
_NoArgsIsHelp = getattr(click, "NoArgsIsHelpError", ())

app = typer.Typer(
    name="podsim",
    cls=LazyGroup,
    help="Simulate TPU-style accelerator pods: topology, placement, step time, cluster, capacity.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        print(f"podsim {_version()}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                       help="Print podsim's version and exit.")) -> None:
    """Simulate TPU-style accelerator pods: topology, placement, step time, cluster, capacity."""


def usage_line(exc: click.UsageError) -> str:
    """A click usage error (unknown command or option, a value that does not parse, a missing
    option) as one line: the command, the problem, the closest match click or podsim found,
    and where the help is."""
    ctx = exc.ctx
    where = ctx.command_path if ctx is not None else "podsim"
    text = " ".join(exc.format_message().split())
    if text.startswith("No such command") and "Did you mean" not in text and ctx is not None:
        name = text.split("'")[1] if text.count("'") >= 2 else ""
        near = get_close_matches(name, ctx.command.list_commands(ctx), n=1, cutoff=0.5)
        if near:
            text += f" Did you mean {near[0]!r}?"
    if isinstance(exc, click.NoSuchOption) and ctx is not None:
        text = re.sub(r"\s*\(Possible options: [^)]*\)", "", text)
        names = [o for p in ctx.command.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")]
        near = get_close_matches(exc.option_name, names, n=1, cutoff=0.5)
        if near and "Did you mean" not in text:
            text += f"; did you mean {near[0]}?"
    return f"error: {where}: {text} (see {where} --help)"


@contextmanager
def _sigterm_as_interrupt() -> Iterator[dict]:
    """While a command runs, SIGTERM is handled as Ctrl-C (KeyboardInterrupt in the main thread),
    so one path stops everything: staged outputs are removed, a sweep's worker pool is terminated
    and its stored points kept, the dashboard's server is killed. Restored afterwards."""
    seen: dict = {"signal": None}
    if threading.current_thread() is not threading.main_thread():
        yield seen
        return

    def handler(signum, frame):
        seen["signal"] = signum
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None) -> None:
    """Console entry point. A usage error (unknown command or option, a bad value) and a
    PodsimError from the library are one line on stderr and exit code 2; Ctrl-C is exit 130
    and SIGTERM exit 143 (each after stopping workers and removing partial outputs); an
    InternalError or any other exception is a bug: its traceback, one line asking for a
    report, and exit code 1. A PodsimWarning (a step podsim cannot fold, said before it runs)
    is one `warning:` line on stderr."""
    warnings.showwarning = _show_warning
    with _sigterm_as_interrupt() as seen:
        _run(argv, seen)


def _run(argv: list[str] | None, seen: dict) -> None:
    try:
        code = typer.main.get_group(app).main(args=argv, prog_name="podsim", standalone_mode=False)
    except _NoArgsIsHelp as exc:
        print(exc.format_message())
        sys.exit(2)
    except click.UsageError as exc:
        print(usage_line(exc), file=sys.stderr)
        sys.exit(2)
    except click.ClickException as exc:  # a click.BadParameter outside parsing, a FileError
        print(f"error: {' '.join(exc.format_message().split())}", file=sys.stderr)
        sys.exit(2)
    except typer.Abort:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except PodsimError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except OSError as exc:  # the file system refused (full disk, permissions) where no loader worded it
        where = f" {str(exc.filename)!r}" if exc.filename else ""
        print(f"error: file system error at{where}: {exc.strerror or exc}", file=sys.stderr)
        sys.exit(2)
    except Exception as exc:  # noqa: BLE001 - every other failure is podsim's bug, said as such
        if os.environ.get("PODSIM_TRACEBACK"):
            raise
        traceback.print_exc(file=sys.stderr)
        kind = "" if isinstance(exc, InternalError) else f"{type(exc).__name__}: "
        print(f"internal error, please report (podsim {_version()}): {kind}{exc}", file=sys.stderr)
        sys.exit(1)
    if isinstance(code, int) and code:  # typer.Exit(n) and Ctrl-C (130) in non-standalone mode
        if code == 130:  # Ctrl-C or SIGTERM: whatever was staged is gone, workers are stopped
            terminated = seen["signal"] == signal.SIGTERM
            print("terminated" if terminated else "interrupted", file=sys.stderr)
            sys.exit(143 if terminated else 130)
        sys.exit(code)


_SHOW_WARNING = warnings.showwarning


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    if issubclass(category, PodsimWarning):
        print(f"warning: {message}", file=sys.stderr, flush=True)
    else:
        _SHOW_WARNING(message, category, filename, lineno, file, line)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("podsim")
    except PackageNotFoundError:
        return "source checkout"
