"""Component failures for the cluster simulation: MTBF/MTTR renewal processes or a trace.

Each component (host, OCS unit, ICI link) alternates up and down: time to failure drawn from
an exponential or Weibull distribution with mean `mtbf_s`, time to repair exponential with mean
`mttr_s`. Steady-state availability is mtbf / (mtbf + mttr); `from_availability` inverts that
for a given repair time, which is how the TPU v4 paper's host-availability axis ([ISCA23]
Fig. 4, hardware.md av.2) maps to a failure process. `FailureModel` groups the processes of a
fleet's hosts, OCS units and ICI links; `draw_fleet_failures` draws all of them, seeded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from podsim import quantities as q
from podsim.bounds import budget, check_budget
from podsim.errors import PodsimError, first_error
from podsim.files import read_csv
from podsim.units import finite_number, format_seconds, fraction, parse_duration

Component = Literal["host", "ocs", "link"]
FAILED_ID = q.count("a part id", 0, 64 * q.MAX_FLEET_CHIPS, "ids of the largest fleet's hosts, OCS units and cables")


def availability_mtbf_s(availability: float, mttr_s: float) -> float:
    """The MTBF that gives steady-state `availability` with repair time `mttr_s`; one line if
    the availability is not in (0, 1) or its MTBF is out of range (named as the availability
    given, not as an MTBF nobody wrote)."""
    if not 0 < availability < 1:  # also NaN
        raise PodsimError(f"availability {availability} must be strictly between 0 and 1 (e.g. 0.995)")
    mtbf_s = mttr_s * availability / (1 - availability)
    if not q.MTBF.inside(mtbf_s):
        lo, hi = (m / (m + mttr_s) for m in (q.MTBF.low, q.MTBF.high))
        raise PodsimError(f"availability {availability:g} with an MTTR of {format_seconds(mttr_s)} means an MTBF of "
                          f"{format_seconds(mtbf_s)}; an MTBF is {q.MTBF.allowed()} ({q.MTBF.why}), so the "
                          f"availability is [{lo:.4g}, {hi:.10g}] with this MTTR")
    return mtbf_s


class FailureProcess(q.NoBoolNumbers):
    """Up/down renewal process of one kind of component."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    mtbf_s: q.MTBF.type = Field(..., description="mean time between failures of one component")
    mttr_s: q.MTTR.type = Field(3600.0, description="mean time to repair")
    distribution: Literal["exponential", "weibull"] = "exponential"
    weibull_shape: q.WEIBULL_SHAPE.type = Field(1.0, description="Weibull shape k (k < 1: infant mortality)")

    @classmethod
    def from_availability(cls, availability: float, mttr_s: float = 3600.0, **kw) -> FailureProcess:
        """The process with steady-state availability `availability` and repair time `mttr_s`."""
        return cls(mtbf_s=availability_mtbf_s(availability, mttr_s), mttr_s=mttr_s, **kw)

    @property
    def availability(self) -> float:
        return self.mtbf_s / (self.mtbf_s + self.mttr_s)

    def _time_to_failure(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.distribution == "exponential":
            return rng.exponential(self.mtbf_s, n)
        scale = self.mtbf_s / math.gamma(1 + 1 / self.weibull_shape)
        return scale * rng.weibull(self.weibull_shape, n)


def _availability(value: Any) -> float:
    """'99.5%' or 0.995 -> a fraction strictly between 0 and 1 (1 would be a part that never fails)."""
    x = fraction(value) if isinstance(value, str) else finite_number(value, "availability")
    if not 0 < x < 1:
        raise PodsimError(f"availability {value!r} must be strictly between 0 and 1 (e.g. 0.995 or 99.5%)")
    return x


class FailureSpec(q.NoBoolNumbers):
    """A failure process as a user writes it: availability (e.g. '99.5%') or MTBF, and MTTR
    (durations with units). A scenario's `failures.host` and `podsim cluster --mtbf` are this."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    availability: Annotated[float, BeforeValidator(_availability)] | None = Field(None, description="steady-state availability, e.g. 99.5%")
    mtbf_s: q.MTBF.duration | None = Field(None, validation_alias=AliasChoices("mtbf_s", "mtbf"), description="mean time between failures of one part")
    mttr_s: q.MTTR.duration = Field(3600.0, validation_alias=AliasChoices("mttr_s", "mttr"), description="mean time to repair")
    distribution: Literal["exponential", "weibull"] = "exponential"
    weibull_shape: q.WEIBULL_SHAPE.type = 1.0

    @model_validator(mode="after")
    def _one(self) -> FailureSpec:
        if (self.availability is None) == (self.mtbf_s is None):
            raise ValueError("give availability (e.g. 99.5%) or mtbf (e.g. 2000h), one of the two")
        return self

    def process(self) -> FailureProcess:
        kw = {"distribution": self.distribution, "weibull_shape": self.weibull_shape}
        if self.availability is not None:
            return FailureProcess.from_availability(self.availability, self.mttr_s, **kw)
        return FailureProcess(mtbf_s=self.mtbf_s, mttr_s=self.mttr_s, **kw)




def expected_failures(process: FailureProcess, count: int, horizon_s: float) -> float:
    """About how many failure events `count` parts draw over the horizon (renewals plus the
    parts that start down): the estimate the events budget is checked against."""
    return count * (horizon_s / (process.mtbf_s + process.mttr_s) + 1)


def check_failure_budget(process: FailureProcess, component: str, count: int, horizon_s: float) -> None:
    """Refuse a failure process whose events would pass the events budget, before drawing."""
    expected = expected_failures(process, count, horizon_s)
    check_budget("events", expected, f"{component} failures: about {expected:.3g} failures of {count:,} parts over "
                 f"{horizon_s:.3g} s (MTBF {process.mtbf_s:.3g} s)", "each is a simulation event")


@dataclass(frozen=True, order=True)
class FailureEvent:
    """Component `component` number `id` fails at `time_s` and is repaired `repair_s` later."""

    time_s: float
    component: str
    id: int
    repair_s: float


def draw_failures(process: FailureProcess, component: Component, count: int, horizon_s: float,
                  rng: np.random.Generator, start_down_fraction: bool = True) -> list[FailureEvent]:
    """Failure events of `count` components over [0, horizon_s).

    With `start_down_fraction`, each component starts in its steady state (down with
    probability 1 - availability), so a short horizon is not biased towards a healthy fleet.
    """
    events: list[FailureEvent] = []
    if count <= 0 or horizon_s <= 0:
        return events
    check_failure_budget(process, component, count, horizon_s)
    t = np.zeros(count)
    if start_down_fraction:
        down = rng.random(count) > process.availability
        # a component that starts down is in the middle of a repair: residual time is exponential
        residual = rng.exponential(process.mttr_s, count)
        for i in np.flatnonzero(down):
            events.append(FailureEvent(0.0, component, int(i), float(residual[i])))
        t = np.where(down, residual, 0.0)
    t = t + process._time_to_failure(rng, count)
    alive = t < horizon_s
    while alive.any():
        idx = np.flatnonzero(alive)
        repair = rng.exponential(process.mttr_s, len(idx))
        events.extend(FailureEvent(float(t[i]), component, int(i), float(r)) for i, r in zip(idx, repair, strict=True))
        t[idx] = t[idx] + repair + process._time_to_failure(rng, len(idx))
        alive = t < horizon_s
    events.sort()
    return events


class FailureModel(BaseModel):
    """Failure processes of a fleet's hosts, OCS units and ICI links (None: that part never fails)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    host: FailureProcess | None = Field(None, description="per host (a host takes its chips down, av.1)")
    ocs: FailureProcess | None = Field(None, description="per OCS unit")
    link: FailureProcess | None = Field(None, description="per ICI cable (see podsim.cluster.links)")

    @property
    def any(self) -> bool:
        return any(p is not None for p in (self.host, self.ocs, self.link))

    @classmethod
    def of(cls, host: FailureSpec | None = None, ocs: FailureSpec | None = None,
           link: FailureSpec | None = None) -> FailureModel:
        """The model of these specs (None: that part never fails)."""
        return cls(**{k: None if v is None else v.process() for k, v in (("host", host), ("ocs", ocs), ("link", link))})


def _option(component: str, field: str) -> str:
    """The CLI option (`podsim cluster`, `podsim plan`) that sets a component's failure field."""
    if field == "availability":
        return "--host-availability"
    if field == "weibull_shape":
        return "--weibull-shape"
    return f"--{'' if component == 'host' else component.lower() + '-'}{field.removesuffix('_s')}"


def _spec(component: str, **fields) -> FailureSpec:
    """The FailureSpec of these fields (an availability's MTBF range checked too, the process not
    built), or one line naming the option and what it must be."""
    try:
        spec = FailureSpec(**fields)
    except ValidationError as exc:
        where, msg = first_error(exc)
        name = {"mtbf_s": "MTBF", "mttr_s": "MTTR", "weibull_shape": "Weibull shape"}.get(where, where)
        raise PodsimError(f"{component} {name} ({_option(component, where)}): {msg} "
                          f"(got {exc.errors()[0].get('input')!r})") from None
    if spec.availability is not None:  # an availability whose MTBF is out of range is refused here (the process is
        availability_mtbf_s(spec.availability, spec.mttr_s)  # built once, by whoever uses the spec)
    return spec


def _shape_fields(weibull_shape: float | None) -> dict:
    if weibull_shape is None:
        return {"distribution": "exponential"}
    q.WEIBULL_SHAPE.check(weibull_shape, "--weibull-shape")
    return {"distribution": "weibull", "weibull_shape": weibull_shape}


def _mtbf_spec(component: str, mtbf: str | float | None, mttr: str | float | None,
               weibull_shape: float | None) -> FailureSpec | None:
    if mtbf is None:
        if mttr is not None:
            raise PodsimError(f"{component} MTTR {mttr!r} ({_option(component, 'mttr_s')}) needs an MTBF "
                              f"({_option(component, 'mtbf_s')}; or, for hosts, an availability, --host-availability)")
        return None
    return _spec(component, mtbf_s=parse_duration(mtbf), mttr_s=parse_duration(mttr if mttr is not None else "1h"),
                 **_shape_fields(weibull_shape))


def host_failure_spec(host_availability: float | None = None, mtbf: str | float | None = None,
                      mttr: str | float | None = None, weibull_shape: float | None = None) -> FailureSpec | None:
    """The hosts' failure spec from user-facing options (by availability or MTBF, durations as '30d',
    '4h' or seconds, MTTR 1 h unless given), None where neither is given; one-line errors. The
    cluster's `failure_model` and the plan's time to train both read the hosts' options here."""
    if host_availability is not None and mtbf is not None:
        raise PodsimError("give hosts an availability (--host-availability) or an MTBF (--mtbf), not both")
    if host_availability is None:
        return _mtbf_spec("host", mtbf, mttr, weibull_shape)
    return _spec("host", availability=host_availability, mttr_s=parse_duration(mttr if mttr is not None else "1h"),
                 **_shape_fields(weibull_shape))


def failure_model(host_availability: float | None = None, mtbf: str | float | None = None, mttr: str | float | None = None,
                  weibull_shape: float | None = None, ocs_mtbf: str | float | None = None, ocs_mttr: str | float | None = None,
                  link_mtbf: str | float | None = None, link_mttr: str | float | None = None) -> FailureModel:
    """The fleet's failure processes from user-facing options (hosts as `host_failure_spec`; OCS
    units and links by MTBF, MTTR 1 h unless given), with one-line errors. A Weibull shape applies
    to every component's time to failure."""
    return FailureModel.of(host=host_failure_spec(host_availability, mtbf, mttr, weibull_shape),
                           ocs=_mtbf_spec("OCS", ocs_mtbf, ocs_mttr, weibull_shape),
                           link=_mtbf_spec("link", link_mtbf, link_mttr, weibull_shape))


def draw_fleet_failures(layout, model: FailureModel, horizon_s: float, seed: int) -> list[FailureEvent]:
    """Failure events of every host, OCS unit and ICI cable of `layout` over [0, horizon_s).

    Each kind of part draws from its own stream spawned from `seed`, so switching link
    failures on does not change the host failures drawn. Link events carry the link id of
    podsim.cluster.links (the cable's '+' end).
    """
    from podsim.cluster.links import IciLinks, ports_of_cables

    host_rng, ocs_rng, link_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3))
    events: list[FailureEvent] = []
    if model.host is not None:
        events += draw_failures(model.host, "host", layout.n_hosts, horizon_s, host_rng)
    if model.ocs is not None:
        if layout.n_ocs == 0:
            raise PodsimError(f"OCS failures: this {layout.generation.id} fleet has no OCS (static wiring); drop the OCS failure process")
        events += draw_failures(model.ocs, "ocs", layout.n_ocs, horizon_s, ocs_rng)
    if model.link is not None:
        links = IciLinks(layout)
        drawn = draw_failures(model.link, "link", links.n_cables, horizon_s, link_rng)
        ports = ports_of_cables(links, np.array([e.id for e in drawn], np.int64))
        events += [FailureEvent(e.time_s, e.component, int(p), e.repair_s) for e, p in zip(drawn, ports, strict=True)]
    events.sort()
    return events


