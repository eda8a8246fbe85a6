"""Test helpers: the shared data folder from any worktree, and the CLI run in-process."""

from pathlib import Path
from typing import NamedTuple

from podsim.cli import main


def shared_data(*parts: str) -> Path:
    """The path under the nearest ancestor's `shared/data/` (the project may sit in a worktree
    one level deeper than the main checkout); the first candidate if none exists."""
    here = Path(__file__).resolve().parent
    candidates = [p / "shared" / "data" / Path(*parts) for p in here.parents]
    return next((c for c in candidates if c.exists()), candidates[1])


class CliRun(NamedTuple):
    code: int
    out: str
    err: str


def run_podsim(capsys, *args: str) -> CliRun:
    """Run the CLI in-process (the console script's entry point): exit code, stdout, stderr.
    The one CLI runner of the tests; a subprocess only where the process itself is tested."""
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return CliRun(code, out.out, out.err)
