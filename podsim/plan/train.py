"""Time to train: a token budget on a chip budget (how long) or by a deadline (the fewest chips).

The step is the plan search's best plan as the engine runs it; the run is tokens / tokens per
step steps of it, stretched by the goodput of the cluster's failure and restart figures
(podsim.plan.goodput); chip-hours, cost and energy follow from the generation's published price
and power per chip (generations.yaml, each with its source; a figure it lacks is said missing,
never guessed). Every figure carries the step time's error band for runs of its kind
(`podsim.validation.bands.step_band`): the step's typical error, carried into days, chip-hours,
cost and energy, which scale with it.

With a deadline the chip counts tried are the powers of two and three times the powers of two
that a generation's slices can make up (a job is equal slices); the fewest whose best estimated
plan finishes in time is found by walking up the powers of two from the peak-FLOP/s bound
(`peak_bound_chips`; a count where no plan fits counts as too slow), then trying the grid's
counts between that one and the power of two below (3 x 2^k); the fewest that finishes in time
is searched with every slice split and confirmed
with the engine; if the engine's step misses the deadline the next count is tried.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from podsim.cluster.failures import FailureSpec
from podsim.errors import PodsimError
from podsim.plan.goodput import Goodput, training_goodput
from podsim.plan.search import PlanQuery, PlanSearch, no_fit_advice, search
from podsim.plan.space import job_layouts
from podsim.topology import Generation, get_generation
from podsim.validation.bands import ErrorBand, step_band

_TOKEN_SUFFIX = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12, "P": 1e15}
MAX_CHIPS = 65_536
"""The largest chip count a deadline search tries by default (16 v4 pods)."""


MAX_TOKENS = 1e15
"""The most tokens a time-to-train query takes: a quadrillion, tens of times past the largest
published pre-training runs (tens of trillions of tokens); past it the days are not a question."""


def parse_tokens(text: str | float | int) -> float:
    """'2T' -> 2e12, '300B' -> 3e11, '1.5e12' -> 1.5e12: a token count (decimal suffixes K, M, B or G, T, P)."""
    if isinstance(text, bool):
        raise PodsimError(f"tokens {text!r} is not a number; give e.g. 2T or 300B")
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        m = re.fullmatch(r"\s*([+-]?[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([KMBGTP]?)\s*", str(text), re.IGNORECASE)
        if not m:
            raise PodsimError(f"tokens {text!r} is not understood; give a number with K, M, B, T (e.g. 2T, 300B, 1.5e12)")
        value = float(m.group(1)) * _TOKEN_SUFFIX[m.group(2).upper()]
    if not math.isfinite(value) or not 1 <= value <= MAX_TOKENS:
        raise PodsimError(f"tokens {text!r} is out of range: a token count is [1, {MAX_TOKENS:.0e}] (e.g. 2T; "
                          "a quadrillion is past any pre-training run)")
    return value


def refuse_nonpositive(name: str, value: float | None, what: str = "") -> None:
    """The one rule for a deadline, price or power: a finite number > 0 (None: not given).
    `name` is how the caller spells the field (`--days` on the command line, `days` here)."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise PodsimError(f"{name} {value:g} must be {what}> 0")


@dataclass(frozen=True)
class Priced:
    """A per-chip figure from generations.yaml (price per hour, power) or given, with its source."""

    value: float | None
    unit: str
    source: str
    note: str = ""

    @property
    def missing(self) -> bool:
        return self.value is None

    def text(self) -> str:
        if self.value is None:
            return f"not published ({self.source}{': ' + self.note if self.note else ''})"
        return f"{self.value:g} {self.unit} ({self.source}{', ' + self.note if self.note else ''})"


def _per_chip(f, unit: str, given: float | None) -> Priced:
    """The figure given, else generations.yaml's `f` with its source (said missing when it has none)."""
    if given is not None:
        return Priced(given, unit, "given")
    return Priced(f.value, unit, f.source, f.note) if f is not None else Priced(None, unit, "generations.yaml")


