"""Replay a real job trace from CSV: exact slice shapes where the trace has them, else
accelerator counts mapped to shapes.

A trace may carry a `shape` column (`4x4x8`, or the v4 paper's Table 2 notation `4x4x8_T` /
`4x4x8_NT`) and a `twisted` column (true/false, 1/0, yes/no; empty: false); a row with a shape
gets exactly that slice (whether the generation can place it is the scheduler's question: a
shape it never can is reported unplaceable, with the reason). A row without a shape (no column,
or an empty cell) maps its accelerator count n to the smallest shape of the generation's ladder
with at least n chips: e.g. on tpu-v4, 1 -> 1x1x1, 2 -> 1x1x2, 4 -> 1x2x2, 8 -> 2x2x2,
16 -> 2x2x4, 32 -> 2x4x4, 64 -> 4x4x4, 128 -> 4x4x8 ... Such a job keeps the count it asked for
(`Job.accelerators`), so a run counts the jobs whose slice was inferred and those rounded up to
more chips (`count_inferred`), and the CLI says so in one warning line.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

from pydantic import ConfigDict, Field, ValidationError

from podsim import quantities as q
from podsim.errors import PodsimError, first_error
from podsim.files import read_csv
from podsim.quantities import MAX_JOBS
from podsim.topology.generations import Generation, get_generation
from podsim.topology.shapes import parse_shape, split_slice_name, validate_shape
from podsim.workload.jobs import Job

ACCELERATORS = q.count("accelerators of one job", 1, q.MAX_FLEET_CHIPS, "the fleet bound")

# Shape ladders: each generation's shapes in increasing chip count (xpk / Cloud TPU docs).
LADDERS: dict[str, tuple[str, ...]] = {
    "cubes": ("1x1x1", "1x1x2", "1x2x2", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8",
              "8x8x16", "8x16x16", "16x16x16", "16x16x24", "16x24x24"),
    "pow2_rectangle": ("2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16", "16x32", "32x32"),
}


class TraceColumns(q.NoBoolNumbers):
    """Which CSV column holds each field; times and durations in seconds times `time_scale`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = "job_id"
    submit: str = "submission_time"
    duration: str = "duration"
    accelerators: str = "num_gpu"
    shape: str = "shape"  # optional: used when the header has it
    twisted: str = "twisted"  # optional likewise
    time_scale: q.ARRIVAL_SCALE.type = 1.0

    @classmethod
    def parse(cls, text: str | None) -> TraceColumns:
        """'submit=t,duration=d,accelerators=n' -> TraceColumns (unnamed fields keep defaults)."""
        if not text:
            return cls()
        fields = {}
        for part in text.split(","):
            key, sep, value = part.partition("=")
            if not sep or key.strip() not in cls.model_fields:
                raise PodsimError(f"--columns {part!r}: use key=column with keys {', '.join(cls.model_fields)}")
            if key.strip() in fields:
                raise PodsimError(f"--columns names {key.strip()!r} twice; the last would silently win")
            fields[key.strip()] = value.strip()
        try:
            return cls.model_validate(fields)
        except ValidationError as exc:
            where, msg = first_error(exc)
            raise PodsimError(f"--columns {where}={fields.get(where)!r}: {msg}") from None


