"""The serving engine model: one model of what an inference server adds to the chips' work, with
one parameter set per engine (and per platform where the figures differ), each figure with its
source.

Every engine is the same model (`EngineModel`); `engine:` in a serving configuration picks the
parameters:

- host time per step (`step_overhead_s`: scheduling, input preparation, kernel launch or
  dispatch, moving the sampled tokens back) and per sampled token (`token_overhead_s`: sampling,
  detokenising, streaming), added to the chips' time of every step, since the step's device work
  waits for them (`overlap`: the host's work for the next step runs beside the device's, so a
  step takes the longer of the two);
- decode attention as its kernel runs it: the fraction of HBM bandwidth its KV-cache reads reach
  (`kv_read_fraction`: a paged or ragged attention kernel reads scattered pages below the
  bandwidth a weight matrix's stream reaches) and what it reads (`kv_buffers`: `paged`, the
  tokens each sequence holds; `static`, each sequence's whole preallocated buffer, as praxis's
  static beam buffers are read), in blocks of `kv_read_block_pages` pages a sequence (a kernel
  that copies a fixed number of pages per grid step reads a sequence's last block whole, past
  its length; 0: the tokens it holds);
- prefill attention (`prefill_attention`: `causal`, a flash kernel over the keys before each
  query; `dense`, every query against every key of the padded bucket with the logits
  materialised, as praxis's `_dot_atten`), and the beams' buffers reordered after every step
  (`beam_reorder`);
- how a static batch's prompts are prefilled (`static_prefill`: `steps`, in steps of at most
  the policy's `token_budget` tokens, as an engine with a bound on tokens per step
  (TensorRT-LLM's `max_num_tokens`) runs them, its workspace one such step's; `whole`, all in
  one program, praxis's);
- which batch policies it runs (`batch_kinds`).

`ideal` is the chips alone: no host time, attention reading at the weights' HBM rate, flash
prefill. The figures of each engine are in `ENGINES`, each a `Sourced` whose `source` resolves
with `podsim sources`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from podsim.errors import PodsimError
from podsim.topology import Generation, get_generation

ENGINE_NAMES = ("auto", "ideal", "tensorrt-llm", "tensorrt-llm-0.6", "vllm", "jetstream", "saxml")
"""`engine:` values; `auto` picks by the batch policy and platform (`resolve_engine`)."""


@dataclass(frozen=True)
class Sourced:
    """A figure and where it comes from: a source id (`podsim sources ID`), code cited as
    owner/repo@commit:path, or a calibration row and the rule that chose it."""

    value: float
    source: str
    note: str = ""


NONE = Sourced(0.0, "first principles: no host work modelled")
FULL = Sourced(1.0, "first principles: KV reads at the HBM fraction of weight reads")


@dataclass(frozen=True)
class EngineModel:
    """One serving engine's parameters on one platform (see the module docstring)."""

    name: str
    platform: str  # gpu | tpu | any
    step_overhead_s: Sourced = NONE
    layer_overhead_s: Sourced = NONE
    token_overhead_s: Sourced = NONE
    kv_read_fraction: Sourced = FULL
    kv_read_block_pages: Sourced = Sourced(0, "first principles: a decode kernel reads the tokens a sequence holds")
    overlap: bool = False
    prefill_attention: str = "causal"  # causal | dense
    logits_materialised: bool = False  # dense attention's logits written and read in fp32 (praxis)
    kv_buffers: str = "paged"  # paged | static
    beam_reorder: bool = False
    gqa_kv_sharing: bool = True  # the decode kernel reads a KV head once for its query group (False: once per query head)
    static_prefill: str = "steps"  # steps | whole
    first_token_from_prefill: bool = True  # False: the prefill samples nothing, the prompt's last token re-run (praxis)
    batch_kinds: tuple[str, ...] = ("continuous", "static")
    what_ifs: frozenset[str] = field(default_factory=frozenset)  # diagnostics only (PRAXIS_WHAT_IFS)
    note: str = ""

    def __post_init__(self) -> None:
        if self.prefill_attention not in ("causal", "dense") or self.kv_buffers not in ("paged", "static") \
                or self.static_prefill not in ("steps", "whole"):
            raise PodsimError(f"engine {self.name}: prefill_attention causal|dense, kv_buffers paged|static, "
                              "static_prefill steps|whole")
        if not 0.0 < self.kv_read_fraction.value <= 1.0:
            raise PodsimError(f"engine {self.name}: kv_read_fraction {self.kv_read_fraction.value} is not in (0, 1]")
        if self.kv_read_block_pages.value < 0 or self.kv_read_block_pages.value != int(self.kv_read_block_pages.value):
            raise PodsimError(f"engine {self.name}: kv_read_block_pages {self.kv_read_block_pages.value} is not a whole "
                              "number of pages >= 0")
        if self.kv_read_block_pages.value and self.kv_buffers != "paged":
            raise PodsimError(f"engine {self.name}: kv_read_block_pages blocks a paged cache's reads; kv_buffers "
                              f"{self.kv_buffers} reads whole buffers: set it 0")
        if min(self.step_overhead_s.value, self.layer_overhead_s.value, self.token_overhead_s.value) < 0:
            raise PodsimError(f"engine {self.name}: host overheads must be >= 0")

    def host_s(self, sampled: float, layers: int) -> float:
        """Host time of a step of a `layers`-layer model that samples `sampled` tokens."""
        return self.step_overhead_s.value + self.layer_overhead_s.value * layers + self.token_overhead_s.value * sampled

    def step_s(self, device_s: float, sampled: float, layers: int) -> float:
        """A step's time from its device time: the host's added, or beside it (`overlap`)."""
        host = self.host_s(sampled, layers)
        return max(device_s, host) if self.overlap else device_s + host

    def figures(self) -> dict[str, Sourced]:
        """The sourced figures, by name (for printing and the docs)."""
        return {"step_overhead_s": self.step_overhead_s, "layer_overhead_s": self.layer_overhead_s,
                "token_overhead_s": self.token_overhead_s, "kv_read_fraction": self.kv_read_fraction,
                "kv_read_block_pages": self.kv_read_block_pages}

    def describe(self) -> str:
        """One line: the engine and its non-zero figures with their sources."""
        f = self.figures()
        parts = []
        for name, unit, scale in (("step_overhead_s", "ms per step", 1e3), ("layer_overhead_s", "ms per layer per step", 1e3),
                                  ("token_overhead_s", "us per sampled token", 1e6)):
            if f[name].value:
                parts.append(f"host {f[name].value * scale:.3g} {unit} ({f[name].source})")
        if not parts:
            parts.append("no host time per step")
        parts.append(f"decode KV reads at {f['kv_read_fraction'].value:.0%} of the weights' HBM rate ({f['kv_read_fraction'].source})")
        if f["kv_read_block_pages"].value:
            parts.append(f"in blocks of {f['kv_read_block_pages'].value:.0f} pages a sequence ({f['kv_read_block_pages'].source})")
        if not self.gqa_kv_sharing:
            parts.append("a KV head read once per query head")
        return f"engine {self.name} ({self.platform}): " + "; ".join(parts) + ("; host beside device" if self.overlap else "")


