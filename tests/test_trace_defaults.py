"""The generator's defaults run a plan as current JAX/XLA programs do (issue 32, build 5): a tensor
axis shards the activations between blocks (MaxText's logical axis rules) and, on TPUs, each
tensor-parallel all-gather and reduce-scatter is decomposed under its matmul (the TPU compiler's
windowed einsum, on unless turned off). Giving those options explicitly changes nothing where the
default applies; the meta says what was chosen and why."""

from __future__ import annotations

import pytest

from podsim.engine import simulate_step
from podsim.study import StepStudy, run_study
from podsim.topology import build_slice
from podsim.trace import GenerateOptions, generate_trace
from podsim.trace.memory import fits_hbm

SMALL = {"n_layers": 2, "global_batch": 16}


def _trace(gen: str, shape: str, plan: str, **opts):
    return generate_trace("llama2-70b", shape, plan, generation=gen, overrides=SMALL, options=GenerateOptions(**opts))


@pytest.mark.parametrize("gen,shape,plan,explicit", [
    ("tpu-v4", "4x4x4", "fsdp=16,tensor=4", {"sequence_parallel": True, "collective_matmul": "chunked"}),
    ("tpu-v5e", "4x4", "fsdp=4,tensor=4", {"sequence_parallel": True, "collective_matmul": "chunked"}),
    ("gpu-h100", "8", "fsdp=2,tensor=4", {"sequence_parallel": True, "collective_matmul": "exposed"}),
    ("tpu-v4", "2x2x4", "fsdp=16", {"sequence_parallel": False, "collective_matmul": "exposed"}),
])
def test_the_same_plan_with_and_without_the_default_options_is_the_same_step(gen, shape, plan, explicit):
    default, given = _trace(gen, shape, plan), _trace(gen, shape, plan, **explicit)
    assert default.ops == given.ops
    assert default.meta["sequence_parallel"] == explicit["sequence_parallel"]
    assert default.meta["collective_matmul"]["mode"] == explicit["collective_matmul"]
    studies = [StepStudy(gen, shape, model="llama2-70b", plan=plan, model_overrides=SMALL, options=o)
               for o in (GenerateOptions(), GenerateOptions(**explicit))]
    a, b = (run_study(s) for s in studies)
    assert a.step_time_s == b.step_time_s and a.exposed_comm_s == b.exposed_comm_s


def test_the_defaults_say_why_and_the_user_still_decides():
    t = _trace("tpu-v4", "4x4x4", "fsdp=16,tensor=4")
    assert "base.yml" in t.meta["sequence_parallel_why"] and "xla_flags_library.py" in t.meta["collective_matmul"]["why"]
    off = _trace("tpu-v4", "4x4x4", "fsdp=16,tensor=4", sequence_parallel=False)
    assert not off.meta["sequence_parallel"] and off.meta["collective_matmul"]["mode"] == "exposed"
    assert off.meta["sequence_parallel_why"] == "as asked"
    assert _trace("tpu-v4", "2x2x4", "fsdp=16").meta["sequence_parallel_why"] == "no tensor parallelism"


def test_a_tensor_plan_given_bare_fits_where_the_megatron_program_does_not():
    """The issue's case: fsdp x tensor=16 with nothing else said, at the model's full depth. With
    the activations sharded between blocks (the default) the kept activations fall by the tensor
    degree and the step fits a v5p's 95 GiB; the all-reduce program keeps them whole and needs
    about twice the chip's HBM."""
    kw = dict(generation="tpu-v5p", overrides={"global_batch": 64})
    bare = generate_trace("gpt3-175b", "4x4x8", "fsdp=8,tensor=16", **kw)
    whole = generate_trace("gpt3-175b", "4x4x8", "fsdp=8,tensor=16", options=GenerateOptions(sequence_parallel=False), **kw)
    act = [t.meta["hbm_footprint"]["activations_bytes"] for t in (bare, whole)]
    assert act[1] / act[0] > 4
    assert bare.meta["hbm_footprint"]["total_bytes"] < whole.meta["hbm_footprint"]["total_bytes"]
    cap = 95 * 2**30
    assert fits_hbm(bare.meta["hbm_footprint"]["total_bytes"], cap) and not fits_hbm(whole.meta["hbm_footprint"]["total_bytes"], cap)


def test_an_int8_plan_given_bare_quantizes_the_weight_matmuls_as_maxtext_does():
    """`--precision int8` alone is MaxText's AQT program (quantized_matmuls 'weights': the attention
    core and the LM head in bf16): the same trace as 'weights' spelled out, and slower than
    quantizing every matmul, which the user can still ask for."""
    bare = _trace("tpu-v5p", "2x2x4", "fsdp=16", precision="int8")
    given = _trace("tpu-v5p", "2x2x4", "fsdp=16", precision="int8", quantized_matmuls="weights")
    every = _trace("tpu-v5p", "2x2x4", "fsdp=16", precision="int8", quantized_matmuls="all")
    assert bare.ops == given.ops and bare.ops != every.ops
    assert bare.meta["quantized_matmuls"] == "weights" and "We do not quantize the logits" in bare.meta["quantized_matmuls_why"]
    assert every.meta["quantized_matmuls_why"] == "as asked"
    precisions = {op.precision for op in bare.ops if getattr(op, "matmuls", ())}
    assert precisions == {"int8", "bf16"}
    assert {op.precision for op in every.ops if getattr(op, "matmuls", ())} == {"int8"}
    assert _trace("tpu-v5p", "2x2x4", "fsdp=16").meta["quantized_matmuls"] == "all"  # bf16: nothing to quantize
    built = build_slice("tpu-v5p", "2x2x4")  # slower: the attention core and the LM head at the bf16 rate
    assert simulate_step(bare, built).compute_s > simulate_step(every, built).compute_s
