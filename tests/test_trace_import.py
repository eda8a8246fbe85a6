"""Chakra (.et, JSON) and ASTRA-sim 1.0 text imports, on the real ASTRA-sim samples and on
synthetic traces written with the compiled schema; corrupt input gives one-line errors."""

from __future__ import annotations

import filecmp
import json
from pathlib import Path

import pytest

from podsim.errors import PodsimError
from podsim.trace import PRESETS, load_trace
from podsim.trace.astra import import_astra_text
from podsim.trace.chakra_schema import chakra_et_pb2 as pb
from podsim.trace.model import Collective, Compute, SendRecv, parse_group
from tests.helpers import astra_samples

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "astra-sim"
COPY = ROOT / "tests" / "data" / "astra-sim"
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")


samples = astra_samples


def test_project_copies_match_the_shared_samples():
    """tests/data holds the samples the tests need; where the shared folder exists they agree."""
    files = [p.relative_to(COPY) for p in COPY.rglob("*") if p.is_file() and p.name != "ORIGIN.md"]
    assert len(files) >= 64 and (COPY / "LICENSE").is_file()
    if SHARED.is_dir():
        for rel in files:
            assert filecmp.cmp(COPY / rel, SHARED / rel, shallow=False), rel


def rank_files(kind: str, fmt: str = "et") -> list[Path]:
    return sorted((samples() / "microbench-8npu-1MB" / fmt).glob(f"{kind}.*.{fmt}"))


@pytest.mark.parametrize("kind", COLLECTIVES)
@pytest.mark.parametrize("fmt", ["et", "json"])
def test_microbenchmarks_import_as_one_spmd_collective(kind, fmt):
    """Eight per-rank files (node ids differ by rank) make one 1 MiB collective over the ring."""
    files = rank_files(kind, fmt)
    assert len(files) == 8
    t = load_trace(files, shape=(8,))
    (op,) = t.ops
    assert op == Collective("n0", kind, 1048576.0, parse_group("x"), name=f"{kind}_8npus_1MB")
    assert t.meta["ranks"] == 8 and t.meta["chakra_version"] == "0.0.4"


def write_et(path: Path, nodes: list, version: str = "0.0.4") -> Path:
    """Write records as Chakra does: varint length, then the message."""
    from google.protobuf.internal.encoder import _VarintBytes

    out = bytearray()
    for msg in [pb.GlobalMetadata(version=version), *nodes]:
        body = msg.SerializeToString()
        out += _VarintBytes(len(body)) + body
    path.write_bytes(bytes(out))
    return path


def node(nid: int, ntype: int, name: str, deps=(), ctrl=(), dur=0, **attrs) -> pb.Node:
    n = pb.Node(id=nid, name=name, type=ntype, data_deps=list(deps), ctrl_deps=list(ctrl), duration_micros=dur)
    for key, value in attrs.items():
        a = n.attr.add(name=key)
        if isinstance(value, bool):
            a.bool_val = value
        elif isinstance(value, list):
            a.bool_list.values.extend(value)
        else:
            a.int64_val = value
    return n


def ring_program(rank: int, n: int = 4) -> list:
    """A compute, a CPU op, a 2-D collective, a ring exchange (send right, receive from left)."""
    return [
        node(10, pb.COMP_NODE, "matmul", dur=250, num_ops=2_000_000, tensor_size=4096, is_cpu_op=False),
        node(11, pb.COMP_NODE, "host launch", deps=[10], dur=5, is_cpu_op=True),
        node(12, pb.METADATA_NODE, "marker", deps=[11]),
        node(13, pb.COMM_COLL_NODE, "grad sync", deps=[12], comm_type=pb.REDUCE_SCATTER, comm_size=1 << 20, involved_dim=[False, True]),
        node(14, pb.COMM_SEND_NODE, "to right", deps=[10], comm_src=rank, comm_dst=(rank + 1) % n, comm_size=4096),
        node(15, pb.COMM_RECV_NODE, "from left", deps=[10], comm_src=(rank - 1) % n, comm_dst=rank, comm_size=4096),
        node(16, pb.COMP_NODE, "consume", deps=[15, 13], dur=100),
    ]


def test_synthetic_chakra_trace_converts_every_node_kind(tmp_path):
    files = [write_et(tmp_path / f"ring.{r}.et", ring_program(r)) for r in range(4)]
    t = load_trace(files, shape=(4, 2), group="x")
    ops = t.by_id()
    assert ops["n10"] == Compute("n10", duration_s=250e-6, flops=2e6, hbm_bytes=4096, name="matmul")
    assert "n11" not in ops and "n12" not in ops  # CPU op and metadata left out, dependencies bridged
    assert ops["n13"].group == parse_group("y") and ops["n13"].deps == ("n10",) and ops["n13"].kind == "reduce_scatter"
    assert ops["n14"] == SendRecv("n14", 4096.0, parse_group("x")[0], 1, ("n10",), "to right")
    assert "n15" not in ops and ops["n16"].deps == ("n14", "n13")  # the receive joins the matching send
    assert t.meta["skipped_nodes"] == {"CPU COMP_NODE": 1, "METADATA_NODE": 1}
    kept = load_trace(files, shape=(4, 2), group="x", keep_cpu_ops=True).by_id()
    assert kept["n11"].duration_s == 5e-6


