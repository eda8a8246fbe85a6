"""Model configurations for the trace generator, with their published sources.

Two families: transformers given by their dimensions (decoders, dense or mixture-of-experts,
and masked-LM encoders such as BERT: `causal=False`) and ResNet-50. Each
config knows its parameter count and model FLOPs per token (transformers) or per image
(ResNet), counted layer by layer from the shapes — no fitted constants.

FLOP convention: a matmul [M, K] x [K, N] is 2·M·K·N FLOPs. Attention scores (QK^T) and the
weighted sum (AV) are counted for the causal half of the score matrix, the work a block-causal
kernel (FlashAttention) does: 2·s·d_attn FLOPs per token per layer forward (an encoder,
`causal=False`, does the whole matrix: 4·s·d_attn). The LM head runs over `loss_positions` per
sequence (every token for a decoder; a masked-LM encoder's masked positions). The backward pass
is twice the forward. Embedding lookups, norms, softmax and activations are not counted as
FLOPs (they are counted as HBM bytes by the generator).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError, model_validator

from podsim import quantities as q
from podsim.errors import PodsimError, first_error
from podsim.trace import model_sources as src


class TransformerConfig(q.NoBoolNumbers):
    """A decoder-only transformer; `n_experts > 1` makes every layer's MLP a mixture of experts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    source: str = Field(description="where the configuration is published")
    n_layers: q.N_LAYERS.type
    d_model: q.WIDTH.type
    n_heads: q.HEADS.type
    n_kv_heads: q.HEADS.type = Field(description="key/value heads (grouped-query attention); = n_heads for multi-head")
    d_ff: q.WIDTH.type = Field(description="hidden width of the MLP (of each expert)")
    vocab: q.VOCAB.type
    seq_len: q.SEQ_LEN.type
    global_batch: q.BATCH.type = Field(description="sequences per training step")
    mlp: Literal["gelu", "swiglu"] = Field(description="gelu: 2 matrices (GPT); swiglu: 3, a gated MLP (LLaMA, "
                                          "Mixtral; Gemma's GeGLU has the same shapes)")
    norm: Literal["layernorm", "rmsnorm"]
    bias: bool = Field(description="linear layers and norms carry biases (GPT-2/3 style)")
    tied_embeddings: bool = Field(description="the LM head reuses the input embedding matrix")
    learned_positions: bool = Field(description="learned position embeddings (GPT); rotary otherwise")
    n_experts: q.EXPERTS.type = 1
    top_k: q.EXPERTS.type = 1
    head_dim: q.WIDTH.type | None = Field(None, description="per-head width; None: d_model / n_heads")
    causal: bool = Field(True, description="decoder (causal attention); False: a bidirectional encoder")
    loss_positions: q.SEQ_LEN.type | None = Field(None, description="positions per sequence through the LM head; None: all")
    parallel_block: bool = Field(False, description="attention and MLP read one normalised input and add into one residual "
                                 "(PaLM's 'parallel layers', GPT-J): one norm, and under tensor parallelism one reduction of "
                                 "the partial sums per layer each way instead of two")

    @model_validator(mode="after")
    def _consistent(self) -> TransformerConfig:
        if self.head_dim is None and self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not a multiple of n_heads {self.n_heads}; give head_dim")
        if self.loss_positions is not None and self.loss_positions > self.seq_len:
            raise ValueError(f"loss_positions {self.loss_positions} exceeds seq_len {self.seq_len}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads {self.n_heads} is not a multiple of n_kv_heads {self.n_kv_heads}")
        if self.top_k > self.n_experts:
            raise ValueError(f"top_k {self.top_k} exceeds n_experts {self.n_experts}")
        return self

    # Shapes ------------------------------------------------------------------------------
    @property
    def kind(self) -> str:
        return "moe" if self.is_moe else "dense"

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 1

    @property
    def d_head(self) -> int:
        return self.head_dim if self.head_dim is not None else self.d_model // self.n_heads

    @property
    def head_positions(self) -> int:
        return self.loss_positions if self.loss_positions is not None else self.seq_len

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch * self.seq_len

    def tensor_problem(self, t: int) -> str | None:
        """Why tensor parallelism over `t` chips cannot split this model (attention heads, KV
        heads, d_ff), or None when it can; the generator and the default plans share the rule."""
        if self.n_heads % t:
            return f"tensor={t} does not divide {self.name}'s {self.n_heads} attention heads"
        if self.n_kv_heads % t and t % self.n_kv_heads:
            return f"tensor={t} neither divides nor is a multiple of {self.name}'s {self.n_kv_heads} KV heads"
        if self.d_ff % t:
            return f"tensor={t} does not divide {self.name}'s d_ff {self.d_ff}"
        return None

    def expert_problem(self, e: int) -> str | None:
        """Why expert parallelism over `e` groups cannot split this model, or None when it can;
        the generator and the serving model share the rule."""
        if e > 1 and not self.is_moe:
            return f"expert={e} needs a mixture-of-experts model; {self.name} is dense"
        if self.n_experts % e:
            return f"expert={e} does not divide {self.name}'s {self.n_experts} experts"
        return None

    @property
    def mlp_matrices(self) -> int:
        return 3 if self.mlp == "swiglu" else 2

    # Parameters --------------------------------------------------------------------------
    @property
    def attn_params(self) -> int:
        """Q, K, V, O projections of one layer (with biases if the model has them)."""
        d, dh = self.d_model, self.d_head
        w = d * self.n_heads * dh * 2 + d * self.n_kv_heads * dh * 2
        b = (self.n_heads * dh + 2 * self.n_kv_heads * dh + d) if self.bias else 0
        return w + b

    @property
    def expert_params(self) -> int:
        """One MLP (one expert) of one layer."""
        w = self.mlp_matrices * self.d_model * self.d_ff
        b = (self.d_ff * (self.mlp_matrices - 1) + self.d_model) if self.bias else 0
        return w + b

    @property
    def router_params(self) -> int:
        return self.d_model * self.n_experts if self.is_moe else 0

    @property
    def norm_params_per_layer(self) -> int:
        per_norm = 2 * self.d_model if self.norm == "layernorm" else self.d_model
        return 2 * per_norm

    @property
    def dense_layer_params(self) -> int:
        """Parameters of one layer that every token uses (attention, norms, router; the MLP if dense)."""
        mlp = 0 if self.is_moe else self.expert_params
        return self.attn_params + self.norm_params_per_layer + self.router_params + mlp

    @property
    def layer_params(self) -> int:
        return self.dense_layer_params + (self.n_experts * self.expert_params if self.is_moe else 0)

    @property
    def embedding_params(self) -> int:
        """Token embedding, position embedding, final norm and (untied) LM head."""
        emb = self.vocab * self.d_model
        pos = self.seq_len * self.d_model if self.learned_positions else 0
        final_norm = self.norm_params_per_layer // 2
        head = 0 if self.tied_embeddings else self.vocab * self.d_model
        return emb + pos + final_norm + head

    @property
    def params(self) -> int:
        return self.n_layers * self.layer_params + self.embedding_params

    @property
    def active_params(self) -> int:
        """Parameters one token uses (top_k experts of each MoE layer)."""
        experts = self.top_k * self.expert_params if self.is_moe else 0
        return self.n_layers * (self.dense_layer_params + experts) + self.embedding_params

    # FLOPs -------------------------------------------------------------------------------
    def forward_flops_per_token(self) -> float:
        """Model forward FLOPs per token (convention in the module docstring)."""
        d, dh, s = self.d_model, self.d_head, self.seq_len
        proj = 2 * d * dh * (2 * self.n_heads + 2 * self.n_kv_heads)
        scores = 2 * s * self.n_heads * dh * (1 if self.causal else 2)  # QK^T and AV, causal half: 2 * (2 s d / 2)
        experts = self.top_k if self.is_moe else 1
        mlp = 2 * self.mlp_matrices * d * self.d_ff * experts
        router = 2 * d * self.n_experts if self.is_moe else 0
        head = 2 * d * self.vocab * self.head_positions / s
        return self.n_layers * (proj + scores + mlp + router) + head

    def training_flops_per_step(self) -> float:
        """Forward + backward (3x forward) model FLOPs of one step, without recomputation."""
        return 3.0 * self.forward_flops_per_token() * self.tokens_per_step


