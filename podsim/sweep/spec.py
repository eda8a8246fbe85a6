"""Sweep files: a base scenario and the points to run it at.

    sweep: ocs-vs-static                 # marks a sweep file and names it
    base: demo.yaml                      # a scenario file (relative to this file) or a mapping
    grid: {topology.wiring: [ocs, static], failures.host.availability: [99%, 99.5%]}
    points: [{label: small, topology.pods: 1}, {label: big, topology.pods: 2}]   # optional
    replicates: 1                        # repeats of every point with their own seeds
    seed: 7                              # root of the per-point seeds (default: the base's)
    seeding: common                      # common | independent
    capacity: {field: topology.pods, low: 1, high: 8}   # bisect for the smallest fleet

Points are `points x grid x replicates` (a missing list is one empty point); a field is set
by one of points, grid and capacity (two would silently replace one another's values). A
capacity sweep bisects a fleet size (CAPACITY_FIELDS), where more never misses a target less
meets; `show` names registered metrics of the base scenario's kind. Seeds come from
`numpy.random.SeedSequence(seed).spawn(n)`: with `common` seeding (the default) the n = replicates
children are shared by every point, so the variants of a comparison see the same job stream and
failures (common random numbers); `independent` gives each point its own child. A capacity
sweep bisects `field` over [low, high] for each grid cell with the cell's seed, so every fleet
size sees the same jobs.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from podsim.errors import PodsimError
from podsim.metrics import METRICS
from podsim.quantities import MAX_SWEEP_POINTS, Seed
from podsim.scenario.check import FieldError, check_scenario
from podsim.scenario.load import (
    YamlDoc,
    describe_error,
    format_error,
    line_of,
    read_yaml_doc,
    validated,
)
from podsim.scenario.schema import Scenario
from podsim.stats import replicate_seeds


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


# Fleet sizes a capacity sweep may bisect: more of them never misses a target less meets (a seed,
# a horizon or a rate would not bisect to a meaningful answer).
CAPACITY_FIELDS = ("topology.pods", "workload.serving.replicas", "workload.serving.disaggregated.prefill",
                   "workload.serving.disaggregated.decode")


class CapacitySpec(_Model):
    """Bisect an integer scenario field for the smallest value that meets the targets."""

    field: str = Field("topology.pods", description=f"the fleet size bisected: {', '.join(CAPACITY_FIELDS)}")
    low: int = Field(1, ge=1)
    high: int = Field(..., ge=1)
    judge: Literal["mean", "interval"] = Field(
        "mean", description="how a size's replicates meet a target: their mean, or the whole 95% interval (conservative)")


class SweepSpec(_Model):
    sweep: str = Field(..., min_length=1, description="the sweep's name")
    question: str = ""
    description: str = ""
    base: Any = Field(..., description="a scenario file (relative to the sweep file) or a scenario mapping")
    grid: dict[str, list[Any]] = Field(default_factory=dict, description="dotted field -> values (every combination)")
    points: list[dict[str, Any]] = Field(default_factory=list, description="each: dotted field -> value, optional label")
    replicates: int = Field(1, ge=1, le=10000)
    seed: Seed | None = None
    seeding: Literal["common", "independent"] = "common"
    capacity: CapacitySpec | None = None
    show: list[str] = Field(default_factory=list, description="metrics the CLI prints per point")
    compare: str | None = Field(None, description="the grid field whose values the report compares (ratios to its first "
                                                  "value); default: the first grid field")

    @field_validator("base")
    @classmethod
    def _base(cls, v: Any) -> Any:
        if not isinstance(v, (str, dict)):
            raise PodsimError("base is a scenario file name or a scenario mapping")
        return v

    @field_validator("grid")
    @classmethod
    def _grid(cls, v: dict) -> dict:
        for k, vals in v.items():
            if not vals:
                raise PodsimError(f"grid {k}: give at least one value")
        return v


def _overlaps(a: str, b: str) -> bool:
    """Whether dotted fields `a` and `b` set the same value (one is the other or inside it)."""
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def _check_fields(spec: SweepSpec, doc: YamlDoc) -> None:
    """Each field set by one of points, grid and capacity; the capacity field a fleet size."""
    def refuse(loc: tuple, msg: str):
        raise PodsimError(format_error(doc.source, line_of(doc.node, loc), loc, msg))

    cap = spec.capacity
    if cap is not None and cap.field not in CAPACITY_FIELDS:
        refuse(("capacity", "field"), f"{cap.field!r} is not a fleet size: a capacity sweep bisects one of "
                                      f"{', '.join(CAPACITY_FIELDS)} (more never misses a target less meets); "
                                      "sweep other fields with grid")
    for k in spec.grid:
        if cap is not None and _overlaps(k, cap.field):
            refuse(("grid", k), f"{k} is the capacity field {cap.field} too: the bisection would replace the grid's values")
    for i, pt in enumerate(spec.points):
        for k in pt:
            if k == "label":
                continue
            hit = next((g for g in spec.grid if _overlaps(k, g)), None)
            if hit is not None:
                refuse(("points", i, k), f"{k} is set by the grid too ({hit}): the grid's values would replace the "
                                         "point's; set it in one of the two")
            if cap is not None and _overlaps(k, cap.field):
                refuse(("points", i, k), f"{k} is the capacity field {cap.field} too: the bisection would replace the "
                                         "point's value")


def _check_show(spec: SweepSpec, doc: YamlDoc, kinds: set[str]) -> None:
    """`show` names metrics the sweep's runs report (a name nothing reports would print n/a)."""
    allowed = [m.name for m in METRICS.values() if m.kind in (*kinds, "both")]
    for i, name in enumerate(spec.show):
        if name not in allowed:
            what = " or ".join(sorted(kinds))
            near = difflib.get_close_matches(str(name), allowed, n=5, cutoff=0.5)
            raise PodsimError(format_error(doc.source, line_of(doc.node, ("show", i)), ("show", i),
                                           f"{name!r} is not a metric of a {what} run ({'closest: ' + ', '.join(near) + '; ' if near else ''}"
                                           f"`podsim metrics --kind {sorted(kinds)[0]}` lists all {len(allowed)} of them)"))


