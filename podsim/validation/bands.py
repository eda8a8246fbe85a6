"""Error bands: how far podsim's answers of one kind have been from published measurements.

Every step time (and serving figure) podsim prints carries the typical error that the validation
corpus measured for runs of its kind: "8.1 s (typical error ±7% over 31 runs of this kind)". A
kind is a path from general to specific, e.g. ("step", "multislice", "tpu-v5e"); a band is looked up
at the most specific prefix the corpus has at least `MIN_RUNS` rows of, and says when it fell back to
a broader kind, or that the corpus has no run of the kind at all.

The figures are data (podsim/data/error_bands.json), written by `benchmarks/validation.py
--write-bands` from the table's errors (`bands_from_errors`, pure) and checked against a fresh run
of the table by the tests, so printing a band never runs the table.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

MIN_RUNS = 3
"""The fewest rows of a kind its own band is taken from; fewer, and the band of the broader kind is used."""
TYPICAL_QUANTILE = 0.68
"""'Typical error' is this quantile of |error| over the rows of a kind: about two in three runs of the
kind fall within it (the coverage of one standard deviation of a normal error)."""
BANDS_FILE = "error_bands.json"


@dataclass(frozen=True)
class ErrorBand:
    """The typical |error| of podsim against measurement for one kind of answer.

    `kind` is the path asked for; `used` the prefix the figures come from (shorter than `kind` when
    the corpus holds fewer than MIN_RUNS rows of the kind asked); `typical` None when the corpus
    holds no row even of the broadest kind."""

    kind: tuple[str, ...]
    used: tuple[str, ...]
    typical: float | None
    n_runs: int
    median: float | None = None
    max: float | None = None

    @property
    def covered(self) -> bool:
        """True when the figures are for the kind asked, not a broader one."""
        return self.typical is not None and self.used == self.kind

    def text(self) -> str:
        """'typical error ±7% over 31 runs of this kind', or what it fell back to."""
        if self.typical is None:
            return "no validation runs of this kind: error unknown"
        figure = f"typical error ±{self.typical:.0%} over {self.n_runs} runs"
        if self.covered:
            return f"{figure} of this kind"
        return f"{figure} of {kind_label(self.used)} (none or too few of {kind_label(self.kind)})"

    def interval(self, value: float) -> tuple[float, float]:
        """value x (1 -/+ typical): the range two runs in three of this kind fall in (NaNs when unknown)."""
        if self.typical is None:
            return math.nan, math.nan
        return value * (1 - self.typical), value * (1 + self.typical)

    def with_value(self, value_text: str) -> str:
        """'8.1 s (typical error ±7% over 31 runs of this kind)'."""
        return f"{value_text} ({self.text()})"

    def as_dict(self) -> dict:
        """The band's figures for --json and the results store."""
        return {"kind": "/".join(self.kind), "used": "/".join(self.used), "typical": self.typical,
                "n_runs": self.n_runs, "median": self.median, "max": self.max, "covered": self.covered}


def kind_label(kind: Sequence[str]) -> str:
    """('step', 'multislice', 'tpu-v5e') -> 'multislice steps on tpu-v5e'."""
    if not kind:
        return "any kind"
    what, *rest = kind
    noun = {"step": "steps", "serve": "serving runs"}.get(what, what)
    mode = [r for r in rest[:1]]
    where = rest[1:]
    words = " ".join(mode + [noun])
    return words + (f" on {'/'.join(where)}" if where else "")


