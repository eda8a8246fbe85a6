"""A scenario's step (and scaling) `options`: the generator's switches reach the trace, change
what they should, and bad ones fail at load time under `options`, in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from podsim.errors import PodsimError
from podsim.scenario import load_scenario_text, run_scenario
from podsim.scenario.load import scenario_from_dict
from podsim.sweep.spec import apply_overrides
from podsim.trace import generate_trace, save_trace

DATA = Path(__file__).parent / "data" / "scenarios"
RESNET = "{generation: tpu-v3, wiring: static}\nworkload: {step: {model: resnet50, slice: 8x8, model_overrides: {global_batch: 1024}%s}}"


def _resnet(options: str = ""):
    return run_scenario(load_scenario_text("name: r\ntopology: " + RESNET % (f", options: {{{options}}}" if options else ""), source="s.yaml"))


def test_tf1_options_slow_a_resnet_step_as_the_generator_does():
    plain = _resnet().metrics
    tf1 = _resnet("combine_grad_reduce: true, replicas_per_chip: 2, grad_bytes: 4, bn_group: 8").metrics
    assert tf1["step_time_s"] > plain["step_time_s"]
    assert tf1["exposed_comm_s"] > 10 * plain["exposed_comm_s"]  # the combined all-reduce and batch-norm sums are all exposed
    assert tf1["mfu"] < plain["mfu"]


def test_recompute_in_a_step_study_counts_hardware_flops():
    raw = yaml.safe_load((DATA / "tiny_step.yaml").read_text())
    base = run_scenario(scenario_from_dict(raw)).metrics
    full = run_scenario(scenario_from_dict(apply_overrides(raw, {"workload.step.options": {"recompute": "full"}}))).metrics
    assert full["step_time_s"] > base["step_time_s"] and full["compute_s"] > 1.2 * base["compute_s"]
    assert full["model_flops_per_step"] == base["model_flops_per_step"]  # recompute is not model work


def test_scaling_section_takes_options():
    raw = yaml.safe_load((DATA / "tiny_scaling.yaml").read_text())
    base = run_scenario(scenario_from_dict(raw)).tables["scaling"]
    full = run_scenario(scenario_from_dict(apply_overrides(raw, {"scaling.options": {"recompute": "full"}}))).tables["scaling"]
    assert all(f > b for f, b in zip(full["step_time_s"], base["step_time_s"], strict=True))


@pytest.mark.parametrize("options,needle", [
    ("bn_group: 8", "workload.step.options: bn_group 8 is not allowed for llama2-70b: it has no batch norm"),
    ("microbatches: 3", "workload.step.options: microbatches 3 does not divide"),
    ("precision: fp16", "workload.step.options.precision"),
    ("overlap_everything: true", "workload.step.options.overlap_everything"),
    ("replicas_per_chip: 4", "workload.step.options.replicas_per_chip"),
])
def test_bad_step_options_fail_at_load_in_one_line(options, needle):
    text = ("name: x\ntopology: {generation: tpu-v4}\nworkload: {step: {model: llama2-70b, slice: 4x4x4, "
            f"model_overrides: {{n_layers: 2, global_batch: 64}}, options: {{{options}}}}}}}")
    with pytest.raises(PodsimError) as e:
        load_scenario_text(text, source="s.yaml")
    msg = str(e.value)
    assert needle in msg and msg.startswith("s.yaml:") and "\n" not in msg


def test_options_with_a_trace_file_are_refused(tmp_path):
    f = tmp_path / "t.json"
    save_trace(generate_trace("resnet50", "2x2x2", "data=8", overrides={"global_batch": 64}), f)
    text = f"name: x\ntopology: {{generation: tpu-v4}}\nworkload: {{step: {{trace: {f}, slice: 2x2x2, options: {{recompute: full}}}}}}"
    with pytest.raises(PodsimError, match="options shape a generated step"):
        load_scenario_text(text, source="s.yaml")


def test_step_options_are_the_generators_own_model():
    """A scenario's `options` sections are GenerateOptions itself (no copy of its fields to drift):
    every field the generator has, the scenario takes, with the generator's defaults and bounds."""
    from dataclasses import fields

    from podsim.scenario.schema import Scaling, StepWorkload
    from podsim.trace import GenerateOptions

    assert StepWorkload.model_fields["options"].annotation is GenerateOptions
    assert Scaling.model_fields["options"].annotation is GenerateOptions
    w = StepWorkload(model="gpt3-175b", slice="4x4x4", options={f.name: f.default for f in fields(GenerateOptions)})
    assert w.options == GenerateOptions()
    for bad, msg in (({"grad_bytes": 9}, r"bytes per element is \[1, 8\]"), ({"microbatches": 0}, r"micro-batches per step is \[1, "),
                     ({"no_such_option": 1}, "nexpected")):
        with pytest.raises(ValueError, match=msg):
            StepWorkload(model="gpt3-175b", slice="4x4x4", options=bad)
