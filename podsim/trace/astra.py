"""Import ASTRA-sim 1.0 text workloads (astra-sim/astra-sim, workload/Workload.cc).

The file is read as ASTRA-sim reads it, a stream of whitespace-separated tokens:

    POLICY [policy arguments]
    N                                     (number of layers)
    name reserved fwd_cycles FWD_TYPE fwd_bytes ig_cycles IG_TYPE ig_bytes wg_cycles WG_TYPE wg_bytes update_cycles [layer policy]

Communication types: ALLREDUCE, ALLGATHER, REDUCESCATTER, ALLTOALL, NONE. Policies: DATA,
MODEL, HYBRID_DATA_MODEL, HYBRID_MODEL_DATA, HYBRID_TRANSFORMER (`model_parallel_NPU_group: K`),
HYBRID_DLRM / HYBRID_DLRM_ENHANCED (last bottom layer), HYBRID_CUSTOMIZED (a policy per layer),
MICRO and DISTRIBUTED_INFERENCE. Each policy's training loop is reproduced as a DAG, the way
ASTRA-sim's `iterate_*` functions run one pass: the forward over the layers, then the backward
from the last layer (weight-gradient and input-gradient compute, their collectives blocking or
not as ASTRA-sim issues them), and each layer's `update_cycles` after its weight-gradient
collective.

Collective groups follow ASTRA-sim's involved dimensions: network dimension i is slice axis
x, y, z[i]. DATA reduces weight gradients over every dimension; HYBRID_DATA_MODEL runs model
parallelism on dimension 0 and data on the rest (HYBRID_MODEL_DATA the reverse); HYBRID_TRANSFORMER
gives model parallelism the first dimensions that hold K NPUs (splitting one if needed, as
ASTRA-sim's break_dimension does). A collective whose dimension set is empty is a no-op in
ASTRA-sim and is left out (counted in meta).

Compute times are in cycles. ASTRA-sim's analytical backend counts time in ns (bandwidth in
GB/s = bytes/ns, latency in ns), so one cycle is 1 ns: `clock_hz` defaults to 1e9 and can be set.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from podsim import quantities as q
from podsim.bounds import check_budget
from podsim.errors import PodsimError
from podsim.files import read_text
from podsim.trace.kinds import normalise_kind
from podsim.trace.model import (
    SLICE_AXES,
    AxisGroup,
    Collective,
    Compute,
    Op,
    StepTrace,
    parse_group,
)

ASTRA_CLOCK_HZ = 1e9
COMM_TYPES = {"ALLREDUCE": "all_reduce", "ALLGATHER": "all_gather", "REDUCESCATTER": "reduce_scatter", "ALLTOALL": "all_to_all", "NONE": None}
ASTRA_POLICIES = (
    "DATA", "MODEL", "HYBRID_DATA_MODEL", "HYBRID_MODEL_DATA", "HYBRID_TRANSFORMER", "HYBRID_DLRM",
    "HYBRID_DLRM_ENHANCED", "HYBRID_CUSTOMIZED", "MICRO", "DISTRIBUTED_INFERENCE", "HYBRID_TRANSFORMER_FWD_IN_BCKWD",
)
# Compute cycles of one phase: a week at the fastest clock podsim takes (quantities.CLOCK_HZ)
CYCLES = q.Quantity("compute cycles of one phase", 0, q.MAX_OP_S * q.CLOCK_HZ.high, why="a week of cycles at 1 THz")
# Policies a HYBRID_CUSTOMIZED layer may name, with the loop it then follows.
LAYER_POLICIES = ("DATA", "MODEL", "HYBRID_DATA_MODEL", "HYBRID_MODEL_DATA", "HYBRID_TRANSFORMER")


@dataclass(frozen=True)
class Layer:
    name: str
    line: int
    fwd_cycles: int
    fwd_type: str | None
    fwd_bytes: int
    ig_cycles: int
    ig_type: str | None
    ig_bytes: int
    wg_cycles: int
    wg_type: str | None
    wg_bytes: int
    update_cycles: int
    policy: str | None = None


@dataclass(frozen=True)
class Workload:
    policy: str
    layers: tuple[Layer, ...]
    model_group: int | None = None  # HYBRID_TRANSFORMER
    last_bottom: int | None = None  # HYBRID_DLRM


class _Tokens:
    def __init__(self, path: Path, text: str):
        self.name = path.name
        self.items = [(tok, ln) for ln, line in enumerate(text.splitlines(), 1) for tok in line.split()]
        self.i = 0

    def next(self, what: str) -> tuple[str, int]:
        if self.i >= len(self.items):
            last = self.items[-1][1] if self.items else 1
            raise PodsimError(f"{self.name} line {last}: the file ends where {what} was expected")
        tok = self.items[self.i]
        self.i += 1
        return tok

    def integer(self, what: str, *, signed: bool = False, quantity: q.Quantity | None = None) -> int:
        tok, ln = self.next(what)
        if not re.fullmatch(r"-?[0-9]+", tok):
            raise PodsimError(f"{self.name} line {ln}: {what} {tok!r} is not a whole number")
        v = int(tok)
        if v < 0 and not signed:
            raise PodsimError(f"{self.name} line {ln}: {what} {v} is negative")
        if quantity is not None:
            try:
                quantity.check(v)
            except PodsimError as exc:
                raise PodsimError(f"{self.name} line {ln}: {what} {exc}") from None
        return v

    def comm(self, what: str) -> str | None:
        tok, ln = self.next(what)
        if tok.upper() == "NONE":
            return None
        try:
            kind = normalise_kind(tok, field=what, send_recv=False)
        except PodsimError:
            kind = None
        if kind is None or kind not in COMM_TYPES.values():
            raise PodsimError(f"{self.name} line {ln}: {what} {tok!r} is not supported; use {', '.join(COMM_TYPES)} "
                              "(or another spelling of one: all-reduce, AllGather ...)")
        return kind


def parse_workload(path: str | Path, text: str | None = None) -> Workload:
    """Read an ASTRA-sim 1.0 text workload; errors name the line and the field."""
    path = Path(path)
    if text is None:
        text = read_text(path, "ASTRA-sim workload")
    tk = _Tokens(path, text)
    policy, ln = tk.next("the parallelism policy")
    if policy not in ASTRA_POLICIES:
        raise PodsimError(f"{path.name} line {ln}: parallelism policy {policy!r} is not an ASTRA-sim 1.0 policy ({', '.join(ASTRA_POLICIES)})")
    if policy == "HYBRID_TRANSFORMER_FWD_IN_BCKWD":
        raise PodsimError(f"{path.name} line {ln}: HYBRID_TRANSFORMER_FWD_IN_BCKWD (checkpointed recomputation) is not supported")
    model_group = last_bottom = None
    if policy == "HYBRID_TRANSFORMER":
        tk.next("the model-parallel group label")
        model_group = tk.integer("model_parallel_NPU_group")
        if model_group < 1:
            raise PodsimError(f"{path.name}: model_parallel_NPU_group must be >= 1")
    elif policy.startswith("HYBRID_DLRM"):
        last_bottom = tk.integer("DLRM last bottom layer")
    n = tk.integer("the number of layers")
    check_budget("ops", n, f"{path.name}: {n:,} layers", "at least one op each; each op is an event of the step engine")
    layers = []
    for i in range(n):
        name, line = tk.next(f"layer {i + 1}'s name")
        tk.integer(f"layer {name!r} reserved field", signed=True)
        fields = {}
        for phase, label in (("fwd", "forward"), ("ig", "input-gradient"), ("wg", "weight-gradient")):
            fields[f"{phase}_cycles"] = tk.integer(f"layer {name!r} {label} compute cycles", quantity=CYCLES)
            fields[f"{phase}_type"] = tk.comm(f"layer {name!r} {label} communication type")
            fields[f"{phase}_bytes"] = tk.integer(f"layer {name!r} {label} communication size", quantity=q.OP_BYTES)
        fields["update_cycles"] = tk.integer(f"layer {name!r} update cycles", quantity=CYCLES)
        lp = None
        if policy == "HYBRID_CUSTOMIZED":
            lp, pl = tk.next(f"layer {name!r} policy")
            if lp not in LAYER_POLICIES:
                raise PodsimError(f"{path.name} line {pl}: layer {name!r} policy {lp!r} is not one of {', '.join(LAYER_POLICIES)}")
        layers.append(Layer(name, line, policy=lp, **fields))
    if tk.i < len(tk.items):
        tok, ln = tk.items[tk.i]
        raise PodsimError(f"{path.name} line {ln}: unexpected {tok!r} after the {n} layers the file announces")
    if last_bottom is not None and not 0 <= last_bottom < n:
        raise PodsimError(f"{path.name}: DLRM last bottom layer {last_bottom} is not a layer index (0..{n - 1})")
    return Workload(policy, tuple(layers), model_group, last_bottom)


def _split_dims(axes: Sequence[str], shape: Sequence[int] | None, model_group: int) -> tuple[tuple[AxisGroup, ...], tuple[AxisGroup, ...]]:
    """Model and data groups for HYBRID_TRANSFORMER: the first dimensions holding K NPUs."""
    if shape is None:
        raise PodsimError("HYBRID_TRANSFORMER needs the network shape (slice, e.g. 4x8) to split model and data dimensions")
    model: list[AxisGroup] = []
    data: list[AxisGroup] = []
    left = model_group
    for axis, size in zip(axes, shape, strict=True):
        if left == 1:
            data.append(AxisGroup(axis))
        elif left % size == 0:
            model.append(AxisGroup(axis))
            left //= size
        elif size % left == 0:
            model.append(AxisGroup(axis, left))
            data.append(AxisGroup(axis, size // left, left))
            left = 1
        else:
            raise PodsimError(f"model_parallel_NPU_group {model_group} does not split the network {'x'.join(map(str, shape))} into whole dimensions")
    if left != 1:
        raise PodsimError(f"model_parallel_NPU_group {model_group} exceeds the {math.prod(shape)} NPUs of the network")
    return tuple(model), tuple(data)


class _Program:
    """The DAG of one ASTRA-sim pass: a compute stream and collectives issued along it."""

    def __init__(self, clock_hz: float):
        self.clock = clock_hz
        self.ops: list[Op] = []
        self.last: str | None = None
        self.waits: list[str] = []
        self.skipped = 0

    def compute(self, op_id: str, cycles: int, name: str, layer: str) -> str | None:
        if cycles == 0:
            return None
        deps = tuple(dict.fromkeys(d for d in (self.last, *self.waits) if d))
        self.ops.append(Compute(op_id, duration_s=cycles / self.clock, deps=deps, name=name, layer=layer))
        self.last, self.waits = op_id, []
        return op_id

    def collective(self, op_id: str, kind: str | None, size: int, group: tuple[AxisGroup, ...], name: str, layer: str, *, blocking: bool) -> str | None:
        if kind is None or size == 0:
            return None
        if not group:
            self.skipped += 1
            return None
        deps = tuple(dict.fromkeys(d for d in (self.last, *self.waits) if d))
        self.ops.append(Collective(op_id, kind, float(size), group, deps=deps, name=name, layer=layer))
        if blocking:
            self.waits.append(op_id)
        return op_id

    def wait(self, op_id: str | None) -> None:
        if op_id:
            self.waits.append(op_id)

    def update(self, op_id: str, after: str | None, cycles: int, layer: str) -> None:
        if after and cycles:
            self.ops.append(Compute(op_id, duration_s=cycles / self.clock, deps=(after,), name="weight update after the gradient collective", layer=layer))


def import_astra_text(
    path: str | Path,
    *,
    shape: Sequence[int] | None = None,
    axes: Sequence[str] | None = None,
    clock_hz: float = ASTRA_CLOCK_HZ,
    text: str | None = None,
) -> StepTrace:
    """An ASTRA-sim 1.0 text workload -> a StepTrace of one training pass (module docstring)."""
    q.CLOCK_HZ.check(clock_hz, "clock")
    path = Path(path)
    wl = parse_workload(path, text)
    axes = tuple(axes) if axes is not None else (SLICE_AXES[: len(shape)] if shape is not None else SLICE_AXES)
    all_dims = parse_group(list(axes))

    def dims(policy: str) -> dict[str, tuple[AxisGroup, ...]]:
        first, rest = parse_group([axes[0]]), (parse_group(list(axes[1:])) if len(axes) > 1 else ())
        if policy in ("DATA", "HYBRID_DLRM", "HYBRID_DLRM_ENHANCED", "MICRO"):
            return {"fwd": (), "ig": (), "wg": all_dims}
        if policy in ("MODEL", "DISTRIBUTED_INFERENCE"):
            return {"fwd": all_dims, "ig": all_dims, "wg": ()}
        if policy == "HYBRID_MODEL_DATA":
            return {"fwd": rest, "ig": rest, "wg": first}
        if policy == "HYBRID_DATA_MODEL":
            return {"fwd": first, "ig": first, "wg": rest}
        if policy == "HYBRID_TRANSFORMER":
            model, data = _split_dims(axes, shape, wl.model_group or 1)
            return {"fwd": model, "ig": model, "wg": data}
        if policy == "ALL":
            return {"fwd": all_dims, "ig": all_dims, "wg": all_dims}
        raise PodsimError(f"policy {policy} has no dimension rule")

    prog = _Program(clock_hz)
    layers = wl.layers
    groups = [dims(layer.policy or ("ALL" if (wl.policy.startswith("HYBRID_DLRM") and i == 0) else wl.policy)) for i, layer in enumerate(layers)]
    ids = [f"L{i}" for i in range(len(layers))]

    def coll(i: int, phase: str, blocking: bool) -> str | None:
        layer = layers[i]
        kind, size = getattr(layer, f"{phase}_type"), getattr(layer, f"{phase}_bytes")
        label = {"fwd": "forward", "ig": "input-gradient", "wg": "weight-gradient"}[phase]
        return prog.collective(f"{ids[i]}.{phase}.comm", kind, size, groups[i][phase], f"{label} collective", layer.name, blocking=blocking)

    def comp(i: int, phase: str) -> str | None:
        layer = layers[i]
        label = {"fwd": "forward", "ig": "input-gradient", "wg": "weight-gradient"}[phase]
        return prog.compute(f"{ids[i]}.{phase}", getattr(layer, f"{phase}_cycles"), f"{label} compute", layer.name)

    def wg_comm(i: int) -> None:
        op = coll(i, "wg", blocking=False)
        prog.update(f"{ids[i]}.update", op, layers[i].update_cycles, layers[i].name)

    p = wl.policy
    if p == "MICRO":
        for i in range(len(layers)):
            wg_comm(i)
    elif p == "DATA":
        for i in range(len(layers)):
            comp(i, "fwd")
        for i in reversed(range(len(layers))):
            comp(i, "wg")
            wg_comm(i)
            if i > 0:
                comp(i, "ig")
    elif p.startswith("HYBRID_DLRM"):
        fwd0 = None
        for i in range(len(layers)):
            comp(i, "fwd")
            if layers[i].fwd_type == "all_to_all":
                c = coll(i, "fwd", blocking=False)
                fwd0 = c if i == 0 else fwd0
            elif i == wl.last_bottom:
                prog.wait(fwd0)
        ig0 = None
        for i in reversed(range(len(layers))):
            comp(i, "wg")
            wg_comm(i)
            if i == 0:
                if p == "HYBRID_DLRM":
                    prog.wait(ig0)
                break
            comp(i, "ig")
            if i == (wl.last_bottom or 0) + 1:
                ig0 = coll(0, "ig", blocking=False)
    elif p == "DISTRIBUTED_INFERENCE":
        for i in range(len(layers)):
            comp(i, "fwd")
            coll(i, "fwd", blocking=True)
    else:  # MODEL, HYBRID_DATA_MODEL, HYBRID_MODEL_DATA, HYBRID_TRANSFORMER, HYBRID_CUSTOMIZED
        for i in range(len(layers)):
            comp(i, "fwd")
            coll(i, "fwd", blocking=True)
        for i in reversed(range(len(layers))):
            comp(i, "ig")
            transformer = p == "HYBRID_TRANSFORMER"
            ig = coll(i, "ig", blocking=transformer) if (transformer or i > 0) else None
            comp(i, "wg")
            if p != "MODEL":
                wg_comm(i)
            if not transformer:
                prog.wait(ig)
    meta = {
        "source_format": "astra-sim-1.0-text",
        "file": str(path),
        "policy": wl.policy,
        "layers": len(layers),
        "clock_hz": clock_hz,
        "skipped_collectives": prog.skipped,
    }
    if wl.model_group:
        meta["model_parallel_npu_group"] = wl.model_group
    trace = StepTrace(tuple(prog.ops), name=path.stem, meta=meta)
    trace.validate(axes=axes)
    return trace
