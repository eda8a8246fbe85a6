"""Build full pods with their compiled link arrays and print wall times.

Target (issue 2): the full v5p pod (8960 chips) with compiled arrays in under 2 s on 2 cores;
the script exits 1 when it is missed.
Run: .venv/bin/python benchmarks/bench_topology.py
"""

from __future__ import annotations

import statistics
import sys
import time

from podsim.topology import PodLayout, get_generation
from podsim.topology.fabric import build_fabric
from podsim.topology.metrics import slice_figures
from podsim.topology.slices import plan_slice, slice_view
from podsim.topology.summary import pod_spec


def build(gen_id: str):
    gen = get_generation(gen_id)
    layout = PodLayout(gen)
    fabric = build_fabric(layout, circuits="torus")
    view = slice_view(fabric, plan_slice(layout, pod_spec(gen)))
    return fabric, view


def timed(fn, repeat: int = 5) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> int:
    ok = True
    print(f"{'generation':10} {'chips':>6} {'links':>7} {'arrays s':>9} {'figures s':>10} {'networkx s':>11}")
    for gen_id in ("tpu-v4", "tpu-v5p", "tpu-7x"):
        t_arrays, (fabric, view) = timed(lambda g=gen_id: build(g))
        t_fig, _ = timed(lambda v=view: slice_figures(v), repeat=3)
        t_nx, graph = timed(lambda f=fabric: f.to_networkx(), repeat=1)
        ok &= gen_id != "tpu-v5p" or t_arrays < 2.0
        print(f"{gen_id:10} {fabric.n_chips:>6} {fabric.n_links:>7} {t_arrays:>9.3f} {t_fig:>10.3f} {t_nx:>11.3f}")
    print(f"target: tpu-v5p compiled arrays < 2 s (median of 5 builds, fresh layout each time): {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