def load_failure_trace(path: str | Path) -> list[FailureEvent]:
    """A CSV of `time_s, component, id, repair_s` rows (component: host, ocs or link)."""
    path = Path(path)
    events = []
    header, rows = read_csv(path, "failure trace")
    need = {"time_s", "component", "id", "repair_s"}
    if not need <= set(header):
        raise PodsimError(f"{path.name}: needs columns {', '.join(sorted(need))}")
    for line, row in rows:
        comp = row["component"].strip()
        if comp not in ("host", "ocs", "link"):
            raise PodsimError(f"{path.name} line {line}: component {comp!r} is not host, ocs or link")
        try:
            ev = FailureEvent(float(row["time_s"]), comp, int(row["id"]), float(row["repair_s"]))
        except ValueError:
            raise PodsimError(f"{path.name} line {line}: time_s, id and repair_s must be numbers (id a whole number)") from None
        if not (math.isfinite(ev.time_s) and math.isfinite(ev.repair_s)):
            raise PodsimError(f"{path.name} line {line}: time_s and repair_s must be finite numbers of seconds")
        if ev.time_s < 0 or ev.repair_s < 0 or ev.id < 0:
            raise PodsimError(f"{path.name} line {line}: negative time, id or repair")
        try:
            q.EVENT_TIME.check(ev.time_s, "time_s")
            q.REPAIR_TIME.check(ev.repair_s, "repair_s")
            FAILED_ID.check(ev.id, "id")
        except PodsimError as exc:
            raise PodsimError(f"{path.name} line {line}: {exc}") from None
        if len(events) >= budget().events:
            check_budget("events", len(events) + 1, f"{path.name}: more than {len(events):,} failure events")
        events.append(ev)
    return sorted(events)
