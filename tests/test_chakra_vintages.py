"""Chakra .et files of both published vintages, told apart by their bytes, and clear errors otherwise.

The files are written here with podsim's compiled schemas (podsim/trace/chakra_schema): the
current one (GlobalMetadata first) and the 2023 one (node records from the first byte).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from google.protobuf.internal.encoder import _VarintBytes

from podsim.errors import PodsimError
from podsim.trace import load_trace
from podsim.trace.chakra import read_et
from podsim.trace.chakra_schema import chakra_et_pb2 as pb
from podsim.trace.chakra_schema import chakra_legacy_pb2 as legacy
from podsim.trace.chakra_wire import make_attr as _attr
from podsim.trace.model import Collective, Compute, SendRecv
from tests.helpers import astra_samples, run_podsim

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "podsim" / "trace" / "chakra_schema"


def write_et(path: Path, messages) -> Path:
    path.write_bytes(b"".join(_VarintBytes(len(b)) + b for b in (m.SerializeToString() for m in messages)))
    return path


def current_rank(rank: int, n: int) -> list:
    """fwd compute (5 us) -> all-reduce of 1 MiB over dim 0 -> send 4 KiB to the next rank -> wgrad (flops)."""
    return [
        pb.GlobalMetadata(version="0.0.4"),
        pb.Node(id=1, name="fwd", type=pb.COMP_NODE, duration_micros=5),
        pb.Node(id=2, name="ar", type=pb.COMM_COLL_NODE, data_deps=[1],
                attr=[_attr("comm_type", int64_val=pb.ALL_REDUCE), _attr("comm_size", int64_val=2**20),
                      _attr("involved_dim", bool_list=[True, False])]),
        pb.Node(id=3, name="pp", type=pb.COMM_SEND_NODE, data_deps=[2],
                attr=[_attr("comm_dst", int32_val=(rank + 1) % n), _attr("comm_size", int64_val=4096),
                      _attr("involved_dim", bool_list=[True, False])]),
        pb.Node(id=4, name="wgrad", type=pb.COMP_NODE, data_deps=[3],
                attr=[_attr("num_ops", int64_val=10**9), _attr("tensor_size", uint64_val=2**20)]),
    ]


def legacy_rank(rank: int, n: int) -> list:
    """The same program in the 2023 schema (run time in ns ticks, comm fields as plain fields)."""
    return [
        legacy.Node(id=1, name="fwd", node_type=legacy.COMP_NODE, simulated_run_time=5000),
        legacy.Node(id=2, name="ar", node_type=legacy.COMM_COLL_NODE, parent=[1], comm_type=legacy.ALL_REDUCE,
                    comm_size=2**20, involved_dim=[True, False]),
        legacy.Node(id=3, name="pp", node_type=legacy.COMM_SEND_NODE, parent=[2], comm_dst=(rank + 1) % n,
                    comm_src=rank, comm_size=4096, involved_dim=[True, False]),
        legacy.Node(id=4, name="wgrad", node_type=legacy.COMP_NODE, parent=[3], num_ops=10**9, tensor_size=2**20),
    ]


def write_ranks(tmp: Path, prefix: str, make, n: int = 4) -> list[Path]:
    return [write_et(tmp / f"{prefix}.{r}.et", make(r, n)) for r in range(n)]


def test_both_vintages_give_the_same_trace(tmp_path):
    cur = load_trace(write_ranks(tmp_path, "cur", current_rank), shape=(4, 2))
    old = load_trace(write_ranks(tmp_path, "old", legacy_rank), shape=(4, 2))
    assert cur.meta["chakra_vintage"] == "current" and cur.meta["chakra_version"] == "0.0.4"
    assert old.meta["chakra_vintage"] == "2023" and old.meta["chakra_version"] == ""
    assert cur.ops == old.ops
    fwd, ar, pp, wgrad = old.ops
    assert fwd == Compute("n1", 5e-6, 0.0, 0.0, None, (), "fwd")
    assert isinstance(ar, Collective) and (ar.kind, ar.bytes, str(ar.group[0]), ar.deps) == ("all_reduce", 2**20, "x", ("n1",))
    assert isinstance(pp, SendRecv) and (pp.bytes, pp.shift, pp.deps) == (4096, 1, ("n2",))
    assert (wgrad.flops, wgrad.hbm_bytes, wgrad.duration_s) == (1e9, 2**20, None)


@pytest.mark.parametrize(("old", "kind"), [(legacy.ALL_REDUCE, "all_reduce"), (legacy.ALL_TO_ALL, "all_to_all"),
                                           (legacy.ALL_GATHER, "all_gather"), (legacy.REDUCE_SCATTER, "reduce_scatter")])
def test_2023_collective_numbering_is_its_own(tmp_path, old, kind):
    """The 2023 enum numbers differ from today's (ALL_TO_ALL was 2, now 6): each maps by name."""
    node = legacy.Node(id=0, name="c", node_type=legacy.COMM_COLL_NODE, comm_type=old, comm_size=64)
    t = load_trace(write_et(tmp_path / "c.0.et", [node]))
    assert t.ops[0].kind == kind and t.ops[0].bytes == 64


