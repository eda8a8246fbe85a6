"""What a scenario run returns: flat key figures, result tables, topology, cost, targets.

Tables are columns of equal length (numpy arrays or lists of str) with fixed names per table
(`TABLES`), so the results store and Parquet files have one schema per table whatever the run.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# table -> column -> kind ('f' float64, 'i' int64, 's' string, 'b' bool)
TABLES: dict[str, dict[str, str]] = {
    "timeseries": {
        "t_s": "f", "busy_chips": "f", "healthy_chips": "f", "queued_jobs": "f", "queued_chips": "f",
        "running_jobs": "f", "largest_placeable_chips": "f", "busy_chip_s": "f", "lost_chip_s": "f",
        "overhead_chip_s": "f", "utilisation": "f", "goodput_cumulative": "f", "fragmentation": "f",
    },
    "jobs": {
        "id": "s", "submit_s": "f", "shape": "s", "chips": "i", "priority": "i", "status": "s", "first_start_s": "f",
        "end_s": "f", "wait_s": "f", "nominal_s": "f", "runs": "i", "interruptions": "i", "preemptions": "i",
        "allocated_chip_s": "f", "useful_chip_s": "f", "lost_chip_s": "f", "overhead_chip_s": "f", "model": "s",
        "wait_shape_s": "f", "wait_resource_s": "f",  # appended: older stores gain them by ALTER TABLE
        "placement": "s", "slowdown": "f",
    },
    "step_times": {
        "model": "s", "shape": "s", "twisted": "b", "step_time_s": "f", "compute_s": "f", "exposed_comm_s": "f",
        "source": "s", "slices": "i", "sites": "i",  # appended: older stores gain them by ALTER TABLE
        "step_time_error": "f", "step_time_error_text": "s",  # the step's error band (podsim.validation.bands)
    },
    "step_ops": {
        "op": "s", "kind": "s", "start_s": "f", "end_s": "f", "bytes": "f", "algorithm": "s", "closed_form_s": "f",
    },
    "step_kinds": {
        "kind": "s", "ops": "i", "bytes": "f", "busy_s": "f", "closed_form_s": "f", "algorithms": "s",
        "op_s": "f",  # appended: the ops' summed durations (busy_s: in flight at all, overlaps once)
    },
    "spine_years": {
        "year": "i", "spine": "s", "link_gbps": "f", "host_gbps": "f", "spine_rebought": "b", "leaf_switches": "i",
        "spine_switches": "i", "ocs": "i", "uplink_ports": "i", "transceivers": "i", "fibre_strands": "i",
        "capex_leaf_usd": "f", "capex_spine_usd": "f", "capex_optics_usd": "f", "capex_fibre_usd": "f", "capex_usd": "f",
        "power_leaf_w": "f", "power_spine_w": "f", "power_optics_w": "f", "power_w": "f", "energy_kwh": "f",
        "energy_usd": "f", "cumulative_usd": "f", "uplink_bytes_per_s": "f", "step_time_s": "f", "compute_s": "f",
        "exposed_comm_s": "f", "dcn_collective_busy_s": "f", "dcn_algbw_bytes_per_s": "f", "useful_fraction": "f", "useful_chip_h": "f",
        "spine_usd_per_useful_chip_h": "f", "lifetime_spine_usd_per_useful_chip_h": "f", "usd_per_useful_chip_h": "f",
        "lifetime_usd_per_useful_chip_h": "f",
    },
    "spine_assumptions": {"name": "s", "value": "f", "unit": "s", "source": "s", "note": "s", "assumed": "b"},
    # the per-op model's constants a step read (podsim.engine.summary.compute_constants_rows): value, basis, source
    "compute_constants": {"name": "s", "value": "f", "basis": "s", "source": "s", "why": "s"},
    "replicates": {  # a replicated run (scenario `replicates: N`): every replicate's figures, long form
        "replicate": "i", "seed": "i", "metric": "s", "value": "f",
    },
    "scaling": {  # a scenario's scaling section (podsim.scenario.scaling.COLUMNS), one row per slice count
        "slices": "i", "chips": "i", "global_batch": "i", "step_time_s": "f", "mfu": "f", "parallel_efficiency": "f",
        "compute_s": "f", "exposed_comm_s": "f", "ici_exposed_s": "f", "dcn_busy_s": "f", "dcn_exposed_s": "f",
        "wan_busy_s": "f", "wan_exposed_s": "f", "dcn_tail_s": "f", "straggler_wait_s": "f", "ecmp_collision_s": "f",
        "multislice_added_s": "f", "engine_wall_s": "f", "step_time_error": "f", "step_time_error_text": "s",
    },
    "plan": {  # a scenario's plan section (podsim.plan.result.PLAN_COLUMNS): one row per confirmed plan, best first
        "rank": "i", "plan": "s", "slices": "i", "slice": "s", "parallelism": "s", "microbatches": "i", "recompute": "s",
        "sequence_parallel": "b", "collective_matmul": "s", "step_time_s": "f", "estimate_s": "f", "estimate_error": "f",
        "mfu": "f", "hbm_bytes_per_chip": "f", "tokens_per_s": "f", "engine_wall_s": "f", "why": "s",
        "hfu": "f",  # appended (a store inserts by position; an older store gains it by ALTER at the end)
    },
    "scaling_tiers": {  # the same study per DCN tier (podsim.study.scaling.TIER_COLUMNS), a row per slice count and tier
        "slices": "i", "tier": "s", "busy_s": "f", "exposed_s": "f", "link_busy_s": "f", "ecmp_collision_s": "f",
    },
}
# serving fleets (podsim.serving): per request, per time bin, per capacity probe
TABLES.update({
    "serving_requests": {"arrival_s": "f", "prompt_tokens": "i", "output_tokens": "i", "ttft_s": "f", "tpot_s": "f",
                         "e2e_s": "f", "replica": "i", "preemptions": "i", "met_slo": "b", "counted": "b", "rejected": "b"},
    "serving_timeseries": {"t_s": "f", "tokens_per_s": "f", "running_seqs": "f", "kv_used_fraction": "f", "busy_fraction": "f"},
    "serving_capacity": {"slice": "s", "replicas": "i", "chips": "i", "met": "b", "why": "s",
                         **{f"{m}_{p}": "f" for m in ("ttft_p99", "tpot_p99", "cost_per_million_tokens_usd", "slo_attainment")
                            for p in ("mean", "low", "high")}},
})
_DTYPE = {"f": np.float64, "i": np.int64, "b": np.bool_}


def normalise_table(name: str, columns: dict[str, Any]) -> dict[str, np.ndarray]:
    """The table with exactly TABLES[name]'s columns in order (missing float columns NaN)."""
    spec = TABLES[name]
    n = max((len(v) for v in columns.values()), default=0)
    out: dict[str, np.ndarray] = {}
    for col, kind in spec.items():
        v = columns.get(col)
        if v is None:
            if kind != "f" and n:
                raise ValueError(f"table {name}: column {col} missing")
            out[col] = np.full(n, np.nan) if kind == "f" else np.array([], dtype=_DTYPE.get(kind, object))
        elif kind == "s":
            out[col] = np.array(["" if x is None else str(x) for x in v], dtype=object)
        else:
            out[col] = np.asarray(v, dtype=_DTYPE[kind])
        if len(out[col]) != n:
            raise ValueError(f"table {name}: column {col} has {len(out[col])} rows, expected {n}")
    return out


