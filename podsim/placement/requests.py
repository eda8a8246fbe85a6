"""Slice requests: what a job asks for, how much it is worth, and the YAML requests file.

A request names a slice shape (plain or twisted), a priority and an arrival time. Its value to
the batch admission model is priority-weighted chips with an age term, so a request that has
waited long enough outranks newer ones and nothing starves:

    weight = chips x (1 + priority) x (1 + age_s / age_scale_s)

The requests file is a YAML list of `{id, shape, priority (default 0), twisted (default
false), arrival_s (default 0), allow_degraded (default false), slices (default 1), span_sites
(default false)}`; a bad entry gives one line naming the request and the field.

A multislice request (`slices: N`) asks for N slices of the shape at once, all or none, joined
over the DCN, on as few sites and pods as the placement can (podsim.placement.multislice for
the greedy, cpsat_gang for CP-SAT); it may span data centres only with `span_sites: true`. Its weight counts all N slices' chips.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, ValidationError, field_validator

from podsim import quantities as q
from podsim.bounds import check_budget
from podsim.errors import PodsimError, first_error
from podsim.files import read_structured
from podsim.quantities import MAX_HORIZON_S, MAX_PRIORITY, Priority
from podsim.topology import Generation, parse_shape
from podsim.topology.shapes import slice_name, validate_shape

WEIGHT_RESOLUTION = 10  # CP-SAT needs integers: weights are kept in tenths of a chip
MAX_SLICES = int(q.REQUEST_SLICES.high)  # slices of one multislice request (bounds the weight; the largest fleets hold fewer pods' worth)


@dataclass(frozen=True)
class SliceRequest:
    """One job's slice request.

    Parameters
    ----------
    id : str
        The job's name.
    shape : str or tuple of int
        '4x4x8' or (4, 4, 8).
    twisted : bool
        Ask for a twisted torus.
    priority : int
        Higher is placed first (and may preempt under the priority policy).
    arrival_s : float
        When the job arrived (the age term of the admission weight).
    allow_degraded : bool
        A cube-level torus missing the circuits of down OCS units will do.
    slices : int
        A multislice request: this many slices of `shape`, all or none.
    span_sites : bool
        A multislice request may be split over data centres (WAN).

    Examples
    --------
    >>> from podsim import SliceRequest
    >>> r = SliceRequest("a", "4x4x8", priority=1)
    >>> r.shape, r.chips
    ((4, 4, 8), 128)
    """

    id: str
    shape: tuple[int, ...]
    twisted: bool = False
    priority: int = 0
    arrival_s: float = 0.0
    allow_degraded: bool = False  # a cube-level torus missing the circuits of down OCS units will do
    slices: int = 1  # a multislice request: this many slices of `shape`, all or none
    span_sites: bool = False  # a multislice request may be split over data centres (WAN)
    chips: int = field(init=False, repr=False, compare=False)  # chips of ONE slice

    def __post_init__(self):
        shape = parse_shape(self.shape)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "id", str(self.id))
        object.__setattr__(self, "chips", math.prod(shape))
        if not isinstance(self.priority, int) or isinstance(self.priority, bool) or not 0 <= self.priority <= MAX_PRIORITY:
            raise PodsimError(f"request {self.id!r}: priority {self.priority!r} must be an integer in [0, {MAX_PRIORITY}]")
        if not math.isfinite(self.arrival_s):
            raise PodsimError(f"request {self.id!r}: arrival_s {self.arrival_s!r} must be a finite number of seconds")
        if not isinstance(self.slices, int) or isinstance(self.slices, bool) or not 1 <= self.slices <= MAX_SLICES:
            raise PodsimError(f"request {self.id!r}: slices {self.slices!r} must be an integer in [1, {MAX_SLICES}]")

    @property
    def total_chips(self) -> int:
        """Chips of all its slices."""
        return self.chips * self.slices

    def member(self, k: int) -> SliceRequest:
        """Slice k of a multislice request as a one-slice request (id 'job/k'); itself if single."""
        if self.slices == 1:
            return self
        return SliceRequest(f"{self.id}/{k}", self.shape, self.twisted, self.priority, self.arrival_s,
                            self.allow_degraded)

    @property
    def name(self) -> str:
        """'4x4x8_T' for a twisted request, as in the v4 paper's Table 2."""
        return slice_name(self.shape, self.twisted)

    def priority_weighted_chips(self) -> int:
        return self.total_chips * (1 + self.priority)

    def weight(self, now_s: float = 0.0, age_scale_s: float = 3600.0) -> int:
        """Integer admission weight in tenths of a priority-weighted chip, age included."""
        age_s = min(max(0.0, now_s - self.arrival_s), MAX_HORIZON_S)  # bounded, so the weight fits CP-SAT's int64
        return round(WEIGHT_RESOLUTION * self.priority_weighted_chips() * (1.0 + age_s / age_scale_s))


