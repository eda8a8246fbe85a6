"""Chakra export read by MLCommons' own decoder (the `mlc-chakra` package, pinned in the
Makefile): every compute node carries its duration, FLOPs, bytes and matmul shapes, and
export -> import gives the same ops and the same simulated step (issue 25)."""

from __future__ import annotations

import os

import pytest

from podsim.engine import build_job, step_summary
from podsim.engine.core import simulate_jobs
from podsim.perf import chip_compute
from podsim.perf.opmodel import op_time_s
from podsim.topology import get_generation
from podsim.trace import GenerateOptions, generate_trace, load_trace
from podsim.trace.chakra_export import encode_et, et_file_names, export_chakra
from podsim.trace.model import Compute, SendRecv

if os.environ.get("CI"):  # CI installs it (make test): a missing reader is a failure there, not a skip
    import chakra  # noqa: F401
chakra_pb = pytest.importorskip("chakra.schema.protobuf.et_def_pb2", reason="mlc-chakra is installed by `make test`")
protolib = pytest.importorskip("chakra.src.third_party.utils.protolib")

SHAPE = (2, 2, 4)
GEN = "tpu-v4"


@pytest.fixture(scope="module")
def trace():
    """A two-layer GPT-3 step on 16 v4 chips: FSDP x tensor, full recompute (it fits HBM)."""
    t = generate_trace("gpt3-175b", SHAPE, "fsdp=4,tensor=4", generation=GEN,
                       overrides={"n_layers": 2, "global_batch": 8}, options=GenerateOptions(recompute="full"))
    assert t.meta["hbm_footprint"]["total_bytes"] < get_generation(GEN).hbm_per_chip.si
    return t


def written(tmp_path, trace, extras=True):
    paths = [tmp_path / n for n in et_file_names("gpt3", 16)]
    for p, msgs in zip(paths, export_chakra(trace, SHAPE, extras=extras, generation=GEN), strict=True):
        p.write_bytes(encode_et(msgs))
    return paths


def mlcommons_read(path):
    """GlobalMetadata and Nodes as Chakra's tools read an .et (protolib.decodeMessage)."""
    f = protolib.openFileRd(str(path))
    meta = chakra_pb.GlobalMetadata()
    assert protolib.decodeMessage(f, meta)
    nodes = []
    while True:
        n = chakra_pb.Node()
        if not protolib.decodeMessage(f, n):
            break
        nodes.append(n)
    f.close()
    return meta, nodes


def attrs(node) -> dict:
    return {a.name: getattr(a, a.WhichOneof("value")) for a in node.attr}


def step(trace):
    job = build_job(trace, get_generation(GEN), SHAPE, 1)
    r = simulate_jobs([job])[0]
    return r, step_summary(r, trace)


def test_mlcommons_decoder_reads_every_compute_node_whole(tmp_path, trace):
    paths = written(tmp_path, trace)
    gen = get_generation(GEN)
    chip = chip_compute(gen)
    ops = {op.id: op for op in trace.ops}
    for path in (paths[0], paths[-1]):
        meta, nodes = mlcommons_read(path)
        assert meta.version == "0.0.4"
        assert len(nodes) == len(trace.ops) + sum(isinstance(op, SendRecv) for op in trace.ops)
        comp = [n for n in nodes if n.type == chakra_pb.COMP_NODE]
        assert len(comp) == sum(isinstance(op, Compute) for op in trace.ops)
        for n in comp:
            a = attrs(n)
            op = ops[a["podsim_id"]]
            assert n.duration_micros == round(op_time_s(op, gen, chip) * 1e6) and n.duration_micros > 0
            assert a["num_ops"] == round(op.flops) and a["tensor_size"] == round(op.hbm_bytes)
            if op.matmuls:
                assert list(a["podsim_matmuls"].values) == [float(v) for mm in op.matmuls for v in mm]
        assert sum(bool(attrs(n).get("num_ops")) for n in comp) == sum(bool(op.flops) for op in ops.values() if isinstance(op, Compute))
        coll = [n for n in nodes if n.type == chakra_pb.COMM_COLL_NODE]
        for n in coll:
            a = attrs(n)
            assert a["comm_size"] == round(ops[a["podsim_id"]].bytes)


def test_export_import_gives_the_same_ops_and_step_time(tmp_path, trace):
    back = load_trace(written(tmp_path, trace), shape=SHAPE)
    assert back.ops == trace.ops and back.name == trace.name
    assert back.meta["model_flops_per_step"] == trace.meta["model_flops_per_step"]
    (r0, s0), (r1, s1) = step(trace), step(back)
    assert r1.step_time_s == r0.step_time_s and r1.compute_s == r0.compute_s
    assert s1["mfu"] == s0["mfu"]


def test_schema_only_export_keeps_the_step_to_the_microsecond(tmp_path, trace):
    """Without podsim's attributes each compute op comes back as its duration on the v4 chip,
    rounded to the µs as the schema's integer field holds it: what ASTRA-sim replays."""
    back = load_trace(written(tmp_path, trace, extras=False), shape=SHAPE)
    assert all(op.duration_s is not None for op in back.ops if isinstance(op, Compute))
    r0, _ = step(trace)
    r1, _ = step(back)
    n_compute = sum(isinstance(op, Compute) for op in trace.ops)
    assert abs(r1.step_time_s - r0.step_time_s) <= n_compute * 0.5e-6