PRAXIS = "google/praxis@c46c844"
XQA_BLOG = ("TensorRT-LLM docs/source/blogs/XQA-kernel.md (\"New XQA-kernel provides 2.4x more Llama-70B throughput\", "
            "released in v0.8)")
TRT_LAYER_OVERHEAD_S = 1.675e-4
"""TensorRT-LLM's host time per layer per step (kernel launches and runtime work the GPU waits for), calibrated
on the gptSession era's batch-1 first-token row with the shortest prompt and fewest layers (docs/validation.md,
serving rule S2; `benchmarks/validation.py --serving --calibrate` recomputes it)."""
JETSTREAM_STEP_OVERHEAD_S = 1.533e-2
"""JetStream's host time per step on TPU v5e (the Python scheduler's page bookkeeping, dispatch, transfer of each
step's tokens, detokenising), calibrated on the experimental engine's first row (sv.62) with the schedule its code
states: one prompt chunk per step beside a decode over every slot (serving rule S2); not published (ov.7).
`benchmarks/validation.py --serving --calibrate` recomputes it."""
JS_EXP_KERNEL = ("AI-Hypercomputer/JetStream@a3bb30e972a344675c20d56d8f61dc309e6a5f7b:experimental/jax/inference/kernel/"
                 "attention_ops.py, kernel/attention/tpu/paged_attention.py")