def test_2023_run_time_is_ticks_at_the_clock(tmp_path):
    files = write_ranks(tmp_path, "old", legacy_rank)
    assert load_trace(files, clock_hz=2e9).ops[0].duration_s == pytest.approx(2.5e-6)
    rt = read_et(files[0])
    assert rt.vintage == "2023" and rt.durations_s == {1: 5e-6}
    assert [w for w in rt.where][0] == "byte offset 0"


def test_detection_reads_bytes_not_names(tmp_path):
    """A 2023 file named like a current one, and the reverse, are read by what they hold."""
    a = write_et(tmp_path / "x.0.et", legacy_rank(0, 1)[:1])
    b = write_et(tmp_path / "y.0.et", current_rank(0, 1)[:2])
    assert read_et(a).vintage == "2023" and read_et(b).vintage == "current"
    # a current-schema node file written without its GlobalMetadata still reads as current
    c = write_et(tmp_path / "z.0.et", [pb.Node(id=7, name="k", type=pb.COMP_NODE, duration_micros=3,
                                               attr=[_attr("num_ops", int64_val=5)])])
    assert read_et(c).vintage == "current" and load_trace(c).ops[0].duration_s == 3e-6


def test_published_current_example_still_reads():
    files = sorted((astra_samples() / "microbench-8npu-1MB" / "et").glob("all_to_all.*.et"))
    assert len(files) == 8
    t = load_trace(files)
    assert t.meta["chakra_vintage"] == "current" and t.meta["chakra_version"] == "0.0.4"
    assert [(op.kind, op.bytes) for op in t.ops] == [("all_to_all", 1048576)]


def _one_line(exc) -> str:
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


def test_neither_vintage_is_refused_with_the_offset(tmp_path):
    p = tmp_path / "bad.0.et"
    # one record whose field 30 is 4 fixed bytes: no Chakra schema has that
    body = _VarintBytes(30 << 3 | 5) + b"\x00\x00\x80\x3f"
    p.write_bytes(_VarintBytes(len(body)) + body)
    with pytest.raises(PodsimError) as e:
        read_et(p)
    msg = _one_line(e)
    assert msg.startswith("bad.0.et: byte offset 0: neither a Chakra GlobalMetadata record nor a Chakra node record")
    assert "2023 schema: field 30" in msg and "current schema: field 30" in msg


def test_text_file_with_et_suffix_is_refused(tmp_path):
    p = tmp_path / "notes.0.et"
    p.write_text("hello, this is not a trace\n")
    with pytest.raises(PodsimError) as e:
        read_et(p)
    assert "notes.0.et: byte offset" in _one_line(e)


def test_damaged_later_record_names_its_offset(tmp_path):
    good = legacy_rank(0, 1)[0].SerializeToString()
    rec = lambda b: _VarintBytes(len(b)) + b  # noqa: E731
    junk = _VarintBytes(30 << 3 | 5) + b"\x00\x00\x80\x3f"  # field 30: no schema has it
    p = tmp_path / "mixed.0.et"
    p.write_bytes(rec(good) + rec(junk))
    with pytest.raises(PodsimError) as e:
        read_et(p)
    assert _one_line(e).startswith(f"mixed.0.et: byte offset {1 + len(good)}: neither a Chakra GlobalMetadata record nor "
                                   "a Chakra node record (2023 schema: field 30, which it has not; 2023-attr schema:")
    # past the records sampled to tell the vintage, each record is still checked against it
    bad = bytes([10 << 3 | 2, 1, 0])  # field 10 length-delimited: a current node's attr, not a 2023 field
    p.write_bytes(rec(good) * 64 + rec(bad))
    with pytest.raises(PodsimError) as e:
        read_et(p)
    assert _one_line(e) == (f"mixed.0.et: byte offset {64 * (1 + len(good))}: not a node record of the 2023 Chakra "
                            "schema (field 10 as length-delimited)")


