"""The CP-SAT placement model of one batch as data: the model and the variables that its parts
(`cpsat_model`, `cpsat_gang`) add and `cpsat` hints and reads."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from podsim.placement.problem import Problem
from podsim.placement.space import Assignment


@dataclass(eq=False)
class PlacementModel:
    """The CP-SAT model of one problem and the variables needed to hint and read it."""

    problem: Problem
    model: cp_model.CpModel = field(default_factory=cp_model.CpModel)
    placed: dict[int, cp_model.IntVar] = field(default_factory=dict)
    counts: dict[tuple[int, int], cp_model.IntVar] = field(default_factory=dict)  # (request, block)
    spans: dict[tuple[int, int], cp_model.IntVar] = field(default_factory=dict)
    pod_choice: dict[tuple[int, int], cp_model.IntVar] = field(default_factory=dict)
    opened: dict[int, cp_model.IntVar] = field(default_factory=dict)  # block
    positions: dict[tuple, list[tuple[cp_model.IntVar, Assignment]]] = field(default_factory=lambda: defaultdict(list))
    groups: dict[tuple, list[int]] = field(default_factory=lambda: defaultdict(list))  # requests, processing order
    touched: dict[int, cp_model.IntVar] = field(default_factory=dict)  # whole cube -> broken into
    rects: dict[int, list[tuple[cp_model.IntVar, cp_model.IntVar, cp_model.IntVar, int, tuple]]] = field(default_factory=lambda: defaultdict(list))
    block_cubes: dict[int, list[int]] = field(default_factory=dict)  # usable cubes per block, id order
    fresh: dict[int, list[int]] = field(default_factory=dict)  # whole cubes per block open to sub-cube slices
    symmetric_fresh: bool = False
    gang_present: dict[int, cp_model.IntVar] = field(default_factory=dict)  # gang -> all its copies placed
    gang_pods: dict[tuple[int, int], cp_model.IntVar] = field(default_factory=dict)  # (gang, pod) -> a copy there
    gang_sites: dict[tuple[int, int], cp_model.IntVar] = field(default_factory=dict)  # (gang, site) -> a copy there
    cands: dict[int, list[tuple[cp_model.IntVar, Assignment]]] = field(default_factory=lambda: defaultdict(list))
    cell_terms: dict[tuple[int, int], list] = field(default_factory=lambda: defaultdict(list))  # (cube, cell) -> vars
    big: int = 1

    @property
    def n_vars(self) -> int:
        return len(self.model.proto.variables)

    @property
    def n_constraints(self) -> int:
        return len(self.model.proto.constraints)
