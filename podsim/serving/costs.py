"""Per-chip costs of one inference step of a transformer: a serving step's ops, shapes and bytes.

One serving step runs every sequence of the batch through the model once: a prefill chunk of a
prompt (`n` new tokens after `c` already in the KV cache) or a decode token (`n` = the request's
beams). The linear layers see all the step's tokens at once, so their weights are read from
HBM once per step whatever the batch (decode is memory-bound: weights, then the KV cache every
sequence attends to; prefill is compute-bound: the prompt's FLOPs). Conventions are the trace
generator's (podsim.trace.costs): a matmul [m, k] x [k, n] is 2mkn FLOPs moving (mk + kn + mn)
elements, the attention core is counted for the keys each query attends to (causal), norms,
residual adds and activations are memory-bound bytes.

Sharding (`tensor` t, `expert` e; t x e = the slice's chips), as podsim's trainer lays a step
(GShard / Megatron): attention heads, the MLP's hidden width and the vocabulary split over
`tensor` (KV heads replicated when t exceeds them, as Megatron does for grouped-query
attention); with `expert` > 1 the batch's sequences split over the e groups for attention
(each group holds its sequences' KV cache) and an all-to-all over `expert` dispatches each
token to its top_k experts and combines them, each chip holding n_experts / e experts whose
hidden width splits over `tensor`. Per layer: a tensor all-reduce after attention and one after
the MLP (`parallel_block`: one after both, GPT-J and PaLM's layer).

Precision per op (`InferencePrecision`): weights as stored (bf16, or int8 / fp8: 1 byte),
the KV cache as stored, the MXU rate of the weight matmuls (bf16: weight-only quantisation
dequantises to bf16; int8 / fp8: both operands quantised, at that published rate) and of the
attention core.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, model_validator

from podsim.errors import PodsimError
from podsim.perf.opmodel import Matmul
from podsim.trace.configs import TransformerConfig
from podsim.trace.costs import Cost, TransformerShard
from podsim.trace.generate import GenerateOptions
from podsim.trace.mesh import ParallelPlan

BYTES = {"bf16": 2, "int8": 1, "fp8": 1}
ACT_BYTES = 2  # bf16 activations
LOGIT_BYTES = 4  # fp32 logits for sampling
SAMPLE_BYTES = 8  # per sampled token: the local best logit and its index (fp32 + int32)
# dense attention as praxis runs it (google/praxis@c46c844 praxis/layers/attentions.py
# `DotProductAttention._dot_atten`): the QK einsum writes the logits, cast to fp32, the softmax
# reads them and writes bf16 probs, the PV einsum reads those; per logit, each tensor once
DENSE_LOGIT_BYTES = 4 + 4 + ACT_BYTES + ACT_BYTES


class InferencePrecision(BaseModel):
    """Precision per op class of an inference step."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    weights: str = Field("bf16", description="weights as stored in HBM: bf16, int8 or fp8 (1 byte)")
    kv_cache: str = Field("bf16", description="KV cache as stored: bf16, int8 or fp8")
    matmul: str = Field("bf16", description="MXU rate of the weight matmuls: bf16 (int8/fp8 weights dequantised), "
                                            "or int8 / fp8 (weights and activations quantised; needs those weights)")
    attention: str = Field("bf16", description="MXU rate of the attention core (QK^T, AV)")

    @model_validator(mode="after")
    def _known(self) -> InferencePrecision:
        for name in ("weights", "kv_cache", "matmul", "attention"):
            value = getattr(self, name)
            if value not in BYTES:
                raise PodsimError(f"precision {name} {value!r} is not known; use one of: {', '.join(BYTES)}")
        if self.matmul != "bf16" and self.weights != self.matmul:
            raise PodsimError(f"precision matmul {self.matmul} multiplies {self.matmul} weights; weights are {self.weights} "
                              f"(set weights: {self.matmul}, or matmul: bf16 for weight-only quantisation)")
        return self

    @property
    def weight_bytes(self) -> int:
        return BYTES[self.weights]

    @property
    def kv_bytes(self) -> int:
        return BYTES[self.kv_cache]