@dataclass(frozen=True)
class Point:
    """One scenario to run: the base with `overrides` (dotted fields) and `seed`."""

    index: int
    key: str
    label: str
    overrides: dict
    seed: int
    replicate: int = 0
    cell: int = 0

    def to_dict(self) -> dict:
        return {"index": self.index, "key": self.key, "label": self.label, "overrides": self.overrides,
                "seed": self.seed, "replicate": self.replicate, "cell": self.cell}


@dataclass(frozen=True)
class Sweep:
    """A loaded, validated sweep: its spec, the base scenario and its cells and points."""

    spec: SweepSpec
    source: str
    base: dict
    base_dir: str | None
    sweep_id: str
    cells: tuple[tuple[str, dict], ...]  # (label, overrides) per grid cell
    seeds: tuple[int, ...]  # common: one per replicate; independent: one per point
    points: tuple[Point, ...] = field(default=())  # grid mode: every point; capacity mode: none

    @property
    def mode(self) -> str:
        return "capacity" if self.spec.capacity is not None else "grid"

    def point(self, cell: int, replicate: int, extra: dict | None = None, index: int = 0) -> Point:
        """The point of a cell and replicate (a capacity probe adds its field's value)."""
        label, over = self.cells[cell]
        over = {**over, **(extra or {})}
        n = len(self.cells)
        seed = self.seeds[replicate] if self.spec.seeding == "common" else self.seeds[replicate * n + cell]
        if extra:
            label = ", ".join(x for x in (label, _label(extra)) if x)
        if self.spec.replicates > 1:
            label = f"{label} #{replicate + 1}" if label else f"#{replicate + 1}"
        return Point(index, point_key(over, seed), label or "base", over, seed, replicate, cell)