def test_chakra_json_form_reads_like_et(tmp_path):
    from google.protobuf import json_format

    for r in range(4):
        doc = {"metadata": {"version": "0.0.4"}, "nodes": [json_format.MessageToDict(n, preserving_proto_field_name=True) for n in ring_program(r)]}
        (tmp_path / f"ring.{r}.json").write_text(json.dumps(doc))
        write_et(tmp_path / f"ring.{r}.et", ring_program(r))
    a = load_trace(sorted(tmp_path.glob("*.json")), shape=(4, 2), group="x")
    b = load_trace(sorted(tmp_path.glob("*.et")), shape=(4, 2), group="x")
    assert a.ops == b.ops


def test_ranks_that_differ_need_a_chosen_rank(tmp_path):
    files = [write_et(tmp_path / f"p.{r}.et", [node(1, pb.COMM_COLL_NODE, "ar", comm_type=pb.ALL_REDUCE, comm_size=1024 * (1 + (r == 2)))]) for r in range(4)]
    with pytest.raises(PodsimError, match=r"ranks 0 and 2 differ at node 1 \(byte offset 8 of p.2.et, 'ar'\); .*\(--rank R\)$"):
        load_trace(files)
    assert load_trace(files, rank=2).ops[0].bytes == 2048


@pytest.mark.parametrize("make,needle", [
    (lambda d: d[:60], "t.0.et: byte offset 8: record is truncated: its prefix says 72 bytes, 51 remain"),
    (lambda d: d[:8] + b"\x48" + b"\xff" * 72, "t.0.et: byte offset 8: not a valid Chakra Node record"),
    (lambda d: d[:8] + b"\xff" * 12, "t.0.et: byte offset 8: corrupt length prefix"),
    (lambda d: d[:8] + b"\x80", "t.0.et: byte offset 8: the length prefix is cut off"),
    (lambda d: b"", "t.0.et: the file is empty"),
])
def test_truncated_or_corrupt_et_names_the_byte_offset(tmp_path, make, needle):
    data = (samples() / "microbench-8npu-1MB" / "et" / "all_reduce.0.et").read_bytes()
    path = tmp_path / "t.0.et"
    path.write_bytes(make(data))
    with pytest.raises(PodsimError) as exc:
        load_trace(path)
    assert needle in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize("nodes,needle", [
    ([node(1, pb.COMP_NODE, "a", deps=[7])], "node 1 (byte offset 8) depends on node 7, which is not in the file"),
    ([node(1, pb.INVALID_NODE, "a")], "node 1 (byte offset 8) has no valid type (INVALID_NODE)"),
    ([node(1, pb.COMM_COLL_NODE, "g", comm_type=pb.GATHER, comm_size=8)], "collective type GATHER is not supported"),
    ([node(1, pb.COMP_NODE, "a", deps=[2]), node(2, pb.COMP_NODE, "b", deps=[1])], "the dependencies form a cycle through op 'n1'"),
])
def test_bad_chakra_nodes_are_named(tmp_path, nodes, needle):
    path = write_et(tmp_path / "t.0.et", nodes)
    with pytest.raises(PodsimError) as exc:
        load_trace(path)
    assert needle in str(exc.value)


# --- ASTRA-sim 1.0 text workloads -------------------------------------------------------------


def text(name: str) -> Path:
    return samples() / "text-workloads" / name


def test_resnet50_workload_matches_podsim_layer_shapes():
    """ASTRA-sim's ResNet-50 weight-gradient sizes are fp32 weights of each layer: podsim's
    layer list (an independent derivation from the architecture) gives the same 54 numbers."""
    t = import_astra_text(text("Resnet50_DataParallel.txt"), shape=(4, 8))
    grads = {op.layer: op.bytes for op in t.ops if isinstance(op, Collective)}
    ours = {layer.name: 4.0 * layer.weight_params for layer in PRESETS["resnet50"].layers()}
    assert grads == ours


def test_data_parallel_loop_structure():
    """DATA: forward over the layers, then per layer from the last: weight-gradient compute,
    its all-reduce over every dimension (not blocking), input-gradient compute (not for layer 0);
    each layer's update waits for its all-reduce."""
    t = import_astra_text(text("Resnet50_DataParallel.txt"), shape=(4, 8), clock_hz=2e9)
    ops = t.by_id()
    n = t.meta["layers"]
    assert n == 54
    assert ops["L0.fwd"].duration_s == 13003 / 2e9 and ops["L1.fwd"].deps == ("L0.fwd",)
    assert ops[f"L{n - 1}.wg"].deps == (f"L{n - 1}.fwd",)
    assert ops["L5.wg.comm"].deps == ("L5.wg",) and ops["L5.wg.comm"].group == parse_group("x,y")
    assert ops["L5.ig"].deps == ("L5.wg",) and ops["L4.wg"].deps == ("L5.ig",)
    assert "L0.ig" not in ops and ops["L0.update"].deps == ("L0.wg.comm",)
    assert ops["L0.update"].duration_s == 3229 / 2e9


