"""Spine economics (issue 17): what an EPS Clos and an OCS DCN cost, draw and deliver over a
fleet's life. Pure functions; `podsim.scenario` runs them for a scenario's `spine` section.

    counts = spine_counts(fabric, link_gbps=400, eps_switch_gbps=51_200, ocs_usable_ports=128)
    rows = spine_timeline(periods, [counts, ...], assumptions())
"""

from typing import TYPE_CHECKING

from podsim._lazy import lazy_face

if TYPE_CHECKING:  # the face's names, each imported on first use (podsim._lazy: start-up)
    from podsim.economics.counts import spine_counts
    from podsim.economics.timeline import spine_timeline

__all__ = ["spine_counts", "spine_timeline"]

lazy_face(__name__)
