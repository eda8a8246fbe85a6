"""XLA's all-reduce combiner on a TF1 program (`combine_grad_reduce`) and one CNN replica per
TensorCore (`replicas_per_chip`): the bytes stay those of every gradient once, the reduction
moves after the whole backward pass, and a second replica per chip doubles the weight update."""

from __future__ import annotations

import json

import pytest
from helpers import run_podsim

from podsim.engine import simulate_step, step_summary
from podsim.errors import PodsimError
from podsim.topology import build_slice
from podsim.trace import PRESETS, GenerateOptions, generate_trace
from podsim.trace.model import Collective, Compute, format_group
from podsim.trace.resnet import bn_tile

COMBINED = GenerateOptions(combine_grad_reduce=True)


def _ancestors(trace, op_id: str) -> set[str]:
    by_id, seen, todo = trace.by_id(), set(), [op_id]
    while todo:
        for d in by_id[todo.pop()].deps:
            if d not in seen:
                seen.add(d)
                todo.append(d)
    return seen


def _collectives(trace):
    return [op for op in trace.ops if isinstance(op, Collective)]


@pytest.mark.parametrize("model,overrides", [("resnet50", {}), ("gpt3-175b", {"n_layers": 4, "global_batch": 64})])
def test_combined_reduction_is_every_gradient_once_after_the_backward_pass(model, overrides):
    apart = generate_trace(model, "4x4x4", "data=64", overrides=overrides)
    together = generate_trace(model, "4x4x4", "data=64", overrides=overrides, options=COMBINED)
    (ar,) = _collectives(together)
    assert len(_collectives(apart)) > 1
    assert ar.kind == "all_reduce" and ar.bytes == pytest.approx(sum(op.bytes for op in _collectives(apart)))
    backward = {op.id for op in together.ops if isinstance(op, Compute) and ".bwd." in op.id}
    assert backward and backward <= _ancestors(together, ar.id)
    assert together.ops[-1].id == "optimizer" and ar.id in together.ops[-1].deps
    assert together.meta["combine_grad_reduce"] is True


def test_combined_reduction_is_exposed_and_costs_less_latency_than_serial_per_layer():
    """One all-reduce after backward is all exposed; per-layer all-reduces with overlap off pay
    one collective latency per layer, so they take longer on the same bytes."""
    s = build_slice("tpu-v4", "4x4x4")
    runs = {}
    for name, opts in {"overlapped": GenerateOptions(), "serial": GenerateOptions(overlap_grad_reduce=False), "combined": COMBINED}.items():
        t = generate_trace("resnet50", "4x4x4", "data=64", options=opts)
        runs[name] = step_summary(simulate_step(t, s), t)
    c = runs["combined"]
    assert c["exposed_comm_s"] == pytest.approx(c["comm_s"], rel=1e-9)
    assert c["step_time_s"] == pytest.approx(c["compute_s"] + c["comm_s"], rel=1e-9)
    assert runs["overlapped"]["step_time_s"] < c["step_time_s"] < runs["serial"]["step_time_s"]


def test_combined_reduction_keeps_dense_and_expert_groups_apart():
    t = generate_trace("mixtral-8x7b", "4x4x4", "data=8,expert=8", overrides={"n_layers": 2, "global_batch": 64}, options=COMBINED)
    ars = _collectives(t)
    ars = [op for op in ars if op.kind == "all_reduce" and "grad" in op.id]
    assert len(ars) == 2 and len({op.group for op in ars}) == 2


def test_a_replica_per_tensorcore_doubles_the_weight_update_and_its_state():
    one = generate_trace("resnet50", "4x4", "data=16", generation="tpu-v3", overrides={"global_batch": 4096})
    two = generate_trace("resnet50", "4x4", "data=16", generation="tpu-v3", overrides={"global_batch": 4096},
                         options=GenerateOptions(replicas_per_chip=2))
    opt1, opt2 = one.by_id()["optimizer"], two.by_id()["optimizer"]
    assert opt2.hbm_bytes == 2 * opt1.hbm_bytes and opt2.flops == 2 * opt1.flops
    assert two.meta["hbm_footprint"]["state_bytes"] == 2 * one.meta["hbm_footprint"]["state_bytes"]
    convs = [(a.flops, a.hbm_bytes) for a in one.ops if isinstance(a, Compute) and a.id != "optimizer"]
    assert convs == [(a.flops, a.hbm_bytes) for a in two.ops if isinstance(a, Compute) and a.id != "optimizer"]
    assert useful(two) - useful(one) == pytest.approx(opt1.flops)
    assert PRESETS["resnet50"].params * 12 == opt1.flops


def useful(trace) -> float:
    return sum(op.flops for op in trace.ops if isinstance(op, Compute))


