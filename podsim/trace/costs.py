"""Per-chip compute costs of one training step: FLOPs, HBM bytes and the matmuls among them.

A matmul [M,K]x[K,N] is 2MKN FLOPs and reads/writes (MK + KN + MN) elements; the backward of
an op is twice its forward in FLOPs and bytes (each matmul becomes its dX and dW matmuls).
`TransformerShard` holds one transformer's per-chip shapes under a parallelism plan and the
forward cost of each block; `conv_cost` is a convolution as the implicit GEMM the MXU runs.
`generate.py` turns these into the compute ops of the step trace.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from podsim.perf.opmodel import Matmul, backward_matmuls
from podsim.trace.configs import ConvLayer, TransformerConfig
from podsim.trace.mesh import ParallelPlan
from podsim.trace.optimizers import optimizer_state_bytes

if TYPE_CHECKING:
    from podsim.trace.options import GenerateOptions


@dataclass(frozen=True)
class Cost:
    """Per-chip FLOPs, HBM bytes and the matmuls among them, of one compute op."""

    flops: float = 0.0
    hbm: float = 0.0
    matmuls: tuple[Matmul, ...] = ()

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.flops + other.flops, self.hbm + other.hbm, self.matmuls + other.matmuls)

    def times(self, k: float) -> Cost:
        """k of these (k may be a fraction: a stage's share of the embedding)."""
        return Cost(self.flops * k, self.hbm * k, tuple(replace(mm, count=mm.count * k, hbm_bytes=mm.hbm_bytes * k) for mm in self.matmuls))

    def backward(self) -> Cost:
        """Its backward: twice the FLOPs and bytes; each matmul becomes its dX and dW matmuls."""
        return Cost(2 * self.flops, 2 * self.hbm, tuple(b for mm in self.matmuls for b in backward_matmuls(mm)))

    def at(self, precision: str = "", backward: str = "") -> Cost:
        """The same work with its matmuls run at `precision` ('' : the program's) and their
        backward at `backward` ('' : as the forward)."""
        return Cost(self.flops, self.hbm, tuple(replace(mm, precision=precision, backward_precision=backward) for mm in self.matmuls))

    def by_precision(self, program: str) -> tuple[tuple[str, Cost], ...]:
        """The op split by the precision its matmuls run at (a matmul's own, else `program`), in
        order of first appearance: one part as it is where all agree (bf16 for an op without
        matmuls); else the first part also carries the memory-bound work."""
        for mm in self.matmuls:
            if mm.precision and mm.precision != program:
                break
        else:  # all at the program's precision (every op at bf16): the trace builder's hot path, no grouping
            return ((program if self.matmuls else "bf16", self),)
        groups: dict[str, list[Matmul]] = {}
        for mm in self.matmuls:
            groups.setdefault(mm.precision or program, []).append(mm)
        if len(groups) <= 1:
            return ((next(iter(groups), "bf16") if self.matmuls else "bf16", self),)
        rest_flops = self.flops - sum(mm.flops for mm in self.matmuls)
        rest_hbm = self.hbm - sum(mm.hbm_bytes for mm in self.matmuls)
        parts = []
        for i, (prec, mms) in enumerate(groups.items()):
            extra = (rest_flops, rest_hbm) if i == 0 else (0.0, 0.0)
            parts.append((prec, Cost(sum(mm.flops for mm in mms) + extra[0], sum(mm.hbm_bytes for mm in mms) + extra[1], tuple(mms))))
        return tuple(parts)


def _matmul(m: float, k: float, n: float, elem_bytes: int, count: float = 1.0) -> Cost:
    """[m, k] x [k, n] (`count` of them): 2mkn FLOPs each, reading and writing (mk + kn + mn) elements."""
    hbm = count * (m * k + k * n + m * n) * elem_bytes
    return Cost(2.0 * count * m * k * n, hbm, (Matmul(m, k, n, count, hbm),))


def _mem(hbm: float) -> Cost:
    return Cost(0.0, hbm)


def _sum(*parts: Cost) -> Cost:
    out = Cost()
    for p in parts:
        out = out + p
    return out


@dataclass(frozen=True)
class Block:
    """One tensor-parallel block's forward cost per micro-batch, in program order: the norm on
    its input, the matmul its input enters (QKV, MLP up: where the sequence-parallel all-gather
    lands), the work between, the matmul its output leaves (attention output, MLP down: where
    the partial sums are reduced), and the residual add."""

    norm: Cost
    first: Cost
    mid: Cost
    last: Cost
    residual: Cost

    def total(self) -> Cost:
        return _sum(self.norm, self.first, self.mid, self.last, self.residual)



@dataclass(frozen=True)
class TransformerShard:
    """Per-chip shapes and costs of one transformer under a plan."""

    cfg: TransformerConfig
    plan: ParallelPlan
    opts: GenerateOptions
    b: int  # sequences per micro-batch per chip
    layers: int  # layers per pipeline stage

    @property
    def t(self) -> int:
        return self.plan.tensor

    @property
    def tokens(self) -> int:
        return self.b * self.cfg.seq_len

    @property
    def heads(self) -> int:
        return self.cfg.n_heads // self.t

    @property
    def kv_heads(self) -> int:
        """KV heads per chip; replicated when tensor > n_kv_heads (Megatron GQA)."""
        return max(self.cfg.n_kv_heads // self.t, 1)

    @property
    def d_ff(self) -> int:
        return self.cfg.d_ff // self.t

    @property
    def vocab(self) -> int:
        return math.ceil(self.cfg.vocab / self.t)

    @property
    def local_experts(self) -> int:
        return self.cfg.n_experts // self.plan.expert

    @property
    def act(self) -> float:
        """Bytes of one micro-batch's activations [b, s, d] on a chip."""
        return float(self.tokens * self.cfg.d_model * self.opts.act_bytes)

    @property
    def sharded(self) -> float:
        """The share of a [b, s, d] tensor between blocks one chip holds: 1/tensor under sequence
        parallelism (Korthikanti et al. 2022 §4.2.2: norms, residual adds and dropout run on a
        1/t slice of the sequence), else 1 (every tensor-parallel chip holds it whole)."""
        return 1.0 / self.t if self.opts.sequence_parallel else 1.0

    def norm_residual_bytes(self) -> float:
        """HBM bytes of one block's norm (read and write its input) and residual add (two reads,
        one write) on one chip: 5 passes over its share of [b, s, d]."""
        return 5.0 * self.act * self.sharded

    # Parameters per chip (before FSDP sharding) ------------------------------------------
    def attn_params(self) -> int:
        c, dh = self.cfg, self.cfg.d_head
        w = c.d_model * dh * (2 * self.heads + 2 * self.kv_heads)
        b = ((self.heads + 2 * self.kv_heads) * dh + c.d_model) if c.bias else 0
        return w + b

    def mlp_params(self) -> int:
        c = self.cfg
        w = c.mlp_matrices * c.d_model * self.d_ff
        b = (self.d_ff * (c.mlp_matrices - 1) + c.d_model) if c.bias else 0
        return w + b

    def dense_params(self) -> int:
        """Per layer: weights replicated over data and expert (attention, norms, router, dense MLP)."""
        c = self.cfg
        return self.attn_params() + c.norm_params_per_layer + c.router_params + (0 if c.is_moe else self.mlp_params())

    def expert_params(self) -> int:
        """Per layer: this chip's experts (replicated over data only)."""
        return self.local_experts * self.mlp_params() if self.cfg.is_moe else 0

    def embed_params(self) -> int:
        c = self.cfg
        emb = self.vocab * c.d_model
        pos = c.seq_len * c.d_model if c.learned_positions else 0
        head = 0 if c.tied_embeddings else self.vocab * c.d_model
        return emb + pos + c.norm_params_per_layer // 2 + head

    # Forward costs (FLOPs, HBM bytes) per micro-batch ------------------------------------
    def attn_core(self) -> Cost:
        """QK^T and AV per head; Q, K, V read and the output written. A fused kernel
        (`attention="flash"`, Dao et al. 2022) does the causal half of the scores for a decoder
        and never writes them; an unfused one (`"materialized"`) computes the whole matrix
        (masking it after) and moves it through HBM four times: QK^T writes it, softmax reads
        and writes it, AV reads it."""
        c, a, dh, s = self.cfg, self.opts.act_bytes, self.cfg.d_head, self.cfg.seq_len
        fused = self.opts.attention == "flash"
        keys = s / 2 if (c.causal and fused) else s
        heads = self.b * self.heads
        flops = 2.0 * heads * s * keys * dh * 2
        hbm = self.tokens * (2 * self.heads + 2 * self.kv_heads) * dh * a
        mms = (Matmul(s, dh, keys, heads, hbm / 2), Matmul(s, keys, dh, heads, hbm / 2))
        scores = 0.0 if fused else 4.0 * heads * s * s * a
        return Cost(flops, hbm + scores, mms).at(self._unquantized())

    def _unquantized(self) -> str:
        """What a program that quantizes only its weight matmuls (`quantized_matmuls` 'weights' or
        'tff') runs its attention core and LM head at: bf16; '' (the program's) under 'all'."""
        return "" if self.opts.quantized_matmuls == "all" else "bf16"

    def _forward_only(self, cost: Cost) -> Cost:
        """A weight matmul quantized in its forward only under `quantized_matmuls` 'tff' (its
        gradients in bf16): the attention output projection and the MLP's matmuls."""
        return cost.at(backward="bf16") if self.opts.quantized_matmuls == "tff" else cost

    def _norm(self) -> Cost:
        return _mem(2.0 * self.act * self.sharded)  # the norm reads and writes its input

    def _residual(self) -> Cost:
        return _mem(3.0 * self.act * self.sharded)  # the residual add reads two, writes one

    def attn_block(self) -> Block:
        c, T, a, dh = self.cfg, self.tokens, self.opts.act_bytes, self.cfg.d_head
        qkv = _matmul(T, c.d_model, (self.heads + 2 * self.kv_heads) * dh, a)
        out = self._forward_only(_matmul(T, self.heads * dh, c.d_model, a))
        return Block(self._norm(), qkv, self.attn_core(), out, self._residual())

    def attn_fwd(self) -> Cost:
        return self.attn_block().total()

    def _mlp_parts(self, tokens: float, experts: int = 1) -> tuple[Cost, Cost, Cost]:
        """Per expert: the input matrices [tokens/experts, d] x [d, d_ff] (1 or 2), the
        activation (and gate product) pass, the output matrix."""
        c, a = self.cfg, self.opts.act_bytes
        fin = c.mlp_matrices - 1
        per = tokens / experts
        up = self._forward_only(_matmul(per, c.d_model, self.d_ff, a, count=experts * fin))
        down = self._forward_only(_matmul(per, self.d_ff, c.d_model, a, count=experts))
        return up, _mem(tokens * self.d_ff * fin * a), down

    def mlp_fwd(self, tokens: float, experts: int = 1) -> Cost:
        up, act, down = self._mlp_parts(tokens, experts)
        return _sum(up, down, act)

    def mlp_block(self) -> Block:
        """The dense MLP block."""
        up, act, down = self._mlp_parts(self.tokens)
        return Block(self._norm(), up, act, down, self._residual())

    def parallel_block(self) -> Block:
        """Attention and the dense MLP as one parallel block (`TransformerConfig.parallel_block`,
        PaLM §2): one norm on the shared input, the QKV and MLP-input matmuls where it enters,
        attention and the activation between, the attention-output and MLP-down matmuls where
        it leaves (their partial sums reduced together), one residual add of three terms."""
        attn, mlp = self.attn_block(), self.mlp_block()
        return Block(attn.norm, attn.first + mlp.first, attn.mid + mlp.mid, attn.last + mlp.last,
                     _mem(4.0 * self.act * self.sharded))  # y = x + attn + mlp: reads three, writes one

    def dense_mlp_fwd(self) -> Cost:
        return self.mlp_block().total()

    def router_fwd(self) -> Cost:
        """The MoE block's router matmul with the block's norm and residual add."""
        c = self.cfg
        return _sum(_matmul(self.tokens, c.d_model, c.n_experts, self.opts.act_bytes), self._norm(), self._residual())

    def routed_tokens(self) -> float:
        cf = self.opts.capacity_factor if self.plan.expert > 1 else 1.0
        return self.tokens * self.cfg.top_k * cf

    def experts_fwd(self) -> Cost:
        return self.mlp_fwd(self.routed_tokens(), self.local_experts)

    def dispatch_bytes(self) -> float:
        return self.routed_tokens() * self.cfg.d_model * self.opts.act_bytes

    def embed_fwd(self) -> Cost:
        return _mem(3.0 * self.tokens * self.cfg.d_model * self.opts.act_bytes)

    def head_fwd(self) -> Cost:
        """The LM head over the positions that carry a loss (every token for a decoder; the
        masked positions for a masked-LM encoder), softmax and loss in fp32."""
        c = self.cfg
        T = self.b * c.head_positions
        logits = _matmul(T, c.d_model, self.vocab, self.opts.act_bytes).at(self._unquantized())
        loss = _mem(2.0 * T * self.vocab * 4)
        return _sum(logits, loss, self._norm())  # the final norm



def adam_update(params: float, opts: GenerateOptions) -> Cost:
    """One optimizer update of `params` parameters: 12 FLOPs each; the optimizer's state (Adam: the
    fp32 master weight and two moments, podsim.trace.optimizers.OPTIMIZER_STATE_BYTES) read and written,
    the gradient read and the weight as used written."""
    return Cost(12.0 * params, params * (2 * optimizer_state_bytes(opts.optimizer) + opts.grad_bytes + opts.weight_bytes))


def conv_cost(layer: ConvLayer, images: int, opts: GenerateOptions) -> Cost:
    """A convolution as the implicit GEMM the MXU runs: [images x h_out^2, k^2 c_in] x
    [k^2 c_in, c_out]; operands are the weights, the input and the output (not an im2col
    copy); batch-norm and ReLU over the output read and write it once more (memory-bound)."""
    a = opts.act_bytes
    m = images * layer.h_out * layer.h_out
    operands = layer.weight_params * opts.weight_bytes + images * (layer.in_elems_per_image + layer.out_elems_per_image) * a
    mm = Matmul(m, layer.kernel * layer.kernel * layer.c_in, layer.c_out, 1.0, operands)
    return Cost(mm.flops, operands + 2 * images * layer.out_elems_per_image * a, (mm,))

