"""The paged KV cache of one replica: how many pages fit in HBM beside the weights and the
step's workspace, and the page accounting a serving simulation keeps.

Each chip of a replica holds its share of every weight (`InferenceShard.weight_bytes`) and of
every cached token's K and V (`kv_bytes_per_token`); the workspace is the largest step's
activations and logits. What is left, in whole pages of `page_tokens` tokens, is the cache. With
an expert axis the e groups each cache their own sequences; podsim pools the e groups' pages
(sequences taken as spread evenly over the groups).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from podsim.errors import InternalError, PodsimError
from podsim.serving.costs import InferenceShard
from podsim.topology import get_generation, parse_shape
from podsim.units import format_bytes

if TYPE_CHECKING:
    from podsim.serving.spec import BatchPolicy, ServingConfig


@dataclass(frozen=True)
class KvBudget:
    """One replica's HBM per chip by use, and the KV-cache pages that fit."""

    hbm_bytes: float
    reserve_bytes: float
    weight_bytes: float
    workspace_bytes: float
    kv_bytes_per_token: float  # per chip holding the sequence
    page_tokens: int
    pages: int  # the replica's pages (every expert group's)

    @property
    def page_bytes(self) -> float:
        return self.kv_bytes_per_token * self.page_tokens

    @property
    def tokens(self) -> int:
        """Tokens the cache holds when every page is full."""
        return self.pages * self.page_tokens

    def as_dict(self) -> dict:
        return {"hbm_bytes_per_chip": self.hbm_bytes, "reserve_bytes_per_chip": self.reserve_bytes,
                "weight_bytes_per_chip": self.weight_bytes, "workspace_bytes_per_chip": self.workspace_bytes,
                "kv_bytes_per_token_per_chip": self.kv_bytes_per_token, "page_tokens": self.page_tokens,
                "kv_pages": self.pages, "kv_tokens": self.tokens}


