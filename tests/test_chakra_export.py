"""Chakra export: one .et per rank that podsim's importer reads back to the same trace, field by
field in the published schema (the attribute types ASTRA-sim's ETFeeder reads)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from podsim.errors import PodsimError
from podsim.trace import StepTrace, load_trace, save_trace
from podsim.trace.chakra import read_et
from podsim.trace.chakra_export import (
    encode_et,
    et_file_names,
    export_chakra,
    peer_rank,
    rank_coords,
)
from podsim.trace.chakra_schema import chakra_et_pb2 as pb
from podsim.trace.chakra_wire import split_records
from podsim.trace.model import Collective, Compute, SendRecv, parse_group
from tests.helpers import astra_samples, run_podsim

SHAPE = (2, 4, 4)
MiB = 2**20


def full_trace() -> StepTrace:
    """Every op kind and field podsim has, including values the schema's integers cannot hold."""
    g = parse_group
    return StepTrace((
        Compute("fwd", 1.2345e-3, name="forward", layer="L0"),
        Compute("mm", None, 3.5e12 + 0.25, 1.5 * 2**30, 0.45, ("fwd",), "matmul", "L0"),
        Compute("bubble", 2e-4, deps=("fwd",), bubble=True),
        Collective("tp", "all_reduce", 64 * MiB, g("x"), deps=("mm",), name="tp sums", layer="L0"),
        Collective("ag", "all_gather", 96 * MiB + 0.5, g("y,z"), "bidir_ring", ("mm",)),
        Collective("rs", "reduce_scatter", 32 * MiB, g("y:2:2"), deps=("ag",)),
        Collective("a2a", "all_to_all", 8 * MiB, g("x,y,z"), deps=("rs",)),
        Collective("bc", "broadcast", MiB, g("z"), deps=("a2a",)),
        Collective("red", "reduce", MiB, g("y"), deps=("bc",)),
        SendRecv("pp", 4 * MiB, g("z")[0], 1, ("tp", "red")),
        SendRecv("back", 4 * MiB, g("y:2")[0], -1, ("pp",)),
        Compute("opt", 5e-4, deps=("back", "bubble"), name="optimizer"),
    ), name="every-field")


def write(tmp_path, trace, shape=SHAPE, extras=True, prefix="t"):
    files = export_chakra(trace, shape, extras=extras, generation="tpu-v4")
    paths = [tmp_path / n for n in et_file_names(prefix, len(files))]
    for p, msgs in zip(paths, files, strict=True):
        p.write_bytes(encode_et(msgs))
    return paths


def decode(path):
    records = split_records(path.read_bytes())
    meta = pb.GlobalMetadata()
    meta.ParseFromString(records[0][1])
    nodes = []
    for _, body in records[1:]:
        n = pb.Node()
        n.ParseFromString(body)
        nodes.append(n)
    return meta, nodes


def attrs(node) -> dict:
    return {a.name: (a.WhichOneof("value"), getattr(a, a.WhichOneof("value"))) for a in node.attr}


def test_round_trip_gives_the_same_trace(tmp_path):
    t = full_trace()
    paths = write(tmp_path, t)
    assert len(paths) == 32 and paths[5].name == "t.5.et"
    back = load_trace(paths, shape=SHAPE)
    assert back.name == t.name and back.ops == t.ops
    assert back.meta["chakra_vintage"] == "current" and back.meta["ranks"] == 32


