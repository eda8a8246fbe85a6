"""The report's placement-modes section: for the job streams that reshape (solver.fold allowed)
or allocate non-contiguously (placement hilbert), and the exact-shape runs beside them, one row
per run of what the mode bought (utilisation, p95 job completion time, the wait split, jobs
placed) and what it cost the jobs it reshaped (the slowdown charged per placement class)."""

from __future__ import annotations

from collections.abc import Sequence

from podsim.scenario.result import RunResult
from podsim.units import format_duration as sec
from podsim.units import format_percent as pct
from podsim.units import is_missing as missing

HEADER = ("run", "fleet", "placement", "utilisation", "JCT p95", "wait for shape / for resource (mean)",
          "completed / never placeable", "runs folded / split / scattered",
          "slowdown charged: fold / split / scatter (mean)", "largest charged")
CLASSES = ("fold", "split", "scatter")


def placement_mode(r: RunResult) -> str:
    """How the run places: exact shapes (best or first fit), fold and split allowed, or Hilbert."""
    solver = r.scenario.get("solver") or {}
    if solver.get("placement") == "hilbert":
        return "Hilbert curve (any free chips)"
    fit = f"{solver.get('placement', 'best')} fit"
    return f"fold and split allowed, {fit}" if solver.get("fold") == "allowed" else f"exact shapes, {fit}"


def reshapes(r: RunResult) -> bool:
    solver = r.scenario.get("solver") or {}
    return r.kind == "cluster" and (solver.get("fold") == "allowed" or solver.get("placement") == "hilbert")


def _ratio(v) -> str:
    return "-" if missing(v) else f"{v:.4f}x"


def reshape_row(label: str, r: RunResult) -> list[str]:
    m = r.metrics
    fleet = f"{m['pods']} x {m['generation']} ({'OCS' if m['ocs'] else 'static'})"
    return [label, fleet, placement_mode(r), pct(m.get("utilisation")), sec(m.get("jct_p95_s")),
            f"{sec(m.get('wait_shape_mean_s'))} / {sec(m.get('wait_resource_mean_s'))}",
            f"{m['jobs_completed']:,} / {m['jobs_unplaceable']:,}",
            " / ".join(f"{int(m.get(f'runs_{c}', 0)):,}" for c in CLASSES),
            " / ".join(_ratio(m.get(f"slowdown_{c}_mean")) for c in CLASSES), _ratio(m.get("slowdown_charged_max"))]


def pricing_text(r: RunResult) -> str:
    """What priced the non-native placements of the run's jobs given in time."""
    solver = r.scenario.get("solver") or {}
    st = r.scenario.get("step_time") or {}
    model = solver.get("slowdown_model")
    if r.metrics.get("runs_slowdown_not_charged"):
        return (f"not charged for {int(r.metrics['runs_slowdown_not_charged']):,} runs: jobs given in time with no "
                "slowdown_model ran at factor 1")
    if not model:
        return "jobs given in steps: their own model on the engine"
    plan = (st.get("parallelism") or {}).get(model, "the preset's plan")
    over = solver.get("slowdown_overrides") or {}
    extra = f", {', '.join(f'{k}={v}' for k, v in over.items())}" if over else ""
    return f"{model} ({plan}{extra}) on the engine"


def reshape_details(runs: Sequence[RunResult], labels: Sequence[str]) -> dict | None:
    """The section's header, one row per job-stream run, and how each was priced; None unless a
    run reshapes or scatters."""
    if not any(reshapes(r) for r in runs):
        return None
    pairs = [(label, r) for label, r in zip(labels, runs, strict=True) if r.kind == "cluster"]
    pricing = sorted({pricing_text(r) for _, r in pairs if reshapes(r)})
    return {"header": list(HEADER), "rows": [reshape_row(label, r) for label, r in pairs], "pricing": pricing}
