"""A non-contiguous baseline: Hilbert-curve allocation on statically wired pods, as clusters
without OCS do (Slurm's topology-aware selection orders nodes along a Hilbert curve; RFold's
`slurm_hilbert` policy, arXiv 2510.03891): a job takes any N free chips, the N consecutive free
chips along the curve with the shortest curve span. Its slice is `scatter`: no links of its own,
its flows routed over the pod's torus (podsim.topology.routing), so the step time the engine
charges it is that of its actual routes.

The curve is Skilling's d-dimensional Hilbert index ("Programming the Hilbert curve", AIP Conf.
Proc. 707, 2004) over a 2^k cube holding the pod, chips ordered by it.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from podsim.placement.space import Assignment, FreeSpace
from podsim.topology.shapes import asked_spec


def hilbert_index(coords: np.ndarray, bits: int) -> np.ndarray:
    """Hilbert-curve index of each (n, d) integer coordinate in [0, 2^bits): Skilling's
    axes-to-transpose followed by interleaving the transposed bits."""
    x = np.array(coords, dtype=np.int64).T.copy()  # (d, n)
    d = x.shape[0]
    m = 1 << (bits - 1)
    q = m
    while q > 1:  # inverse undo
        p = q - 1
        for i in range(d):
            hi = (x[i] & q) != 0
            x[0] = np.where(hi, x[0] ^ p, x[0])
            t = np.where(hi, 0, (x[0] ^ x[i]) & p)
            x[0] ^= t
            x[i] ^= t
        q >>= 1
    for i in range(1, d):  # Gray encode
        x[i] ^= x[i - 1]
    t = np.zeros_like(x[0])
    q = m
    while q > 1:
        t = np.where((x[d - 1] & q) != 0, t ^ (q - 1), t)
        q >>= 1
    x ^= t
    out = np.zeros(x.shape[1], dtype=np.int64)
    for b in range(bits - 1, -1, -1):
        for i in range(d):
            out = (out << 1) | ((x[i] >> b) & 1)
    return out


@cache
def _order(pod_shape: tuple[int, ...]) -> np.ndarray:
    """Local (row-major) chip indices of a pod in Hilbert order."""
    bits = max(1, math.ceil(math.log2(max(pod_shape))))
    coords = np.stack(np.unravel_index(np.arange(math.prod(pod_shape)), pod_shape), axis=1)
    order = np.argsort(hilbert_index(coords, bits), kind="stable")
    order.setflags(write=False)
    return order


def rank_hilbert(space: FreeSpace, req):
    """The N free chips with the shortest Hilbert span in any pod (a tie: the first pod, the
    earliest start), as a `scatter` assignment, with its rank (podsim.placement.greedy.Ranked):
    the span; None when no pod has N free chips."""
    lay = space.layout
    gen = lay.generation
    n = req.chips
    local_order = _order(gen.pod_shape)  # row-major local index
    best = None
    for pod in range(lay.pods):
        chips = lay.chip_at[pod].ravel()[local_order]  # chip ids along the curve
        free = np.flatnonzero(space.chip_free[chips])
        if len(free) < n:
            continue
        span = free[n - 1:] - free[:len(free) - n + 1]
        k = int(np.argmin(span))
        if best is None or span[k] < best[0]:
            best = (int(span[k]), pod, chips[free[k:k + n]])
    if best is None:
        return None
    span, pod, chips = best
    spec = asked_spec(gen, req.shape, False, lay.ocs)
    cubes = tuple(int(c) for c in dict.fromkeys(lay.cube_of_chip[chips].tolist())) if lay.has_cubes else ()
    return (span,), pod, (), Assignment("reshaped", spec.shape, pod, cubes, None, form="scatter",
                                        detail=(tuple(int(c) for c in chips), (), spec))