@dataclass(frozen=True)
class ConvLayer:
    """One weight layer of a CNN: a convolution (k x k) or the final fully connected layer."""

    name: str
    c_in: int
    c_out: int
    kernel: int
    stride: int
    h_in: int  # input height = width
    batchnorm: bool = True
    bias: bool = False

    @property
    def h_out(self) -> int:
        return math.ceil(self.h_in / self.stride)

    @property
    def weight_params(self) -> int:
        return self.kernel * self.kernel * self.c_in * self.c_out

    @property
    def params(self) -> int:
        return self.weight_params + (2 * self.c_out if self.batchnorm else 0) + (self.c_out if self.bias else 0)

    @property
    def forward_flops_per_image(self) -> float:
        return 2.0 * self.weight_params * self.h_out * self.h_out

    @property
    def in_elems_per_image(self) -> int:
        return self.c_in * self.h_in * self.h_in

    @property
    def out_elems_per_image(self) -> int:
        return self.c_out * self.h_out * self.h_out


class ResNetConfig(q.NoBoolNumbers):
    """ResNet-50 v1.5 (stride 2 on the 3x3 convolution of each down-sampling block)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    source: str
    image_size: q.IMAGE_SIZE.type = 224
    classes: q.VOCAB.type = 1000
    global_batch: q.BATCH.type = Field(description="images per training step")
    blocks: tuple[q.N_LAYERS.type, q.N_LAYERS.type, q.N_LAYERS.type, q.N_LAYERS.type] = (3, 4, 6, 3)

    @property
    def kind(self) -> str:
        return "cnn"

    def layers(self) -> list[ConvLayer]:
        """Weight layers in forward order, named as in ASTRA-sim's ResNet-50 workload."""
        h = self.image_size
        out = [ConvLayer("conv1", 3, 64, 7, 2, h)]
        h = out[0].h_out // 2  # 3x3 max-pool, stride 2
        c_in = 64
        for stage, (n_blocks, width) in enumerate(zip(self.blocks, (64, 128, 256, 512), strict=True)):
            for b in range(n_blocks):
                stride = 2 if (b == 0 and stage > 0) else 1
                tag = f"layer_{width}_{b + 1}"
                out.append(ConvLayer(f"{tag}_conv1", c_in, width, 1, 1, h))
                out.append(ConvLayer(f"{tag}_conv2", width, width, 3, stride, h))
                h_out = math.ceil(h / stride)
                out.append(ConvLayer(f"{tag}_conv3", width, 4 * width, 1, 1, h_out))
                if b == 0:
                    out.append(ConvLayer(f"{tag}_conv4", c_in, 4 * width, 1, stride, h))  # projection shortcut
                c_in, h = 4 * width, h_out
        out.append(ConvLayer("fc1000", c_in, self.classes, 1, 1, 1, batchnorm=False, bias=True))
        return out

    @property
    def params(self) -> int:
        return sum(layer.params for layer in self.layers())

    def forward_flops_per_image(self) -> float:
        return sum(layer.forward_flops_per_image for layer in self.layers())

    def training_flops_per_step(self) -> float:
        return 3.0 * self.forward_flops_per_image() * self.global_batch


