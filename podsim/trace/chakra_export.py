"""Export a podsim StepTrace as Chakra execution traces: one current-schema `.et` per rank.

Each rank's file is a GlobalMetadata record (version 0.0.4, the schema version of Chakra's
`schema/protobuf/et_def.proto`) and one Node per op, with the published fields and attribute
types ASTRA-sim's ETFeeder reads:

- Compute -> COMP_NODE: `duration_micros` (µs, rounded: the schema's field is an integer) for a
  fixed-duration op; attributes `num_ops` (int64, FLOPs) and `tensor_size` (uint64, HBM bytes)
  for a roofline op; `is_cpu_op` false, true for host work (the input pipeline).
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
(a shift outside 0..size-1, as written),
`podsim_efficiency`, `podsim_bubble`. `extras=False` leaves them out.
"""

from __future__ import annotations

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


def _metadata(trace: StepTrace, extras: bool) -> pb.GlobalMetadata:
    return pb.GlobalMetadata(version=SCHEMA_VERSION, attr=[_attr("podsim_trace", string_val=trace.name)] if extras else [])


def export_chakra(trace: StepTrace, shape: Sequence[int], *, extras: bool = True) -> list[list]:
    """Per rank, the messages of its `.et` file: [GlobalMetadata, Node, ...] (for small traces
    and tests; `chakra_files` streams the encoded files)."""
    shape, axes = _check_shape(trace, shape)
    plan = _plan(trace)
    return [[_metadata(trace, extras), *(n for op, nid, deps in plan for n in _nodes(op, nid, deps, rank, shape, axes, extras))]
            for rank in range(math.prod(shape))]


def chakra_files(trace: StepTrace, shape: Sequence[int], *, extras: bool = True) -> Iterator[bytes]:
    """The encoded `.et` of each rank in turn, the same bytes as encode_et(export_chakra(...)[r]).
    Only send/recv nodes differ between ranks, so every other record is encoded once."""
    shape, axes = _check_shape(trace, shape)
    parts: list = [bytearray(encode_et([_metadata(trace, extras)]))]
    for op, nid, deps in _plan(trace):
        if isinstance(op, SendRecv):
            parts.append((op, nid, deps))
        else:
            data = encode_et(_nodes(op, nid, deps, 0, shape, axes, extras))
            if isinstance(parts[-1], bytearray):
                parts[-1].extend(data)
            else:
                parts.append(bytearray(data))
    for rank in range(math.prod(shape)):
        yield b"".join(p if isinstance(p, bytearray) else encode_et(_nodes(*p, rank, shape, axes, extras)) for p in parts)


def _nodes(op, nid: int, deps: list[int], rank: int, shape, axes, extras: bool) -> list:
    common = [_attr("podsim_id", string_val=op.id)] if extras else []
    if extras and op.layer:
        common.append(_attr("podsim_layer", string_val=op.layer))
    if isinstance(op, Compute):
        node = pb.Node(id=nid, name=op.name, type=pb.COMP_NODE, data_deps=deps)
        node.attr.append(_attr("is_cpu_op", bool_val=op.host))
        if op.duration_s is not None:
            node.duration_micros = round(op.duration_s * 1e6)
        if op.flops:
            node.attr.append(_attr("num_ops", int64_val=round(op.flops)))
        if op.hbm_bytes:
            node.attr.append(_attr("tensor_size", uint64_val=round(op.hbm_bytes)))
        if extras:
            if op.duration_s is not None and (op.duration_s * 1e6 != node.duration_micros or not node.duration_micros):
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