class RequestEntry(q.NoBoolNumbers):
    """One entry of a requests file."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    id: str = Field(..., min_length=1, description="unique request (job) id")
    shape: str = Field(..., description="slice shape, e.g. 4x4x8 (v4) or 8x16 (v5e)")
    priority: Priority = Field(0, description=f"0 = normal, at most {MAX_PRIORITY}; the weight is chips x (1 + priority)")
    twisted: bool = Field(False, description="twisted torus (k x k x 2k or k x 2k x 2k, OCS pods only)")
    arrival_s: q.ARRIVAL_TIME.type = Field(0.0, description="arrival time in seconds (for the age term)")
    allow_degraded: bool = Field(False, description="accept a cube-level torus missing the circuits of a down OCS unit")
    slices: q.REQUEST_SLICES.type = Field(1, description="a multislice request: this many slices of the shape, all or none")
    span_sites: bool = Field(False, description="a multislice request may be split over data centres (WAN links)")

    @field_validator("id", mode="before")
    @classmethod
    def _id_text(cls, v: Any) -> Any:
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v

    @field_validator("shape", mode="before")
    @classmethod
    def _shape_text(cls, v: Any) -> Any:
        if isinstance(v, (list, tuple)):
            return "x".join(str(x) for x in v)
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v


def _entry_error(index: int, raw: Any, exc: ValidationError) -> PodsimError:
    fld, msg = first_error(exc, "entry")
    rid = raw.get("id") if isinstance(raw, dict) else None
    who = f"request {rid!r} (entry {index + 1})" if rid is not None else f"request entry {index + 1}"
    value = raw.get(fld) if isinstance(raw, dict) and fld in raw else None
    shown = f" = {value!r}" if value is not None else ""
    if msg == "unknown field":
        msg = "unknown field (allowed: id, shape, priority, twisted, arrival_s, allow_degraded, slices, span_sites)"
    return PodsimError(f"{who} field '{fld}'{shown}: {msg}")


def parse_requests(raw: Any, gen: Generation, source: str = "requests") -> list[SliceRequest]:
    """Validate a parsed requests list: fields, unique ids, and each shape against `gen`'s rules."""
    if not isinstance(raw, list):
        raise PodsimError(f"{source}: expected a YAML list of requests ({{id, shape, priority, twisted}}), got {type(raw).__name__}")
    check_budget("requests", len(raw), f"{source}: {len(raw):,} requests", "each is a CP-SAT decision or a greedy pass")
    out: list[SliceRequest] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        try:
            entry = RequestEntry.model_validate(item)
        except ValidationError as exc:
            raise _entry_error(i, item, exc) from None
        if entry.id in seen:
            raise PodsimError(f"request {entry.id!r} (entry {i + 1}) field 'id': the id is used twice; ids must be unique")
        seen.add(entry.id)
        try:
            validate_shape(gen, entry.shape, entry.twisted)
        except PodsimError as exc:
            fld = "twisted" if entry.twisted and "twist" in str(exc) else "shape"
            raise PodsimError(f"request {entry.id!r} (entry {i + 1}) field '{fld}': {exc}") from None
        if entry.span_sites and entry.slices == 1:
            raise PodsimError(f"request {entry.id!r} (entry {i + 1}) field 'span_sites': only a multislice request "
                              "(slices >= 2) can span sites")
        out.append(SliceRequest(entry.id, entry.shape, entry.twisted, entry.priority, entry.arrival_s, entry.allow_degraded,
                                entry.slices, entry.span_sites))
    return out


def load_requests(path: str | Path, gen: Generation) -> list[SliceRequest]:
    """Read and validate a requests file (see the module docstring for its form)."""
    return parse_requests(read_structured(path, "requests"), gen, source=str(path))


def processing_order(requests: Sequence[SliceRequest], weights: Sequence[int]) -> list[int]:
    """Indices by weight (largest first), then arrival, then position: the greedy order.

    The CP-SAT model's symmetry breaking between identical requests uses the same order, so the
    greedy solution is always a consistent hint.
    """
    return sorted(range(len(requests)), key=lambda i: (-weights[i], requests[i].arrival_s, i))