def test_files_follow_the_published_schema_field_by_field(tmp_path):
    paths = write(tmp_path, full_trace(), extras=False)
    meta, nodes = decode(paths[0])
    assert meta.version == "0.0.4" and list(meta.attr) == []
    by_name = {n.name or f"#{n.id}": n for n in nodes if n.type != pb.COMM_RECV_NODE}
    ids = {n.id for n in nodes}
    assert len(ids) == len(nodes) == 14  # 12 ops, the two permutes as a send and a receive each
    for n in nodes:
        assert set(n.data_deps) <= ids and not n.ctrl_deps
        a = attrs(n)
        assert a["is_cpu_op"] == ("bool_val", False)
        assert all(k in ("is_cpu_op", "num_ops", "tensor_size", "comm_type", "comm_size", "involved_dim", "comm_src",
                         "comm_dst", "comm_tag") for k in a)  # only the schema's names: no podsim extras
    fwd, mm = by_name["forward"], by_name["matmul"]
    assert fwd.type == pb.COMP_NODE and fwd.duration_micros == 1234 and attrs(fwd)["num_ops"] == ("int64_val", 0)
    assert attrs(mm)["num_ops"] == ("int64_val", 3500000000000) and attrs(mm)["tensor_size"] == ("uint64_val", 1610612736)
    # the modelled op's time on a v4 chip at its own 0.45 of peak: the FLOPs' 28.3 ms beat its bytes' 1.3 ms
    assert mm.duration_micros == round((3.5e12 + 0.25) / (275e12 * 0.45) * 1e6)
    tp = attrs(by_name["tp sums"])
    assert tp["comm_type"] == ("int64_val", pb.ALL_REDUCE) and tp["comm_size"] == ("int64_val", 64 * MiB)
    assert list(tp["involved_dim"][1].values) == [True, False, False] and tp["involved_dim"][0] == "bool_list"
    kinds = sorted(pb.CollectiveCommType.Name(attrs(n)["comm_type"][1]) for n in nodes if n.type == pb.COMM_COLL_NODE)
    assert kinds == ["ALL_GATHER", "ALL_REDUCE", "ALL_TO_ALL", "BROADCAST", "REDUCE", "REDUCE_SCATTER"]
    rs = next(n for n in nodes if n.type == pb.COMM_COLL_NODE and attrs(n)["comm_type"][1] == pb.REDUCE_SCATTER)
    assert "involved_dim" not in attrs(rs)  # y:2:2 is not a whole dimension: the schema cannot say it


def test_sends_and_receives_pair_up_across_ranks(tmp_path):
    """Every send of rank r to d with tag k has a receive on d from r with tag k (what ASTRA-sim matches)."""
    paths = write(tmp_path, full_trace(), extras=False)
    sends, recvs = set(), set()
    for r, p in enumerate(paths):
        for n in decode(p)[1]:
            a = attrs(n)
            if n.type == pb.COMM_SEND_NODE:
                sends.add((r, a["comm_dst"][1], a["comm_tag"][1], a["comm_size"][1]))
                assert a["comm_dst"][0] == "int32_val"
            elif n.type == pb.COMM_RECV_NODE:
                recvs.add((a["comm_src"][1], r, a["comm_tag"][1], a["comm_size"][1]))
    assert sends == recvs and len(sends) == 2 * 32


@pytest.mark.parametrize(("axis", "shift", "rank", "peer"), [
    ("z", 1, 0, 8), ("z", 1, 24, 0), ("y", -1, 0, 6), ("x", 1, 1, 0), ("y:2", -1, 2, 0), ("y:2", 1, 4, 6), ("y:2:2", 1, 2, 6)])
def test_peer_ranks_follow_astra_sim_numbering(axis, shift, rank, peer):
    """rank = x + 2 * (y + 4 * z) on a 2x4x4 slice; blocks y:2 are {0,1}, {2,3}; y:2:2 is {0,2}, {1,3}."""
    assert peer_rank(rank, SHAPE, parse_group(axis)[0], shift) == peer
    assert rank_coords(27, SHAPE) == [1, 1, 3]


def test_schema_only_files_read_back_up_to_the_schemas_rounding(tmp_path):
    """Without podsim's attributes the trace comes back as the schema says it: times to the µs,
    FLOPs to the unit, ids from positions, a y:2:2 group as the default (every axis). A permute
    inside blocks (y:2) has no schema field for its axis: a one-line error asks for --group."""
    with pytest.raises(PodsimError, match="a send/recv runs along one axis but the group is x,y,z; give a one-axis group"):
        load_trace(write(tmp_path, full_trace(), extras=False, prefix="blocks"), shape=SHAPE)
    ops = list(full_trace().ops)
    ops = [*ops[:10], replace(ops[11], deps=("pp", "bubble"))]  # without the y:2 permute
    t = StepTrace(tuple(ops), name="schema-only")
    back = load_trace(write(tmp_path, t, extras=False), shape=SHAPE)
    assert [type(op) for op in back.ops] == [type(op) for op in t.ops]
    assert [op.id for op in back.ops][:3] == ["n0", "n1", "n2"]
    assert back.ops[0].duration_s == pytest.approx(1.234e-3) and back.ops[1].flops == 3.5e12
    assert back.ops[4].bytes == 96 * MiB and back.ops[4].algorithm == "auto"
    assert str(back.ops[5].group[0]) == "x" and len(back.ops[5].group) == 3
    pp = back.ops[9]
    assert isinstance(pp, SendRecv) and (str(pp.axis), pp.shift) == ("z", 1)