class TraceSpec(q.NoBoolNumbers):
    """A job trace to replay: the CSV, its columns, how many jobs and how fast they arrive."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    path: Path
    columns: TraceColumns = TraceColumns()
    arrival_scale: q.ARRIVAL_SCALE.type = Field(1.0, description="multiply submission times (0.9: 11% more load)")
    limit: q.TRACE_JOBS.type | None = Field(None, description="read at most this many jobs")

    def jobs(self, generation: str | Generation) -> list[Job]:
        return load_trace_csv(self.path, generation, self.columns, limit=self.limit, arrival_scale=self.arrival_scale)


def ladder(gen: Generation) -> list[tuple[int, ...]]:
    """Valid shapes of `gen` in increasing size, used to round accelerator counts up."""
    if gen.slice_rule == "listed":
        names = gen.slice_shapes
    elif gen.slice_rule == "gpu_nodes":
        per = int(gen.chips_per_host.value)
        names = tuple(str(n) for n in [1, 2, 4] + list(range(per, gen.pod_chips + 1, per)))
    else:
        names = LADDERS[gen.slice_rule]
    out = []
    for name in names:
        try:
            out.append(validate_shape(gen, parse_shape(name)).shape)
        except PodsimError:
            continue
    return sorted(out, key=math.prod)


@functools.cache
def _ladder_of(gen_id: str) -> tuple[tuple[int, ...], ...]:
    return tuple(ladder(get_generation(gen_id)))


def shape_for_count(gen: Generation, n: int) -> tuple[int, ...]:
    """The smallest valid shape with at least `n` chips; an error if none is that large."""
    shapes = _ladder_of(gen.id) if get_generation(gen.id) is gen else tuple(ladder(gen))
    for shape in shapes:
        if math.prod(shape) >= n:
            return shape
    raise PodsimError(f"no {gen.id} slice has {n} chips (largest: {math.prod(shapes[-1])})")


_TRUE, _FALSE = ("true", "1", "yes", "y", "t"), ("false", "0", "no", "n", "f", "")


def _count(row: dict, column: str, path: Path, line: int) -> int | None:
    """The accelerator count of a row (None where the cell is empty); at least 1."""
    text = row[column].strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise PodsimError(f"{path.name} line {line}: {column} {text!r} is not a number of accelerators") from None
    if not (math.isfinite(value) and value >= 1 and value.is_integer()):
        raise PodsimError(f"{path.name} line {line}: {column} {text!r} must be a whole number >= 1")
    try:
        return int(ACCELERATORS.check(value, column))
    except PodsimError as exc:
        raise PodsimError(f"{path.name} line {line}: {exc}") from None


def _exact_shape(text: str, twist_text: str, gen: Generation, path: Path, line: int,
                 cols: TraceColumns) -> tuple[tuple[int, ...], bool]:
    """A row's exact slice: `AxBxC` with an optional `_T`/`_NT` suffix, and its twist column."""
    try:
        base, tag = split_slice_name(text)
    except PodsimError as exc:
        raise PodsimError(f"{path.name} line {line}: {cols.shape} {exc}") from None
    try:
        shape = parse_shape(base, gen.dims)
    except PodsimError as exc:
        raise PodsimError(f"{path.name} line {line}: {cols.shape}: {exc}") from None
    tw = twist_text.strip().lower()
    if tw not in _TRUE + _FALSE:
        raise PodsimError(f"{path.name} line {line}: {cols.twisted} {twist_text!r}: use true or false (or 1/0, yes/no)")
    twisted = tw in _TRUE
    if tag is not None and tw and twisted != tag:
        raise PodsimError(f"{path.name} line {line}: {cols.shape} {text!r} and {cols.twisted} {twist_text!r} disagree")
    return shape, twisted or bool(tag)


def count_inferred(jobs) -> tuple[int, int, float]:
    """(jobs whose shape was inferred from an accelerator count, those rounded up to more chips,
    the chip-seconds the rounding adds over their durations)."""
    inferred = [j for j in jobs if j.accelerators is not None]
    up = [j for j in inferred if j.chips > j.accelerators * j.slices]
    extra = sum((j.chips - j.accelerators * j.slices) * (j.duration_s or 0.0) for j in up)
    return len(inferred), len(up), extra