@dataclass(frozen=True)
class Seq:
    """One sequence's share of a step: `new` tokens after `context` in its KV cache. A decode
    token of a request with b beams is new = b; `shared` of the context is the prompt, read
    once for all beams (prefix sharing); the rest is each beam's own."""

    new: int
    context: int
    shared: int = 0
    beams: int = 1


def seq_tokens(s: Seq) -> tuple[float, float, float, float]:
    """One sequence's attention in tokens: (queries, keys summed over its queries, cached tokens
    read, new tokens written). A prefill chunk (or a one-beam decode token) is causal over the
    chunk: n queries attend to c + (n + 1) / 2 keys on average. A decode step of b beams has
    new = b: each beam's query attends to the prompt (`shared`, read once for all beams), its
    own (context - shared) / b tokens and itself."""
    if s.beams > 1:
        own = (s.context - s.shared) / s.beams
        return float(s.new), s.new * (s.shared + own + 1.0), s.shared + own * s.beams, float(s.new)
    return float(s.new), s.new * (s.context + (s.new + 1) / 2.0), float(s.context), float(s.new)


@dataclass(frozen=True)
class AttentionLoad:
    """What the attention core of one layer costs on one chip, summed over a step's sequences:
    query tokens, FLOPs and the KV-cache bytes read and written (per layer, per chip)."""

    queries: float = 0.0
    flops: float = 0.0
    kv_read_bytes: float = 0.0
    kv_write_bytes: float = 0.0

    def __add__(self, other: AttentionLoad) -> AttentionLoad:
        return AttentionLoad(self.queries + other.queries, self.flops + other.flops,
                             self.kv_read_bytes + other.kv_read_bytes, self.kv_write_bytes + other.kv_write_bytes)


