"""Bounds of products of the numbers podsim reads, and the work budgets a run is held to.

The ranges of single numbers are stated once, in `podsim.quantities` (`Quantity.check`,
`.option`, `.type`). This module adds the bounds of a product (a fleet's chips, a time
series' samples) and the **work budgets**: work whose size is known before it starts (ops of
a trace, flows of a pattern, requests of a batch, failure events over a horizon, files of an
export, bytes of an input) is checked against a budget first, and refused with the
estimate and the flag that raises it. The CLI sets the budget from `--max-ops`, `--max-flows`,
`--max-requests`, `--max-events`, `--max-files` and `--max-input` (podsim.cli.common); library
callers use `with budgets(ops=10**6): ...`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, fields, replace
from typing import Any

from podsim.errors import PodsimError
from podsim.quantities import MAX_FLEET_CHIPS, MAX_SAMPLES


def check_fleet(pods: int, chips_per_pod: int, name: str = "pods") -> None:
    """Refuse a fleet too large to hold in memory, with its chip count."""
    chips = pods * chips_per_pod
    if chips > MAX_FLEET_CHIPS:
        raise PodsimError(f"{name} {pods:,} x {chips_per_pod:,} chips = {chips:,} chips; podsim simulates fleets of at most "
                          f"{MAX_FLEET_CHIPS:,} chips (state arrays per chip and link)")


def check_samples(horizon_s: float, sample_s: float, name: str = "sample interval") -> None:
    """Refuse a time series with more than MAX_SAMPLES points, with the estimate."""
    n = horizon_s / sample_s
    if n > MAX_SAMPLES:
        raise PodsimError(f"{name} {sample_s:g} s over a {horizon_s:g} s horizon is {n:.3g} samples; at most "
                          f"{MAX_SAMPLES:,} (each samples every pod): use a longer interval")


# Work budgets ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Budget:
    """How much work one command may start (each default is ~20x the largest shipped case and
    bounds a run to about a minute and a few GB on one core)."""

    ops: int = 100_000  # ops of one step trace: ~0.15 ms of engine time each; a GPT-3 step has ~4,400
    flows: int = 2_000_000  # flows one pattern routes at once: each keeps its route's links in memory
    requests: int = 10_000  # requests of one placement batch: ~8 s for CP-SAT's model
    events: int = 5_000_000  # failure events drawn over a horizon: ~200 B and a scheduler pass each
    files: int = 65_536  # files one export writes (one per rank: 16 v4 pods)
    input_bytes: int | None = None  # bytes of one input file; None: the per-format caps of podsim.files


BUDGET_FLAGS = {"ops": "--max-ops", "flows": "--max-flows", "requests": "--max-requests", "events": "--max-events",
                "files": "--max-files", "input_bytes": "--max-input"}
BUDGET_HELP = {
    "ops": "ops of one step trace",
    "flows": "flows one collective pattern routes at once",
    "requests": "slice requests of one placement batch",
    "events": "failure events drawn over the horizon",
    "files": "files one export writes",
    "input_bytes": "bytes of one input file (a size, e.g. 512MiB)",
}
BUDGET_UNITS = {"ops": "ops", "flows": "flows", "requests": "requests", "events": "events", "files": "files",
                "input_bytes": "bytes"}
_DEFAULT_BUDGET = Budget()
_BUDGET: ContextVar[Budget] = ContextVar("podsim_budget", default=_DEFAULT_BUDGET)  # noqa: B039 - Budget is frozen


def budget() -> Budget:
    """The budget in force (the defaults unless a `budgets` block or a CLI flag raised it)."""
    return _BUDGET.get()


@contextmanager
def budgets(**changes: Any) -> Iterator[Budget]:
    """Run a block with some budgets changed: `with budgets(ops=10**6): simulate_step(...)`."""
    unknown = set(changes) - {f.name for f in fields(Budget)}
    if unknown:
        raise PodsimError(f"unknown budget {sorted(unknown)[0]!r}; budgets: {', '.join(f.name for f in fields(Budget))}")
    token = _BUDGET.set(replace(_BUDGET.get(), **{k: v for k, v in changes.items() if v is not None}))
    try:
        yield _BUDGET.get()
    finally:
        _BUDGET.reset(token)


def check_budget(kind: str, estimate: float, what: str, why: str = "") -> None:
    """Refuse work of `estimate` units of budget `kind` before it starts, with the estimate,
    the budget and the flag that raises it."""
    limit = getattr(budget(), kind)
    if limit is not None and estimate > limit:
        shown = f"{estimate:,.0f}" if estimate < 1e15 else f"{estimate:.3g}"
        unit = BUDGET_UNITS[kind]
        raise PodsimError(f"{what}: {shown} {unit}, over the budget of {limit:,} {BUDGET_HELP[kind]}"
                          f"{' (' + why + ')' if why else ''}; raise it with {BUDGET_FLAGS[kind]} N")