def load_trace_csv(path: str | Path, generation: str, columns: TraceColumns | None = None,
                   limit: int | None = None, arrival_scale: float = 1.0) -> list[Job]:
    """Jobs from a CSV trace, sorted by submission time, shifted to start at 0.

    Ids are kept, a repeated one numbered (`id#2`). `arrival_scale` multiplies the submission times (not the durations): 0.9 offers the same
    jobs 1/0.9 times as fast, the usual way to replay a trace at a higher load.
    """
    if limit is not None and limit < 1:
        raise PodsimError(f"limit {limit} must be >= 1 (the number of trace jobs to read); leave it out to read them all")
    if not (arrival_scale > 0 and math.isfinite(arrival_scale)):
        raise PodsimError(f"arrival_scale {arrival_scale} must be > 0 (1 replays the trace as recorded)")
    gen = get_generation(generation)
    cols = columns or TraceColumns()
    path = Path(path)
    header, rows = read_csv(path, "job trace")
    has_shape, has_twist = cols.shape in header, cols.twisted in header
    needed = [cols.id, cols.submit, cols.duration] + ([] if has_shape else [cols.accelerators])
    missing = [c for c in needed if c not in header]
    if missing:
        raise PodsimError(f"{path.name}: column {missing[0]!r} not found; columns are {', '.join(header)} (map them with --columns)")
    if has_twist and not has_shape:
        raise PodsimError(f"{path.name}: column {cols.twisted!r} twists the slices of a {cols.shape!r} column, which the trace lacks")
    has_count = cols.accelerators in header
    jobs: list[Job] = []
    for line, row in rows:
        try:
            submit = float(row[cols.submit]) * cols.time_scale
            duration = float(row[cols.duration]) * cols.time_scale
        except (ValueError, OverflowError):
            raise PodsimError(f"{path.name} line {line}: a finite number is expected in {cols.submit} and {cols.duration}") from None
        if not (math.isfinite(submit) and math.isfinite(duration)):
            raise PodsimError(f"{path.name} line {line}: {cols.submit} and {cols.duration} must be finite numbers")
        if duration < 0 or submit < 0:
            raise PodsimError(f"{path.name} line {line}: negative {cols.submit} or {cols.duration}")
        try:
            q.EVENT_TIME.check(submit, cols.submit)
            q.EVENT_TIME.check(duration, cols.duration)
        except PodsimError as exc:
            raise PodsimError(f"{path.name} line {line}: {exc}") from None
        if len(jobs) >= MAX_JOBS:
            raise PodsimError(f"{path.name}: more than {MAX_JOBS:,} jobs (the simulation's job bound); read fewer with --limit (a trace's limit)")
        n = _count(row, cols.accelerators, path, line) if has_count else None
        text = row[cols.shape].strip() if has_shape else ""
        if text:
            shape, twisted = _exact_shape(text, row.get(cols.twisted, "") if has_twist else "", gen, path, line, cols)
            if n is not None and n != math.prod(shape):
                raise PodsimError(f"{path.name} line {line}: {cols.shape} {text} has {math.prod(shape)} chips but "
                                  f"{cols.accelerators} says {n}; give one, or make them agree")
            job = Job(id=str(row[cols.id]), submit_s=submit, shape=shape, twisted=twisted, duration_s=duration)
        else:
            if n is None:
                raise PodsimError(f"{path.name} line {line}: neither {cols.shape} nor {cols.accelerators} is given; the slice needs one")
            if has_twist and row[cols.twisted].strip():
                raise PodsimError(f"{path.name} line {line}: {cols.twisted} is set but {cols.shape} is empty; a twist needs a shape")
            job = Job(id=str(row[cols.id]), submit_s=submit, shape=shape_for_count(gen, n), duration_s=duration, accelerators=n)
        jobs.append(job)
        if limit is not None and len(jobs) >= limit:
            break
    if not jobs:
        raise PodsimError(f"{path.name} has no jobs")
    seen: dict[str, int] = {}
    for k, j in enumerate(jobs):  # a repeated id (a resubmission, a copied row) gets #2, #3, ...
        seen[j.id] = seen.get(j.id, 0) + 1
        if seen[j.id] > 1:
            jobs[k] = Job(**{**j.__dict__, "id": f"{j.id}#{seen[j.id]}"})
    jobs.sort(key=lambda j: (j.submit_s, j.id))
    t0 = jobs[0].submit_s
    return [Job(**{**j.__dict__, "submit_s": (j.submit_s - t0) * arrival_scale}) for j in jobs]