def scenario_hash(scenario: dict) -> str:
    """Stable hash of a scenario's content (sorted JSON)."""
    return hashlib.sha256(json.dumps(scenario, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass(frozen=True, eq=False)
class RunResult:
    """One scenario run.

    kind: 'cluster' (a job stream on a fleet) or 'step' (one job's training step).
    metrics: flat key figures (the cluster's or the engine's, plus cost and energy).
    topology: the pod's figures (podsim.topology.topology_summary) and the fleet's size.
    cost: chip-hours, price per chip-hour and its source, cost, power and its source, energy.
    targets: one dict per target: metric, op, threshold, value, met.
    references: published figures set beside results: metric, value, podsim, ratio, source.
    tables: see TABLES.
    intervals: a replicated run's (`replicates` > 1) metric -> podsim.stats.Interval as a dict
      (mean, low, high, n, sd, confidence); its `metrics` then hold the means.
    """

    name: str
    kind: str
    scenario: dict
    metrics: dict
    topology: dict
    cost: dict
    targets: tuple[dict, ...] = ()
    references: tuple[dict, ...] = ()
    tables: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    wall_s: float = 0.0
    run_id: str = ""
    intervals: dict[str, dict] = field(default_factory=dict)

    @property
    def replicates(self) -> int:
        """Independent repeats behind the figures (1: one seed)."""
        return int(self.metrics.get("replicates") or 1)

    def interval(self, metric: str):
        """The metric's Interval over the replicates, or None for a one-seed run."""
        from podsim.stats import Interval

        d = self.intervals.get(metric)
        return Interval.from_dict(d) if d is not None else None

    @property
    def scenario_hash(self) -> str:
        return scenario_hash(self.scenario)

    @property
    def targets_met(self) -> bool | None:
        """All targets met (None when the scenario sets none)."""
        return all(t["met"] for t in self.targets) if self.targets else None

    def table(self, name: str) -> dict[str, np.ndarray]:
        table = self.tables.get(name)
        return table if table is not None else normalise_table(name, {})

    def summary(self, tables: tuple[str, ...] = ()) -> dict:
        """Key figures as one JSON-ready dict (the CLI's --json, the store's row); `tables`:
        these tables too, as lists per column, under "tables"."""
        out = {"run_id": self.run_id, "name": self.name, "kind": self.kind, "metrics": _clean(self.metrics),
                "cost": _clean(self.cost), "targets": [_clean(t) for t in self.targets],
                "targets_met": self.targets_met, "references": [_clean(r) for r in self.references],
                "scenario_hash": self.scenario_hash, "wall_s": self.wall_s}
        if self.intervals:
            out["replicates"] = self.replicates
            out["intervals"] = _clean(self.intervals)
        if tables:
            out["tables"] = {t: {c: _clean(v.tolist()) for c, v in self.table(t).items()} for t in tables}
        return out


def _clean(x: Any) -> Any:
    """JSON-ready: numpy scalars to Python, NaN and inf to None."""
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x
