"""What routing could do for an all-to-all: link loads under the engine's routes and under an
even split over every shortest path.

The engine routes each flow on one dimension-order path (podsim.topology.routing). A network
that spreads every flow evenly over all its shortest paths (at each hop, equal shares to every
neighbour one hop closer to the destination) shows what load balancing could add; on the
twisted tori of [ISCA23] §2.8 it reaches the total-capacity bound (every link equally busy).
"""

from __future__ import annotations

import numpy as np

from podsim.topology.metrics import bfs_levels
from podsim.topology.routing import slice_routes
from podsim.topology.slices import SliceView


def all_to_all_link_load(view: SliceView, routing: str = "dor") -> np.ndarray:
    """Bytes on every fabric link when each chip of the slice sends 1 byte to every other.

    `dor`: the engine's dimension-order routes; `ecmp`: an even split over all shortest paths.
    """
    n = view.n
    load = np.zeros(view.fabric.n_links)
    if routing == "dor":
        src, dst = np.nonzero(~np.eye(n, dtype=bool))
        r = slice_routes(view, src, dst)
        np.add.at(load, r.links, 1.0)
        return load
    if routing != "ecmp":
        raise ValueError(f"routing {routing!r}: use dor or ecmp")
    peer = view.port_peer.reshape(n, -1)
    link = view.port_link.reshape(n, -1)
    dist = np.stack([bfs_levels(view.port_peer, s) for s in range(n)])  # links are bidirectional
    for t in range(n):
        d = dist[:, t]
        amount = np.ones(n)
        amount[t] = 0.0
        for level in range(int(d.max()), 0, -1):
            u = np.flatnonzero(d == level)
            nb = peer[u]
            closer = (nb >= 0) & (d[np.maximum(nb, 0)] == level - 1)
            share = amount[u] / closer.sum(1)
            rows = np.nonzero(closer)
            np.add.at(load, link[u][rows], share[rows[0]])
            np.add.at(amount, nb[rows], share[rows[0]])
    return load


def all_to_all_time_s(view: SliceView, size_bytes: float, routing: str = "dor") -> float:
    """Bandwidth time of an all-to-all of `size_bytes` per chip (n/p to every member): the
    busiest link's bytes over its capacity."""
    cap = view.fabric.link_capacity_bytes_per_s
    load = all_to_all_link_load(view, routing) * size_bytes / view.n
    used = load > 0
    return float((load[used] / cap[used]).max())
