"""A collective as phases of flows: the plain data every algorithm produces and the engine runs.

- `Pattern`: who sends to whom in one step — `src[i] -> dst[i]` (global chip ids) for every
  instance of the group, with a relative size per flow (1 for all but tree steps).
- `Phase`: a pattern with the bytes each flow carries, repeated `repeat` times in a row (the
  p - 1 identical steps of a ring).
- A stream is a sequence of phases (each waits for the previous one to be delivered); a stage
  is a set of streams that run at once (the two directions of a bidirectional ring, the rotated
  axis orders of the all-links torus algorithm); a `Schedule` is a sequence of stages.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from podsim.collectives.groups import GroupLayout
from podsim.collectives.slicesplit import SliceSplit

Stream = tuple["Phase", ...]
Stage = tuple[Stream, ...]


@dataclass(frozen=True, eq=False)
class Pattern:
    """One step's flows over every instance of a group.

    `periods[j]`: the pattern is unchanged when every rank moves by `periods[j]` along grid
    axis j (cyclically) - what the symmetry fast path uses. The flows are made on demand by
    `make(keep)`, optionally only those whose source chip is in `keep` (a boolean mask over
    the fabric's chips), so a fast path never builds the flows it will not simulate.
    `split_fn()` says, without building them, which flows stay inside slices and which cross
    (slicesplit.SliceSplit; None: unknown, so no slice symmetry is assumed).
    """

    name: str
    layout: GroupLayout
    periods: tuple[int, ...]
    n_flows: int  # over every instance, before any symmetry folding
    make: Callable[[GroupLayout, np.ndarray | None], tuple[np.ndarray, np.ndarray, np.ndarray | None]] = field(repr=False)
    split_fn: Callable[[], SliceSplit] | None = field(default=None, repr=False)

    def flows(self, keep: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """(src, dst, weight or None) of the flows, those from sources in `keep` only if given."""
        return self.make(self.layout, keep)

    @cached_property
    def split(self) -> SliceSplit | None:
        """Which of the flows stay inside slices and which cross (worked out once)."""
        return None if self.split_fn is None else self.split_fn()


@dataclass(frozen=True, eq=False)
class Phase:
    pattern: Pattern
    bytes: float  # per flow (times the pattern's weight)
    repeat: int = 1


@dataclass(frozen=True, eq=False)
class Schedule:
    """The stages of one collective under one algorithm."""

    kind: str
    algorithm: str
    layout: GroupLayout
    size_bytes: float
    stages: tuple[Stage, ...]

    def patterns(self) -> list[Pattern]:
        seen: dict[int, Pattern] = {}
        for stage in self.stages:
            for stream in stage:
                for ph in stream:
                    seen.setdefault(id(ph.pattern), ph.pattern)
        return list(seen.values())


def sequence(*stages_lists: tuple[Stage, ...]) -> tuple[Stage, ...]:
    """Stages one after another, dropping empty ones."""
    out: list[Stage] = []
    for stages in stages_lists:
        for st in stages:
            streams = tuple(s for s in st if s)
            if streams:
                out.append(streams)
    return tuple(out)