TRT_CAL = "calibration: sv.13 (serving rule S2: the batch-1 first-token row with the shortest prompt, fewest layers)"
PAGED_KV = Sourced(1 / 1.23, "ov.16", "a paged decode kernel 20-26% slower than a contiguous one (vLLM, SOSP 2023 §7.1); "
                   "1/1.23 at the middle")

# engine -> platform -> parameters. Ids (sv., ov., lp., cl.) are rows of podsim/data/reference/serving_measurements.md
ENGINES: dict[str, dict[str, EngineModel]] = {
    "ideal": {"any": EngineModel("ideal", "any", note="the chips alone: no host time, KV reads at the weights' HBM rate")},
    "tensorrt-llm": {"gpu": EngineModel(
        "tensorrt-llm", "gpu", layer_overhead_s=Sourced(TRT_LAYER_OVERHEAD_S, TRT_CAL + ", borrowed from tensorrt-llm-0.6 "
                                                        "(S3: no batch-1 row of this version)"),
        kv_read_fraction=PAGED_KV, gqa_kv_sharing=True,
        note=f"in-flight batching (gptManager, v0.8 to v0.11): paged KV cache, XQA decode kernel ({XQA_BLOG}); "
             "host time additive (ov.14: the batch-1 rows' time beyond the roofline adds to it)")},
    "tensorrt-llm-0.6": {"gpu": EngineModel(
        "tensorrt-llm-0.6", "gpu", layer_overhead_s=Sourced(TRT_LAYER_OVERHEAD_S, TRT_CAL),
        kv_read_fraction=Sourced(1.0, "sv.1", "contiguous KV cache: the benchmark's engines are built without "
                                 "--paged_kv_cache (TRTLLM-V061 build commands)"),
        gqa_kv_sharing=False,
        note=f"gptSession static batching (v0.5 to v0.7): contiguous KV, the masked MHA decode kernel reading a KV head "
             f"once per query head. The v0.6.1 doc's Llama 2 70B runs export TRTLLM_ENABLE_XQA=1 (the XQA kernel, then "
             f"experimental and chosen by a heuristic, reads a KV head once per group; default from v0.8: {XQA_BLOG}); "
             f"whether it ran on their FP8 contiguous cache is not in a stored source, so the masked MHA's reads stand")},
    "vllm": {"gpu": EngineModel(
        "vllm", "gpu", step_overhead_s=Sourced(8e-3, "ov.2, ov.4", "13 ms per token of Llama 3 8B on an H100 under light "
                                               "load (ov.2) less ~5 ms of GPU time per step (ov.4): vLLM before v0.6"),
        kv_read_fraction=Sourced(1 / 1.23, "ov.16", "vLLM's PagedAttention kernel 20-26% slower than a contiguous one"),
        note="continuous batching with paged KV (vLLM before v0.6.0: scheduling and input preparation on the host between "
             "GPU steps, ov.1)")},
    "jetstream": {"tpu": EngineModel(
        "jetstream", "tpu", step_overhead_s=Sourced(JETSTREAM_STEP_OVERHEAD_S, "calibration: sv.62 (serving rule S2: "
                                                    "the engine's first row in id order)"),
        kv_read_block_pages=Sourced(8, "ov.27: " + JS_EXP_KERNEL, "decode_attention sets pages_per_compute_block = 8; the paged "
                                    "attention kernel copies that many pages per grid step and skips only whole blocks "
                                    "past a sequence's length"),
        note="JetStream's experimental JAX engine on TPU (its two published runs, sv.62 and sv.66): one host "
             "dispatch per step; decode attention at the weights' HBM rate (no kernel figure published for TPUs, "
             "ov.18); JetStream's orchestrator with the MaxText or PyTorch engines spends less a step (sv.49-sv.59 "
             "bound it: docs/validation.md)")},
    "saxml": {"tpu": EngineModel(
        "saxml", "tpu", prefill_attention="dense", logits_materialised=True, kv_buffers="static", beam_reorder=True,
        static_prefill="whole", first_token_from_prefill=False, batch_kinds=("static",),
        step_overhead_s=Sourced(0.0, "ov.24", "a batch's decode steps run in one on-device loop: no host round trip per step"),
        note=f"praxis as the MLPerf rounds ran it ({PRAXIS} praxis/layers/attentions.py `_dot_atten`, "
             "praxis/beam_search.py `shuffle_state`, praxis/layers/models.py `decode_with_params`)")},
}
AUTO = {"gpu": "tensorrt-llm", "tpu": "jetstream"}
"""`engine: auto`: the parameter set of each platform's validated engine, whatever the batch kind (Saxml
for Saxml's batcher)."""