@dataclass(frozen=True)
class InferenceShard:
    """One transformer's per-chip shapes and costs when served with `tensor` x `expert` chips."""

    cfg: TransformerConfig
    tensor: int = 1
    expert: int = 1
    precision: InferencePrecision = InferencePrecision()
    parallel_block: bool = False  # attention and MLP read one normalised input; one all-reduce sums both
    capacity_factor: float = 1.0  # MoE dispatch buffer per expert / its balanced share
    kv_states: int = 2  # tensors cached per token and layer: K and V; 3 with pre-rotary keys kept (old praxis)
    kv_read_fraction: float = 1.0  # the HBM fraction attention's KV reads reach / the weights' (the engine's kernel)
    kv_head_reads: float = 1.0  # times a decode kernel reads each KV head per step: 1, or its query group without GQA sharing

    def __post_init__(self) -> None:
        c, t, e = self.cfg, self.tensor, self.expert
        if t < 1 or e < 1:
            raise PodsimError(f"tensor {t} and expert {e} must be >= 1")
        if why := c.tensor_problem(t) or c.expert_problem(e):
            raise PodsimError(why)
        if self.kv_states not in (2, 3):
            raise PodsimError(f"kv_states {self.kv_states}: a token's cache holds K and V (2), or K, V and pre-rotary K (3)")
        if not 0.0 < self.kv_read_fraction <= 1.0:
            raise PodsimError(f"kv_read_fraction {self.kv_read_fraction} is not in (0, 1]")
        if self.kv_head_reads < 1.0:
            raise PodsimError(f"kv_head_reads {self.kv_head_reads} is below 1: every KV head is read at least once")
        if self.capacity_factor < 1.0:
            raise PodsimError(f"capacity_factor {self.capacity_factor} is below 1; MoE dispatch buffers must hold every routed token")
        # the per-chip shapes and parameter counts are the trainer's (podsim.trace.costs.TransformerShard)
        object.__setattr__(self, "_train", TransformerShard(c, ParallelPlan(tensor=t, expert=e), GenerateOptions(), b=1,
                                                            layers=c.n_layers))

    # Shapes (the trainer's shard's) --------------------------------------------------------
    @property
    def chips(self) -> int:
        return self.tensor * self.expert

    @property
    def heads(self) -> int:
        return self._train.heads

    @property
    def kv_heads(self) -> int:
        """KV heads per chip; replicated when tensor exceeds them (Megatron GQA)."""
        return self._train.kv_heads

    @property
    def d_ff(self) -> int:
        return self._train.d_ff

    @property
    def vocab(self) -> int:
        return self._train.vocab

    @property
    def local_experts(self) -> int:
        return self._train.local_experts

    # Bytes held per chip -----------------------------------------------------------------
    def attn_params(self) -> int:
        return self._train.attn_params()

    def mlp_params(self) -> int:
        """One MLP (one expert) on this chip."""
        return self._train.mlp_params()

    def layer_weight_bytes(self) -> float:
        """One layer's weights on this chip (norms in bf16)."""
        c, wb = self.cfg, self.precision.weight_bytes
        mlp = self.local_experts * self.mlp_params() if c.is_moe else self.mlp_params()
        return (self.attn_params() + mlp + c.router_params) * wb + c.norm_params_per_layer * ACT_BYTES

    def embed_weight_bytes(self) -> float:
        """Token embedding, learned positions, final norm and an untied LM head on this chip."""
        c, wb = self.cfg, self.precision.weight_bytes
        emb = self.vocab * c.d_model
        pos = c.seq_len * c.d_model if c.learned_positions else 0
        head = 0 if c.tied_embeddings else self.vocab * c.d_model
        return (emb + pos + head) * wb + c.norm_params_per_layer // 2 * ACT_BYTES

    def weight_bytes(self) -> float:
        """Every weight byte one chip holds (and reads once per step)."""
        return self.cfg.n_layers * self.layer_weight_bytes() + self.embed_weight_bytes()

    def kv_bytes_per_token_layer(self) -> float:
        """What one token caches in one layer, on one chip that holds the sequence: K and V, and
        (`kv_states` 3) the keys before the rotary embedding too, which praxis kept until
        google/praxis@be97eb5 ("to save 1/3 KV Cache memory usage ... when RoPE enabled")."""
        return self.kv_states * self.kv_heads * self.cfg.d_head * self.precision.kv_bytes

    def kv_read_bytes_per_token_layer(self) -> float:
        """What attention reads of one cached token in one layer: its K (after the rotary
        embedding) and V."""
        return 2.0 * self.kv_heads * self.cfg.d_head * self.precision.kv_bytes

    def kv_read_cost_bytes_per_token_layer(self) -> float:
        """`kv_read_bytes_per_token_layer` as the attention kernel costs it: bytes at the weights'
        HBM rate that take as long as its KV reads at `kv_read_fraction` of that rate, each KV
        head read `kv_head_reads` times (a kernel that runs each query head on its own reads its
        group's KV head once per query head)."""
        return self.kv_read_bytes_per_token_layer() * self.kv_head_reads / self.kv_read_fraction

    def kv_bytes_per_token(self) -> float:
        """K and V of one token over all layers on one chip that holds the sequence."""
        return self.cfg.n_layers * self.kv_bytes_per_token_layer()

    def workspace_bytes(self, max_tokens: int, max_seqs: int) -> float:
        """HBM a step needs beyond weights and KV cache, at its largest: the activations alive at
        once inside a layer for `max_tokens` tokens, the residual stream beside the largest op's
        input and output (a buffer is reused once dead, as TensorRT's and XLA's allocators reuse
        them across ops and layers), and fp32 logits of `max_seqs` sampled positions."""
        c, dh, d, ff = self.cfg, self.cfg.d_head, self.cfg.d_model, self.d_ff
        qkv, attn = (self.heads + 2 * self.kv_heads) * dh, self.heads * dh
        routed = c.top_k * self.capacity_factor if c.is_moe else 1.0  # an expert's tokens per token
        mlp_in, mlp_mid = routed * ff * (c.mlp_matrices - 1), routed * ff  # the MLP's input matmuls' outputs, activation's
        ops = (d + qkv, qkv + attn, attn + d, d + mlp_in, mlp_in + mlp_mid, mlp_mid + d)  # each op's input and output
        tokens = math.ceil(max_tokens / self.expert)
        return tokens * (d + max(ops)) * ACT_BYTES + math.ceil(max_seqs / self.expert) * self.vocab * LOGIT_BYTES

    # Costs of a step's ops on one chip ---------------------------------------------------
    def _matmul(self, m: float, k: float, n: float, count: float = 1.0) -> Cost:
        """[m, k] x [k, n] (`count` of them): bf16 activations times a weight stored at the
        weight precision."""
        hbm = count * ((m * k + m * n) * ACT_BYTES + k * n * self.precision.weight_bytes)
        return Cost(2.0 * count * m * k * n, hbm, (Matmul(m, k, n, count, hbm),))

    def group_tokens(self, tokens: float) -> float:
        """Tokens one chip's expert group runs of a step's `tokens` (sequences split evenly)."""
        return tokens / self.expert

    def embed(self, tokens: float) -> Cost:
        """Embedding lookup of the step's tokens: gather and write [T, d]."""
        return Cost(0.0, 3.0 * self.group_tokens(tokens) * self.cfg.d_model * ACT_BYTES)

    def attn_in(self, tokens: float) -> Cost:
        """Norm then the QKV projection."""
        c, T = self.cfg, self.group_tokens(tokens)
        qkv = self._matmul(T, c.d_model, (self.heads + 2 * self.kv_heads) * c.d_head)
        return Cost(0.0, 3.0 * T * c.d_model * ACT_BYTES) + qkv

    def attn_out(self, tokens: float) -> Cost:
        """The output projection and the residual add."""
        c, T = self.cfg, self.group_tokens(tokens)
        return self._matmul(T, self.heads * c.d_head, c.d_model) + Cost(0.0, 2.0 * T * c.d_model * ACT_BYTES)

    def mlp_in(self, tokens: float) -> Cost:
        """Norm then the MLP's input matrices (up, and gate for SwiGLU) and the activation."""
        c, T = self.cfg, self.group_tokens(tokens)
        fin = c.mlp_matrices - 1
        norm = Cost(0.0, 0.0 if self.parallel_block else 3.0 * T * c.d_model * ACT_BYTES)
        return norm + self._matmul(T, c.d_model, self.d_ff, count=fin) + Cost(0.0, T * self.d_ff * fin * ACT_BYTES)

    def mlp_out(self, tokens: float) -> Cost:
        """The MLP's output matrix and the residual add."""
        c, T = self.cfg, self.group_tokens(tokens)
        return self._matmul(T, self.d_ff, c.d_model) + Cost(0.0, 2.0 * T * c.d_model * ACT_BYTES)

    def router(self, tokens: float) -> Cost:
        c, T = self.cfg, self.group_tokens(tokens)
        return Cost(0.0, 3.0 * T * c.d_model * ACT_BYTES) + self._matmul(T, c.d_model, c.n_experts)

    def routed_tokens(self, tokens: float) -> float:
        """Tokens one chip's experts compute: the group's tokens x top_k (x the capacity factor
        when dispatched over an expert axis)."""
        cf = self.capacity_factor if self.expert > 1 else 1.0
        return self.group_tokens(tokens) * self.cfg.top_k * cf

    def active_experts(self, tokens: float) -> float:
        """Experts on one chip that receive at least one of the step's tokens, in expectation,
        for routing that picks top_k of n_experts uniformly: E_local (1 - (1 - k / E)^T). A
        decode step of a few tokens reads only these experts' weights."""
        c = self.cfg
        return self.local_experts * (1.0 - (1.0 - c.top_k / c.n_experts) ** max(tokens, 0.0))

    def experts(self, tokens: float) -> Cost:
        """The chip's experts over their routed tokens: input matrices, activation, output."""
        c = self.cfg
        routed, active = self.routed_tokens(tokens), self.active_experts(tokens)
        if routed <= 0 or active <= 0:
            return Cost()
        per = routed / active
        fin = c.mlp_matrices - 1
        up = self._matmul(per, c.d_model, self.d_ff, count=active * fin)
        down = self._matmul(per, self.d_ff, c.d_model, count=active)
        return up + Cost(0.0, routed * self.d_ff * fin * ACT_BYTES) + down + Cost(0.0, 2.0 * self.group_tokens(tokens) * c.d_model * ACT_BYTES)

    def head(self, sampled: float) -> Cost:
        """Final norm and the LM head over the positions that sample a token, fp32 logits
        written and read once by sampling."""
        c, S = self.cfg, self.group_tokens(sampled)
        if S <= 0:
            return Cost()
        logits = self._matmul(S, c.d_model, self.vocab)
        return Cost(0.0, 3.0 * S * c.d_model * ACT_BYTES) + logits + Cost(0.0, 2.0 * S * self.vocab * LOGIT_BYTES)

    def load(self, queries: float, keys: float, read_tokens: float, write_tokens: float) -> AttentionLoad:
        """The attention load of one layer on one chip from a step's token totals over all its
        sequences (the chip's group holds 1/expert of them): query tokens, keys summed over the
        queries, cached tokens read and new tokens written (see `seq_tokens`)."""
        e, kv = self.expert, self.kv_bytes_per_token_layer()
        return AttentionLoad(queries / e, 4.0 * self.heads * self.cfg.d_head * keys / e,
                             read_tokens * self.kv_read_cost_bytes_per_token_layer() / e, write_tokens * kv / e)

    def attention_load(self, seqs: list[Seq] | tuple[Seq, ...]) -> AttentionLoad:
        """`load` summed over these sequences."""
        q = k = r = w = 0.0
        for s in seqs:
            dq, dk, dr, dw = seq_tokens(s)
            q, k, r, w = q + dq, k + dk, r + dr, w + dw
        return self.load(q, k, r, w)

    def attention(self, load: AttentionLoad) -> Cost:
        """The fused attention kernel over a step's load: QK^T and AV as two matmuls over the
        step's keys summed over its queries, Q read, the output written, K and V read from (and
        the new ones written to) the cache. The keys are padded to the MXU tile once over that
        sum, not per query: a lower bound on what a kernel pads (one with tile-sized query and
        key blocks pads each query's keys), exact where every query's keys fill whole tiles,
        and monotone in the step's queries and keys (padding the average query's keys, as
        before, was neither: one more query could cost less)."""
        if load.queries <= 0:
            return Cost()
        h, dh = self.heads, self.cfg.d_head
        keys = load.flops / (4.0 * h * dh)  # keys summed over the queries
        qo = 2.0 * load.queries * h * dh * ACT_BYTES
        hbm = qo + load.kv_read_bytes + load.kv_write_bytes
        mms = (Matmul(1.0, dh, keys, h, hbm / 2), Matmul(1.0, keys, dh, h, hbm / 2))
        return Cost(load.flops, hbm, mms)

    def dense_logits_bytes(self, keys: float) -> float:
        """HBM one chip moves, over every layer, for the logits of dense attention (praxis's:
        every query's logits over `keys`, summed over the step's queries, materialised;
        `DENSE_LOGIT_BYTES` each), beyond the attention core's Q, K, V and output."""
        return self.cfg.n_layers * self.heads * keys * DENSE_LOGIT_BYTES / self.expert

    def dense_logits_live_bytes(self, keys: float) -> float:
        """HBM one chip holds at once for dense attention's logits in one layer: every query's fp32
        logits and bf16 probabilities over `keys` (summed over the step's queries), alive together."""
        return self.heads * keys * (LOGIT_BYTES + ACT_BYTES) / self.expert

    def beam_reorder_bytes(self, buffer_tokens: float) -> float:
        """HBM one chip moves, over every layer, to reorder the beams' own KV buffers after a
        beam-search step (praxis `beam_search.shuffle_state` on every decode-cache state: each
        buffer read and written whole); `buffer_tokens` summed over the beams."""
        return 2.0 * buffer_tokens * self.kv_bytes_per_token() / self.expert

    # Communication ------------------------------------------------------------------------
    def tensor_reduce_bytes(self, tokens: float) -> float:
        """The tensor-parallel all-reduce of [T, d] activations (per chip, nccl convention)."""
        return self.group_tokens(tokens) * self.cfg.d_model * ACT_BYTES

    def dispatch_bytes(self, tokens: float) -> float:
        """Each chip's all-to-all send buffer for the MoE dispatch (and the combine)."""
        return self.routed_tokens(tokens) * self.cfg.d_model * ACT_BYTES

    def sample_bytes(self, sampled: float) -> float:
        """The vocabulary-parallel sampling reduction: the best logit and its index per position."""
        return self.group_tokens(sampled) * SAMPLE_BYTES
