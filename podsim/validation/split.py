"""The calibration split of the step-time validation table, as code (the rule the lead fixed on
2026-12-04, before any new row's error was seen, with its amendments A1 and A2 of the same day;
docs/validation.md quotes them):

- R1: a compute constant with a published microbenchmark of its generation is set from it
  (podsim.perf.efficiency.SOURCED); no row calibrates it.
- R2: otherwise at most one row per generation and constant, among that generation's rows that are
  a direct measurement, one slice, within HBM by podsim's own memory model under the row's plan, and
  whose plan and options the source states (`RowFacts.eligible`): for a matmul fraction the one of
  that precision with the highest measured MFU, for the HBM fraction the one with the lowest model
  FLOPs per HBM byte in podsim's trace; ties, the earliest published.
- A1: an upper bound whose training share (R6: podsim.validation.table.train_share) is at least
  MIN_TRAIN_SHARE counts as a direct measurement; its implied value (R6) is its calibration target
  and the step its measured MFU is taken at.
- A2: a row can set a constant only if the constant is identifiable from it: a 1% change of the
  constant moves the row's predicted step by at least MIN_SENSITIVITY x 1% (`sensitivity`, measured
  by the engine at the constants in force). R2 chooses among the eligible rows that pass; where none
  passes and no source exists the constant has no basis (podsim.perf.efficiency: the vendor's figure),
  and `unidentified` says why.
- R3: a generation with neither takes no row; podsim.perf.efficiency gives it its no-basis value
  (no source was found that says another generation's figure holds for it).
- R4: `calibration_rows(rows)` is the only place calibration rows come from; a row that does not
  fit HBM is refused in one line if asked to calibrate (`check_can_calibrate`).
- R5: every other row validates; `cross_validate` refits per fold (leave one row out, leave one
  source family out) and predicts the held-out rows.
- R6 (scoring) lives in podsim.validation.table.implied_s.

The hosts' JPEG rate (not a compute constant, so outside the rule's R1-R3) is picked the same way:
among the eligible rows that decode JPEGs on that generation's hosts and whose step the rate can be
identified from (A2), the one whose hosts feed the most images per step (the step most set by the
hosts, least confounded by the chips).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from podsim.errors import PodsimError
from podsim.perf import chips as chip_constants
from podsim.perf import efficiency
from podsim.perf.efficiency import HBM, MATMUL, constant_name, parse_name
from podsim.study.study import run_study, study_job
from podsim.topology import get_generation
from podsim.trace.configs import ResNetConfig
from podsim.trace.memory import fits_hbm
from podsim.trace.model import Compute
from podsim.trace.plans import model_config
from podsim.validation.row import Row, row_chips, row_key
from podsim.validation.table import (
    fitting_study,
    implied_s,
    peak_scale,
    row_trace,
    step_record,
    train_share,
)

HOST = "host"
HOST_CONSTANTS = {f"{get_generation(gen).chip_id}:{HOST}:{pipeline}": attr
                  for gen, pipelines in chip_constants.HOST_INPUT_RATES.items() for pipeline, (attr, _unit) in pipelines.items()}
"""Host input rates calibrated like a compute constant, named like one ('tpu-v3:host:jpeg') -> the
podsim.perf.chips attribute that holds it: every rate of chips.HOST_INPUT_RATES."""
UNLIMITED_HOST_RATE = float("inf")  # a fold with no row for a host rate: the hosts never hold a step
MIN_TRAIN_SHARE = 0.95
"""A1: an upper bound whose eval pass moves it by at most 5% (the table's resolution) may calibrate."""
MIN_SENSITIVITY = 0.3
"""A2: the least |d ln step / d ln constant| at which a row can set a constant."""
SENSITIVITY_STEP = 0.01
"""A2: the change of the constant the sensitivity is measured over (a 1% decrease: a fraction may be
at its bound of 1 but can always fall)."""


@dataclass(frozen=True)
class RowFacts:
    """What the rule reads of a row: its data and podsim's own trace of it (no engine run)."""

    id: str
    chip: str
    precision: str
    pipeline: str  # the hosts' input pipeline ('none', 'jpeg')
    eligible: bool
    why_not: str  # '' when eligible
    target_s: float  # the step the row is calibrated to: its measurement, or an A1 bound's implied value (R6)
    measured_mfu: float  # model FLOPs / (target_s x peak of the row's precision), per chip
    flops_per_hbm_byte: float  # model FLOPs per HBM byte of the chip's compute ops in podsim's trace
    host_items: float  # items (images) each host feeds per step, 0 without a host pipeline
    published: str


_FACTS: dict[tuple, RowFacts] = {}


def row_facts(row: Row) -> RowFacts:
    """The row's facts (cached per row)."""
    key = row_key(row)
    if key not in _FACTS:
        _FACTS[key] = _facts(row)
    return _FACTS[key]


def _facts(row: Row) -> RowFacts:
    gen = get_generation(row.generation)
    trace = row_trace(row)
    chips = row_chips(row)
    model = float(trace.meta.get("model_flops_per_step") or 0.0) / chips
    hbm = sum(op.hbm_bytes for op in trace.ops if isinstance(op, Compute) and not op.host and not op.bubble)
    peak = gen.peak_flops_per_s / peak_scale(row)
    capacity = gen.hbm_per_chip.si
    fits = fits_hbm(trace.meta["hbm_footprint"]["total_bytes"], capacity)
    # images each host feeds per step under the row's stated pipeline (whether or not its rate has a basis)
    cfg = model_config(row.model, row.overrides)
    decodes = row.options.input_pipeline != "none" and isinstance(cfg, ResNetConfig)
    host_items = cfg.global_batch * (gen.chips_per_host.value or 0) / chips if decodes else 0.0
    share = train_share(row) if row.kind == "upper_bound" else 1.0
    direct = row.kind == "measured" or (row.kind == "upper_bound" and share >= MIN_TRAIN_SHARE)
    what = (f"an upper bound whose training share is {share:.3f} (under {MIN_TRAIN_SHARE} of amendment A1)" if row.kind == "upper_bound"
            else f"a {row.kind}")
    target = implied_s(row) if direct else row.measured_s
    why = next((w for ok, w in (
        (direct, f"{what}, not a direct measurement"),
        (row.slices == 1, f"{row.slices} slices"),
        (row.stated, "its source leaves the plan or options open (`assumed`)"),
        (fits, f"over HBM: {trace.meta['hbm_footprint']['total_bytes'] / 2**30:.1f} GiB of {capacity / 2**30:.1f} GiB per chip "
               "by podsim's memory model"),
    ) if not ok), "")
    return RowFacts(row.id, gen.chip_id, row.options.precision, row.options.input_pipeline, not why, why, target,
                    model / (target * peak) if model else 0.0, model / hbm if hbm else float("inf"),
                    host_items, row.published)


def row_constants(row: Row) -> tuple[str, ...]:
    """The constants a row's prediction depends on: its chip's matmul fraction of its precision
    (and bf16's, which the no-basis fallback of another precision reads), its HBM fraction, and
    its hosts' rate when its hosts decode."""
    f = row_facts(row)
    names = [constant_name(f.chip, MATMUL, "bf16"), constant_name(f.chip, HBM)]
    if f.precision != "bf16":
        names.append(constant_name(f.chip, MATMUL, f.precision))
    if f.pipeline != "none" and f"{f.chip}:{HOST}:{f.pipeline}" in HOST_CONSTANTS:
        names.append(f"{f.chip}:{HOST}:{f.pipeline}")
    return tuple(names)


def _sourced(name: str) -> bool:
    return name in efficiency.SOURCED


def calibration_rows(rows: Iterable[Row], predictor: Predictor | None = None) -> dict[str, str]:
    """Constant name -> the id of the one row that sets it (R2 with A1 and A2): for each constant no
    source sets, the best-ranked eligible row (`ranked_pools`) from which the constant is
    identifiable (`sensitivity`). Picks only from the rows' data, podsim's trace and its engine."""
    return _identified(list(rows), predictor)[0]


def unidentified(rows: Iterable[Row], predictor: Predictor | None = None) -> dict[str, str]:
    """Constant name -> why no row sets it although eligible rows exist: none passes A2's
    identifiability test (the constant then has no basis: podsim.perf.efficiency's vendor figure)."""
    return _identified(list(rows), predictor)[1]


def ranked_pools(rows: Iterable[Row]) -> dict[str, list[RowFacts]]:
    """Constant name -> R2's ranking of its eligible rows, best first, for every constant a row of
    `rows` depends on that no source sets (R1); a constant without an eligible row is left out (R3).
    Matmul: that precision's rows by highest measured MFU; HBM: lowest model FLOPs per HBM byte;
    a host rate: most items per host per step; ties, the earliest published."""
    rows = list(rows)
    facts = {r.id: row_facts(r) for r in rows}
    wanted = {n for r in rows for n in row_constants(r) if not _sourced(n)}
    pools: dict[str, list[RowFacts]] = {}
    for name in sorted(wanted):
        chip, kind, sub = parse_name(name)
        pool = [f for f in facts.values() if f.eligible and f.chip == chip]
        if kind == MATMUL:
            pool = [f for f in pool if f.precision == sub and f.measured_mfu > 0]
            best = sorted(pool, key=lambda f: (-f.measured_mfu, f.published, f.id))
        elif kind == HBM:
            best = sorted(pool, key=lambda f: (f.flops_per_hbm_byte, f.published, f.id))
        else:
            pool = [f for f in pool if f.pipeline == sub and f.host_items > 0]
            best = sorted(pool, key=lambda f: (-f.host_items, f.published, f.id))
        if best:
            pools[name] = best
    return pools


def in_force(row: Row) -> dict[str, float]:
    """The values of the calibratable constants `row` reads, as podsim holds them now (a
    constant with no basis at its vendor figure)."""
    return current_values(n for n in row_constants(row) if not _sourced(n))


_RULE_PREDICTOR: Predictor | None = None


def sensitivity(row: Row, name: str, predictor: Predictor | None = None, values: Mapping[str, float] | None = None) -> float:
    """A2: |d ln step / d ln constant| of the row's predicted step at `values` (default: the
    constants in force), from the engine's step at the constant and at SENSITIVITY_STEP below it.
    1.0: the step is wholly set by the constant (time ~ 1 / fraction); 0: not at all."""
    global _RULE_PREDICTOR
    if predictor is None:
        _RULE_PREDICTOR = _RULE_PREDICTOR or Predictor()
        predictor = _RULE_PREDICTOR
    values = dict(in_force(row) if values is None else values)
    base = predictor.step_s(row, values)
    lower = predictor.step_s(row, {**values, name: values[name] * (1 - SENSITIVITY_STEP)})
    return abs(math.log(lower / base)) / -math.log(1 - SENSITIVITY_STEP)


def _identified(rows: list[Row], predictor: Predictor | None) -> tuple[dict[str, str], dict[str, str]]:
    """(picks, why not) of `calibration_rows` and `unidentified`: each ranked pool walked best
    first until a row passes A2 (the same choice as filtering the pool by A2, then ranking)."""
    by_id = {r.id: r for r in rows}
    picks: dict[str, str] = {}
    why: dict[str, str] = {}
    for name, pool in ranked_pools(rows).items():
        tried = []
        for f in pool:
            s = sensitivity(by_id[f.id], name, predictor)
            if s >= MIN_SENSITIVITY:
                picks[name] = f.id
                break
            tried.append(f"{f.id} {s:.2f}")
        else:
            why[name] = (f"no eligible row passes A2 (sensitivity >= {MIN_SENSITIVITY}): " + ", ".join(tried))
    return picks, why


def check_can_calibrate(row: Row, name: str) -> None:
    """A one-line refusal when `row` may not set `name` (R2, R4): not eligible, or not of the
    constant's generation or precision."""
    f = row_facts(row)
    chip, kind, sub = parse_name(name)
    if f.chip != chip or (kind == MATMUL and f.precision != sub):
        raise PodsimError(f"row {row.id} ({f.chip}, {f.precision}) cannot calibrate {name}")
    if not f.eligible:
        raise PodsimError(f"row {row.id} cannot calibrate {name}: {f.why_not}")


def check_identifiable(row: Row, name: str, predictor: Predictor | None = None) -> None:
    """A one-line refusal when `name` cannot be identified from `row` (A2)."""
    s = sensitivity(row, name, predictor)
    if s < MIN_SENSITIVITY:
        raise PodsimError(f"row {row.id} cannot calibrate {name}: a 1% change of it moves the row's step by {s:.2f}%, "
                          f"under the {MIN_SENSITIVITY}% of amendment A2")


# Constants in force ------------------------------------------------------------------------------

def current_values(names: Iterable[str]) -> dict[str, float]:
    """The values of calibratable constants as podsim holds them now."""
    out = {}
    for n in names:
        if n in HOST_CONSTANTS:  # a host rate with no basis: the hosts never hold a step
            v = getattr(chip_constants, HOST_CONSTANTS[n])
            out[n] = UNLIMITED_HOST_RATE if v is None else float(v)
        else:
            out[n] = efficiency.fraction(n).value
    return out


@contextmanager
def constants(values: Mapping[str, float]) -> Iterator[None]:
    """Exactly these calibrated constants in force (efficiency's calibrated set replaced; a host
    rate not given: unlimited), for calibration and cross-validation."""
    fr = {k: v for k, v in values.items() if k not in HOST_CONSTANTS}
    host = {attr: values.get(n, UNLIMITED_HOST_RATE) for n, attr in HOST_CONSTANTS.items()}
    old = {attr: getattr(chip_constants, attr) for attr in host}
    with efficiency.calibrated(fr, replace_all=True):
        for attr, v in host.items():
            setattr(chip_constants, attr, v)
        try:
            yield
        finally:
            for attr, v in old.items():
                setattr(chip_constants, attr, v)


class Predictor:
    """A row's step under a set of constants, as `run_study` gives it (the engine's step plus the
    multislice terms), each row's job built once and each (row, constants it depends on) simulated
    once: refits and folds rerun only the engine, and only when a constant the row reads changed."""

    def __init__(self) -> None:
        self._jobs: dict[tuple, object] = {}
        self._runs: dict[tuple, dict] = {}
        self.engine_runs = 0

    def summary(self, row: Row, values: Mapping[str, float]) -> dict:
        names = row_constants(row)
        key = (row_key(row), tuple((n, values.get(n)) for n in names))
        if key not in self._runs:
            # a host rate is read when the trace is generated (the host op's duration): one job per rate
            jk = (row_key(row), tuple((n, values.get(n)) for n in names if n in HOST_CONSTANTS))
            with constants(values):
                if jk not in self._jobs:
                    study = fitting_study(row)
                    self._jobs[jk] = (study, study_job(study))
                r = run_study(*self._jobs[jk])
            self.engine_runs += 1
            self._runs[key] = step_record(r)
        return self._runs[key]

    def step_s(self, row: Row, values: Mapping[str, float]) -> float:
        return self.summary(row, values)["step_time_s"]


def _bounds(name: str) -> tuple[float, float]:
    return (1.0, 1e9) if name in HOST_CONSTANTS else efficiency.BOUNDS


def solve(predictor: Predictor, row: Row, name: str, values: Mapping[str, float], tol: float = 1e-3, evals: int = 12) -> float:
    """The value of `name` that makes `row`'s prediction equal its calibration target (its
    measurement, or an A1 bound's implied value: RowFacts.target_s), the others at `values`. The step falls (or stays) as the value grows, so the value is bracketed by steps of
    x1.25 from the current one and then narrowed by regula falsi (Illinois); a row even the bound
    cannot meet sets the constant at that bound (a fraction at 1: the whole peak is still slow)."""
    if name not in HOST_CONSTANTS:
        check_can_calibrate(row, name)
    lo, hi = _bounds(name)
    target = row_facts(row).target_s

    def gap(x: float) -> float:
        return predictor.step_s(row, {**values, name: x}) / target - 1

    a = min(max(values.get(name, 0.8 * hi if hi <= 1 else 1e4), lo), hi)
    ga = gap(a)
    if abs(ga) < tol:
        return a
    up = ga > 0  # too slow: a larger value is needed
    b, gb = a, ga
    for _ in range(evals):
        b = min(b * 1.25, hi) if up else max(b / 1.25, lo)
        gb = gap(b)
        if (gb <= 0) if up else (gb >= 0):
            break
        a, ga = b, gb
        if b in (lo, hi):
            return b
    for _ in range(evals):  # a and b bracket the root (ga and gb of opposite signs, or gb = 0)
        if abs(gb) < tol or ga == gb:
            return b
        c = b - gb * (b - a) / (gb - ga)
        gc = gap(c)
        if (gc > 0) == (gb > 0):
            ga /= 2  # Illinois: keep the far end from sticking
        else:
            a, ga = b, gb
        b, gb = c, gc
    return b


def calibrate(rows: Sequence[Row], picks: Mapping[str, str], predictor: Predictor, start: Mapping[str, float] | None = None,
              rounds: int = 4, names: Iterable[str] | None = None, tol: float = 1e-3) -> dict[str, float]:
    """Solve each picked constant on its row (`names`: only these; the rest kept at `start`), in
    turn, until no constant moves by `tol` or `rounds` rounds (a generation's constants move each
    other's rows)."""
    by_id = {r.id: r for r in rows}
    todo = sorted(picks if names is None else (n for n in names if n in picks))
    values = dict(start or current_values(picks))
    values = {k: v for k, v in values.items() if k in picks}
    for n in todo:
        values.setdefault(n, current_values([n])[n])
    for _ in range(rounds):
        before = dict(values)
        for n in todo:
            values[n] = solve(predictor, by_id[picks[n]], n, values)
        if all(abs(values[n] - before[n]) <= tol * max(1.0, abs(before[n])) for n in todo):
            break
    return values


# Cross-validation (R5) ---------------------------------------------------------------------------

def _refit_for(held_out: Sequence[Row], rest: Sequence[Row], plain_picks: Mapping[str, str], plain_values: Mapping[str, float],
               predictor: Predictor) -> dict[str, float]:
    """The constants the held-out rows read, refit on `rest` by the rule: the same as the plain
    table's where the rule picks the same rows for every constant of the held-out rows' chips; else
    those chips' constants solved again on the fold's picks (a constant with no pick in the fold
    falls to its no-basis value)."""
    picks = calibration_rows(rest, predictor)
    chips = {row_facts(r).chip for r in held_out}
    on_chip = lambda n: parse_name(n)[0] in chips  # noqa: E731
    names = {n for n in {*picks, *plain_picks} if on_chip(n)}
    if all(picks.get(n) == plain_picks.get(n) for n in names):
        return dict(plain_values)
    values = {k: v for k, v in plain_values.items() if not on_chip(k)}
    start = {n: plain_values[n] for n in names if n in plain_values}
    values.update(calibrate(rest, {n: picks[n] for n in names if n in picks}, predictor, start=start))
    return values


def cross_validate(rows: Sequence[Row], plain_picks: Mapping[str, str], plain_values: Mapping[str, float], predictor: Predictor,
                   score: Callable[[Row, float], float], on_row: Callable[[str, str, float], None] | None = None) -> dict:
    """Leave-one-out (every row: drop it, re-apply the rule to the rest, refit, predict it) and
    leave-one-source-out (every corpus family: drop its rows, refit, predict them) errors per row
    id, scored by `score(row, predicted_s)` (podsim.validation.table.error)."""
    loo: dict[str, float] = {}
    loso: dict[str, float] = {}
    for row in rows:
        rest = [r for r in rows if r.id != row.id]
        values = _refit_for([row], rest, plain_picks, plain_values, predictor)
        loo[row.id] = score(row, predictor.step_s(row, values))
        if on_row:
            on_row("loo", row.id, loo[row.id])
    for corpus in sorted({r.corpus for r in rows}):
        held = [r for r in rows if r.corpus == corpus]
        rest = [r for r in rows if r.corpus != corpus]
        values = _refit_for(held, rest, plain_picks, plain_values, predictor)
        for row in held:
            loso[row.id] = score(row, predictor.step_s(row, values))
            if on_row:
                on_row("loso", row.id, loso[row.id])
    return {"loo": loo, "loso": loso}
