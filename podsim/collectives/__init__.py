"""Collective algorithms as phases of flows, with their alpha-beta closed forms beside them.

Typical use::

    from podsim.collectives import plan_collective
    from podsim.collectives.groups import group_layout
    from podsim.collectives.fabricroutes import Placement
    from podsim.collectives.routes import RouterPool
    placement = Placement(built.fabric, (built.view,))
    layout = group_layout(placement.views, "all")
    plan = plan_collective("all_reduce", layout, 2**30, "auto", RouterPool(placement))
    plan.schedule.algorithm, plan.closed_form_s      # 'torus_all_links', 8.04e-3 on a v4 pod
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from podsim._lazy import lazy_face

if TYPE_CHECKING:  # the face's names, each imported on first use (podsim._lazy: start-up)
    from podsim.collectives.algorithms import ALGORITHMS, KINDS
    from podsim.collectives.choice import Plan, plan_collective

# The public API: plan a collective (schedule + closed form) and the closed forms themselves.
# A schedule's parts (Pattern, Phase), route symmetry and schedule_time_s stay in their modules.
__all__ = ["ALGORITHMS", "KINDS", "Plan", "plan_collective"]

lazy_face(__name__)
