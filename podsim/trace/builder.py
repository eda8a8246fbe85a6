"""The program builder of a step trace: ops in program order with logical axis groups,
mapped to slice-axis groups at the end (`ProgramBuilder.finish`).

Compute ops chain on one stream (each waits for the previous one); a collective names logical
axes ("data", "tensor", ...; "dcn" across slices) and is blocking, non-blocking or overlapping
the next compute. `finish` lays each group on the slice under a mesh mapping and splits an
all-reduce whose axes are not one block of the slice, or that crosses slices (dcn) as well as
axes inside them, into reduce-scatter, all-reduce, all-gather (hierarchical).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from podsim.errors import PodsimError
from podsim.trace.mesh import LOGICAL_AXES, MeshMapping, merge_groups
from podsim.trace.model import DCN_AXIS, AxisGroup, Collective, Compute, Op, SendRecv, busbw_factor

if TYPE_CHECKING:
    from podsim.trace.costs import Cost


class ProgramBuilder:
    """Collects ops in program order. Compute ops chain on one stream; collectives name
    logical axes until `finish` maps them to physical groups."""

    def __init__(self, sizes: Mapping[str, int], precision: str = "bf16", combine_grads: bool = False):
        self.sizes = dict(sizes)
        self.combine_grads = combine_grads  # hold data-parallel gradient all-reduces for one combined one
        self.held: dict[tuple[str, ...], tuple[float, list[str], str]] = {}
        self.ops: list[Op] = []
        self.logical: dict[str, tuple[str, ...]] = {}
        self.last_compute: str | None = None
        self.pending: list[str] = []  # blocking collectives the next compute waits for
        self.overlapping: list[str] = []  # collectives running beside the next compute (collective matmul)
        self.after_next: list[str] = []  # ... which the compute after that waits for
        self.precision = precision  # of the matmuls in compute ops

    def group_size(self, axes: Sequence[str]) -> int:
        return math.prod(self.sizes[a] for a in axes)

    def compute(self, op_id: str, cost: Cost, *, deps: Sequence[str | None] = (), name: str = "", layer: str = "", bubble: bool = False) -> str:
        """A compute op after the previous one; an op whose matmuls run at more than one precision
        (Cost.by_precision) as one op per precision in a row, the later ids `op_id.<precision>`.
        Returns the last op's id."""
        all_deps = tuple(dict.fromkeys(d for d in (self.last_compute, *self.pending, *self.after_next, *deps) if d))
        oid = ""
        for prec, part in cost.by_precision(self.precision):
            all_deps, oid = ((oid,), f"{op_id}.{prec}") if oid else (all_deps, op_id)
            mms = tuple(mm.as_tuple() for mm in part.matmuls if mm.count > 0)
            self.ops.append(Compute(oid, flops=part.flops, hbm_bytes=part.hbm, deps=all_deps, name=name, layer=layer,
                                    bubble=bubble, matmuls=mms, precision=prec if mms else "bf16"))
        self.last_compute, self.pending = oid, []
        self.after_next, self.overlapping = self.overlapping, []
        return oid

    def frontier(self) -> list[str]:
        """What an op issued now after the program so far must wait for."""
        return [d for d in (self.last_compute, *self.pending, *self.overlapping, *self.after_next) if d]

    def collective(self, op_id: str, kind: str, nbytes: float, axes: Sequence[str], *, deps: Sequence[str | None] | None = None, blocking: bool | str = True, name: str = "", layer: str = "") -> str | None:
        """A collective over logical `axes`; None (and no op) when the group is one chip.
        `blocking`: True, the next compute waits for it; False, only explicit deps do;
        "overlap", it runs beside the next compute and the one after waits for it."""
        axes = tuple(a for a in axes if self.sizes[a] > 1)
        if not axes or nbytes <= 0:
            return None
        d = self.frontier() if deps is None else [x for x in deps if x]
        self.ops.append(Collective(op_id, kind, float(nbytes), (), deps=tuple(dict.fromkeys(d)), name=name, layer=layer))
        self.logical[op_id] = axes
        if blocking == "overlap":
            self.overlapping.append(op_id)
        elif blocking:
            self.pending.append(op_id)
        return op_id

    def tile_all_reduce(self, op_id: str, nbytes: float, tile: tuple[AxisGroup, ...], *, name: str, layer: str) -> str:
        """An all-reduce over a fixed block of the slice (e.g. 2x2 chips; every block at once), on
        the critical path: not a logical axis, so `finish` keeps the group as given."""
        self.ops.append(Collective(op_id, "all_reduce", float(nbytes), tile, deps=tuple(dict.fromkeys(self.frontier())), name=name, layer=layer))
        self.pending.append(op_id)
        return op_id

    def grad_all_reduce(self, op_id: str, nbytes: float, axes: Sequence[str], *, ready: str, blocking: bool, name: str, layer: str) -> str | None:
        """A data-parallel gradient all-reduce of one layer: issued now, or (`combine_grads`) held
        and merged per axis group into one all-reduce after the backward pass (`flush_grads`)."""
        if not self.combine_grads:
            return self.collective(op_id, "all_reduce", nbytes, axes, deps=[ready], blocking=blocking, name=name, layer=layer)
        key = tuple(a for a in axes if self.sizes[a] > 1)
        if key and nbytes > 0:
            held, deps, _ = self.held.get(key, (0.0, [], name))
            self.held[key] = (held + nbytes, [*deps, ready], name)
        return None

    def flush_grads(self) -> list[str]:
        """The held gradient all-reduces, one per axis group, each after every layer it carries:
        XLA's all-reduce combiner on a TF1 program (CrossShardOptimizer's cross_replica_sum per
        variable), so none of it runs under the backward pass."""
        ids = [self.collective(f"grad.ar.combined.{'.'.join(axes)}", "all_reduce", nbytes, axes, deps=deps, name=f"{name} (combined)", layer="optimizer")
               for axes, (nbytes, deps, name) in self.held.items()]
        self.held = {}
        return [i for i in ids if i]

    def send(self, op_id: str, nbytes: float, shift: int, *, deps: Sequence[str | None], name: str = "", axis: str = "pipeline",
             layer: str = "") -> str | None:
        """A collective permute along the logical `axis` (the pipeline's stages, or the tensor
        ring of a collective matmul); None when the axis is one chip."""
        if self.sizes[axis] == 1:
            return None
        self.ops.append(SendRecv(op_id, float(nbytes), AxisGroup("x"), shift, deps=tuple(dict.fromkeys(d for d in deps if d)), name=name, layer=layer))
        self.logical[op_id] = (axis,)
        return op_id

    def windowed_matmul(self, op_id: str, side: str, cost: Cost, nbytes: float, axis: str, *, deps: Sequence[str | None] = (),
                        name: str, layer: str, bubble: bool = False) -> None:
        """A matmul fused with the collective on its input (`side` "all_gather") or output
        ("reduce_scatter") over logical `axis`, decomposed as XLA's windowed einsum runs it (Wang et
        al., ASPLOS 2023; openxla/xla SpmdPartitionerOptions: one direction, the loop not unrolled):
        t = |axis| partial matmuls of cost / t (one per shard of the sharded dimension) and t - 1
        collective permutes of one shard (nbytes / t) to the next chip of the ring. Iteration i runs
        partial matmul i beside one permute and the next iteration waits for both:

        - all_gather: iteration i multiplies the shard it holds while passing that shard on; the
          last iteration passes nothing;
        - reduce_scatter: iteration i computes its partial sum while the sums accumulated so far
          move on; the first iteration has nothing to pass yet, and the next op waits for the last
          permute (the chip's own reduced shard).

        So the step pays max(partial matmul, permute) per iteration: what a permute outlasts its
        partial matmul by is exposed, the rest hidden. One op per partial matmul and per permute;
        the engine times both."""
        if side not in ("all_gather", "reduce_scatter"):
            raise ValueError(f"windowed_matmul side {side!r}")
        t = self.sizes[axis]
        part, shard = cost.times(1.0 / t), nbytes / t
        ready = self.frontier()  # the input shard is ready when what came before is done
        prev: list[str] = []  # the ops of the previous iteration
        for i in range(t):
            this = [self.compute(f"{op_id}.part{i}", part, deps=[*prev, *(deps if i == 0 else ())],
                                 name=f"{name} (part {i + 1}/{t})", layer=layer, bubble=bubble)]
            if side == "all_gather" and i < t - 1:
                this.append(self.send(f"{op_id}.permute{i}", shard, +1, deps=prev or ready, axis=axis, layer=layer,
                                      name=f"tensor-parallel shard to the next chip (collective matmul, {i + 1} of {t - 1})"))
            elif side == "reduce_scatter" and i > 0:
                this.append(self.send(f"{op_id}.permute{i - 1}", shard, +1, deps=prev, axis=axis, layer=layer,
                                      name=f"tensor-parallel partial sums to the next chip (collective matmul, {i} of {t - 1})"))
            prev = [x for x in this if x]
        self.pending += prev[1:]  # reduce_scatter: the chip's reduced shard arrives with the last permute

    def volume_per_axis(self) -> dict[str, float]:
        """Bytes each chip moves on each logical axis per step (bus-bandwidth convention)."""
        vol = {a: 0.0 for a in (*LOGICAL_AXES, "dcn")}
        for op in self.ops:
            axes = self.logical.get(op.id)
            if not axes:
                continue
            if isinstance(op, SendRecv):
                moved = op.bytes
            else:
                moved = op.bytes * busbw_factor(op.kind, self.group_size(axes))
            for a in axes:
                vol[a] += moved
        return vol

    def finish(self, mapping: MeshMapping, shape: Sequence[int]) -> list[Op]:
        """Replace logical groups with slice-axis groups; split an all-reduce whose axes do not
        form one group, or that spans the slices (dcn) and axes inside them, into
        reduce-scatter, all-reduce, all-gather (hierarchical: the DCN carries the shard)."""
        out: list[Op] = []
        renamed: dict[str, str] = {}

        def groups(axes: Sequence[str]) -> list[tuple[AxisGroup, ...]]:
            """The slice-axis groups of logical axes under `mapping` (dcn: across slices)."""
            return [mapping.groups[a] if a != "dcn" else (AxisGroup(DCN_AXIS),) for a in axes]

        for op in self.ops:
            axes = self.logical.get(op.id)
            if op.deps and renamed:
                op = replace(op, deps=tuple(renamed.get(d, d) for d in op.deps))
            if axes is None:
                out.append(op)
                continue
            parts = groups(axes)
            if isinstance(op, SendRecv):
                out.append(SendRecv(op.id, op.bytes, parts[0], op.shift, op.deps, op.name, op.layer))
                continue
            inside = [a for a in axes if a != "dcn"]
            if op.kind == "all_reduce" and "dcn" in axes and inside and (grp := merge_groups(groups(inside), shape)):
                # Across slices XLA reduces hierarchically: reduce-scatter inside the slice (ICI),
                # all-reduce of the 1/n shard across the slices (DCN), all-gather inside again.
                out += self._hierarchical(op, grp, (AxisGroup(DCN_AXIS),), self.group_size(inside))
                renamed[op.id] = out[-1].id
                continue
            group = merge_groups(parts, shape)
            if group is not None:
                out.append(Collective(op.id, op.kind, op.bytes, group, op.algorithm, op.deps, op.name, op.layer))
                continue
            if op.kind != "all_reduce":
                raise PodsimError(f"op {op.id!r}: the {op.kind} over {', '.join(axes)} is not one block of the slice under mesh {mapping.describe()}; choose another mapping")
            inner = min(axes, key=lambda a: mapping.order.index(a) if a in mapping.order else len(mapping.order))
            outer = [a for a in axes if a != inner]
            inner_grp = mapping.groups[inner]
            outer_grp = merge_groups(groups(outer), shape)
            if outer_grp is None:
                raise PodsimError(f"op {op.id!r}: cannot lay the all-reduce over {', '.join(axes)} on mesh {mapping.describe()}")
            out += self._hierarchical(op, inner_grp, outer_grp, self.group_size([inner]))
            renamed[op.id] = out[-1].id
        return out

    @staticmethod
    def _hierarchical(op: Collective, inner: tuple[AxisGroup, ...], outer: tuple[AxisGroup, ...], n_inner: int) -> list[Collective]:
        """An all-reduce as reduce-scatter over `inner`, all-reduce of the 1/n_inner shard over
        `outer`, all-gather over `inner`, each waiting for the one before (ids .rs, .ar, .ag)."""
        rs = Collective(op.id + ".rs", "reduce_scatter", op.bytes, inner, op.algorithm, op.deps, op.name, op.layer)
        ar = Collective(op.id + ".ar", "all_reduce", op.bytes / n_inner, outer, op.algorithm, (rs.id,), op.name, op.layer)
        ag = Collective(op.id + ".ag", "all_gather", op.bytes, inner, op.algorithm, (ar.id,), op.name, op.layer)
        return [rs, ar, ag]