def chip_price(gen: Generation, given: float | None = None) -> Priced:
    return _per_chip(gen.price_per_chip_hour, "USD/h", given)


def chip_power(gen: Generation, given: float | None = None) -> Priced:
    return _per_chip(gen.power_per_chip, "W", given)


@dataclass(frozen=True)
class TrainQuery:
    """`tokens` on the plan search's chips (`search.chips`), or by `days` (the fewest chips)."""

    search: PlanQuery
    tokens: float
    days: float | None = None
    failures: FailureSpec | None = None
    checkpoint_interval_s: float | None = None
    restart_s: float | None = None
    price_per_chip_hour: float | None = None
    power_per_chip_w: float | None = None
    max_chips: int = MAX_CHIPS

    def __post_init__(self) -> None:
        if not (isinstance(self.tokens, (int, float)) and math.isfinite(self.tokens) and 1 <= self.tokens <= MAX_TOKENS):
            raise PodsimError(f"tokens {self.tokens!r} is out of range: a token count is [1, {MAX_TOKENS:.0e}]")
        refuse_nonpositive("days", self.days, "a number of days ")
        if (self.days is None) == (self.search.chips is None and self.search.slice is None):
            raise PodsimError("give --days (the fewest chips that finish in time) or --chips (how long), one of the two")
        for name in ("price_per_chip_hour", "power_per_chip_w"):
            refuse_nonpositive(name.replace("_", "-"), getattr(self, name))
        if self.max_chips < 1:
            raise PodsimError(f"max chips {self.max_chips} must be >= 1")


@dataclass(frozen=True)
class Ranged:
    """A figure and its error band's range (two runs in three of this kind fall in it)."""

    value: float | None
    low: float | None = None
    high: float | None = None


@dataclass
class TrainPlan:
    """The answer: chips, slices, plan, days, chip-hours, cost and energy, each with its range."""

    query: TrainQuery
    search: PlanSearch
    steps: int
    tokens_per_step: int
    step_s: float
    band: ErrorBand
    goodput: Goodput
    days: Ranged
    chip_hours: Ranged
    cost_usd: Ranged
    energy_mwh: Ranged
    price: Priced
    power: Priced
    meets_deadline: bool | None = None
    tried: list[dict] = field(default_factory=list)  # the chip counts a deadline search estimated

    @property
    def chips(self) -> int:
        return self.search.best.assessed.candidate.chips


def _ranged(value: float | None, band: ErrorBand) -> Ranged:
    if value is None:
        return Ranged(None)
    lo, hi = band.interval(value)
    return Ranged(value, None if math.isnan(lo) else lo, None if math.isnan(hi) else hi)


def _answer(q: TrainQuery, s: PlanSearch, tried: list[dict]) -> TrainPlan:
    best = s.best
    c = best.assessed.candidate
    gen = s.context.generation
    tps = s.context.cfg.tokens_per_step
    steps = math.ceil(q.tokens / tps)
    gp = training_goodput(gen, c.chips, q.failures, q.checkpoint_interval_s, q.restart_s)
    band = step_band(gen.id, c.slices)
    wall_s = steps * best.step_s / gp.goodput
    days = wall_s / 86400
    hours = wall_s / 3600 * c.chips
    price, power = chip_price(gen, q.price_per_chip_hour), chip_power(gen, q.power_per_chip_w)
    cost = None if price.missing else hours * price.value
    energy = None if power.missing else hours * power.value / 1e6
    return TrainPlan(q, s, steps, tps, best.step_s, band, gp, _ranged(days, band), _ranged(hours, band),
                     _ranged(cost, band), _ranged(energy, band), price, power,
                     None if q.days is None else days <= q.days, tried)


def chip_grid(gen: Generation, max_chips: int) -> list[int]:
    """Powers of two and three times powers of two, up to `max_chips`, that equal slices of `gen` make up."""
    out = []
    for n in sorted({2**k for k in range(0, 31)} | {3 * 2**k for k in range(0, 30)}):
        if n > max_chips:
            break
        try:
            job_layouts(gen, n)
        except PodsimError:
            continue
        out.append(n)
    return out