ModelConfig = TransformerConfig | ResNetConfig



def _llama_style(name: str, source: str, n_layers: int, d_model: int, n_heads: int, n_kv_heads: int, d_ff: int,
                 vocab: int, seq_len: int, global_batch: int) -> TransformerConfig:
    """A decoder shaped as LLaMA: SwiGLU MLP, RMSNorm, rotary positions, no biases, an untied LM head."""
    return TransformerConfig(
        name=name, source=source, n_layers=n_layers, d_model=d_model, n_heads=n_heads, n_kv_heads=n_kv_heads, d_ff=d_ff,
        vocab=vocab, seq_len=seq_len, global_batch=global_batch, mlp="swiglu", norm="rmsnorm", bias=False,
        tied_embeddings=False, learned_positions=False,
    )


def maxtext_model(scale: int, global_batch: int, script: str) -> TransformerConfig:
    """MaxText's model of `global_parameter_scale` = scale (a power of 2), as MAXTEXT_SOURCE says."""
    b, r = divmod(int(math.log2(scale)), 3)
    if 2 ** int(math.log2(scale)) != scale:
        raise PodsimError(f"maxtext global_parameter_scale {scale} is not a power of 2")
    heads = 8 * 2 ** (b + (r > 0))
    return TransformerConfig(
        name=f"maxtext-{scale}b", source=src.MAXTEXT_SOURCE.format(script=script), n_layers=16 * 2**b, d_model=2560 * 2 ** (b + (r > 1)),
        n_heads=heads, n_kv_heads=heads, head_dim=256, d_ff=8192 * 2 ** (b + (r > 0)), vocab=32768, seq_len=2048,
        global_batch=global_batch, mlp="gelu", norm="rmsnorm", bias=False, tied_embeddings=True, learned_positions=False,
        parallel_block=True,
    )


