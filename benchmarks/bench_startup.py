"""Start-up time of the command line: `podsim --help`, `podsim topology tpu-v4 --json` and a
64-chip 1 MiB all-reduce (`podsim steptime`), each run as a fresh process (`python -m podsim
...`, as the console script does).

Targets (issue 23): --help <= 0.3 s, topology <= 0.4 s, the all-reduce <= 0.4 s. The machine is
shared, so a run's wall time includes waiting for a core; the verdict uses the fastest of N
runs (the least disturbed), and the median and the CPU time (user + sys) are printed beside it,
with the heavy libraries each command imports. Exits 1 when a command misses its target.
Run: .venv/bin/python benchmarks/bench_startup.py [N]
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = (  # (arguments, target s)
    (("--help",), 0.3),
    (("topology", "tpu-v4", "--json"), 0.4),
    (("steptime", "--generation", "tpu-v4", "--slice", "4x4x4", "--collective", "all_reduce", "--bytes", "1MiB"), 0.4),
)
HEAVY = ("ortools", "simpy", "duckdb", "plotly", "streamlit", "pyarrow", "dask", "pandas", "networkx", "scipy", "numpy.ma")
ROOT = Path(__file__).resolve().parents[1]


def once(args: tuple[str, ...]) -> tuple[float, float]:
    """(wall s, CPU s) of one `python -m podsim ARGS` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "podsim", *args], check=True, stdout=subprocess.DEVNULL, env=_env())
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def heavy_imports(args: tuple[str, ...]) -> list[str]:
    """The heavy libraries a command loads (none of them should be needed to start)."""
    code = ("import sys\nfrom podsim.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True, env=_env())
    return r.stderr.split()


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    # Bytecode as an installed podsim has it (pip compiles at install; here PYTHONDONTWRITEBYTECODE
    # may be set, and then every run would compile every module it imports), then warm the file cache.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "podsim")], check=True, stdout=subprocess.DEVNULL)
    once(("--help",))
    ok = True
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'command':42} {'target':>6} {'min s':>6} {'median s':>9} {'CPU s':>6}  heavy imports ({n} runs each)")
    for args, target in COMMANDS:
        runs = [once(args) for _ in range(n)]
        walls, cpus = [w for w, _ in runs], [c for _, c in runs]
        best = min(walls)
        ok &= best <= target
        heavy = heavy_imports(args)
        name = "podsim " + " ".join(args)
        name = name if len(name) <= 42 else name[:39] + "..."
        print(f"{name:42} {target:>6.2f} {best:>6.3f} {statistics.median(walls):>9.3f} "
              f"{statistics.median(cpus):>6.3f}  {', '.join(heavy) or 'none'}")
    print(f"targets (fastest of {n}; the machine may be shared): {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
