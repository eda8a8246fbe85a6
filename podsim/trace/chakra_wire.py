"""Chakra `.et` files at the wire level: records, and which vintage of the schema wrote them.

An `.et` file is a stream of protobuf records, each preceded by its length as a varint. The
published vintages are told apart by their bytes (never by the file name):

- **current** (mlcommons/chakra `schema/protobuf/et_def.proto`, late 2023 onwards): a
  GlobalMetadata record (field 1 `version`, field 2 `attr`, both length-delimited), then Nodes
  whose details are `attr` entries (`comm_type`, `comm_size`, `num_ops` ...) and whose time is
  `duration_micros` (µs);
- **2023** (mlcommons/chakra-old `et_def/et_def.proto`, ASTRA-sim 2.0's first examples): Node
  records from the first byte, no GlobalMetadata; `id` (field 1) is a proto2 `required` varint,
  so every record has it; details are plain fields (`node_type` 3, `parent` 4,
  `simulated_run_time` 7 in ASTRA-sim ticks = ns, `num_ops` 12, `comm_type` 13, `involved_dim`
  14, `comm_src`/`comm_dst`/`comm_size` 16-18) with their own enum numbering;
- **2023-attr** (mlcommons/chakra `et_def/et_def.proto` of mid 2023): Node records from the
  first byte (a GlobalMetadata of attributes only, if any), `parent` 4, tensor text in 5-10 and
  a list of typed attributes in field 11 (`runtime` in ticks, `num_ops`, `comm_type` in that
  revision's numbering, `comm_size`, `involved_dim`, `is_host_op` ...).

A first record whose fields fit {1, 2} length-delimited is GlobalMetadata. The node schema is
the first of 2023, 2023-attr, current (after a GlobalMetadata: 2023-attr, then current) whose
wire types fit every one of the first node records (up to 64), 2023-attr only if some record
has its attribute list (field 11); after a GlobalMetadata, nodes no schema fits are read as
current (a later revision's extra fields skipped, as protobuf does); without one, a record that
fits none is refused with its offset. Older nodes become current-schema Nodes (`legacy_to_current`,
`attr_to_current`), so one converter reads every vintage.
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
ATTR_WIRE = {1: {VARINT}, 2: {LEN}, 3: {VARINT}, 4: {VARINT, LEN}} | {n: {LEN} for n in range(5, 12)}
_WIRE_NAMES = {VARINT: "a varint", I64: "8 fixed bytes", LEN: "length-delimited", 3: "a group start", 4: "a group end", I32: "4 fixed bytes"}

CURRENT, LEGACY, LEGACY_ATTR = "current", "2023", "2023-attr"
SAMPLE_NODES = 64
_NODE_WIRE = {LEGACY: LEGACY_WIRE, LEGACY_ATTR: ATTR_WIRE, CURRENT: CURRENT_WIRE}

LEGACY_TYPES = {
    legacy.INVALID_NODE: pb.INVALID_NODE, legacy.MEM_LOAD_NODE: pb.MEM_LOAD_NODE,
    legacy.MEM_LOAD_COMP_NODE: pb.COMP_NODE,  # a load then compute: FLOPs and bytes, as a COMP_NODE
    legacy.MEM_STORE_NODE: pb.MEM_STORE_NODE, legacy.COMP_NODE: pb.COMP_NODE, legacy.COMM_SEND_NODE: pb.COMM_SEND_NODE,
    legacy.COMM_RECV_NODE: pb.COMM_RECV_NODE, legacy.COMM_COLL_NODE: pb.COMM_COLL_NODE,
}
LEGACY_COMM = {legacy.ALL_REDUCE: pb.ALL_REDUCE, legacy.ALL_TO_ALL: pb.ALL_TO_ALL, legacy.ALL_GATHER: pb.ALL_GATHER,
               legacy.REDUCE_SCATTER: pb.REDUCE_SCATTER}
# mid-2023 numbering (ALL_REDUCE 0, ALL_TO_ALL 1, ALL_GATHER 2, REDUCE_SCATTER 3, BROADCAST 4) -> current
ATTR_COMM = {0: pb.ALL_REDUCE, 1: pb.ALL_TO_ALL, 2: pb.ALL_GATHER, 3: pb.REDUCE_SCATTER, 4: pb.BROADCAST}
_ATTR_VALUE = {0: "b", 1: "f", 2: "u", 3: "i", 4: "s", 5: "bools", 6: "floats", 7: "uints", 8: "ints", 9: "strings"}


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


def split_records(data: bytes, max_records: int | None = None) -> list[tuple[int, bytes]]:
    """The (byte offset, body) of each length-prefixed record; more than `max_records` (the
    ops budget's worth) is refused before the rest is split."""
    records = []
    pos = 0
    while pos < len(data):
        if max_records is not None and len(records) >= max_records:
            raise PodsimError(f"byte offset {pos}: more than {max_records - 1:,} records (nodes), past the ops budget "
                              "(a corrupt file, or raise it with --max-ops N)")
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


def _fields_at(off: int, body: bytes, name: str, first: bool) -> list[tuple[int, int]]:
    try:
        return wire_fields(body)
    except ValueError as exc:
        if first:
            raise PodsimError(f"{name}: byte offset {off}: not a protobuf record ({exc}); not a Chakra trace") from None
        raise PodsimError(f"{name}: byte offset {off}: not a valid Chakra Node record ({exc})") from None


def _fits(fields: list[tuple[int, int]], vintage: str) -> str | None:
    bad = misfit(fields, _NODE_WIRE[vintage])
    if bad is None and vintage != CURRENT and (1, VARINT) not in fields:
        bad = "no node id (field 1, required in that schema)"
    return bad


def detect_vintage(records: list[tuple[int, bytes]], name: str) -> tuple[str, bool]:
    """(CURRENT, LEGACY or LEGACY_ATTR, whether the first record is GlobalMetadata); see the
    module docstring."""
    off, body = records[0]
    has_meta = misfit(_fields_at(off, body, name, True), METADATA_WIRE) is None
    nodes = records[1 if has_meta else 0 :][:SAMPLE_NODES]
    candidates = [LEGACY_ATTR, CURRENT] if has_meta else [LEGACY, LEGACY_ATTR, CURRENT]
    sampled = [(o, _fields_at(o, b, name, o == off)) for o, b in nodes]
    for vintage in candidates:
        if all(_fits(f, vintage) is None for _, f in sampled):
            # a 2023-attr node keeps every detail in its attribute list (field 11): some must show it
            if vintage != LEGACY_ATTR or any(n == 11 for _, f in sampled for n, _ in f):
                return vintage, has_meta
    if has_meta:  # the current lineage: fields a later revision adds are skipped, as protobuf does
        return CURRENT, True
    # the first record no schema takes, with why
    for o, f in sampled:
        why = {v: _fits(f, v) for v in candidates}
        if all(why.values()):
            schemas = "; ".join(f"{v} schema: {w}" for v, w in why.items())
            raise PodsimError(f"{name}: byte offset {o}: neither a Chakra GlobalMetadata record nor a Chakra node record ({schemas})")
    raise PodsimError(f"{name}: byte offset {nodes[0][0]}: the node records mix Chakra schema vintages "
                      f"({', '.join(candidates)}); a file is written with one")


def make_attr(name: str, **value: Any) -> Any:
    """A current-schema AttributeProto: `make_attr("num_ops", int64_val=3)`, `bool_list=[...]`."""
    a = pb.AttributeProto(name=name)
    for k, v in value.items():
        if k.endswith("_list"):
            getattr(a, k).values.extend(v)
        else:
            setattr(a, k, v)
    return a


def _parse_node(body: bytes, where: str, misfit_of, vintage: str, node: Any) -> Any:
    """`node` parsed from `body` once its wire fields fit the vintage's schema (`misfit_of`
    gives the first misfit in words, or None); else a one-line error naming the record."""
    try:
        fields = wire_fields(body)
    except ValueError as exc:
        raise PodsimError(f"{where}: not a valid Chakra Node record ({exc})") from None
    bad = misfit_of(fields)
    if bad is not None:
        raise PodsimError(f"{where}: not a node record of the {vintage} Chakra schema ({bad})")
    node.ParseFromString(body)
    return node


def legacy_to_current(body: bytes, where: str, clock_hz: float) -> tuple[Any, float | None]:
    """A 2023 node record -> (current-schema Node, duration in s or None when it has no run time).

    Fields both vintages carry map one to one: id, name, type, parent -> data_deps, num_ops,
    tensor_size, comm_type (renumbered), comm_size, comm_src, comm_dst, involved_dim."""
    old = _parse_node(body, where, lambda fields: misfit(fields, LEGACY_WIRE), "2023", legacy.Node())
    node = pb.Node(id=old.id, name=old.name, type=LEGACY_TYPES.get(old.node_type, pb.INVALID_NODE))
    node.data_deps.extend(old.parent)
    if old.HasField("num_ops"):
        node.attr.append(make_attr("num_ops", int64_val=old.num_ops))
    if old.HasField("tensor_size"):
        node.attr.append(make_attr("tensor_size", uint64_val=old.tensor_size))
    if old.node_type == legacy.COMM_COLL_NODE:
        if old.comm_type not in LEGACY_COMM:
            known = ", ".join(legacy.CollectiveCommType.Name(k) for k in LEGACY_COMM)
            raise PodsimError(f"{where}: node {old.id} ({old.name!r}) has collective type "
                              f"{legacy.CollectiveCommType.Name(old.comm_type)}; the 2023 schema's are {known}")
        node.attr.append(make_attr("comm_type", int64_val=LEGACY_COMM[old.comm_type]))
    if old.HasField("comm_size"):
        node.attr.append(make_attr("comm_size", int64_val=old.comm_size))
    for key in ("comm_src", "comm_dst"):
        if old.HasField(key):
            node.attr.append(make_attr(key, int32_val=getattr(old, key)))
    if len(old.involved_dim):
        node.attr.append(make_attr("involved_dim", bool_list=list(old.involved_dim)))
    duration = old.simulated_run_time / clock_hz if old.simulated_run_time else None
    return node, duration


def attr_to_current(body: bytes, where: str, clock_hz: float) -> tuple[Any, float | None]:
    """A mid-2023 node record (typed attribute list) -> (current-schema Node, run time in s or
    None). Attributes read: is_host_op -> is_cpu_op, runtime (ticks at clock_hz), num_ops,
    tensor_size, comm_type (renumbered), comm_size, comm_src, comm_dst, involved_dim."""
    old = _parse_node(body, where, lambda fields: _fits(fields, LEGACY_ATTR), "2023-attr", legacy.AttrNode())
    node = pb.Node(id=old.id, name=old.name, type=old.type if old.type in pb.NodeType.values() else pb.INVALID_NODE)
    node.data_deps.extend(old.parent)
    duration = None
    for a in old.attribute:
        value = getattr(a, _ATTR_VALUE.get(a.type, "s"))
        key = a.name
        if key == "runtime":
            duration = float(value) / clock_hz if value else None
        elif key == "is_host_op":
            node.attr.append(make_attr("is_cpu_op", bool_val=bool(value)))
        elif key == "num_ops":
            node.attr.append(make_attr("num_ops", int64_val=int(value)))
        elif key == "tensor_size":
            node.attr.append(make_attr("tensor_size", uint64_val=int(value)))
        elif key == "comm_type":
            if int(value) not in ATTR_COMM:
                known = ", ".join(legacy.AttrCollectiveCommType.Name(k) for k in ATTR_COMM)
                raise PodsimError(f"{where}: node {old.id} ({old.name!r}) has comm_type {value}; the 2023-attr schema's are {known}")
            node.attr.append(make_attr("comm_type", int64_val=ATTR_COMM[int(value)]))
        elif key == "comm_size":
            node.attr.append(make_attr("comm_size", int64_val=int(value)))
        elif key in ("comm_src", "comm_dst"):
            node.attr.append(make_attr(key, int32_val=int(value)))
        elif key == "involved_dim":
            node.attr.append(make_attr("involved_dim", bool_list=[bool(v) for v in value]))
    return node, duration
