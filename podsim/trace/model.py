"""The in-code step trace: a DAG of ops run SPMD on every chip of a slice.

This is the contract between trace producers (generators, importers, files) and the step-time
engine. Sizes follow the nccl-tests convention ([NCCL-PERF], hardware.md §5) so bus-bandwidth
factors apply unchanged:

- all_reduce, broadcast, reduce: `bytes` is the buffer each chip holds;
- all_gather: `bytes` is the gathered (output) buffer; each chip contributes bytes / n;
- reduce_scatter: `bytes` is the input buffer; each chip ends with bytes / n;
- all_to_all: `bytes` is each chip's send buffer; it sends bytes / n to every member;
- send_recv (a collective permute): every chip sends `bytes` to the chip `shift` steps along
  its group, as pipeline stages pass activations (one axis) or a collective matmul passes a
  shard round the tensor-parallel ring (one axis or several).

A group is named by axes of the slice, so one trace runs on any slice size: `x` is the chips
along x; `x,y` the x-y plane; `x,y,z` (or `all`) every chip. `x:4` is contiguous blocks of 4
along x and `x:4:2` is 4 chips spaced 2 apart (how a logical mesh axis that splits a physical
axis appears). `dcn` spans the slices of a multislice job (hierarchical: ICI inside each
slice, DCN across slices).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from podsim.errors import PodsimError, first_duplicate
from podsim.trace.kinds import COLLECTIVE_KINDS

CollectiveKind = Literal["all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast", "reduce"]
SLICE_AXES = ("x", "y", "z")
PRECISIONS = ("bf16", "int8", "fp8")
DCN_AXIS = "dcn"


@dataclass(frozen=True)
class AxisGroup:
    """Part of a group along one axis: `size` chips (None: the whole axis) spaced `stride` apart."""

    axis: str
    size: int | None = None
    stride: int = 1

    def __str__(self) -> str:
        if self.size is None:
            return self.axis
        return f"{self.axis}:{self.size}" + (f":{self.stride}" if self.stride != 1 else "")


def parse_group(group: str | Iterable[str | AxisGroup]) -> tuple[AxisGroup, ...]:
    """'x,y' / ['x', 'y:4'] / 'all' -> AxisGroups, in axis order, each axis at most once."""
    if isinstance(group, str):
        items: list = [g for g in re.split(r"[,\s]+", group.strip()) if g]
    else:
        items = list(group)
    if items == ["all"]:
        items = list(SLICE_AXES)
    out: list[AxisGroup] = []
    for item in items:
        if isinstance(item, AxisGroup):
            out.append(item)
            continue
        m = re.fullmatch(r"(x|y|z|dcn)(?::([0-9]+))?(?::([0-9]+))?", str(item).strip())
        if not m:
            raise PodsimError(f"group axis {item!r} is not understood; use x, y, z, dcn or all, optionally x:SIZE[:STRIDE]")
        size = int(m.group(2)) if m.group(2) else None
        stride = int(m.group(3)) if m.group(3) else 1
        if (size is not None and size < 1) or stride < 1:
            raise PodsimError(f"group axis {item!r}: size and stride must be >= 1")
        out.append(AxisGroup(m.group(1), size, stride))
    axes = [g.axis for g in out]
    if len(set(axes)) != len(axes):
        raise PodsimError(f"group {group!r} names an axis twice")
    if not out:
        raise PodsimError("a collective's group names no axis; use e.g. x, x,y or all")
    order = {a: i for i, a in enumerate((*SLICE_AXES, DCN_AXIS))}
    return tuple(sorted(out, key=lambda g: order[g.axis]))


def format_group(group: Sequence[AxisGroup]) -> str:
    return ",".join(str(g) for g in group)


DEFAULT_COMPUTE_EFFICIENCY = 0.6
"""The flat fraction of peak FLOP/s LLM training on TPU v4 averages ([ISCA23], hardware.md
perf.3): the value offered for a flat override (`--compute-efficiency`, a scenario's `compute_efficiency`
or `step_time.compute_efficiency`). Every step time defaults to the per-op model (podsim.perf)."""


@dataclass(frozen=True)
class Compute:
    """Local work on every chip: a fixed duration, or FLOPs and HBM bytes (roofline)."""

    id: str
    duration_s: float | None = None
    flops: float = 0.0
    hbm_bytes: float = 0.0
    efficiency: float | None = None  # fraction of peak FLOP/s reached; None: the engine's default
    deps: tuple[str, ...] = ()
    name: str = ""
    layer: str = ""
    # A pipeline fill/drain slot: the chip spends the time of this op (time it like any other)
    # but does no useful work, so FLOP totals and utilisation leave it out.
    bubble: bool = False
    # Per-op model inputs (podsim.perf): the op's matmuls as (count, m, k, n, operand HBM bytes)
    # per chip, and the precision its matmuls run at (bf16, int8, fp8).
    matmuls: tuple[tuple[float, ...], ...] = ()
    precision: str = "bf16"
    # Work on the host CPUs, beside the chips' program (the input pipeline producing the next
    # step's batch): it holds the step up only when it outlasts the chips; not chip compute.
    host: bool = False

    def duration_on(self, peak_flops_per_s: float, hbm_bytes_per_s: float, efficiency: float) -> float:
        """Its fixed duration, or the roofline: the slower of its FLOPs at `efficiency` of peak
        (the op's own efficiency wins) and its HBM traffic."""
        if self.duration_s is not None:
            return float(self.duration_s)
        eff = self.efficiency if self.efficiency is not None else efficiency
        if not 0 < eff <= 1:
            raise PodsimError(f"op {self.id!r}: efficiency {eff} must be in (0, 1]")
        t_flops = self.flops / (peak_flops_per_s * eff) if self.flops else 0.0
        t_hbm = self.hbm_bytes / hbm_bytes_per_s if self.hbm_bytes else 0.0
        return max(t_flops, t_hbm)

@dataclass(frozen=True)
class Collective:
    """A collective over a group of chips; `bytes` per the nccl-tests convention above."""

    id: str
    kind: CollectiveKind
    bytes: float
    group: tuple[AxisGroup, ...]
    algorithm: str = "auto"
    deps: tuple[str, ...] = ()
    name: str = ""
    layer: str = ""


@dataclass(frozen=True)
class SendRecv:
    """A collective permute: every chip sends `bytes` to the chip `shift` ranks on along its
    group: one axis group (pipeline stages along an axis), or several (a tensor-parallel ring laid
    over two axes; ranked as collective groups rank, the first axis fastest)."""

    id: str
    bytes: float
    axis: AxisGroup | tuple[AxisGroup, ...]
    shift: int = 1
    deps: tuple[str, ...] = ()
    name: str = ""
    layer: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.axis, tuple) and len(self.axis) == 1:  # one spelling per group: (x,) is x
            object.__setattr__(self, "axis", self.axis[0])

    @property
    def group(self) -> tuple[AxisGroup, ...]:
        """The axis groups the permute runs along (one for a pipeline's)."""
        return self.axis if isinstance(self.axis, tuple) else (self.axis,)


