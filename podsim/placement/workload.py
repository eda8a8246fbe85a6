"""Published slice-request mixes, and seeded draws from them (benchmarks, examples, tests).

`V4_SLICE_POPULARITY` is the TPU v4 paper's slice popularity table: share of slices by shape
over one day in Nov 2022, slices of at least 0.1% ([ISCA23] Table 2, reference rows slc.4-slc.7;
`_T` twisted, `_NT` not twisted). The listed rows sum to 97.5%; draws renormalise them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from podsim.placement.requests import SliceRequest

# (shape, twisted, percent of slices, reference row)
V4_SLICE_POPULARITY: tuple[tuple[str, bool, float, str], ...] = (
    ("1x1x1", False, 2.1, "slc.4"), ("1x1x2", False, 0.4, "slc.4"), ("1x2x2", False, 6.7, "slc.4"),
    ("2x2x2", False, 4.7, "slc.4"), ("2x2x4", False, 6.4, "slc.4"), ("2x4x4", False, 8.9, "slc.4"),
    ("4x4x4", False, 13.9, "slc.5"), ("4x4x8", True, 16.0, "slc.5"), ("4x4x8", False, 1.5, "slc.5"),
    ("4x4x12", False, 0.7, "slc.5"), ("4x8x8", True, 9.2, "slc.5"), ("4x8x8", False, 1.5, "slc.5"),
    ("4x4x16", False, 1.0, "slc.5"), ("4x8x12", False, 0.1, "slc.5"),
    ("8x8x8", False, 9.6, "slc.6"), ("4x8x16", False, 1.7, "slc.6"), ("4x4x32", False, 0.6, "slc.6"),
    ("8x8x12", False, 0.7, "slc.6"), ("8x8x16", True, 1.8, "slc.6"), ("8x8x16", False, 1.4, "slc.6"),
    ("4x16x16", False, 0.3, "slc.6"), ("4x4x64", False, 0.1, "slc.6"), ("4x8x32", False, 0.1, "slc.6"),
    ("8x12x16", False, 0.1, "slc.6"), ("4x4x96", False, 0.1, "slc.6"), ("8x8x24", False, 0.1, "slc.6"),
    ("8x16x16", True, 1.4, "slc.7"), ("8x16x16", False, 0.3, "slc.7"), ("12x16x16", False, 5.7, "slc.7"),
    ("4x4x192", False, 0.4, "slc.7"),
)


def draw_requests(rng: np.random.Generator, n: int,
                  table: Sequence[tuple[str, bool, float, str]] = V4_SLICE_POPULARITY,
                  priorities: Sequence[float] = (0.7, 0.2, 0.1), window_s: float = 0.0,
                  prefix: str = "job") -> list[SliceRequest]:
    """`n` requests with shapes drawn by popularity, priorities 0, 1, 2, ... with the given
    probabilities, and arrival times uniform over the `window_s` seconds before time 0."""
    share = np.array([row[2] for row in table], float)
    rows = rng.choice(len(table), size=n, p=share / share.sum())
    prio = rng.choice(len(priorities), size=n, p=np.asarray(priorities) / np.sum(priorities))
    arrival = -rng.uniform(0.0, window_s, size=n) if window_s > 0 else np.zeros(n)
    return [SliceRequest(f"{prefix}-{k}", table[r][0], table[r][1], int(prio[k]), float(arrival[k]))
            for k, r in enumerate(rows)]
