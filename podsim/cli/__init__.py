"""The `podsim` command line. Each sub-command lives in its own module and registers itself on
`app`; all of them call library functions and hold no model logic.

Bad input (a PodsimError or a usage error) prints one line and exits with code 2.
"""

from __future__ import annotations

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
    scaling,
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
