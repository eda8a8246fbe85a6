"""The CP-SAT model's part for multislice requests (gangs), with their hint.

A gang of N slices is N one-slice copies in the expanded problem (`expand_gangs`); the model's
other parts place each copy like any request, so the copies share every no-overlap, cube-count
and cell constraint with the one-slice requests and are packed jointly with them. This part adds:

- all or none: sum(placed[copy]) == N x present[gang];
- pods and sites: `use[g, pod]` is true exactly when a copy of g is in the pod, `site[g, s]`
  exactly when one of its pods is in site s; a gang without `span_sites` has at most one site
  (hard), as `validate_placement` requires;
- the objective (`gang_penalty`): fewest sites, then fewest pods per gang (fewer DCN hops: the
  ranking of `multislice.py`), then the existing block goals, all below one unit of admitted
  weight so they never trade away placed value;
- symmetry: the copies of a cube-level gang take increasing position indexes (sum over blocks
  of block id x cubes there: ordered by pod, then blocks within a pod); rectangle copies are
  chained by their row-major key in `cpsat_model._rect_part`; sub-cube and box copies share one
  set of positions per gang, which has no order to break. `canonical_gangs` sorts a hint the same way.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from itertools import pairwise

from podsim.placement.cpsat_vars import PlacementModel
from podsim.placement.multislice import site_of_pod
from podsim.placement.space import Assignment


def add_gangs(pm: PlacementModel) -> None:
    """All or none, one site unless span_sites, pods and sites used, copies ordered."""
    p, m = pm.problem, pm.model
    lay = p.layout
    site = site_of_pod(lay, p.settings.sites)
    counts_of = _counts_by_request(pm)
    for g, gang in enumerate(p.gangs):
        if gang.copies[0] not in pm.placed:  # no options (copies share them): no copy has a variable
            continue
        placed = [pm.placed[c] for c in gang.copies]
        present = m.new_bool_var(f"gang[{gang.request.id}]")
        pm.gang_present[g] = present
        m.add(sum(placed) == len(placed) * present)
        _order_cube_copies(pm, gang.copies, counts_of)
        if lay.pods == 1:
            continue
        by_site: dict[int, list] = defaultdict(list)
        for pod, lits in sorted(_pod_literals(pm, g).items()):
            use = m.new_bool_var(f"use[{gang.request.id},{pod}]")
            for lit in lits:
                m.add_implication(lit, use)
            m.add(use <= sum(lits))
            pm.gang_pods[(g, pod)] = use
            by_site[int(site[pod])].append(use)
        if p.settings.sites == 1:
            continue
        for s, uses in sorted(by_site.items()):
            v = m.new_bool_var(f"site[{gang.request.id},{s}]")
            for use in uses:
                m.add_implication(use, v)
            m.add(v <= sum(uses))
            pm.gang_sites[(g, s)] = v
        if not gang.request.span_sites:
            m.add_at_most_one(pm.gang_sites[(g, s)] for s in by_site)


def _counts_by_request(pm: PlacementModel) -> dict[int, list[tuple[int, object]]]:
    out: dict[int, list[tuple[int, object]]] = defaultdict(list)
    for (i, b), n in sorted(pm.counts.items()):
        out[i].append((b, n))
    return out


def _order_cube_copies(pm: PlacementModel, copies: Sequence[int], counts_of) -> None:
    """Copy k's position index <= copy k+1's: blocks are numbered pod by pod, so this orders the
    copies by pod and, within a pod, by the blocks their cubes are in."""
    keys = [sum(b * n for b, n in counts_of[c]) for c in copies if counts_of.get(c)]
    if len(keys) == len(copies):
        for a, b in pairwise(keys):
            pm.model.add(a <= b)


def _pod_literals(pm: PlacementModel, g: int) -> dict[int, list]:
    """Per pod, the literals that put one of gang g's copies there."""
    p = pm.problem
    copies = set(p.gangs[g].copies)
    out: dict[int, list] = defaultdict(list)
    for (i, pod), y in pm.pod_choice.items():  # cube-level slices on OCS pods
        if i in copies:
            out[pod].append(y)
    for i in copies:  # static rectangles
        for pres, _, _, pod, _ in pm.rects.get(i, ()):
            out[pod].append(pres)
    for key, members in pm.groups.items():  # sub-cube slices and cube boxes: the gang's shared positions
        if members and members[0] in copies:
            for v, a in pm.positions.get(key, ()):
                out[a.pod].append(v)
    return out


def gang_penalty(pm: PlacementModel, secondary, n_secondary: int) -> tuple[object, int]:
    """(penalty expression, its largest value): sites used above pods used above the
    `n_secondary` existing goals (`secondary`, each 0 or 1), lexicographically. Only gangs that
    may span sites count sites (the others have one site whenever placed), which keeps the
    objective's scale down."""
    gangs = pm.problem.gangs
    sites = [v for (g, _), v in pm.gang_sites.items() if gangs[g].request.span_sites]
    w_pod = n_secondary + 1
    w_site = n_secondary + w_pod * len(pm.gang_pods) + 1
    penalty = secondary + w_pod * sum(pm.gang_pods.values()) + w_site * sum(sites)
    return penalty, n_secondary + w_pod * len(pm.gang_pods) + w_site * len(sites)


def canonical_gangs(pm: PlacementModel, out: list[Assignment | None]) -> None:
    """Sort each cube-level gang's copies by their position index (in place), as the model orders them."""
    p = pm.problem
    for gang in p.gangs:
        got = [out[c] for c in gang.copies]
        if any(a is None or a.kind != "cubes" for a in got):
            continue
        got.sort(key=lambda a: int(sum(int(p.block_of(c)) for c in a.cubes)))
        for c, a in zip(gang.copies, got, strict=True):
            out[c] = a


def hint_gangs(pm: PlacementModel, hint: Sequence[Assignment | None]) -> None:
    """Hint the gang variables from a (greedy) placement."""
    p, m = pm.problem, pm.model
    site = site_of_pod(p.layout, p.settings.sites)
    for g, v in pm.gang_present.items():
        m.add_hint(v, all(hint[c] is not None for c in p.gangs[g].copies))
    pods = {g: {hint[c].pod for c in gang.copies if hint[c] is not None} for g, gang in enumerate(p.gangs)}
    for (g, pod), v in pm.gang_pods.items():
        m.add_hint(v, pod in pods[g])
    for (g, s), v in pm.gang_sites.items():
        m.add_hint(v, any(int(site[pod]) == s for pod in pods[g]))
