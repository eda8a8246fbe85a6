"""Chakra `.et` files at the wire level: records, and which vintage of the schema wrote them.

An `.et` file is a stream of protobuf records, each preceded by its length as a varint. Two
vintages are published, told apart by the first record's bytes (never by the file name):

- **current** (mlcommons/chakra `schema/protobuf/et_def.proto`, 2023-24 onwards): a
  GlobalMetadata record (field 1 `version` and field 2 `attr`, both length-delimited), then
  Nodes whose details are `attr` entries (`comm_type`, `comm_size`, `num_ops` ...) and whose
  time is `duration_micros` (µs);
- **2023** (mlcommons/chakra-old `et_def/et_def.proto`, ASTRA-sim 2.0's first examples): Node
  records from the first byte, no GlobalMetadata; `id` (field 1) is a proto2 `required` varint,
  so every such record starts with it; details are plain fields (`node_type` 3, `parent` 4,
  `simulated_run_time` 7 in ASTRA-sim ticks = ns, `num_ops` 12, `comm_type` 13, `involved_dim`
  14, `comm_src`/`comm_dst`/`comm_size` 16-18) with their own enum numbering.

A first record is GlobalMetadata if its fields fit {1, 2} length-delimited; else a 2023 node if
it has field 1 as a varint and every field fits that schema's wire types; else a current-schema
node (a file written without its GlobalMetadata); anything else is refused with its offset.
2023 nodes become current-schema Nodes (`legacy_to_current`), so one converter reads both.
"""

from __future__ import annotations

from typing import Any

from podsim.errors import PodsimError
from podsim.trace.chakra_schema import chakra_et_pb2 as pb
from podsim.trace.chakra_schema import chakra_legacy_pb2 as legacy

VARINT, I64, LEN, I32 = 0, 1, 2, 5
# field number -> wire types it may be written with (repeated scalars: packed or not)
METADATA_WIRE = {1: {LEN}, 2: {LEN}}
LEGACY_WIRE = {n: {VARINT} for n in range(1, 23)} | {2: {LEN}, 4: {VARINT, LEN}, 14: {VARINT, LEN}, 22: {VARINT, LEN}}
CURRENT_WIRE = {1: {VARINT}, 2: {LEN}, 3: {VARINT}, 4: {VARINT, LEN}, 5: {VARINT, LEN}, 6: {VARINT}, 7: {VARINT},
                8: {LEN}, 9: {LEN}, 10: {LEN}}
_WIRE_NAMES = {VARINT: "a varint", I64: "8 fixed bytes", LEN: "length-delimited", 3: "a group start", 4: "a group end", I32: "4 fixed bytes"}

CURRENT, LEGACY = "current", "2023"

LEGACY_TYPES = {
    legacy.INVALID_NODE: pb.INVALID_NODE, legacy.MEM_LOAD_NODE: pb.MEM_LOAD_NODE,
    legacy.MEM_LOAD_COMP_NODE: pb.COMP_NODE,  # a load then compute: FLOPs and bytes, as a COMP_NODE
    legacy.MEM_STORE_NODE: pb.MEM_STORE_NODE, legacy.COMP_NODE: pb.COMP_NODE, legacy.COMM_SEND_NODE: pb.COMM_SEND_NODE,
    legacy.COMM_RECV_NODE: pb.COMM_RECV_NODE, legacy.COMM_COLL_NODE: pb.COMM_COLL_NODE,
}
LEGACY_COMM = {legacy.ALL_REDUCE: pb.ALL_REDUCE, legacy.ALL_TO_ALL: pb.ALL_TO_ALL, legacy.ALL_GATHER: pb.ALL_GATHER,
               legacy.REDUCE_SCATTER: pb.REDUCE_SCATTER}


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """Decode a base-128 varint at `pos`; (value, next position)."""
    value = shift = 0
    start = pos
    while True:
        if pos >= len(data):
            raise PodsimError(f"byte offset {start}: the length prefix is cut off (file ends after {len(data)} bytes)")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift >= 64:
            raise PodsimError(f"byte offset {start}: corrupt length prefix (varint longer than 10 bytes)")


def split_records(data: bytes) -> list[tuple[int, bytes]]:
    """The (byte offset, body) of each length-prefixed record."""
    records = []
    pos = 0
    while pos < len(data):
        start = pos
        n, pos = read_varint(data, pos)
        if pos + n > len(data):
            raise PodsimError(f"byte offset {start}: record is truncated: its prefix says {n} bytes, {len(data) - pos} remain")
        records.append((start, data[pos : pos + n]))
        pos += n
    return records