@pytest.mark.parametrize("model,value,needle", [
    ("gpt3-175b", 2, "replicas_per_chip 2 is not allowed for gpt3-175b; use 1, or 2 (one replica per TensorCore) for a data-parallel CNN"),
    ("resnet50", 3, "replicas_per_chip 3 is not allowed for resnet50"),
    ("resnet50", 0, "replicas_per_chip 0 is not allowed"),
])
def test_replicas_per_chip_is_refused_where_it_means_nothing(model, value, needle):
    with pytest.raises(PodsimError) as exc:
        generate_trace(model, "4x4x4", "data=64", options=GenerateOptions(replicas_per_chip=value))
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_cli_flags_reach_the_trace(capsys, tmp_path):
    path = tmp_path / "r.json"
    code, _, err = run_podsim(capsys, "trace", "generate", "resnet50", "-g", "tpu-v3", "--slice", "4x4", "-p", "data=16",
                              "--set", "global_batch=4096", "--combine-grad-reduce", "--replicas-per-chip", "2", "--grad-bytes", "4", "--bn-group", "8", "-o", str(path))
    assert code == 0, err
    meta = json.loads(path.read_text())["meta"]
    assert meta["combine_grad_reduce"] is True and meta["replicas_per_chip"] == 2
    assert meta["bn_group"] == 8 and meta["bn_tile"] == "x:2,y:2"


# --- distributed batch norm (bn_group) -------------------------------------------------------


@pytest.mark.parametrize("chips,shape,tile", [
    (4, (32, 32), "x:2,y:2"), (8, (16, 16, 16), "x:2,y:2,z:2"), (4, (12, 12, 24), "x:2,y:2"),
    (16, (4, 4, 8), "x:4,y:2,z:2"), (2, (2, 2, 1), "x:2"),
])
def test_bn_tile_is_a_compact_block(chips, shape, tile):
    assert format_group(bn_tile(chips, shape)) == tile


@pytest.mark.parametrize("chips,shape,needle", [(3, (4, 4), "not a power of two"), (8, (2, 2), "does not tile slice 2x2")])
def test_bn_tile_refuses_what_cannot_be_laid(chips, shape, needle):
    with pytest.raises(PodsimError, match=needle):
        bn_tile(chips, shape)


def _v3(**opts):
    return generate_trace("resnet50", "8x8", "data=64", generation="tpu-v3", overrides={"global_batch": 1024},
                          options=GenerateOptions(combine_grad_reduce=True, **opts))


def test_distributed_batch_norm_sums_statistics_twice_per_layer_on_the_critical_path():
    t = _v3(bn_group=8, replicas_per_chip=2)
    bn = [op for op in t.ops if isinstance(op, Collective) and op.id.endswith(".bn")]
    cfg = PRESETS["resnet50"]
    with_bn = [layer for layer in cfg.layers() if layer.batchnorm]
    assert len(bn) == 2 * len(with_bn) == 106
    assert {format_group(op.group) for op in bn} == {"x:2,y:2"}  # 8 replicas = 4 chips of two TensorCores
    assert sum(op.bytes for op in bn) == 2 * sum(8 * layer.c_out for layer in with_bn)
    users = {d for op in t.ops for d in op.deps}
    assert all(op.id in users for op in bn)  # each is waited for
    s = build_slice("tpu-v3", "8x8")
    plain, dbn = (step_summary(simulate_step(x, s), x) for x in (_v3(replicas_per_chip=2), t))
    r = simulate_step(t, s)
    bn_busy = sum(op.duration_s for op in r.timeline if op.step == 0 and op.id.endswith(".bn"))
    assert bn_busy > 0 and dbn["step_time_s"] - plain["step_time_s"] == pytest.approx(bn_busy, rel=1e-9)


@pytest.mark.parametrize("opts,needle", [
    ({"bn_group": 3, "replicas_per_chip": 2}, "bn_group 3 must be a multiple of replicas_per_chip (2)"),
    ({"bn_group": 128}, "bn_group 128 (128 chips) must divide the 64 data-parallel chips"),
])
def test_bad_bn_groups_are_one_line_errors(opts, needle):
    with pytest.raises(PodsimError) as exc:
        _v3(**opts)
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_bn_group_is_refused_for_a_model_without_batch_norm():
    with pytest.raises(PodsimError, match="bn_group 8 is not allowed for gpt3-175b: it has no batch norm"):
        generate_trace("gpt3-175b", "4x4x4", "data=64", options=GenerateOptions(bn_group=8))


def test_bn_group_of_one_chips_replicas_moves_nothing_between_chips():
    assert not [op for op in _v3(bn_group=2, replicas_per_chip=2).ops if op.id.endswith(".bn")]
