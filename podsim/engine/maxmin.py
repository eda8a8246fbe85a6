"""Max-min fair rates of flows on shared links, by progressive filling, vectorised with numpy.

Every unfrozen flow's rate rises together; the link whose remaining capacity per unfrozen
crossing is smallest saturates first, freezing the flows that cross it at that level; repeat
until every flow is frozen. A flow that crosses a link k times uses k times its rate there.
"""

from __future__ import annotations

import numpy as np


def max_min_rates(entry_flow: np.ndarray, entry_link: np.ndarray, n_flows: int, capacity: np.ndarray) -> np.ndarray:
    """Rates (bytes/s) of `n_flows` flows; entry i says flow entry_flow[i] crosses link
    entry_link[i]. Flows that cross no link get an infinite rate."""
    rates = np.full(n_flows, np.inf)
    if len(entry_flow) == 0:
        return rates
    remaining = np.array(capacity, float)
    crossings = np.bincount(entry_link, minlength=len(remaining)).astype(float)
    ef, el = entry_flow, entry_link
    while True:
        share = remaining[el] / crossings[el]
        level = share.min()
        saturated = share <= level * (1 + 1e-9)
        hit = np.zeros(n_flows, bool)
        hit[ef[saturated]] = True
        rates[hit] = level
        gone = hit[ef]
        if gone.all():
            return rates
        np.subtract.at(remaining, el[gone], level)
        np.subtract.at(crossings, el[gone], 1.0)
        remaining[el[saturated]] = 0.0
        np.maximum(remaining, 0.0, out=remaining)
        ef, el = ef[~gone], el[~gone]
