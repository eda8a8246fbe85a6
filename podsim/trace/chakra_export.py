"""Export a podsim StepTrace as Chakra execution traces: one current-schema `.et` per rank.

Each rank's file is a GlobalMetadata record (version 0.0.4, the schema version of Chakra's
`schema/protobuf/et_def.proto`) and one Node per op, with the published fields and attribute
types ASTRA-sim's ETFeeder reads:

- Compute -> COMP_NODE: `duration_micros` (µs, rounded: the schema's field is an integer) on
  every node: a fixed-duration op's own, else the op's time on the chip of `generation` by the
  per-op model (podsim.perf, as the engine charges it; or a flat `efficiency`), so a replayer
  such as ASTRA-sim needs no compute model of its own; attributes `num_ops` (int64, FLOPs) and
  `tensor_size` (uint64, HBM bytes) on every node too; `is_cpu_op` false, true for host work
  (the input pipeline).
- Collective -> COMM_COLL_NODE: `comm_type` (int64, CollectiveCommType), `comm_size` (int64,
  bytes in the nccl-tests convention, as the importer reads it), `involved_dim` (bool list, one
  per slice axis) when the group is whole slice axes (x, y,z ...).
- SendRecv -> COMM_SEND_NODE to the peer `shift` steps along its axis and COMM_RECV_NODE from
  the peer as many steps back (`comm_dst` / `comm_src` int32 ranks, `comm_tag` int32 pairing
  them, `comm_size` int64); ops after it depend on the receive.
- Dependencies are `data_deps`; node ids are the ops' positions in the trace.

Ranks are numbered as ASTRA-sim numbers NPUs, dimension 0 fastest: rank = x + X*(y + Y*z).
What the schema cannot say exactly rides along as podsim's own attributes (ignored by other
readers, read back by podsim's importer so the round trip is exact): `podsim_id`, `podsim_layer`,
`podsim_group` (groups like x:4:2 or dcn that involved_dim cannot name), `podsim_algorithm`,
`podsim_duration_s`, `podsim_flops`, `podsim_hbm_bytes`, `podsim_bytes` (exact values), `podsim_shift`
(a shift outside 0..size-1, as written), `podsim_efficiency`, `podsim_bubble`, and for an op the
per-op model times, `podsim_modelled` (its duration_micros is that time, not a fixed duration),
`podsim_matmuls` (double list: count, m, k, n, operand bytes per matmul) and `podsim_precision`;
GlobalMetadata carries `podsim_trace` (the name), `podsim_meta` (the trace's meta as JSON) and
`podsim_generation` (whose chip the durations are for). `extras=False` leaves them out: then
an import reads each compute op as its fixed duration (to the µs).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence

from google.protobuf.internal.encoder import _VarintBytes

from podsim.errors import PodsimError
from podsim.trace.chakra_schema import chakra_et_pb2 as pb
from podsim.trace.chakra_wire import make_attr as _attr
from podsim.trace.model import (
    DCN_AXIS,
    SLICE_AXES,
    AxisGroup,
    Collective,
    Compute,
    SendRecv,
    StepTrace,
    format_group,
)

SCHEMA_VERSION = "0.0.4"
KIND_COMM = {"all_reduce": pb.ALL_REDUCE, "reduce": pb.REDUCE, "all_gather": pb.ALL_GATHER, "broadcast": pb.BROADCAST,
             "all_to_all": pb.ALL_TO_ALL, "reduce_scatter": pb.REDUCE_SCATTER}


def _exact(value: float) -> bool:
    return float(value).is_integer()


def rank_coords(rank: int, shape: Sequence[int]) -> list[int]:
    """A rank's coordinates, dimension 0 fastest (ASTRA-sim's NPU numbering)."""
    out = []
    for n in shape:
        out.append(rank % n)
        rank //= n
    return out


def coords_rank(coords: Sequence[int], shape: Sequence[int]) -> int:
    rank = 0
    for c, n in zip(reversed(coords), reversed(shape), strict=True):
        rank = rank * n + c
    return rank


def peer_rank(rank: int, shape: Sequence[int], axis: AxisGroup, shift: int) -> int:
    """The rank `shift` steps along `axis` (a whole axis or blocks x:SIZE[:STRIDE]) from `rank`."""
    a = SLICE_AXES.index(axis.axis)
    coords = rank_coords(rank, shape)
    size, stride = (axis.size or shape[a]), axis.stride
    pos = (coords[a] // stride) % size
    coords[a] += (((pos + shift) % size) - pos) * stride
    return coords_rank(coords, shape)


def _involved_dim(group: Sequence[AxisGroup], axes: Sequence[str]) -> list[bool] | None:
    if any(g.size is not None or g.axis == DCN_AXIS for g in group):
        return None
    names = {g.axis for g in group}
    return [ax in names for ax in axes]


def _check_shape(trace: StepTrace, shape: Sequence[int]) -> tuple[tuple[int, ...], tuple[str, ...]]:
    shape = tuple(int(n) for n in shape)
    if not shape or len(shape) > len(SLICE_AXES) or min(shape) < 1:
        raise PodsimError(f"slice shape {shape} must have 1 to {len(SLICE_AXES)} positive dimensions")
    axes = SLICE_AXES[: len(shape)]
    trace.validate(axes=axes)
    for op in trace.ops:
        if not isinstance(op, SendRecv):
            continue
        if any(g.axis == DCN_AXIS for g in op.group):
            raise PodsimError(f"op {op.id!r}: a send/recv across the DCN has its peer in another slice; the export "
                              "writes one slice's ranks, so it cannot name it")
        if len(op.group) > 1:
            raise PodsimError(f"op {op.id!r}: a send/recv round a ring over several axes ({format_group(op.group)}) has no "
                              "Chakra form (a send/recv names one axis); map the tensor axis onto one slice axis (--map tensor=z)")
    return shape, axes


def _plan(trace: StepTrace) -> list[tuple]:
    """(op, node id, dependency node ids) per op, in the trace's order; an op after a SendRecv
    waits for its receive (the id after its send)."""
    ids: dict[str, int] = {}
    next_id = 0
    for op in trace.ops:  # as listed (validate() has checked the DAG)
        ids[op.id] = next_id
        next_id += 2 if isinstance(op, SendRecv) else 1
    done = {op.id: ids[op.id] + (1 if isinstance(op, SendRecv) else 0) for op in trace.ops}
    return [(op, ids[op.id], [done[d] for d in op.deps]) for op in trace.ops]


def _metadata(trace: StepTrace, extras: bool, gen_id: str | None) -> pb.GlobalMetadata:
    if not extras:
        return pb.GlobalMetadata(version=SCHEMA_VERSION)
    attrs = [_attr("podsim_trace", string_val=trace.name),
             _attr("podsim_meta", string_val=json.dumps(trace.meta, sort_keys=True, default=str, allow_nan=False))]
    if gen_id:
        attrs.append(_attr("podsim_generation", string_val=gen_id))
    return pb.GlobalMetadata(version=SCHEMA_VERSION, attr=attrs)


def compute_durations(trace: StepTrace, generation=None, efficiency: float | None = None) -> tuple[dict[str, float], str | None]:
    """Each compute op's time in seconds as the engine charges it (its fixed duration, else the
    per-op model on `generation`'s chip, or a flat `efficiency`), and the generation id used.
    `generation` defaults to the one a generated trace was made for; a trace with modelled ops
    and no generation is refused (a node's duration is a time on some chip)."""
    from podsim.perf import chip_compute
    from podsim.perf.opmodel import op_time_s
    from podsim.topology import get_generation

    ops = [op for op in trace.ops if isinstance(op, Compute)]
    modelled = [op for op in ops if op.duration_s is None]
    if not modelled:
        return {op.id: float(op.duration_s) for op in ops}, None
    generation = generation or trace.meta.get("generation")
    if generation is None:
        raise PodsimError(f"op {modelled[0].id!r} has no fixed duration; give the generation whose chip times it "
                          "(--generation), so every Chakra compute node carries its duration")
    gen = get_generation(generation)
    chip = chip_compute(gen)
    return {op.id: op_time_s(op, gen, chip, efficiency) for op in ops}, gen.id


def export_chakra(trace: StepTrace, shape: Sequence[int], *, extras: bool = True, generation=None,
                  efficiency: float | None = None) -> list[list]:
    """Per rank, the messages of its `.et` file: [GlobalMetadata, Node, ...] (for small traces
    and tests; `chakra_files` streams the encoded files)."""
    shape, axes = _check_shape(trace, shape)
    plan = _plan(trace)
    times, gen_id = compute_durations(trace, generation, efficiency)
    return [[_metadata(trace, extras, gen_id),
             *(n for op, nid, deps in plan for n in _nodes(op, nid, deps, rank, shape, axes, extras, times))]
            for rank in range(math.prod(shape))]


def chakra_files(trace: StepTrace, shape: Sequence[int], *, extras: bool = True, generation=None,
                 efficiency: float | None = None) -> Iterator[bytes]:
    """The encoded `.et` of each rank in turn, the same bytes as encode_et(export_chakra(...)[r]).
    Only send/recv nodes differ between ranks, so every other record is encoded once."""
    shape, axes = _check_shape(trace, shape)
    times, gen_id = compute_durations(trace, generation, efficiency)
    parts: list = [bytearray(encode_et([_metadata(trace, extras, gen_id)]))]
    for op, nid, deps in _plan(trace):
        if isinstance(op, SendRecv):
            parts.append((op, nid, deps))
        else:
            data = encode_et(_nodes(op, nid, deps, 0, shape, axes, extras, times))
            if isinstance(parts[-1], bytearray):
                parts[-1].extend(data)
            else:
                parts.append(bytearray(data))
    for rank in range(math.prod(shape)):
        yield b"".join(p if isinstance(p, bytearray) else encode_et(_nodes(*p, rank, shape, axes, extras, times)) for p in parts)


def _nodes(op, nid: int, deps: list[int], rank: int, shape, axes, extras: bool, times: dict[str, float] | None = None) -> list:
    common = [_attr("podsim_id", string_val=op.id)] if extras else []
    if extras and op.layer:
        common.append(_attr("podsim_layer", string_val=op.layer))
    if isinstance(op, Compute):
        node = pb.Node(id=nid, name=op.name, type=pb.COMP_NODE, data_deps=deps)
        node.attr.append(_attr("is_cpu_op", bool_val=op.host))
        seconds = op.duration_s if op.duration_s is not None else (times or {}).get(op.id)
        if seconds is not None:
            node.duration_micros = round(seconds * 1e6)
        node.attr.append(_attr("num_ops", int64_val=round(op.flops)))
        node.attr.append(_attr("tensor_size", uint64_val=round(op.hbm_bytes)))
        if extras:
            if op.duration_s is None:  # timed by a model on import again: the µs above are for other readers
                common.append(_attr("podsim_modelled", bool_val=True))
                if op.matmuls:
                    common.append(_attr("podsim_matmuls", double_list=[float(v) for mm in op.matmuls
                                                                        for v in (*mm, 0.0)[:5]]))
                if op.precision != "bf16":
                    common.append(_attr("podsim_precision", string_val=op.precision))
            elif op.duration_s * 1e6 != node.duration_micros or not node.duration_micros:
                common.append(_attr("podsim_duration_s", double_val=op.duration_s))
            if op.flops and not _exact(op.flops):
                common.append(_attr("podsim_flops", double_val=op.flops))
            if op.hbm_bytes and not _exact(op.hbm_bytes):
                common.append(_attr("podsim_hbm_bytes", double_val=op.hbm_bytes))
            if op.efficiency is not None:
                common.append(_attr("podsim_efficiency", double_val=op.efficiency))
            if op.bubble:
                common.append(_attr("podsim_bubble", bool_val=True))
        node.attr.extend(common)
        return [node]
    if isinstance(op, Collective):
        node = pb.Node(id=nid, name=op.name, type=pb.COMM_COLL_NODE, data_deps=deps)
        node.attr.extend([_attr("is_cpu_op", bool_val=False), _attr("comm_type", int64_val=KIND_COMM[op.kind]),
                          _attr("comm_size", int64_val=round(op.bytes))])
        dims = _involved_dim(op.group, axes)
        if dims is not None:
            node.attr.append(_attr("involved_dim", bool_list=dims))
        if extras:
            if dims is None:
                common.append(_attr("podsim_group", string_val=format_group(op.group)))
            if op.algorithm != "auto":
                common.append(_attr("podsim_algorithm", string_val=op.algorithm))
            if not _exact(op.bytes):
                common.append(_attr("podsim_bytes", double_val=op.bytes))
        node.attr.extend(common)
        return [node]
    assert isinstance(op, SendRecv)
    dims = _involved_dim((op.axis,), axes)
    extra = list(common)
    if extras and dims is None:
        extra.append(_attr("podsim_group", string_val=str(op.axis)))
    if extras and not _exact(op.bytes):
        extra.append(_attr("podsim_bytes", double_val=op.bytes))
    if extras and not 0 <= op.shift < (op.axis.size or shape[axes.index(op.axis.axis)]):
        extra.append(_attr("podsim_shift", int64_val=op.shift))
    out = []
    for kind, key, peer, node_id, node_deps in (
        (pb.COMM_SEND_NODE, "comm_dst", peer_rank(rank, shape, op.axis, op.shift), nid, deps),
        (pb.COMM_RECV_NODE, "comm_src", peer_rank(rank, shape, op.axis, -op.shift), nid + 1, deps),
    ):
        node = pb.Node(id=node_id, name=op.name, type=kind, data_deps=node_deps)
        node.attr.extend([_attr("is_cpu_op", bool_val=False), _attr(key, int32_val=peer),
                          _attr("comm_size", int64_val=round(op.bytes)), _attr("comm_tag", int32_val=nid)])
        if dims is not None:
            node.attr.append(_attr("involved_dim", bool_list=dims))
        node.attr.extend(extra)
        out.append(node)
    return out


def encode_et(messages: Sequence) -> bytes:
    """Messages as an `.et` byte stream: each record preceded by its length as a varint."""
    return b"".join(_VarintBytes(len(b)) + b for b in (m.SerializeToString() for m in messages))


def et_file_names(prefix: str, ranks: int) -> list[str]:
    """Chakra's and ASTRA-sim's per-rank names: `<prefix>.<rank>.et`."""
    return [f"{prefix}.{r}.et" for r in range(ranks)]  # ASTRA-sim: prefix + "." + to_string(id) + ".et"