PRESETS: dict[str, ModelConfig] = {
    "gpt3-175b": TransformerConfig(
        name="gpt3-175b", source=src.GPT3_SOURCE, n_layers=96, d_model=12288, n_heads=96, n_kv_heads=96,
        d_ff=4 * 12288, vocab=50257, seq_len=2048, global_batch=1536, mlp="gelu", norm="layernorm",
        bias=True, tied_embeddings=True, learned_positions=True,
    ),
    "llama2-70b": TransformerConfig(
        name="llama2-70b", source=src.LLAMA2_SOURCE, n_layers=80, d_model=8192, n_heads=64, n_kv_heads=8,
        d_ff=28672, vocab=32000, seq_len=4096, global_batch=1024, mlp="swiglu", norm="rmsnorm",
        bias=False, tied_embeddings=False, learned_positions=False,
    ),
    "mixtral-8x7b": TransformerConfig(
        name="mixtral-8x7b", source=src.MIXTRAL_SOURCE, n_layers=32, d_model=4096, n_heads=32, n_kv_heads=8,
        d_ff=14336, vocab=32000, seq_len=4096, global_batch=1024, mlp="swiglu", norm="rmsnorm",
        bias=False, tied_embeddings=False, learned_positions=False, n_experts=8, top_k=2,
    ),
    "bert-large": TransformerConfig(
        name="bert-large", source=src.BERT_SOURCE, n_layers=24, d_model=1024, n_heads=16, n_kv_heads=16,
        d_ff=4096, vocab=30522, seq_len=512, global_batch=8192, mlp="gelu", norm="layernorm",
        bias=True, tied_embeddings=True, learned_positions=True, causal=False, loss_positions=76,
    ),
    "palm-540b": TransformerConfig(
        name="palm-540b", source=src.PALM_SOURCE, n_layers=118, d_model=18432, n_heads=48, n_kv_heads=1,
        head_dim=256, d_ff=4 * 18432, vocab=256000, seq_len=2048, global_batch=2048, mlp="swiglu",
        norm="layernorm", bias=False, tied_embeddings=True, learned_positions=False, parallel_block=True,
    ),
    "llama2-7b": _llama_style("llama2-7b", src.LLAMA2_7B_SOURCE, 32, 4096, 32, 32, 11008, 32000, 4096, 1024),
    "llama2-13b": _llama_style("llama2-13b", src.LLAMA2_13B_SOURCE, 40, 5120, 40, 40, 13824, 32000, 4096, 1024),
    "llama3-8b": _llama_style("llama3-8b", src.LLAMA3_8B_SOURCE, 32, 4096, 32, 8, 14336, 128256, 8192, 512),
    "llama3-70b": _llama_style("llama3-70b", src.LLAMA3_70B_SOURCE, 80, 8192, 64, 8, 28672, 128256, 8192, 512),
    "mistral-7b": _llama_style("mistral-7b", src.MISTRAL_SOURCE, 32, 4096, 32, 8, 14336, 32000, 4096, 1024),
    "gemma-7b": TransformerConfig(
        name="gemma-7b", source=src.GEMMA_SOURCE, n_layers=28, d_model=3072, n_heads=16, n_kv_heads=16, head_dim=256,
        d_ff=24576, vocab=256000, seq_len=8192, global_batch=512, mlp="swiglu", norm="rmsnorm", bias=False,
        tied_embeddings=True, learned_positions=False,
    ),
    "gptj-6b": TransformerConfig(
        name="gptj-6b", source=src.GPTJ_SOURCE, n_layers=28, d_model=4096, n_heads=16, n_kv_heads=16, head_dim=256,
        d_ff=16384, vocab=50401, seq_len=2048, global_batch=512, mlp="gelu", norm="layernorm", bias=True,
        tied_embeddings=False, learned_positions=False, parallel_block=True,
    ),
    "resnet50": ResNetConfig(name="resnet50", source=src.RESNET_SOURCE, global_batch=1024),
    # MaxText's published v5e and v5p configurations (MaxText/configs/v5e/*.sh, v5p/*.sh): batch = the
    # script's per_device_batch_size x the chips of one slice of the README's first row
    **{f"maxtext-{s}b": maxtext_model(s, batch, script) for s, batch, script in (
        (16, 6 * 256, "v5e/16b.sh: 6 x v5e-256"), (32, 4 * 256, "v5e/32b.sh: 4 x v5e-256"), (64, 2 * 256, "v5e/64b.sh: 2 x v5e-256"),
        (128, 1 * 256, "v5e/128b.sh: 1 x v5e-256"), (256, 2 * 512, "v5p/256b.sh: 2 x v5p-1024, 512 chips"),
        (512, 2 * 512, "v5p/512b.sh: 2 x v5p-1024, 512 chips"), (1024, 2 * 1024, "v5p/1024b.sh: 2 x v5p-2048, 1024 chips"))},
}


