"""Step-time models for step-based jobs: the protocol, the cache, the roofline."""

from __future__ import annotations

import pytest

from podsim.cluster import CachedStepTime, RooflineStepTime, StepEstimate, StepTimeModel
from podsim.errors import PodsimError
from podsim.topology import get_generation
from podsim.trace import generate_trace

V4 = get_generation("tpu-v4")


class Counting:
    """A stand-in engine: step time inversely proportional to chips, 20% faster twisted."""

    def __init__(self, value=None):
        self.calls = []
        self.value = value

    def estimate(self, model, generation, shape, twisted, *, slices=1, sites=1):
        self.calls.append((model, generation.id, shape, twisted) + (() if slices == 1 else (slices, sites)))
        if self.value is not None:
            return StepEstimate(self.value, self.value, 0.0, "fixed")
        n = 1
        for v in shape:
            n *= v
        t = 1000.0 / n * (0.8 if twisted else 1.0)
        return StepEstimate(t, t, 0.0, "counting")


def test_roofline_uses_the_generators_model_flops():
    """FLOPs per step are what generate_trace records; time = FLOPs / (chips x 275 TFLOP/s x eff)."""
    trace = generate_trace("gpt3-175b", "8x16x16", "data=8,fsdp=16,tensor=16")
    flops = trace.meta["model_flops_per_step"]
    roof = RooflineStepTime(efficiency=0.5)
    assert isinstance(roof, StepTimeModel)
    assert roof.estimate("gpt3-175b", V4, (8, 16, 16), True).step_time_s == pytest.approx(flops / (2048 * 275e12 * 0.5))
    # compute only: twice the chips, half the time; efficiency 1 is the lower bound
    assert roof.estimate("gpt3-175b", V4, (16, 16, 16), False).step_time_s == pytest.approx(
        roof.estimate("gpt3-175b", V4, (8, 16, 16), False).step_time_s / 2)
    assert RooflineStepTime(1.0).estimate("llama2-70b", V4, (8, 8, 8), False).step_time_s < \
        RooflineStepTime().estimate("llama2-70b", V4, (8, 8, 8), False).step_time_s
    with pytest.raises(PodsimError, match="efficiency 0"):
        RooflineStepTime(0)
    with pytest.raises(PodsimError, match="unknown model"):
        roof.estimate("gpt9", V4, (8, 8, 8), False)


def test_cache_asks_once_per_shape_and_twist():
    inner = Counting()
    cached = CachedStepTime(inner)
    for _ in range(3):
        cached.step_time_s("m", V4, (4, 4, 8), True)
        cached.step_time_s("m", V4, (4, 4, 8), False)
    assert len(inner.calls) == 2 == cached.calls
    assert cached.step_time_s("m", V4, (4, 4, 8), True) == pytest.approx(1000 / 128 * 0.8)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_cache_rejects_impossible_step_times(bad):
    with pytest.raises(PodsimError, match="positive number of seconds"):
        CachedStepTime(Counting(bad)).step_time_s("m", V4, (4, 4, 4), False)
    with pytest.raises(PodsimError, match="has no estimate"):
        CachedStepTime(object())


def test_the_simulation_asks_for_the_slice_actually_given():
    """On a static pod a twisted request runs untwisted: the model is asked for the plain torus."""
    from podsim.cluster import ClusterConfig, simulate
    from podsim.workload import Job

    inner = Counting()
    jobs = [Job(id="j", submit_s=0.0, shape=(4, 4, 8), twisted=True, steps=3600, model="m")]
    r = simulate(ClusterConfig(generation="tpu-v4", ocs=False, horizon_s=86400), jobs, step_time=inner)
    assert set(inner.calls) == {("m", "tpu-v4", (4, 4, 8), False)}
    assert r.jobs[0].end_s == pytest.approx(3600 * 1000 / 128)
    inner = Counting()
    r = simulate(ClusterConfig(generation="tpu-v4", ocs=True, horizon_s=86400), jobs, step_time=inner)
    assert set(inner.calls) == {("m", "tpu-v4", (4, 4, 8), True)}
    assert r.jobs[0].end_s == pytest.approx(10.0 + 3600 * 1000 / 128 * 0.8)
