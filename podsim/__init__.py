"""podsim: a simulator of TPU-style accelerator pod networks.

Topology (torus + OCS + DCN), slice placement, step-time engine, cluster simulation and
capacity planning. See README.md for a tour, docs/ for each area and DESIGN.md for the
architecture.

The front door: the entry points a user needs, each documented with a working example
(numpydoc; `help(podsim.place)`):

- a fabric: `get_generation`, `build_slice`, `simulate_collective`
- placement: `PodState`, `SliceRequest`, `place`
- a step: `generate_trace`, `load_trace`, `StepStudy`, `run_study`
- a scenario and its report: `load_scenario`, `run_scenario`, `render_report`

Each name loads its package on first use, so `import podsim` costs nothing; everything else is
in the packages (podsim.topology, podsim.placement, podsim.trace, podsim.engine, podsim.study,
podsim.cluster, podsim.scenario, podsim.sweep, podsim.store, podsim.report, ...).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_HOMES = {
    "get_generation": "podsim.topology", "build_slice": "podsim.topology", "simulate_collective": "podsim.engine",
    "PodState": "podsim.placement", "SliceRequest": "podsim.placement", "place": "podsim.placement",
    "generate_trace": "podsim.trace", "load_trace": "podsim.trace", "StepStudy": "podsim.study", "run_study": "podsim.study",
    "load_scenario": "podsim.scenario", "run_scenario": "podsim.scenario", "render_report": "podsim.report",
}
__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'podsim' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # loaded once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
