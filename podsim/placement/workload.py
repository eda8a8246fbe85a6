"""Seeded request draws from a slice mix (benchmarks, examples, tests).

The default mix is the TPU v4 paper's slice popularity table, kept once in
`podsim.workload.popularity` ([ISCA23] Table 2, reference rows slc.4-slc.7); its rows sum to
97.5% and draws renormalise them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from podsim.placement.requests import SliceRequest
from podsim.topology import get_generation
from podsim.workload.popularity import V4_SLICE_POPULARITY, SliceMix


def draw_requests(rng: np.random.Generator, n: int, table: Mapping[str, float] = V4_SLICE_POPULARITY,
                  priorities: Sequence[float] = (0.7, 0.2, 0.1), window_s: float = 0.0,
                  prefix: str = "job", generation: str = "tpu-v4") -> list[SliceRequest]:
    """`n` requests with shapes drawn from `table` ('AxBxC[_T|_NT]' -> share, checked against
    `generation`), priorities 0, 1, 2, ... with the given probabilities, and arrival times
    uniform over the `window_s` seconds before time 0."""
    shapes = SliceMix.from_table(get_generation(generation), dict(table)).sample(rng, n)
    prio = rng.choice(len(priorities), size=n, p=np.asarray(priorities) / np.sum(priorities))
    arrival = -rng.uniform(0.0, window_s, size=n) if window_s > 0 else np.zeros(n)
    return [SliceRequest(f"{prefix}-{k}", shape, twisted, int(prio[k]), float(arrival[k]))
            for k, (shape, twisted) in enumerate(shapes)]