def step_kind(generation: str, slices: int) -> tuple[str, ...]:
    """The kind of a training step: single slice or multislice, on a generation (its id)."""
    return ("step", "multislice" if slices > 1 else "single-slice", generation)


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile of values, linear between order statistics (numpy's default)."""
    s = sorted(values)
    if not s:
        raise ValueError("quantile of no values")
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def bands_from_errors(errors: Iterable[tuple[Sequence[str], float]]) -> dict[tuple[str, ...], dict]:
    """Figures per kind prefix from (kind, signed error) pairs of validation rows: every prefix of
    every row's kind gets the row's |error|. Pure: `benchmarks/validation.py --write-bands` stores it."""
    by_prefix: dict[tuple[str, ...], list[float]] = {}
    for kind, err in errors:
        if not math.isfinite(err):
            raise ValueError(f"error band: a row of kind {'/'.join(kind)} has a non-finite error {err!r}")
        for n in range(1, len(kind) + 1):
            by_prefix.setdefault(tuple(kind[:n]), []).append(abs(err))
    return {k: {"n_runs": len(v), "typical": quantile(v, TYPICAL_QUANTILE), "median": quantile(v, 0.5), "max": max(v)}
            for k, v in sorted(by_prefix.items())}


def to_json(bands: Mapping[tuple[str, ...], dict], note: str) -> str:
    """The bands file's text: a note on how it was made, then one record per kind prefix."""
    records = [json.dumps({"kind": list(k), **{f: round(v, 6) if isinstance(v, float) else v for f, v in fig.items()}})
               for k, fig in sorted(bands.items())]
    head = json.dumps({"note": note, "min_runs": MIN_RUNS, "typical_quantile": TYPICAL_QUANTILE})[:-1]
    return head + ', "bands": [\n ' + ",\n ".join(records) + "\n]}\n"


@cache
def stored_bands() -> dict[tuple[str, ...], dict]:
    """The shipped bands (podsim/data/error_bands.json), by kind prefix."""
    text = resources.files("podsim.data").joinpath(BANDS_FILE).read_text(encoding="utf-8")
    return {tuple(r["kind"]): {k: v for k, v in r.items() if k != "kind"} for r in json.loads(text)["bands"]}


def band(kind: Sequence[str], bands: Mapping[tuple[str, ...], dict] | None = None) -> ErrorBand:
    """The band of `kind`: its own figures when the corpus has MIN_RUNS rows of it, else those of the
    longest prefix that has; no figures (typical None) when even the broadest prefix has none."""
    table = stored_bands() if bands is None else bands
    kind = tuple(kind)
    for n in range(len(kind), 0, -1):
        fig = table.get(kind[:n])
        if fig and fig["n_runs"] >= MIN_RUNS:
            return ErrorBand(kind, kind[:n], fig["typical"], fig["n_runs"], fig.get("median"), fig.get("max"))
    return ErrorBand(kind, (), None, 0)


def step_band(generation: str, slices: int = 1) -> ErrorBand:
    """The band of a training step on `generation` (its id) over `slices` slices."""
    return band(step_kind(generation, slices))


SERVING_KINDS = {"ttft": "ttft", "tpot": "throughput", "throughput": "throughput", "cost": "throughput",
                 "chips": "rate"}
"""Which kind of serving validation row each serving answer is judged by: a first token by the
batch-1 first-token rows; TPOT, throughput and cost per token (chip-hours over tokens) by the
throughput rows (their time is the decode and prefill steps at load); the chips a capacity search
needs by the rows that measured a rate within latency bounds."""


def serving_kind(answer: str, generation: str) -> tuple[str, ...]:
    """("serve", kind, generation) of a serving answer (SERVING_KINDS) on a generation (its id)."""
    if answer not in SERVING_KINDS:
        raise ValueError(f"serving answer {answer!r}: one of {', '.join(SERVING_KINDS)}")
    return ("serve", SERVING_KINDS[answer], generation)


def serving_band(answer: str, generation: str, bands: Mapping[tuple[str, ...], dict] | None = None) -> ErrorBand:
    """The band of a serving answer (ttft, tpot, throughput, cost, chips) on `generation`."""
    return band(serving_kind(answer, generation), bands)


def merged(stored: Mapping[tuple[str, ...], dict], new: Mapping[tuple[str, ...], dict], root: str) -> dict:
    """`stored` with every kind under `root` ("step", "serve") replaced by `new`'s: one table's
    --write-bands keeps the other's bands in the one file."""
    keep = {k: v for k, v in stored.items() if not k or k[0] != root}
    return {**keep, **{k: v for k, v in new.items() if k and k[0] == root}}


SERVING_ANSWERS = (("ttft", "TTFT"), ("tpot", "TPOT"), ("throughput", "throughput"), ("cost", "cost per million tokens"))
"""A serving run's answers that carry a band, with their names in words (the capacity search's
chips: `capacity_band_metrics`)."""


def serving_band_metrics(generation: str) -> dict:
    """Each serving answer's band as metrics: `<answer>_error` (the typical |error|, NaN where the
    corpus has no run of the kind), `<answer>_error_runs`, `<answer>_error_text`, and
    `serving_error_text` (all of them in one line)."""
    out, words = {}, []
    for answer, name in SERVING_ANSWERS:
        b = serving_band(answer, generation)
        out.update({f"{answer}_error": b.typical if b.typical is not None else math.nan,
                    f"{answer}_error_runs": b.n_runs, f"{answer}_error_text": b.text()})
        words.append(f"{name} {b.text()}")
    out["serving_error_text"] = "; ".join(words)
    return out


def capacity_band_metrics(generation: str) -> dict:
    """The capacity search's chips with the band of runs that measured a rate within latency bounds."""
    b = serving_band("chips", generation)
    return {"capacity_chips_error": b.typical if b.typical is not None else math.nan,
            "capacity_chips_error_runs": b.n_runs, "capacity_chips_error_text": b.text()}
