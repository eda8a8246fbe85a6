"""Scenarios: one YAML file says what to simulate (fleet, network, workload, failures, policy,
step-time model, horizon, seed) and what counts as good enough (targets).

    from podsim.scenario import load_scenario, run_scenario
    s = load_scenario("scenarios/demo.yaml")      # one-line errors with file, line and field
    r = run_scenario(s, on_progress=None)          # RunResult; no output files
    r.metrics["goodput"], r.targets_met, r.cost["cost_usd"], r.tables["timeseries"]

Modules: schema (the pydantic models), fields (units: durations, rates, fractions, targets),
check (rules across fields), load (YAML with line numbers), run (run_scenario), steptime
(roofline or engine step times per shape), result (RunResult and its tables), spine and
scaling (the studies a scenario's `spine` and `scaling` sections ask for).
"""

from typing import TYPE_CHECKING

from podsim._lazy import lazy_face

if TYPE_CHECKING:  # the face's names, each imported on first use (podsim._lazy: start-up)
    from podsim.scenario.load import load_scenario, load_scenario_text
    from podsim.scenario.result import RunResult
    from podsim.scenario.run import run_scenario
    from podsim.scenario.schema import Scenario

__all__ = ["RunResult", "Scenario", "load_scenario", "load_scenario_text", "run_scenario"]

lazy_face(__name__)