def test_2023_invalid_collective_is_named(tmp_path):
    node = legacy.Node(id=0, name="c", node_type=legacy.COMM_COLL_NODE, comm_size=64)  # comm_type left INVALID_COMM
    with pytest.raises(PodsimError) as e:
        read_et(write_et(tmp_path / "c.0.et", [node]))
    assert "collective type INVALID_COMM; the 2023 schema's are ALL_REDUCE, ALL_TO_ALL" in _one_line(e)


def test_legacy_descriptor_matches_its_proto_file():
    """chakra_legacy_pb2 is built in Python (no protoc): its fields must be the .proto's."""
    text = (SCHEMA_DIR / "chakra_legacy.proto").read_text()
    body = text[text.index("message Node"):]
    declared = {(int(n), name) for name, n in re.findall(r"^\s*(?:optional|repeated) \w+ (\w+) = (\d+)", body, re.M)}
    built = {(f.number, f.name) for f in legacy.Node.DESCRIPTOR.fields}
    assert declared == built and len(built) == 22
    for enum in ("NodeType", "CollectiveCommType"):
        block = text[text.index(f"enum {enum}"):].split("}")[0]
        values = {name: int(v) for name, v in re.findall(r"(\w+) = (\d+);", block)}
        assert values == {v.name: v.number for v in legacy.DESCRIPTOR.enum_types_by_name[enum].values}


def test_cli_imports_a_2023_trace(tmp_path, capsys):
    files = write_ranks(tmp_path, "old", legacy_rank)
    out = tmp_path / "o.json"
    code, stdout, err = run_podsim(capsys, "trace", "import", *map(str, files), "--slice", "4x2", "-o", str(out), "--json")
    assert code == 0, err
    assert '"all_reduce"' in stdout and out.exists()


def test_2023_files_named_eg_or_unnamed_are_read_by_their_bytes(tmp_path):
    """The 2023 converters wrote `<prefix>.<rank>.eg`; a binary file of any name is tried as Chakra."""
    eg = write_ranks(tmp_path, "old", legacy_rank)
    renamed = []
    for p in eg:
        q = p.with_suffix(".eg")
        p.rename(q)
        renamed.append(q)
    t = load_trace(renamed, shape=(4, 2))
    assert t.name == "old" and t.meta["ranks"] == 4 and t.meta["chakra_vintage"] == "2023"
    blob = tmp_path / "trace.bin"
    blob.write_bytes(renamed[0].read_bytes())
    assert read_et(blob).vintage == "2023"
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(PodsimError, match="junk.bin: unknown trace format: binary, and not Chakra records \\(byte offset"):
        load_trace(junk)


def test_chakra_json_comm_type_by_name_in_any_spelling(tmp_path):
    import json

    nodes = [{"id": 0, "name": "ar", "type": "COMM_COLL_NODE",
              "attr": [{"name": "comm_type", "string_val": "AllReduce"}, {"name": "comm_size", "int64_val": 1024}]},
             {"id": 1, "name": "ag", "type": "COMM_COLL_NODE", "data_deps": [0],
              "attr": [{"name": "comm_type", "string_val": "all-gather"}, {"name": "comm_size", "int64_val": 1024}]}]
    p = tmp_path / "named.0.json"
    p.write_text(json.dumps({"metadata": {"version": "0.0.4"}, "nodes": nodes}))
    assert [op.kind for op in load_trace(p).ops] == ["all_reduce", "all_gather"]
    nodes[0]["attr"][0]["string_val"] = "allreduc"
    p.write_text(json.dumps({"nodes": nodes}))
    with pytest.raises(PodsimError, match=r"named.0.json: node 0 \(node #0, 'ar'\): comm_type 'allreduc' is not a known collective"):
        load_trace(p)


def _a(name, kind, **value):
    return legacy.AttributeProto(name=name, type=legacy.AttributeType.Value(kind), **value)


