"""The `podsim` command line. Each sub-command lives in its own module and registers itself on
`app`; all of them call library functions and hold no model logic.

Bad input (a PodsimError or a usage error) prints one line and exits with code 2; a file-system
error is one line naming the path (exit 2); anything else is a bug: one "internal error" line
with the details, exit 1 (PODSIM_TRACEBACK=1 re-raises it).
"""

from __future__ import annotations

import os
import sys

import typer

from podsim.errors import PodsimError

app = typer.Typer(
    name="podsim",
    help="Simulate TPU-style accelerator pods: topology, placement, step time, cluster, capacity.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Sub-command modules register on `app` when imported.
from podsim.cli import (  # noqa: E402,F401
    cluster,
    dashboard,
    demo,
    place,
    report,
    run,
    steptime,
    sweep,
    topology,
    trace,
    validate,
)


def main(argv: list[str] | None = None) -> None:
    """Console entry point. Typer reports usage errors itself (exit 2); a PodsimError from the
    library becomes one line on stderr and exit code 2."""
    try:
        app(args=argv, prog_name="podsim")
    except PodsimError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except OSError as exc:  # the file system refused (full disk, permissions) where no loader worded it
        where = f" {str(exc.filename)!r}" if exc.filename else ""
        print(f"error: file system error at{where}: {exc.strerror or exc}", file=sys.stderr)
        sys.exit(2)
    except Exception as exc:  # a bug in podsim: say so, with the details for a report
        if os.environ.get("PODSIM_TRACEBACK"):
            raise
        text = " ".join(f"{type(exc).__name__}: {exc}".split())
        print(f"internal error (a bug in podsim; PODSIM_TRACEBACK=1 shows where): {text}", file=sys.stderr)
        sys.exit(1)
