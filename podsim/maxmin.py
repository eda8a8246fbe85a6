"""Max-min fair rates of flows on shared links, by progressive filling, vectorised with numpy.

Every unfrozen flow's rate rises together; the link whose remaining capacity per unfrozen
crossing is smallest saturates first, freezing the flows that cross it at that level; repeat
until every flow is frozen. A flow that crosses a link k times uses k times its rate there;
a multipath flow that puts a fraction w of its bytes on a link uses w times its rate there
(`entry_weight`), so its crossings count w.
"""

from __future__ import annotations

import numpy as np


def max_min_rates(entry_flow: np.ndarray, entry_link: np.ndarray, n_flows: int, capacity: np.ndarray,
                  entry_weight: np.ndarray | None = None) -> np.ndarray:
    """Rates (bytes/s) of `n_flows` flows; entry i says flow entry_flow[i] crosses link
    entry_link[i] (with weight entry_weight[i], default 1). Flows that cross no link get an
    infinite rate."""
    rates = np.full(n_flows, np.inf)
    if len(entry_flow) == 0:
        return rates
    remaining = np.array(capacity, float)
    ew = np.ones(len(entry_flow)) if entry_weight is None else np.asarray(entry_weight, float)
    crossings = np.bincount(entry_link, weights=ew, minlength=len(remaining))
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
        np.subtract.at(remaining, el[gone], level * ew[gone])
        np.subtract.at(crossings, el[gone], ew[gone])
        remaining[el[saturated]] = 0.0
        np.maximum(remaining, 0.0, out=remaining)
        ef, el, ew = ef[~gone], el[~gone], ew[~gone]


def active_links(entry_link: np.ndarray, n_links: int) -> tuple[np.ndarray, np.ndarray]:
    """(links some entry crosses, sorted; each entry's index among them), to solve rates on
    those links only, not the whole fabric. Few entries: sort them; many: a fabric-long count."""
    if 16 * len(entry_link) < n_links:
        used, local = np.unique(entry_link, return_inverse=True)
        return used, local.ravel()
    used = np.flatnonzero(np.bincount(entry_link, minlength=n_links))
    index = np.empty(n_links, np.int64)
    index[used] = np.arange(len(used))
    return used, index[entry_link]