def point_key(overrides: dict, seed: int) -> str:
    text = json.dumps({"overrides": overrides, "seed": seed}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _label(over: dict) -> str:
    return ", ".join(f"{k.rsplit('.', 1)[-1]}={_short(v)}" for k, v in over.items())


def _short(v: Any) -> str:
    if isinstance(v, dict):
        return "{" + ",".join(f"{k}:{_short(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ",".join(_short(x) for x in v) + "]"
    return str(v)


def apply_overrides(raw: dict, overrides: dict) -> dict:
    """A deep copy of `raw` with each dotted field set (missing mappings are created)."""
    out = copy.deepcopy(raw)
    for dotted, value in overrides.items():
        parts = dotted.split(".")
        node = out
        for i, part in enumerate(parts[:-1]):
            nxt = node.get(part)
            if nxt is None:
                nxt = node[part] = {}
            if not isinstance(nxt, dict):
                raise PodsimError(f"cannot set {dotted}: {'.'.join(parts[: i + 1])} is not a mapping")
            node = nxt
        node[parts[-1]] = copy.deepcopy(value)
    return out


def point_scenario(base: dict, overrides: dict, seed: int, base_dir: str | None, source: str = "<sweep point>") -> Scenario:
    """The validated scenario of a point (used in workers too)."""
    raw = apply_overrides(base, {"seed": seed, **overrides})
    doc = YamlDoc(raw, None, source, Path(base_dir) if base_dir else None)
    scenario = validated(Scenario, doc)
    check_scenario(scenario)
    return scenario


class _Locator:
    """Maps a scenario error of a point to the line that set the value: the sweep file's
    override, else the base scenario (inline in the sweep file or its own file)."""

    def __init__(self, doc: YamlDoc, base_doc: YamlDoc, base_prefix: tuple):
        self.doc, self.base_doc, self.base_prefix = doc, base_doc, base_prefix

    def message(self, loc: tuple, msg: str, where: tuple | None) -> str:
        if where is not None:
            return format_error(self.doc.source, line_of(self.doc.node, where), loc, msg)
        return format_error(self.base_doc.source, line_of(self.base_doc.node, self.base_prefix + loc), loc, msg)


def _validate_point(sweep: Sweep, cell: int, extra: dict, locator: _Locator, where_of: dict) -> str:
    """The point's scenario checked as run checks it; its kind ('cluster', 'step', 'serving')."""
    p = sweep.point(cell, 0, extra)
    raw = apply_overrides(sweep.base, {"seed": p.seed, **p.overrides})
    doc = YamlDoc(raw, None, sweep.source, Path(sweep.base_dir) if sweep.base_dir else None)
    try:
        scenario = Scenario.model_validate(raw, context={"base_dir": doc.base_dir})
        check_scenario(scenario)
        return scenario.kind
    except FieldError as exc:
        loc, msg = exc.loc, str(exc)
    except ValidationError as exc:
        loc, msg = describe_error(exc.errors()[0], Scenario)
    except PodsimError as exc:
        raise PodsimError(f"{sweep.source}: point {p.label!r}: {exc}") from None
    dotted = ".".join(str(x) for x in loc)
    where = next((w for k, w in where_of.items() if dotted == k or dotted.startswith(k + ".") or k.startswith(dotted + ".")), None)
    raise PodsimError(locator.message(loc, msg, where) + f" (point {p.label!r})") from None


def load_sweep(path: str | Path) -> Sweep:
    """Read a sweep file and validate its base and every cell (a capacity sweep: at its low
    and high values). One-line errors name the file, the line and the field."""
    doc = read_yaml_doc(path, "sweep")
    if not isinstance(doc.data, dict) or "sweep" not in doc.data:
        raise PodsimError(f"{doc.source}: a sweep file starts with 'sweep: NAME' (a scenario file runs with `podsim run`)")
    spec = validated(SweepSpec, doc)
    _check_fields(spec, doc)
    if isinstance(spec.base, str):
        base_path = (Path(doc.source).parent / spec.base)
        if not base_path.is_file():
            raise PodsimError(format_error(doc.source, line_of(doc.node, ("base",)), ("base",), f"file {spec.base!r} does not exist (looked for {base_path})"))
        base_doc = read_yaml_doc(base_path)
        base_prefix: tuple = ()
        if not isinstance(base_doc.data, dict):
            raise PodsimError(f"{base_doc.source}: a scenario is a mapping of fields")
    else:
        base_doc, base_prefix = YamlDoc(spec.base, doc.node, doc.source, doc.base_dir), ("base",)
    base = dict(base_doc.data)
    n_points = max(1, len(spec.points)) * math.prod(len(v) for v in spec.grid.values()) * spec.replicates
    if n_points > MAX_SWEEP_POINTS:
        sizes = " x ".join(f"{len(v)} {k}" for k, v in spec.grid.items())
        raise PodsimError(format_error(doc.source, line_of(doc.node, ("grid",)), ("grid",),
                                       f"{n_points:.3g} points ({max(1, len(spec.points))} point(s) x {sizes} x {spec.replicates} "
                                       f"replicate(s)); a sweep has at most {MAX_SWEEP_POINTS:,} (each is a run and a store row)"))
    # cells: points x grid
    grid_keys = list(spec.grid)
    point_list = spec.points or [{}]
    cells: list[tuple[str, dict]] = []
    where_cells: list[dict] = []
    for i, pt in enumerate(point_list):
        pt = dict(pt)
        plabel = str(pt.pop("label", "")) if "label" in pt else ""
        for combo in itertools.product(*(spec.grid[k] for k in grid_keys)):
            over = {**pt, **dict(zip(grid_keys, combo, strict=True))}
            glabel = _label(dict(zip(grid_keys, combo, strict=True)))
            label = ", ".join(x for x in (plabel or (_label(pt) if pt else ""), glabel) if x)
            cells.append((label, over))
            where = {k: ("points", i, k) for k in pt}
            where.update({k: ("grid", k) for k in grid_keys})
            if spec.capacity:
                where[spec.capacity.field] = ("capacity", "field")
            where_cells.append(where)
    if spec.compare is not None and spec.compare not in spec.grid:
        raise PodsimError(format_error(doc.source, line_of(doc.node, ("compare",)), ("compare",),
                                       f"{spec.compare!r} is not a grid field; the grid sweeps {', '.join(spec.grid) or 'nothing'}"))
    if spec.capacity is not None:
        cap = spec.capacity
        if cap.low > cap.high:
            raise PodsimError(format_error(doc.source, line_of(doc.node, ("capacity", "low")), ("capacity", "low"), f"low {cap.low} > high {cap.high}"))
        if not base.get("targets") and not any("targets" in over or any(k.startswith("targets.") for k in over) for _, over in cells):
            raise PodsimError(format_error(base_doc.source, line_of(base_doc.node, base_prefix), base_prefix + ("targets",),
                                           "a capacity sweep needs targets in the scenario (e.g. wait_p95_s: '<= 1h')"))
    root = spec.seed if spec.seed is not None else int(base.get("seed", 0) or 0)
    n_seeds = spec.replicates if spec.seeding == "common" else spec.replicates * len(cells)
    ident = json.dumps({"spec": spec.model_dump(mode="json", exclude={"base"}), "base": base}, sort_keys=True, default=str)
    sweep_id = f"{''.join(c if c.isalnum() else '-' for c in spec.sweep)[:40]}-{hashlib.sha256(ident.encode()).hexdigest()[:8]}"
    sweep = Sweep(spec, doc.source, base, str(base_doc.base_dir) if base_doc.base_dir else None, sweep_id,
                  tuple(cells), replicate_seeds(root, n_seeds))
    locator = _Locator(doc, base_doc, base_prefix)
    kinds = set()
    for c, where in enumerate(where_cells):
        extras = [{spec.capacity.field: spec.capacity.low}, {spec.capacity.field: spec.capacity.high}] if spec.capacity else [{}]
        for extra in extras:
            kinds.add(_validate_point(sweep, c, extra, locator, where))
    _check_show(spec, doc, kinds)
    if spec.capacity is None:
        pts = [sweep.point(c, r, index=k) for k, (r, c) in enumerate(itertools.product(range(spec.replicates), range(len(cells))))]
        keys = [p.key for p in pts]
        if len(set(keys)) != len(keys):
            raise PodsimError(f"{doc.source}: two points are the same scenario with the same seed; make the grid's values distinct")
        sweep = Sweep(spec, doc.source, base, sweep.base_dir, sweep_id, tuple(cells), sweep.seeds, tuple(pts))
    return sweep