def kv_budget(shard: InferenceShard, generation, page_tokens: int, max_tokens: int, max_seqs: int,
              reserve: float = 0.0, extra_workspace_bytes: float = 0.0) -> KvBudget:
    """The KV-cache pages of one replica; a one-line error if the weights and workspace (a step's
    activations, and `extra_workspace_bytes` beside them: a dense prefill's logits) leave no room
    for one page."""
    gen = get_generation(generation)
    hbm = gen.hbm_per_chip.require(f"{gen.id} HBM per chip")
    weights = shard.weight_bytes()
    work = shard.workspace_bytes(max_tokens, max_seqs) + extra_workspace_bytes
    per_token = shard.kv_bytes_per_token()
    free = hbm * (1.0 - reserve) - weights - work
    page = per_token * page_tokens
    pages = int(free // page) * shard.expert if free > 0 else 0
    if pages < 1:
        raise PodsimError(
            f"{shard.cfg.name} on {shard.chips} {gen.id} chips (tensor={shard.tensor}, expert={shard.expert}) needs "
            f"{format_bytes(weights)} of weights and {format_bytes(work)} of workspace per chip, but a chip has "
            f"{format_bytes(hbm * (1 - reserve))}: no room for a KV cache; shard it over more chips or store weights in int8")
    return KvBudget(hbm, hbm * reserve, weights, work, per_token, page_tokens, pages)


def _most_padding(sizes: tuple[int, ...], most: int) -> int:
    """The most a count from 1 to `most` grows when run at the smallest of `sizes` that holds it
    (none is past the largest: batch_sizes hold max_seqs); 0 unpadded."""
    pad, below = 0, 0
    for b in sizes:
        if below >= most:
            break
        pad, below = max(pad, b - below - 1), b
    return pad


def _most_chunk_padding(buckets: tuple[int, ...], tokens: int, chunks: int) -> int:
    """The most `buckets` pad a step's prompt chunks, at most `chunks` of them holding `tokens` in
    all. A chunk pads most for its tokens one past a bucket (b + 1 tokens run as the next bucket),
    so this is the linear programme over those sizes (x_j chunks of w_j tokens padded by p_j:
    max sum p x, sum w x <= tokens, sum x <= chunks), whose optimum uses at most two sizes: an
    upper bound on any step's padding, and the most padding itself where its counts come out whole."""
    sizes = [(below + 1, b - below - 1) for below, b in zip((0, *buckets), buckets, strict=False) if below < tokens]
    best = max((p * min(chunks, tokens / w) for w, p in sizes), default=0.0)
    for i, (w1, p1) in enumerate(sizes):
        for w2, p2 in sizes[i + 1:]:  # both constraints tight: x1 + x2 = chunks, w1 x1 + w2 x2 = tokens
            x2 = (tokens - w1 * chunks) / (w2 - w1)
            if 0 <= x2 <= chunks:
                best = max(best, p1 * (chunks - x2) + p2 * x2)
    return math.floor(best + 1e-9)


def static_batch_shape(policy: BatchPolicy, context: int) -> tuple[int, int]:
    """(rows, prompt length) a static batch runs at most: the largest of `batch_sizes` (else
    max_batch) and the largest bucket (else the model's `context`)."""
    return (policy.batch_sizes[-1] if policy.batch_sizes else policy.max_batch,
            policy.buckets[-1] if policy.buckets else context)


def step_workspace_shape(policy: BatchPolicy, beams: int, context: int) -> tuple[int, int]:
    """(tokens, sampled positions) of the largest step a replica runs under `policy`, padded as
    the engine pads it: what its workspace (`InferenceShard.workspace_bytes`) is sized for.
    Continuous: the token budget (or every slot's decode rows, or in `separate` prefill a whole
    prompt of up to the model's `context`, where larger), plus the most `batch_sizes` pads the decode
    rows and `buckets` pads the step's prompt chunks (at most `prefill_seqs` of them); its
    sampled positions: every slot's beams, plus the decode padding. Static: a prefill step of at
    most the budget or a decode step of every row's beams, at the largest of `batch_sizes`, the
    prompts at most the largest bucket or the model's `context` (an engine that prefills a static
    batch whole, `static_prefill` whole, sizes that prefill's workspace itself: `ServingSim`)."""
    if policy.kind == "continuous":
        real = max(policy.token_budget, policy.max_seqs * beams, context if policy.prefill == "separate" else 0)
        chunks = min(policy.prefill_seqs or policy.max_seqs, policy.token_budget)
        decode_pad = beams * _most_padding(policy.batch_sizes, policy.max_seqs)
        chunk_pad = _most_chunk_padding(policy.buckets, real, chunks)
        return real + decode_pad + chunk_pad, policy.max_seqs * beams + decode_pad
    rows, longest = static_batch_shape(policy, context)
    return max(min(policy.token_budget, rows * longest), rows * beams), rows * beams


def kv_fraction_reserve(config: ServingConfig, fraction: float) -> float:
    """The `hbm_reserve` at which a continuous-batching configuration's KV cache is `fraction` of
    what its weights and its largest step's workspace (`step_workspace_shape`) leave a chip, as
    TensorRT-LLM's KV-cache memory fraction (kvcache_free_gpu_mem_frac) sizes it."""
    if not 0.0 < fraction <= 1.0:
        raise PodsimError(f"KV-cache memory fraction {fraction} is not in (0, 1]")
    pol = config.batch
    if pol.kind != "continuous":
        raise PodsimError(f"a KV-cache memory fraction sizes a continuous batcher's cache; this configuration batches {pol.kind}")
    shard = config.model.shard(math.prod(parse_shape(config.slice)))
    b = kv_budget(shard, config.generation, pol.page_tokens, *step_workspace_shape(pol, config.requests.beams, shard.cfg.seq_len))
    return (1.0 - fraction) * (b.hbm_bytes - b.weight_bytes - b.workspace_bytes) / b.hbm_bytes


def seq_pages(prompt, own, beams, page_tokens: int):
    """Pages a sequence holds: its prompt and own tokens in one run of pages (one beam), or the
    prompt's pages shared by its beams and each beam's own tokens on pages of its own. Works on
    numbers and on numpy arrays."""
    one = np.ceil((prompt + own) / page_tokens)
    many = np.ceil(prompt / page_tokens) + beams * np.ceil(own / page_tokens)
    return np.where(beams > 1, many, one) if isinstance(beams, np.ndarray) else (many if beams > 1 else one)


class PageLedger:
    """A replica's free and used pages; every allocation checked against the capacity."""

    def __init__(self, pages: int):
        self.capacity = int(pages)
        self.used = 0
        self.peak = 0

    @property
    def free(self) -> int:
        return self.capacity - self.used

    def take(self, n: int) -> None:
        n = int(n)
        if n < 0 or self.used + n > self.capacity:
            raise InternalError(f"KV cache: taking {n} pages with {self.used} of {self.capacity} used")
        self.used += n
        self.peak = max(self.peak, self.used)

    def give(self, n: int) -> None:
        n = int(n)
        if n < 0 or n > self.used:
            raise InternalError(f"KV cache: returning {n} pages with {self.used} used")
        self.used -= n


def pages_for(tokens: float, page_tokens: int) -> int:
    return int(math.ceil(tokens / page_tokens))