def wire_fields(body: bytes) -> list[tuple[int, int]]:
    """(field number, wire type) of each field of a record, in order; ValueError if malformed."""
    out = []
    pos = 0
    try:
        while pos < len(body):
            tag, pos = read_varint(body, pos)
            number, wire = tag >> 3, tag & 7
            if number == 0 or wire not in _WIRE_NAMES:
                raise ValueError(f"byte {pos - 1} of the record is not a field tag")
            out.append((number, wire))
            if wire == VARINT:
                _, pos = read_varint(body, pos)
            elif wire == LEN:
                n, pos = read_varint(body, pos)
                pos += n
            elif wire in (I64, I32):
                pos += 8 if wire == I64 else 4
            if pos > len(body):
                raise ValueError(f"field {number} runs past the end of the record")
    except PodsimError as exc:
        raise ValueError(str(exc).split(": ", 1)[-1]) from None
    return out


def misfit(fields: list[tuple[int, int]], schema: dict[int, set[int]]) -> str | None:
    """The first field the schema does not have with that wire type, in words; None if all fit."""
    for number, wire in fields:
        if wire not in schema.get(number, ()):
            return f"field {number} as {_WIRE_NAMES[wire]}" if number in schema else f"field {number}, which it has not"
    return None


def detect_vintage(records: list[tuple[int, bytes]], name: str) -> tuple[str, bool]:
    """(CURRENT or LEGACY, whether the first record is GlobalMetadata); see the module docstring."""
    off, body = records[0]
    try:
        fields = wire_fields(body)
    except ValueError as exc:
        raise PodsimError(f"{name}: byte offset {off}: not a protobuf record ({exc}); not a Chakra trace") from None
    if misfit(fields, METADATA_WIRE) is None:
        return CURRENT, True
    bad_legacy = misfit(fields, LEGACY_WIRE) or (None if (1, VARINT) in fields else "no node id (field 1)")
    if bad_legacy is None:
        return LEGACY, False
    bad_current = misfit(fields, CURRENT_WIRE)
    if bad_current is None:
        return CURRENT, False
    raise PodsimError(f"{name}: byte offset {off}: neither a Chakra GlobalMetadata record nor a Chakra node record "
                      f"(2023 schema: {bad_legacy}; current schema: {bad_current})")


def _attr(name: str, **value: Any) -> Any:
    a = pb.AttributeProto(name=name)
    for k, v in value.items():
        if k == "bool_list":
            a.bool_list.values.extend(v)
        else:
            setattr(a, k, v)
    return a


def legacy_to_current(body: bytes, where: str, clock_hz: float) -> tuple[Any, float | None]:
    """A 2023 node record -> (current-schema Node, duration in s or None when it has no run time).

    Fields both vintages carry map one to one: id, name, type, parent -> data_deps, num_ops,
    tensor_size, comm_type (renumbered), comm_size, comm_src, comm_dst, involved_dim."""
    fields = wire_fields(body)
    bad = misfit(fields, LEGACY_WIRE)
    if bad is not None:
        raise PodsimError(f"{where}: not a node record of the 2023 Chakra schema ({bad})")
    old = legacy.Node()
    old.ParseFromString(body)
    node = pb.Node(id=old.id, name=old.name, type=LEGACY_TYPES.get(old.node_type, pb.INVALID_NODE))
    node.data_deps.extend(old.parent)
    if old.HasField("num_ops"):
        node.attr.append(_attr("num_ops", int64_val=old.num_ops))
    if old.HasField("tensor_size"):
        node.attr.append(_attr("tensor_size", uint64_val=old.tensor_size))
    if old.node_type == legacy.COMM_COLL_NODE:
        if old.comm_type not in LEGACY_COMM:
            known = ", ".join(legacy.CollectiveCommType.Name(k) for k in LEGACY_COMM)
            raise PodsimError(f"{where}: node {old.id} ({old.name!r}) has collective type "
                              f"{legacy.CollectiveCommType.Name(old.comm_type)}; the 2023 schema's are {known}")
        node.attr.append(_attr("comm_type", int64_val=LEGACY_COMM[old.comm_type]))
    if old.HasField("comm_size"):
        node.attr.append(_attr("comm_size", int64_val=old.comm_size))
    for key in ("comm_src", "comm_dst"):
        if old.HasField(key):
            node.attr.append(_attr(key, int32_val=getattr(old, key)))
    if len(old.involved_dim):
        node.attr.append(_attr("involved_dim", bool_list=list(old.involved_dim)))
    duration = old.simulated_run_time / clock_hz if old.simulated_run_time else None
    return node, duration