def get_model(name: str, overrides: dict[str, Any] | None = None) -> ModelConfig:
    """A preset by name, with fields overridden (e.g. {'global_batch': 2048})."""
    try:
        base = PRESETS[name]
    except KeyError:
        raise PodsimError(f"unknown model {name!r}; presets: {', '.join(PRESETS)}") from None
    if not overrides:
        return base
    fields = type(base).model_fields
    unknown = [k for k in overrides if k not in fields or k in ("name", "source")]
    if unknown:
        allowed = ", ".join(k for k in fields if k not in ("name", "source"))
        raise PodsimError(f"model {name}: {unknown[0]!r} cannot be set; fields: {allowed}")
    try:
        return type(base).model_validate({**base.model_dump(), **overrides})
    except ValidationError as exc:
        where, msg = first_error(exc, "model")
        raise PodsimError(f"model {name}: {where}: {msg}") from None


def parse_assignments(items: list[str] | None, what: str, example: str) -> dict[str, str]:
    """['a=1', 'b=x,y'] -> {'a': '1', 'b': 'x,y'}; a one-line error names `what` and an example."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise PodsimError(f"{what} {item!r} is not KEY=VALUE (e.g. {example})")
        if key.strip() in out:
            raise PodsimError(f"{what} {key.strip()!r} is given twice ({key.strip()}={out[key.strip()]}, {item.strip()}); "
                              "the last would silently win")
        out[key.strip()] = value.strip()
    return out


def parse_overrides(items: list[str] | None) -> dict[str, str]:
    """['global_batch=2048', 'seq_len=4096'] -> {'global_batch': '2048', ...} (pydantic converts)."""
    return parse_assignments(items, "model override", "global_batch=2048")
