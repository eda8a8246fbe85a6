"""podsim's own trace file format (JSON or YAML, versioned) <-> StepTrace.

A file is a mapping with `podsim_trace: 1`, an optional `name` and `meta`, and `ops`: a list
of ops, each with an `id`, a `kind` and its fields:

- `kind: compute` — `duration_s`, or `flops` and `hbm_bytes` (per chip), optional
  `efficiency` (fraction of peak), `bubble` (pipeline fill/drain slot), `matmuls` (a list of
  `[count, m, k, n, hbm_bytes]`, the op's matmuls for the per-op model), `precision`
  (`bf16`, `int8`, `fp8`) and `host` (work on the host CPUs beside the chips, e.g. the input
  pipeline);
- `kind: all_reduce | reduce_scatter | all_gather | all_to_all | broadcast | reduce` —
  `bytes` (nccl-tests convention, see model.py; a number or a size such as `1MiB`), `group`
  (slice axes: `x`, `x,y`, `all`, `x:4:2`, `dcn`) and optional `algorithm`;
- `kind: send_recv` — `bytes`, `axis` (the group it shifts along: one axis group such as `y` or
  `x:4`, or several, `x,y`) and `shift`.

Every op may have `deps` (ids it waits for), `name` and `layer`. Errors name the op and the
field. Files are written atomically (a temporary file renamed into place), so a failed write
leaves nothing behind.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import ConfigDict, ValidationError, field_validator

from podsim import files
from podsim import quantities as q
from podsim.bounds import check_budget
from podsim.errors import PodsimError, first_error
from podsim.files import write_text_atomic
from podsim.trace.kinds import normalise_algorithm, normalise_kind
from podsim.trace.model import (
    COLLECTIVE_KINDS,
    Collective,
    Compute,
    Op,
    SendRecv,
    StepTrace,
    format_group,
    parse_group,
)
from podsim.units import parse_bytes

FORMAT_VERSION = 1
OP_KINDS = ("compute", *COLLECTIVE_KINDS, "send_recv")
SUFFIXES = (".json", ".yaml", ".yml")


class _Strict(q.NoBoolNumbers):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class _OpBase(_Strict):
    id: str
    kind: str
    deps: list[str] = []
    name: str = ""
    layer: str = ""

    @field_validator("id", "name", "layer", mode="before")
    @classmethod
    def _text(cls, v: Any) -> Any:
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v

    @field_validator("deps", mode="before")
    @classmethod
    def _dep_list(cls, v: Any) -> Any:
        if v is None:  # `deps:` with nothing after it (YAML's null): no dependencies
            return []
        if isinstance(v, (str, int)) and not isinstance(v, bool):
            v = [v]
        if not isinstance(v, (list, tuple)):
            return v  # pydantic refuses it in one line: a list is expected
        return [str(d) if isinstance(d, int) and not isinstance(d, bool) else d for d in v]


def _size(v: Any) -> float:
    """Bytes as a number or a size with a unit, at most a petabyte (quantities.OP_BYTES); the
    sign is checked by StepTrace.validate."""
    if isinstance(v, bool):
        raise ValueError("must be a number of bytes")
    if isinstance(v, (int, float)):
        if not math.isfinite(v):
            raise ValueError(f"{v} is not a finite number")
        value = float(v)
    else:
        text = str(v).strip()
        value = -parse_bytes(text[1:]) if text.startswith("-") else parse_bytes(text)
    return value if value < 0 else float(q.OP_BYTES.check(value))  # a negative size: StepTrace.validate says so


def _matmul_flops(mm: list[float]) -> float:
    return 2.0 * mm[0] * mm[1] * mm[2] * mm[3] if len(mm) >= 4 else 0.0


class _ComputeIn(_OpBase):
    kind: Literal["compute"]
    duration_s: q.OP_SECONDS.type | None = None
    flops: q.OP_FLOPS.type = 0.0
    hbm_bytes: float = 0.0
    efficiency: q.EFFICIENCY.type | None = None
    bubble: bool = False
    matmuls: list[list[q.MATMUL_DIM.type]] = []
    precision: str = "bf16"
    host: bool = False

    @field_validator("hbm_bytes", mode="before")
    @classmethod
    def _bytes(cls, v: Any) -> float:
        return _size(v)

    @field_validator("matmuls")
    @classmethod
    def _matmul_work(cls, v: list[list[float]]) -> list[list[float]]:
        for mm in v:
            q.OP_FLOPS.check(_matmul_flops(mm), f"matmul {[_num(x) for x in mm]}: 2 x count x m x k x n =")
        return v


class _CollectiveIn(_OpBase):
    bytes: float
    group: str | list[str]
    algorithm: str = "auto"

    @field_validator("bytes", mode="before")
    @classmethod
    def _bytes(cls, v: Any) -> float:
        return _size(v)


class _SendRecvIn(_OpBase):
    kind: Literal["send_recv"]
    bytes: float
    axis: str
    shift: q.SHIFT.type = 1

    @field_validator("bytes", mode="before")
    @classmethod
    def _bytes(cls, v: Any) -> float:
        return _size(v)


class _TraceFile(_Strict):
    podsim_trace: int
    name: str = ""
    meta: dict = {}
    ops: list[Any]

    @field_validator("ops")
    @classmethod
    def _budget(cls, v: list[Any]) -> list[Any]:
        check_budget("ops", len(v), "the trace", "each op is an event of the step engine")
        return v


def _one_line(exc: ValidationError) -> str:
    where, msg = first_error(exc)
    if msg == "unknown field":
        msg = "is not a field of this kind of op"
    return f"field {where!r}: {msg}"


def _op_from_dict(raw: Any, index: int) -> Op:
    if not isinstance(raw, dict):
        raise PodsimError(f"op #{index} is not a mapping of fields (got {type(raw).__name__})")
    op_id = raw.get("id", f"#{index}")
    kind = raw.get("kind")
    if kind != "compute":
        try:
            kind = normalise_kind(kind)
        except PodsimError:
            raise PodsimError(f"op {op_id!r}: unknown op kind {kind!r}; known: {', '.join(OP_KINDS)} "
                              "(collectives in any spelling: all-reduce, allreduce, ALLREDUCE)") from None
        raw = {**raw, "kind": kind}
    try:
        if kind == "compute":
            c = _ComputeIn.model_validate(raw)
            return Compute(c.id, c.duration_s, c.flops, c.hbm_bytes, c.efficiency, tuple(c.deps), c.name, c.layer, c.bubble,
                           tuple(tuple(float(x) for x in mm) for mm in c.matmuls), c.precision, c.host)
        if kind == "send_recv":
            s = _SendRecvIn.model_validate(raw)
            return SendRecv(s.id, s.bytes, parse_group(s.axis), s.shift, tuple(s.deps), s.name, s.layer)
        c = _CollectiveIn.model_validate(raw)
        alg = normalise_algorithm(c.algorithm, field="field 'algorithm':")
        return Collective(c.id, kind, c.bytes, parse_group(c.group), alg, tuple(c.deps), c.name, c.layer)
    except ValidationError as exc:
        raise PodsimError(f"op {op_id!r}: {_one_line(exc)}") from None
    except PodsimError as exc:
        text = str(exc)
        raise PodsimError(text if text.startswith("op ") else f"op {op_id!r}: {text}") from None


_META_NUMBERS = {"chips": q.Quantity("meta.chips", 1, q.MAX_FLEET_CHIPS, integer=True, why="the fleet bound"),
                 "slices": q.JOB_SLICES,
                 "model_flops_per_step": q.Quantity("FLOPs per step", 0, 1e30, low_open=True),
                 "hardware_flops_per_step": q.Quantity("FLOPs per step", 0, 1e30, low_open=True)}


def check_meta(meta: dict) -> dict:
    """The `meta` fields podsim reads (chips, slices, FLOPs per step, the HBM footprint, the
    parallelism and slice it was made for) have the types and ranges the summaries need."""
    from podsim.trace.mesh import parse_parallelism

    for key, quantity in _META_NUMBERS.items():
        if key in meta:
            quantity.check(meta[key], f"meta.{key}")
    hbm = meta.get("hbm_footprint")
    if hbm is not None:
        if not isinstance(hbm, dict) or "total_bytes" not in hbm:
            raise PodsimError("meta.hbm_footprint must be a mapping with total_bytes")
        q.Quantity("HBM bytes per chip", 0, 1e18, "B").check(hbm["total_bytes"], "meta.hbm_footprint.total_bytes")
    for key, parse in (("parallelism", parse_parallelism), ("slice", lambda text: trace_slice({"slice": text}))):
        if key in meta:
            if not isinstance(meta[key], str):
                raise PodsimError(f"meta.{key} {meta[key]!r} must be text, e.g. 'fsdp=16,tensor=4' or '4x4x8'")
            try:
                parse(meta[key])
            except PodsimError as exc:
                raise PodsimError(f"meta.{key}: {exc}") from None
    return meta


def trace_slice(meta: dict) -> tuple[int, ...] | None:
    """The slice shape a trace was made for (meta.slice, e.g. '4x4x8' or the twisted '4x4x8_T':
    a twist changes the wiring, not the program), or None if it does not say."""
    from podsim.topology import parse_shape
    from podsim.topology.shapes import split_slice_name

    text = meta.get("slice")
    if text is None:
        return None
    try:
        base, _ = split_slice_name(text)
    except PodsimError as exc:
        raise PodsimError(f"meta.slice {exc}") from None
    return parse_shape(base)


def trace_from_dict(data: Any) -> StepTrace:
    """A parsed native file -> a validated StepTrace (sizes, kinds, groups, no cycles)."""
    if not isinstance(data, dict) or "podsim_trace" not in data:
        raise PodsimError("not a podsim trace: the top level needs `podsim_trace: 1` and a list of `ops`")
    if isinstance(data["podsim_trace"], bool) or data["podsim_trace"] != FORMAT_VERSION:
        raise PodsimError(f"podsim_trace version {data['podsim_trace']!r} is not supported; this podsim reads version {FORMAT_VERSION}")
    try:
        f = _TraceFile.model_validate(data)
    except ValidationError as exc:
        raise PodsimError(f"trace file: {_one_line(exc)}") from None
    trace = StepTrace(tuple(_op_from_dict(raw, i) for i, raw in enumerate(f.ops)), f.name, check_meta(dict(f.meta)))
    trace.validate()
    return trace


def _num(x: float) -> float | int:
    return int(x) if float(x).is_integer() and abs(x) < 2**63 else float(x)


def op_to_dict(op: Op) -> dict:
    """One op as the plain mapping written to files (defaults left out)."""
    out: dict[str, Any] = {"id": op.id}
    if isinstance(op, Compute):
        out["kind"] = "compute"
        if op.duration_s is not None:
            out["duration_s"] = op.duration_s
        if op.flops:
            out["flops"] = _num(op.flops)
        if op.hbm_bytes:
            out["hbm_bytes"] = _num(op.hbm_bytes)
        if op.efficiency is not None:
            out["efficiency"] = op.efficiency
        if op.bubble:
            out["bubble"] = True
        if op.matmuls:
            out["matmuls"] = [[_num(x) for x in mm] for mm in op.matmuls]
        if op.precision != "bf16":
            out["precision"] = op.precision
        if op.host:
            out["host"] = True
    elif isinstance(op, Collective):
        out.update(kind=op.kind, bytes=_num(op.bytes), group=format_group(op.group))
        if op.algorithm != "auto":
            out["algorithm"] = op.algorithm
    else:
        out.update(kind="send_recv", bytes=_num(op.bytes), axis=format_group(op.group))
        if op.shift != 1:
            out["shift"] = op.shift
    if op.deps:
        out["deps"] = list(op.deps)
    if op.name:
        out["name"] = op.name
    if op.layer:
        out["layer"] = op.layer
    return out


def trace_to_dict(trace: StepTrace) -> dict:
    return {"podsim_trace": FORMAT_VERSION, "name": trace.name, "meta": trace.meta, "ops": [op_to_dict(op) for op in trace.ops]}


def dumps_trace(trace: StepTrace, fmt: Literal["json", "yaml"] = "json") -> str:
    data = trace_to_dict(trace)
    if fmt == "yaml":
        return yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=120)
    # One op per line: readable, diffable, and compact for traces of thousands of ops.
    head = json.dumps({k: v for k, v in data.items() if k != "ops"}, indent=1)[:-2]
    ops = ",\n  ".join(json.dumps(o) for o in data["ops"])
    return f"{head},\n \"ops\": [\n  {ops}\n ]\n}}\n"


def output_format(path: str | Path) -> Literal["json", "yaml"]:
    suffix = Path(path).suffix.lower()
    if suffix not in SUFFIXES:
        raise PodsimError(f"output file {str(path)!r} must end in .json, .yaml or .yml")
    return "json" if suffix == ".json" else "yaml"


def save_trace(trace: StepTrace, path: str | Path) -> Path:
    """Validate and write `trace` as JSON or YAML (by the file's suffix), atomically."""
    fmt = output_format(path)
    trace.validate()
    return write_text_atomic(path, dumps_trace(trace, fmt))


def load_native(path: str | Path, data: Any | None = None) -> StepTrace:
    """Read a native JSON/YAML trace file."""
    path = Path(path)
    if data is None:
        data = read_structured(path)
    return trace_from_dict(data)


def read_structured(path: Path) -> Any:
    """Parse a JSON or YAML file; a one-line error names the file and the position."""
    return files.read_structured(path, "trace")


__all__ = [
    "FORMAT_VERSION", "OP_KINDS", "dumps_trace", "load_native", "op_to_dict", "output_format",
    "read_structured", "save_trace", "trace_from_dict", "trace_to_dict", "write_text_atomic",
]