def platform_of(gen: Generation) -> str:
    """gpu or tpu: which of an engine's parameter sets a generation takes."""
    return "gpu" if gen.chip_id.startswith("gpu") or gen.vendor.lower() == "nvidia" else "tpu"


def resolve_engine(name: str, generation: str | Generation, batch_kind: str = "continuous",
                   batcher: str = "idle") -> EngineModel:
    """The parameters of engine `name` on `generation`'s platform. `auto`: saxml for Saxml's
    batcher, else the platform's validated engine (`AUTO`). A name podsim has no parameters for
    on that platform is refused."""
    gen = get_generation(generation)
    if name not in ENGINE_NAMES:
        raise PodsimError(f"engine {name!r} is not known; use one of: {', '.join(ENGINE_NAMES)}")
    plat = platform_of(gen)
    if name == "auto":
        name = "saxml" if batcher == "saxml" else AUTO[plat]
    sets = ENGINES.get(name, {})
    model = sets.get(plat) or sets.get("any")
    if model is None:
        have = ", ".join(f"{e} on {'/'.join(p)}" for e, p in ENGINES.items())
        raise PodsimError(f"engine {name}: no parameters for {plat}s ({gen.id}); podsim has: {have}")
    if name == "saxml" and batcher != "saxml":
        raise PodsimError("engine saxml runs Saxml's batcher: set batch kind static and batcher saxml")
    if batcher != "saxml" and batch_kind not in model.batch_kinds:
        raise PodsimError(f"engine {name} runs {', '.join(model.batch_kinds)} batches, not {batch_kind}; "
                          f"set batch kind {model.batch_kinds[0]} or another engine")
    return model


def with_costs(model: EngineModel, costs: frozenset[str]) -> EngineModel:
    """The Saxml model with only `costs` of praxis's charged (the ablation's subsets: `dense_prefill`,
    `logits`, `static_buffers`, `beam_reorder`) and any what-ifs among them."""
    return replace(model, prefill_attention="dense" if "dense_prefill" in costs else "causal",
                   logits_materialised="logits" in costs, kv_buffers="static" if "static_buffers" in costs else "paged",
                   beam_reorder="beam_reorder" in costs, what_ifs=frozenset(costs & PRAXIS_WHAT_IFS))


PRAXIS_COSTS = frozenset({"dense_prefill", "logits", "static_buffers", "beam_reorder"})
"""The costs of a Saxml batch praxis's code implies, all charged by the saxml engine."""
PRAXIS_WHAT_IFS = frozenset({"prefill_collectives_hidden", "int8_materialised"})
"""Bounds no row uses: the prefill's tensor collectives all hidden under its matmuls (the
classes' windowed-einsum flags at their best), and int8 weights materialised as bf16 at every
decode step (written and read: 4 bytes more per weight)."""
