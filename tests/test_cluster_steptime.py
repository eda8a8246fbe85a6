"""Step-time models for step-based jobs: the protocol, the cache, the roofline."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import ask

from podsim.errors import PodsimError
from podsim.study import CachedStepTime, RooflineStepTime, StepStudy, StepTimeModel
from podsim.study.steptime import StepEstimate
from podsim.topology import get_generation
from podsim.trace import generate_trace

V4 = get_generation("tpu-v4")


class Counting:
    """A stand-in engine: step time inversely proportional to chips, 20% faster twisted."""

    def __init__(self, value=None):
        self.calls = []
        self.value = value

    def estimate(self, study: StepStudy):
        model, shape, twisted, slices, sites = study.model, study.shape, study.twisted, study.slices, study.sites
        self.calls.append((model, study.generation.id, shape, twisted) + (() if slices == 1 else (slices, sites)))
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
    roof = RooflineStepTime()
    assert isinstance(roof, StepTimeModel)
    assert ask(roof, "gpt3-175b", V4, (8, 16, 16), True, compute_efficiency=0.5).step_time_s == pytest.approx(flops / (2048 * 275e12 * 0.5))
    # compute only: twice the chips, half the time; efficiency 1 is the lower bound
    assert ask(roof, "gpt3-175b", V4, (16, 16, 16), compute_efficiency=0.5).step_time_s == pytest.approx(
        ask(roof, "gpt3-175b", V4, (8, 16, 16), compute_efficiency=0.5).step_time_s / 2)
    assert ask(roof, "llama2-70b", V4, (8, 8, 8), compute_efficiency=1.0).step_time_s < \
        ask(roof, "llama2-70b", V4, (8, 8, 8)).step_time_s
    with pytest.raises(PodsimError, match="efficiency 0"):
        ask(roof, "llama2-70b", V4, (8, 8, 8), compute_efficiency=0)
    with pytest.raises(PodsimError, match="unknown model"):
        ask(roof, "gpt9", V4, (8, 8, 8))


def test_cache_asks_once_per_shape_and_twist():
    inner = Counting()
    cached = CachedStepTime(inner)
    for _ in range(3):
        cached.step_time_s("llama2-70b", V4, (4, 4, 8), True)
        cached.step_time_s("llama2-70b", V4, (4, 4, 8), False)
    assert len(inner.calls) == 2 == cached.calls
    assert cached.step_time_s("llama2-70b", V4, (4, 4, 8), True) == pytest.approx(1000 / 128 * 0.8)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_cache_rejects_impossible_step_times(bad):
    with pytest.raises(PodsimError, match="positive number of seconds"):
        CachedStepTime(Counting(bad)).step_time_s("llama2-70b", V4, (4, 4, 4), False)
    with pytest.raises(PodsimError, match="has no estimate"):
        CachedStepTime(object())


def test_the_simulation_asks_for_the_slice_actually_given():
    """On a static pod a twisted request runs untwisted: the model is asked for the plain torus."""
    from podsim.cluster import ClusterConfig, simulate
    from podsim.workload import Job

    inner = Counting()
    jobs = [Job(id="j", submit_s=0.0, shape=(4, 4, 8), twisted=True, steps=3600, model="llama2-70b")]
    r = simulate(ClusterConfig(generation="tpu-v4", ocs=False, horizon_s=86400), jobs, step_time=inner)
    assert set(inner.calls) == {("llama2-70b", "tpu-v4", (4, 4, 8), False)}
    assert r.jobs[0].end_s == pytest.approx(3600 * 1000 / 128)
    inner = Counting()
    r = simulate(ClusterConfig(generation="tpu-v4", ocs=True, horizon_s=86400), jobs, step_time=inner)
    assert set(inner.calls) == {("llama2-70b", "tpu-v4", (4, 4, 8), True)}
    assert r.jobs[0].end_s == pytest.approx(10.0 + 3600 * 1000 / 128 * 0.8)


@pytest.mark.parametrize("model,chips,slices,plan", [
    ("llama2-70b", 512, 1, "fsdp=512"),                 # the batch (1024) splits over every chip
    ("llama2-70b", 2048, 1, "fsdp=1024,tensor=2"),      # 1024 sequences over 2048 chips
    ("llama2-70b", 4096, 1, "fsdp=1024,tensor=4"),
    ("gpt3-175b", 4096, 1, "fsdp=512,tensor=8"),        # gcd(4096, 1536) = 512
    ("gpt3-175b", 3072, 1, "fsdp=1536,tensor=2"),       # a 12x16x16 slice
    ("llama2-70b", 1024, 2, "fsdp=512,tensor=2,dcn=2"),  # 512 sequences per slice
])
def test_default_plan_splits_the_batch_then_tensor(model, chips, slices, plan):
    """With no plan a cluster job's preset batch goes over FSDP as far as it divides, the rest of
    the chips tensor parallel: fsdp = gcd(chips, batch per slice), fsdp x tensor = chips. The
    per-op roofline then times every slice of the v4 ladder (the flat one never needed a plan)."""
    from podsim.trace.plans import multislice_plan

    assert multislice_plan(None, model, chips, slices) == plan
    shape = {512: (8, 8, 8), 1024: (8, 8, 16), 2048: (8, 16, 16), 3072: (12, 16, 16), 4096: (16, 16, 16)}[chips]
    e = ask(RooflineStepTime(), model, V4, shape, slices=slices)
    assert plan in e.source and e.step_time_s > 0


def test_a_batch_too_small_for_the_slice_is_timed_on_the_chips_it_uses():
    """llama2-70b's 1024 sequences on 3072 chips leave 3x, which cannot be tensor parallel (64
    heads): no plan uses every chip, so the engine's plan is a one-line error naming the fixes,
    and the per-op roofline times fsdp=1024 on a third of the slice (4x16x16) and divides by 3,
    saying so (the flat roofline's FLOPs / chips makes the same linear assumption)."""
    from podsim.study.steptime import compute_critical_path_s
    from podsim.trace.plans import multislice_plan

    with pytest.raises(PodsimError, match=r"llama2-70b on 1 x 3072 chips: .* splits over 1024 chips per slice "
                                          r"\(fsdp=1024\) and the other 3x cannot be tensor parallel; give .*"
                                          r"step_time.parallelism.*step_time.compute_efficiency"):
        multislice_plan(None, "llama2-70b", 3072, 1)
    e = ask(RooflineStepTime(), "llama2-70b", V4, (12, 16, 16))
    third = compute_critical_path_s(generate_trace("llama2-70b", (4, 16, 16), "fsdp=1024", generation=V4), V4)
    assert e.step_time_s == pytest.approx(third / 3) and "fsdp=1024 on 1024 chips, / 3 for 3072" in e.source
    # ResNet is data parallel: its replicated work would not shrink by 1/k, so no such part
    with pytest.raises(PodsimError, match="resnet50 on 1 x 4096 chips"):
        ask(RooflineStepTime(), "resnet50", V4, (16, 16, 16))


def test_a_job_streams_studies_are_named_by_model_and_slice():
    """The engine's warnings name a job stream's step as its model on its slice, not 'job'."""
    from podsim.scenario import load_scenario
    from podsim.scenario.studies import job_studies

    s = load_scenario(Path(__file__).resolve().parents[1] / "podsim" / "scenario" / "demo.yaml")
    gen = get_generation("tpu-v4")
    study_of = job_studies(s, gen)
    assert study_of("mixtral-8x7b", gen, (4, 4, 8), True, 1, 1).name == "mixtral-8x7b on 4x4x8_T"
    assert study_of("mixtral-8x7b", gen, (4, 4, 4), False, 2, 1).name == "mixtral-8x7b on 4x4x4 x2"
