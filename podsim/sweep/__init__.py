"""Sweeps: one base scenario run at many points (a grid, a list, replicates with their own
seeds) or bisected for the smallest fleet that meets its targets; serial, in a process pool
or on Dask; every point stored in the results store as soon as it finishes.

    from podsim.sweep import load_sweep, open_executor, run_sweep
    sweep = load_sweep("scenarios/a_ocs_vs_static.yaml")
    with open_executor("dask", workers=2) as handle:          # or "serial", "process"; address=...
        outcome = run_sweep(sweep, handle, "out/a/results.duckdb", resume=True)
"""

from typing import TYPE_CHECKING

from podsim._lazy import lazy_face

if TYPE_CHECKING:  # the face's names, each imported on first use (podsim._lazy: start-up)
    from podsim.sweep.executors import open_executor
    from podsim.sweep.run import answer_text, probe_text, run_sweep
    from podsim.sweep.spec import load_sweep

__all__ = ["answer_text", "load_sweep", "open_executor", "probe_text", "run_sweep"]

lazy_face(__name__)