def _estimate_days(q: TrainQuery, chips: int) -> tuple[float, PlanSearch]:
    """Days of the best estimated plan on `chips` (inf when no plan fits); the fewest-slices layouts only."""
    s = search(replace(q.search, chips=chips, slice=None, slices=None, top=0, fewest_slices=True))
    if not s.ranked:
        return math.inf, s
    a = s.ranked[0]
    gp = training_goodput(s.context.generation, chips, q.failures, q.checkpoint_interval_s, q.restart_s)
    steps = math.ceil(q.tokens / s.context.cfg.tokens_per_step)
    return steps * a.estimate.step_s / gp.goodput / 86400, s


def time_to_train(q: TrainQuery, on_progress: Callable[[str, float, float], None] | None = None) -> TrainPlan:
    """How long `q.tokens` take on `q.search`'s chips, or the fewest chips that take them within
    `q.days` (see the module docstring)."""
    if q.days is None:
        s = search(q.search, on_progress)
        if not s.confirmed:
            raise PodsimError(no_fit_advice(s))
        return _answer(q, s, [])
    gen = get_generation(q.search.generation)
    grid = chip_grid(gen, q.max_chips)
    if not grid:
        raise PodsimError(f"no chip count up to {q.max_chips:,} is made of {gen.id} slices")
    tried: dict[int, dict] = {}

    def days_at(n: int) -> float:
        if n not in tried:
            d, s = _estimate_days(q, n)
            tried[n] = {"chips": n, "estimated_days": d, "plan": s.ranked[0].candidate.label() if s.ranked else None,
                        "estimated_step_s": s.ranked[0].estimate.step_s if s.ranked else None}
            if on_progress:
                on_progress("chips", len(tried), len(tried) + 1)
        return tried[n]["estimated_days"]

    floor = peak_bound_chips(q, gen)
    pow2 = [n for n in grid if n & (n - 1) == 0 and n * 2 > floor]
    hit = next((n for n in pow2 if days_at(n) <= q.days), None)
    if hit is None:
        best = min(tried.values(), key=lambda r: r["estimated_days"], default=None)
        where = (f"the best, {best['chips']:,} chips, takes about {best['estimated_days']:.1f} days by the estimate"
                 if best and math.isfinite(best["estimated_days"]) else "no plan fits")
        raise PodsimError(f"{q.tokens:.3g} tokens of {q.search.model} do not fit in {q.days:g} days on up to {q.max_chips:,} "
                          f"{gen.id} chips: {where} (the global batch bounds the speed-up); allow more days, more chips "
                          "(--max-chips) or a larger batch (--set global_batch=N)")
    between = [n for n in grid if hit // 2 < n < hit]  # e.g. 3/4 of the power of two
    order = [n for n in between if days_at(n) <= q.days][:1] + [n for n in grid if n >= hit]
    last = None
    for n in order:  # confirm with the engine; a miss moves on to the next count
        s = search(replace(q.search, chips=n, slice=None, slices=None), on_progress)
        if not s.confirmed:
            continue
        last = _answer(q, s, sorted(tried.values(), key=lambda r: r["chips"]))
        if last.meets_deadline:
            return last
    if last is None:
        raise PodsimError(f"no plan of {q.search.model} could be confirmed on {gen.id} from {hit:,} chips up")
    return last


def peak_bound_chips(q: TrainQuery, gen: Generation) -> float:
    """Chips that could not be fewer even at peak FLOP/s and no failures: the run's model FLOPs
    over (peak x the deadline). The deadline search starts at the power of two above half of it."""
    from podsim.trace.plans import model_config

    cfg = model_config(q.search.model, dict(q.search.model_overrides))
    flops = cfg.training_flops_per_step() * math.ceil(q.tokens / cfg.tokens_per_step)
    return flops / (gen.peak_flops_per_s * q.days * 86400)