def attr_rank(rank: int, n: int) -> list:
    """The same program in the mid-2023 schema: typed attributes, `runtime` in ns ticks."""
    return [
        legacy.AttrNode(id=1, name="fwd", type=legacy.AttrNodeType.Value("COMP_NODE"),
                        attribute=[_a("is_host_op", "BOOL", b=False), _a("runtime", "UINT", u=5000)]),
        legacy.AttrNode(id=2, name="ar", type=legacy.AttrNodeType.Value("COMM_COLL_NODE"), parent=[1],
                        attribute=[_a("comm_type", "INT", i=legacy.AttrCollectiveCommType.Value("ALL_REDUCE")),
                                   _a("comm_size", "UINT", u=2**20), _a("involved_dim", "BOOLS", bools=[True, False])]),
        legacy.AttrNode(id=3, name="pp", type=legacy.AttrNodeType.Value("COMM_SEND_NODE"), parent=[2],
                        attribute=[_a("comm_dst", "INT", i=(rank + 1) % n), _a("comm_size", "UINT", u=4096),
                                   _a("involved_dim", "BOOLS", bools=[True, False])]),
        legacy.AttrNode(id=4, name="wgrad", type=legacy.AttrNodeType.Value("COMP_NODE"), parent=[3],
                        inputs="[[1, 2]]", input_shapes="[[1024, 1024]]",
                        attribute=[_a("num_ops", "UINT", u=10**9), _a("tensor_size", "UINT", u=2**20)]),
    ]


@pytest.mark.parametrize("with_metadata", [False, True])
def test_mid_2023_attribute_vintage_gives_the_same_trace(tmp_path, with_metadata):
    """Node records with typed attributes (field 11), with or without that revision's GlobalMetadata."""
    meta = [legacy.AttrGlobalMetadata(attribute=[_a("schema", "STRING", s="1.0.2-chakra.0.0.4")])] if with_metadata else []
    files = [write_et(tmp_path / f"mid.{r}.et", [*meta, *attr_rank(r, 4)]) for r in range(4)]
    mid = load_trace(files, shape=(4, 2))
    cur = load_trace(write_ranks(tmp_path, "cur", current_rank), shape=(4, 2))
    assert mid.meta["chakra_vintage"] == "2023-attr" and mid.ops == cur.ops


def test_mid_2023_collective_numbering_and_unknown_type(tmp_path):
    node = legacy.AttrNode(id=0, name="c", type=legacy.AttrNodeType.Value("COMM_COLL_NODE"),
                           attribute=[_a("comm_type", "INT", i=1), _a("comm_size", "UINT", u=64)])  # 1: ALL_TO_ALL then
    assert load_trace(write_et(tmp_path / "a.0.et", [node])).ops[0].kind == "all_to_all"
    node.attribute[0].i = 9
    with pytest.raises(PodsimError, match="has comm_type 9; the 2023-attr schema's are ALL_REDUCE, ALL_TO_ALL, ALL_GATHER, REDUCE_SCATTER, BROADCAST"):
        read_et(write_et(tmp_path / "b.0.et", [node]))


def test_attr_descriptor_matches_its_proto_file():
    text = (SCHEMA_DIR / "chakra_legacy_attr.proto").read_text()
    for msg, cls in (("Node", legacy.AttrNode), ("AttributeProto", legacy.AttributeProto), ("GlobalMetadata", legacy.AttrGlobalMetadata)):
        body = text[text.index(f"message {msg} {{"):].split("}")[0]
        declared = {(int(n), name) for name, n in re.findall(r"^\s*(?:optional|repeated) \w+ (\w+) = (\d+)", body, re.M)}
        assert declared == {(f.number, f.name) for f in cls.DESCRIPTOR.fields}
    for enum in ("NodeType", "AttributeType", "CollectiveCommType"):
        block = text[text.index(f"enum {enum}"):].split("}")[0]
        values = {name: int(v) for name, v in re.findall(r"(\w+) = (\d+);", block)}
        assert values == {v.name: v.number for v in legacy.ATTR_DESCRIPTOR.enum_types_by_name[enum].values}


def test_current_files_with_fields_of_a_later_revision_still_read(tmp_path):
    """After a GlobalMetadata, a node field no known revision has (here 12) is skipped, not refused."""
    recs = current_rank(0, 1)[:2]
    body = recs[1].SerializeToString() + _VarintBytes(12 << 3 | 0) + b"\x05"
    p = tmp_path / "later.0.et"
    p.write_bytes(b"".join(_VarintBytes(len(b)) + b for b in (recs[0].SerializeToString(), body)))
    rt = read_et(p)
    assert rt.vintage == "current" and load_trace(p).ops[0].duration_s == 5e-6