def test_micro_benchmark_text_is_one_collective():
    t = load_trace(text("microAllReduce.txt"), shape=(8,))
    colls = [op for op in t.ops if isinstance(op, Collective)]
    assert colls == [Collective("L0.wg.comm", "all_reduce", 1048576.0, parse_group("x"), name="weight-gradient collective", layer="conv1")]


def test_hybrid_data_model_groups_and_blocking():
    """HYBRID_DATA_MODEL: model parallelism on dimension 0 (forward collective blocks the next
    layer), data on the rest; the input-gradient collective is waited for before the next layer."""
    t = import_astra_text(text("MLP_HybridParallel_Data_Model.txt"), shape=(4, 8))
    ops = t.by_id()
    assert ops["L0.fwd.comm"].kind == "all_gather" and ops["L0.fwd.comm"].group == parse_group("x")
    assert "L0.fwd.comm" in ops["L1.fwd"].deps
    assert ops["L3.wg.comm"].group == parse_group("y")
    assert set(ops["L2.ig"].deps) == {"L3.wg", "L3.ig.comm"}


def test_dlrm_embedding_all_to_all_and_waits():
    t = import_astra_text(text("DLRM_HybridParallel.txt"), shape=(8,))
    ops = t.by_id()
    assert ops["L0.fwd.comm"].kind == "all_to_all" and ops["L0.fwd.comm"].bytes == 98304
    assert "L0.fwd.comm" in ops["L5.fwd"].deps  # the top MLP waits for the embeddings (last bottom layer 4)
    assert ops["L0.ig.comm"].deps == ("L5.ig",)  # issued after the input gradient of layer last_bottom + 1
    assert ops["L0.wg"].deps == ("L1.ig",) and "L0.ig" not in ops  # the embedding's input gradient is not computed


def test_hybrid_transformer_splits_a_dimension(tmp_path):
    """model_parallel_NPU_group 2 on a 4x8 network: model on x:2, data on x:2:2 and y."""
    path = tmp_path / "tr.txt"
    path.write_text("HYBRID_TRANSFORMER model_parallel_NPU_group: 2\n2\n"
                    "attn -1 100 ALLREDUCE 4096 100 ALLREDUCE 4096 100 ALLREDUCE 8192 10\n"
                    "mlp -1 100 ALLREDUCE 4096 100 ALLREDUCE 4096 100 ALLREDUCE 8192 10\n")
    ops = import_astra_text(path, shape=(4, 8)).by_id()
    assert ops["L0.fwd.comm"].group == parse_group("x:2") and ops["L0.wg.comm"].group == parse_group("x:2:2,y")
    assert "L1.ig.comm" in ops["L1.wg"].deps  # the input-gradient collective blocks


@pytest.mark.parametrize("content,needle", [
    ("SHARDED\n1\n", "w.txt: unknown trace format (first word 'SHARDED')"),
    ("DATA\nmany\n", "line 2: the number of layers 'many' is not a whole number"),
    ("DATA\n1\nconv -1 10 NONE 0 x NONE 0 10 ALLREDUCE 64 1\n", "line 3: layer 'conv' input-gradient compute cycles 'x' is not a whole number"),
    ("DATA\n1\nconv -1 10 NONE 0 10 NONE 0 10 ALLREDUCE -64 1\n", "line 3: layer 'conv' weight-gradient communication size -64 is negative"),
    ("DATA\n1\nconv -1 10 NONE 0 10 NONE 0 10 BCAST 64 1\n", "line 3: layer 'conv' weight-gradient communication type 'BCAST' is not supported"),
    ("DATA\n2\nconv -1 10 NONE 0 10 NONE 0 10 ALLREDUCE 64 1\n", "line 3: the file ends where layer 2's name was expected"),
    ("DATA\n1\nconv -1 10 NONE 0 10 NONE 0 10 ALLREDUCE 64 1\nextra\n", "line 4: unexpected 'extra' after the 1 layers"),
])
def test_bad_text_workloads_name_the_line(tmp_path, content, needle):
    path = tmp_path / "w.txt"
    path.write_text(content)
    with pytest.raises(PodsimError) as exc:
        load_trace(path)
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_unknown_policy_is_named(tmp_path):
    with pytest.raises(PodsimError, match=r"^w.txt line 1: parallelism policy 'SHARDED' is not an ASTRA-sim 1.0 policy"):
        import_astra_text(tmp_path / "w.txt", text="SHARDED\n1\n")


def test_several_files_only_for_chakra(tmp_path):
    with pytest.raises(PodsimError, match="only for Chakra traces"):
        load_trace([text("microAllReduce.txt"), text("microAllToAll.txt")])
    (tmp_path / "x.bin").write_bytes(b"\x00\xff\xfe")
    with pytest.raises(PodsimError, match="unknown trace format"):
        load_trace(tmp_path / "x.bin")
