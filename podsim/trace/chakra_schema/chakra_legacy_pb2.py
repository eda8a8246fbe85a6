"""The 2023 Chakra node schemas as protobuf classes, built from FileDescriptorProtos (what protoc
would embed), since no protoc was available; tests/test_chakra_vintages.py checks them against
the .proto files:

- chakra_legacy.proto (early 2023, plain fields): `Node`, `NodeType`, `CollectiveCommType`;
- chakra_legacy_attr.proto (mid 2023, typed attributes): `AttrNode`, `AttrGlobalMetadata`,
  `AttrNodeType`, `AttrCollectiveCommType`, `AttributeType`.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper

_F = descriptor_pb2.FieldDescriptorProto
_ENUMS = {
    "NodeType": ["INVALID_NODE", "MEM_LOAD_NODE", "MEM_LOAD_COMP_NODE", "MEM_STORE_NODE", "COMP_NODE",
                 "COMM_SEND_NODE", "COMM_RECV_NODE", "COMM_COLL_NODE"],
    "MemoryType": ["INVALID_MEMORY", "LOCAL_MEMORY", "REMOTE_MEMORY"],
    "CollectiveCommType": ["INVALID_COMM", "ALL_REDUCE", "ALL_TO_ALL", "ALL_GATHER", "REDUCE_SCATTER"],
}
# (number, name, type, repeated, enum type)
NODE_FIELDS = [
    (1, "id", _F.TYPE_UINT64, False, None),
    (2, "name", _F.TYPE_STRING, False, None),
    (3, "node_type", _F.TYPE_ENUM, False, "NodeType"),
    (4, "parent", _F.TYPE_UINT64, True, None),
    (5, "tensor_loc", _F.TYPE_ENUM, False, "MemoryType"),
    (6, "tensor_size", _F.TYPE_UINT64, False, None),
    (7, "simulated_run_time", _F.TYPE_UINT64, False, None),
    (8, "input_tensor_loc", _F.TYPE_ENUM, False, "MemoryType"),
    (9, "input_tensor_size", _F.TYPE_UINT64, False, None),
    (10, "output_tensor_loc", _F.TYPE_ENUM, False, "MemoryType"),
    (11, "output_tensor_size", _F.TYPE_UINT64, False, None),
    (12, "num_ops", _F.TYPE_UINT64, False, None),
    (13, "comm_type", _F.TYPE_ENUM, False, "CollectiveCommType"),
    (14, "involved_dim", _F.TYPE_BOOL, True, None),
    (15, "communicator_id", _F.TYPE_UINT32, False, None),
    (16, "comm_src", _F.TYPE_UINT32, False, None),
    (17, "comm_dst", _F.TYPE_UINT32, False, None),
    (18, "comm_size", _F.TYPE_UINT64, False, None),
    (19, "comm_tag", _F.TYPE_UINT32, False, None),
    (20, "comm_priority", _F.TYPE_UINT32, False, None),
    (21, "callback_after", _F.TYPE_UINT64, False, None),
    (22, "local_mem_access_completed", _F.TYPE_BOOL, False, None),
]
PACKAGE = "podsim.chakra_legacy"


def _file() -> descriptor_pb2.FileDescriptorProto:
    f = descriptor_pb2.FileDescriptorProto(name="chakra_legacy.proto", package=PACKAGE, syntax="proto2")
    for name, values in _ENUMS.items():
        e = f.enum_type.add(name=name)
        for i, v in enumerate(values):
            e.value.add(name=v, number=i)
    msg = f.message_type.add(name="Node")
    for number, name, ftype, repeated, enum in NODE_FIELDS:
        fd = msg.field.add(name=name, number=number, type=ftype,
                           label=_F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL)
        if enum:
            fd.type_name = f".{PACKAGE}.{enum}"
    return f


ATTR_PACKAGE = "podsim.chakra_legacy_attr"
_ATTR_ENUMS = {
    "NodeType": ["INVALID_NODE", "METADATA_NODE", "MEM_LOAD_NODE", "MEM_STORE_NODE", "COMP_NODE", "COMM_SEND_NODE",
                 "COMM_RECV_NODE", "COMM_COLL_NODE"],
    "AttributeType": ["BOOL", "FLOAT", "UINT", "INT", "STRING", "BOOLS", "FLOATS", "UINTS", "INTS", "STRINGS"],
    "CollectiveCommType": ["ALL_REDUCE", "ALL_TO_ALL", "ALL_GATHER", "REDUCE_SCATTER", "BROADCAST"],
}
ATTRIBUTE_FIELDS = [
    (1, "name", _F.TYPE_STRING, False, None), (2, "type", _F.TYPE_ENUM, False, "AttributeType"),
    (3, "doc_string", _F.TYPE_STRING, False, None), (4, "b", _F.TYPE_BOOL, False, None),
    (5, "f", _F.TYPE_FLOAT, False, None), (6, "u", _F.TYPE_UINT64, False, None), (7, "i", _F.TYPE_INT64, False, None),
    (8, "s", _F.TYPE_STRING, False, None), (9, "bools", _F.TYPE_BOOL, True, None), (10, "floats", _F.TYPE_FLOAT, True, None),
    (11, "uints", _F.TYPE_UINT64, True, None), (12, "ints", _F.TYPE_INT64, True, None),
    (13, "strings", _F.TYPE_STRING, True, None),
]
ATTR_NODE_FIELDS = [
    (1, "id", _F.TYPE_UINT64, False, None), (2, "name", _F.TYPE_STRING, False, None),
    (3, "type", _F.TYPE_ENUM, False, "NodeType"), (4, "parent", _F.TYPE_UINT64, True, None),
    (5, "inputs", _F.TYPE_STRING, False, None), (6, "input_shapes", _F.TYPE_STRING, False, None),
    (7, "input_types", _F.TYPE_STRING, False, None), (8, "outputs", _F.TYPE_STRING, False, None),
    (9, "output_shapes", _F.TYPE_STRING, False, None), (10, "output_types", _F.TYPE_STRING, False, None),
    (11, "attribute", _F.TYPE_MESSAGE, True, "AttributeProto"),
]


def _attr_file() -> descriptor_pb2.FileDescriptorProto:
    f = descriptor_pb2.FileDescriptorProto(name="chakra_legacy_attr.proto", package=ATTR_PACKAGE, syntax="proto2")
    for name, values in _ATTR_ENUMS.items():
        e = f.enum_type.add(name=name)
        for i, v in enumerate(values):
            e.value.add(name=v, number=i)
    for msg_name, fields in (("AttributeProto", ATTRIBUTE_FIELDS), ("GlobalMetadata", [(1, "attribute", _F.TYPE_MESSAGE, True, "AttributeProto")]),
                             ("Node", ATTR_NODE_FIELDS)):
        msg = f.message_type.add(name=msg_name)
        for number, name, ftype, repeated, ref in fields:
            fd = msg.field.add(name=name, number=number, type=ftype, label=_F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL)
            if ref:
                fd.type_name = f".{ATTR_PACKAGE}.{ref}"
    return f


def _add(name: str, build):
    try:
        return _pool.FindFileByName(name)
    except KeyError:
        return _pool.Add(build())


_pool = descriptor_pool.Default()
DESCRIPTOR = _add("chakra_legacy.proto", _file)
Node = message_factory.GetMessageClass(DESCRIPTOR.message_types_by_name["Node"])
NodeType = EnumTypeWrapper(DESCRIPTOR.enum_types_by_name["NodeType"])
CollectiveCommType = EnumTypeWrapper(DESCRIPTOR.enum_types_by_name["CollectiveCommType"])
for _enum in DESCRIPTOR.enum_types_by_name.values():
    for _v in _enum.values:
        globals()[_v.name] = _v.number

ATTR_DESCRIPTOR = _add("chakra_legacy_attr.proto", _attr_file)
AttrNode = message_factory.GetMessageClass(ATTR_DESCRIPTOR.message_types_by_name["Node"])
AttrGlobalMetadata = message_factory.GetMessageClass(ATTR_DESCRIPTOR.message_types_by_name["GlobalMetadata"])
AttributeProto = message_factory.GetMessageClass(ATTR_DESCRIPTOR.message_types_by_name["AttributeProto"])
AttrNodeType = EnumTypeWrapper(ATTR_DESCRIPTOR.enum_types_by_name["NodeType"])
AttrCollectiveCommType = EnumTypeWrapper(ATTR_DESCRIPTOR.enum_types_by_name["CollectiveCommType"])
AttributeType = EnumTypeWrapper(ATTR_DESCRIPTOR.enum_types_by_name["AttributeType"])