Op = Compute | Collective | SendRecv


@dataclass(frozen=True)
class StepTrace:
    """One training step as a DAG of ops (listed in any order that respects nothing in
    particular; `topological_order` sorts them)."""

    ops: tuple[Op, ...]
    name: str = ""
    meta: dict = field(default_factory=dict, compare=False)

    def by_id(self) -> dict[str, Op]:
        return {op.id: op for op in self.ops}

    def topological_order(self) -> list[Op]:
        """Ops in dependency order; a one-line error names an op on a cycle or a missing dep."""
        ops = self.by_id()
        if len(ops) != len(self.ops):
            dup = first_duplicate(op.id for op in self.ops)
            raise PodsimError(f"op id {dup!r} is used twice")
        indeg = {i: 0 for i in ops}
        users: dict[str, list[str]] = {i: [] for i in ops}
        for op in self.ops:
            for d in op.deps:
                if d not in ops:
                    raise PodsimError(f"op {op.id!r} depends on {d!r}, which is not in the trace")
                indeg[op.id] += 1
                users[d].append(op.id)
        ready = [i for i in ops if indeg[i] == 0]
        order: list[Op] = []
        while ready:
            i = ready.pop()
            order.append(ops[i])
            for u in users[i]:
                indeg[u] -= 1
                if indeg[u] == 0:
                    ready.append(u)
        if len(order) != len(ops):
            stuck = sorted(i for i, n in indeg.items() if n > 0)
            raise PodsimError(f"the dependencies form a cycle through op {stuck[0]!r}")
        return order

    def validate(self, axes: Sequence[str] = SLICE_AXES) -> None:
        """Within the ops budget; sizes non-negative, kinds known, groups on axes the slice
        has, send/recv shifts nonzero, no op depending on itself, no cycles."""
        from podsim.bounds import check_budget

        check_budget("ops", len(self.ops), f"trace {self.name!r}" if self.name else "the trace",
                     "each op is an event of the step engine")
        for op in self.ops:
            if op.id in op.deps:
                raise PodsimError(f"op {op.id!r} depends on itself")
            if isinstance(op, SendRecv) and op.shift == 0:
                raise PodsimError(f"op {op.id!r}: send_recv shift 0 sends every chip's bytes to itself; give a shift != 0 (1: the next chip)")
            if isinstance(op, Collective):
                if op.kind not in COLLECTIVE_KINDS:
                    raise PodsimError(f"op {op.id!r}: unknown collective kind {op.kind!r}; known: {', '.join(COLLECTIVE_KINDS)}")
                groups = [g.axis for g in op.group]
            elif isinstance(op, SendRecv):
                groups = [g.axis for g in op.group]
            else:
                groups = []
                if op.duration_s is not None and op.duration_s < 0:
                    raise PodsimError(f"op {op.id!r}: duration_s {op.duration_s} is negative")
                if op.flops < 0 or op.hbm_bytes < 0:
                    raise PodsimError(f"op {op.id!r}: flops and hbm_bytes must be >= 0")
                if op.precision not in PRECISIONS:
                    raise PodsimError(f"op {op.id!r}: precision {op.precision!r} is not known; use one of: {', '.join(PRECISIONS)}")
                for mm in op.matmuls:
                    if len(mm) not in (4, 5) or any(x < 0 for x in mm):
                        raise PodsimError(f"op {op.id!r}: matmul {list(mm)} is not [count, m, k, n, hbm_bytes] with non-negative numbers")
            size = getattr(op, "bytes", 0.0)
            if size < 0:
                raise PodsimError(f"op {op.id!r}: bytes {size} is negative")
            missing = [a for a in groups if a not in axes and a != DCN_AXIS]
            if missing:
                raise PodsimError(f"op {op.id!r}: group axis {missing[0]!r} is not an axis of this slice ({', '.join(axes)})")
        self.topological_order()


def busbw_factor(kind: str, p: int) -> float:
    """nccl-tests bus-bandwidth factor ([NCCL-PERF], hardware.md nccl.2, nccl.4-nccl.7): bytes a
    chip moves per byte of the op's buffer in the convention above; busbw = algbw x factor."""
    if p <= 1:
        return 1.0 if kind in ("broadcast", "reduce", "send_recv") else 0.0
    return {"all_reduce": 2 * (p - 1) / p, "reduce_scatter": (p - 1) / p, "all_gather": (p - 1) / p,
            "all_to_all": (p - 1) / p}.get(kind, 1.0)