def test_published_example_survives_import_export_import(tmp_path):
    files = sorted((astra_samples() / "microbench-8npu-1MB" / "et").glob("all_gather.*.et"))
    assert len(files) == 8
    first = load_trace(files, shape=(8,))
    again = load_trace(write(tmp_path, first, shape=(8,), extras=False, prefix="all_gather"), shape=(8,))
    assert again.ops == first.ops and again.name == "all_gather"
    _, nodes = decode(files[0])
    ours = decode(tmp_path / "all_gather.0.et")[1]
    for key in ("comm_type", "comm_size", "is_cpu_op"):  # the same attribute types as the published file
        assert attrs(ours[0])[key][0] == attrs(nodes[0])[key][0]


def test_cli_export_and_errors(tmp_path, capsys):
    src = tmp_path / "step.json"
    save_trace(full_trace(), src)
    out = tmp_path / "et"
    code, _, err = run_podsim(capsys, "trace", "export", str(src), "--slice", "2x4x4", "-o", str(out))
    assert code == 2 and "op 'mm' has no fixed duration; give the generation" in err
    code, stdout, err = run_podsim(capsys, "trace", "export", str(src), "--format", "chakra", "--slice", "2x4x4", "-o", str(out),
                                   "--generation", "tpu-v4", "--json")
    assert code == 0, err
    info = json.loads(stdout)
    assert info["files"] == 32 and info["first"] == "step.0.et" and info["nodes_per_rank"] == 14
    assert read_et(out / "step.31.et").title == "every-field"
    assert load_trace(sorted(out.glob("*.et")), shape=SHAPE).ops == full_trace().ops
    code, _, err = run_podsim(capsys, "trace", "export", str(src), "-o", str(out))
    assert code == 2 and "give --slice SHAPE" in err
    code, _, err = run_podsim(capsys, "trace", "export", str(src), "--format", "perfetto", "--slice", "2x4x4", "-o", str(out))
    assert code == 2 and "--format 'perfetto' is not supported; use chakra" in err
    code, _, err = run_podsim(capsys, "trace", "export", str(src), "--slice", "2x6x4", "-o", str(out))
    assert code == 2 and "op 'rs': group y:2:2 spans 4 chips along y but the slice has 6" in err
    code, _, err = run_podsim(capsys, "trace", "export", str(src), "--slice", "2x4x4", "-o", str(src))
    assert code == 2 and "is a file, not a folder" in err and len(err.strip().splitlines()) == 1


def test_peer_off_axis_is_refused(tmp_path):
    """A send whose peer differs in another coordinate than its axis is a one-line error."""
    t = StepTrace((SendRecv("s", 64, parse_group("y")[0], 1),), name="p")
    paths = write(tmp_path, t, shape=(2, 2), extras=False)
    data = [decode(p) for p in paths]
    for r, (meta, nodes) in enumerate(data):
        for n in nodes:
            for a in n.attr:
                if a.name == "comm_dst":
                    a.int32_val = (r + 3) % 4  # diagonal: x and y both change for rank 0 -> 3
        paths[r].write_bytes(encode_et([meta, *nodes]))
    with pytest.raises(PodsimError, match=r"names rank 3 \[1, 1\], which is not along its axis y on a 2x2 slice"):
        load_trace(paths, shape=(2, 2))


def test_streamed_files_equal_the_messages(tmp_path):
    from podsim.trace.chakra_export import chakra_files

    t = full_trace()
    for extras in (True, False):
        assert list(chakra_files(t, SHAPE, extras=extras, generation="tpu-v4")) == \
            [encode_et(m) for m in export_chakra(t, SHAPE, extras=extras, generation="tpu-v4")]


def test_send_recv_across_the_dcn_is_refused():
    t = StepTrace((SendRecv("x", 64, parse_group("dcn")[0], 1),))
    with pytest.raises(PodsimError, match="op 'x': a send/recv across the DCN has its peer in another slice"):
        export_chakra(t, (2, 2))
