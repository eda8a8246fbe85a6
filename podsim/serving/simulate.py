"""The serving simulation on SimPy: requests arrive, a router sends each to a replica, every
replica runs steps of its batch policy on its slice, each step as long as `StepTimer` says.

    result = simulate_serving(config)          # podsim.serving.ServingConfig
    result.metrics["ttft_p99_s"], result.metrics["tokens_per_s_per_chip"]

Processes: one arrival process, and one per replica that plans a step from its queue and its
running sequences, waits the step's time, then commits it (tokens generated, first tokens,
completions, pages freed). With prefill and decode on separate replicas (disaggregated), a
request's KV cache moves once its prefill ends: the decode replica takes pages for it first
(a request waits there while none are free), the move takes the engine's time over one transfer
link per prefill replica, then the prefill replica frees its pages.

Continuous batching: every running sequence decodes one token (one per beam) in every step;
the rest of the token budget goes to prompts in arrival order (`chunked`: a prompt may be split
over steps; `separate`: a step prefills whole prompts only, and decoding waits). A request is
admitted only when its prompt's pages are free (`paged`) or its prompt's and whole output's
(`reserve`); the head of the queue that does not fit blocks the rest (first come, first served).
A request whose pages exceed the whole cache is rejected on arrival. Under `paged`, when a
decode step needs more pages than are free, the latest admitted sequences are preempted: their
pages freed, each back at the head of the queue to recompute its prompt and its tokens so far.

Times are recorded per request: arrival, first token (the end of the step that finishes its
prompt), last token (the end of the step that generates it; a static batch returns every result
when the batch ends). No I/O; every draw comes from the config's seed.
"""

from __future__ import annotations

import heapq
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import simpy

from podsim.errors import InternalError, PodsimError
from podsim.serving.costs import InferenceShard
from podsim.serving.kvcache import KvBudget, PageLedger, kv_budget, pages_for, seq_pages
from podsim.serving.saxclient import SaxRetries
from podsim.serving.spec import ServingConfig
from podsim.serving.steptime import StepTimer
from podsim.serving.transfer import KvTransfer
from podsim.serving.workload import Requests, draw_requests
from podsim.topology import DcnSpec, Generation, get_generation, parse_shape

ProgressFn = Callable[[float, float], None]


@dataclass
class RequestLog:
    """Per request (arrays indexed by request): what happened to it."""

    first_s: np.ndarray
    end_s: np.ndarray
    replica: np.ndarray
    preemptions: np.ndarray
    rejected: np.ndarray

    @classmethod
    def empty(cls, n: int) -> RequestLog:
        return cls(np.full(n, np.nan), np.full(n, np.nan), np.full(n, -1, dtype=np.int64),
                   np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool))


class StepLog:
    """Per step of one replica: (end time, length, tokens, decode tokens, sequences, pages used,
    KV tokens); `column(name)` as an array."""

    FIELDS = ("end_s", "dt_s", "tokens", "decode_tokens", "seqs", "pages", "kv_tokens")

    def __init__(self):
        self.rows: list[tuple] = []
        self.add = self.rows.append  # add((end, dt, tokens, decode, seqs, pages, kv))
        self._array: tuple[int, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.rows)

    def column(self, name: str) -> np.ndarray:
        if not self.rows:
            return np.zeros(0)
        if self._array is None or self._array[0] != len(self.rows):  # one conversion per length
            self._array = (len(self.rows), np.asarray(self.rows, dtype=float))
        return self._array[1][:, self.FIELDS.index(name)]


@dataclass
class _Prefill:
    """An admitted request whose prompt (or recompute) is being prefilled."""

    rid: int
    tokens: int  # tokens to prefill: the prompt, or prompt + tokens so far after a preemption
    generated: int  # tokens it had generated before (0 unless recomputing)
    pages: int
    done: int = 0


@dataclass
class _Seq:
    """A decoding sequence. All of a replica's decoding sequences advance together, one token
    (per beam) per decode step, so a sequence is its state at admission: admitted after `s0`
    decode steps of the replica with `prompt` tokens in its KV cache and `total0` tokens
    generated (its last one not yet in the cache). After s - s0 more steps it has generated
    total0 + s - s0 and holds prompt + (s - s0) tokens per beam."""

    rid: int
    prompt: int
    s0: int
    total0: int
    target: int
    pages: int  # reserve: pages taken at admission (fixed); paged: pages held at admission
    order: int


@dataclass
class _Plan:
    dt: float
    decode: bool  # the decoding sequences run this step
    chunks: list[tuple[_Prefill, int]]
    tokens: int
    start: float
    kv_tokens: float  # tokens in the KV cache while the step runs


PRAXIS_COSTS = frozenset({"dense_prefill", "logits", "static_buffers", "beam_reorder"})
"""The costs of a Saxml batch praxis's code implies (`Replica._praxis_batch_s`), all charged."""
PRAXIS_WHAT_IFS = frozenset({"prefill_collectives_hidden", "int8_materialised"})
"""Bounds no row uses: the prefill's tensor collectives all hidden under its matmuls (the
classes' windowed-einsum flags at their best), and int8 weights materialised as bf16 at every
decode step (written and read: 4 bytes more per weight)."""


class Replica:
    """One replica: its queue, prefills in progress, decoding sequences and KV pages."""

    def __init__(self, sim: ServingSim, index: int, role: str):
        self.sim, self.index, self.role = sim, index, role  # role: both, prefill or decode
        self.policy = sim.config.batch
        self.n_slots = self.policy.max_seqs if self.policy.kind == "continuous" else self.policy.max_batch
        self.beams = sim.req.beams
        self.pt = self.policy.page_tokens
        self.paged = self.policy.kv == "paged"
        # decoding sequences, by id; aggregates kept as they join and leave
        self.seqs: dict[int, _Seq] = {}
        self.finish: list[tuple[int, int]] = []  # heap of (decode step it finishes after, seq id)
        self.by_order: list[int] = []  # seq ids in admission order (preemption takes the latest)
        self.s = 0  # decode steps run
        self.sum_prompt = 0  # sum of prompt over decoding sequences
        self.sum_gofs = 0  # sum of (1 - s0): since = that + s per sequence
        self.residue = [0] * self.pt  # paged: sequences by (prompt - s0) mod page_tokens
        self._sid = 0
        self.waiting: deque[tuple[int, int, int]] = deque()  # (rid, tokens to prefill, generated before)
        self.prefilling: list[_Prefill] = []
        self.ready: deque[tuple[int, int]] = deque()  # decode role: (rid, pages taken) whose KV has arrived
        self.incoming: deque[int] = deque()  # decode role: prefilled requests waiting for pages here
        self.ledger = PageLedger(sim.budget.pages)
        self.wake: simpy.Event | None = None
        self.steps = StepLog()
        self.busy_s = 0.0
        self.link = simpy.Resource(sim.env, capacity=1) if role == "prefill" else None
        self._order = 0
        self.max_seqs_seen = 0
        self.preempted = 0
        self.sending = 0  # prefill role: pages of prefilled requests not yet sent
        self.arriving = 0  # decode role: pages taken for KV caches on their way here
        self.ahead_until = 0.0  # steps committed ahead of the clock end here (_decode_run)
        self.in_batches = 0  # static: requests taken into batches (forming, formed or running), not yet returned
        self.busy_until = 0.0  # static: when the batch running on the slice returns
        self._praxis_s: dict[tuple[int, int, int], tuple[float, float]] = {}  # saxml: batch_s by (rows, length, steps)

    # Queue ---------------------------------------------------------------------------------
    @property
    def outstanding(self) -> int:
        return (len(self.waiting) + len(self.prefilling) + len(self.seqs) + len(self.ready) + len(self.incoming)
                + self.in_batches)

    def poke(self) -> None:
        if self.wake is not None and not self.wake.triggered:
            self.wake.succeed()

    def submit(self, rid: int) -> None:
        self.waiting.append((rid, int(self.sim.req.prompt[rid]), 0))
        self.poke()

    # Pages ---------------------------------------------------------------------------------
    def alone_pages(self, rid: int) -> int:
        """Pages request `rid` needs with the cache to itself; more than the cache: rejected."""
        req, pol = self.sim.req, self.policy
        prompt, out = int(req.prompt[rid]), int(req.output[rid])
        if pol.kind == "static":
            length = next((b for b in pol.buckets if b >= prompt), prompt)
            return int(seq_pages(length, out - 1, req.beams, self.pt)) * self.padded(1)
        return int(seq_pages(prompt, out - 1, req.beams, self.pt)) if not self.paged else pages_for(prompt, self.pt)

    def admit_pages(self, prompt_tokens: int, generated: int, target: int) -> int:
        """Pages a request takes on admission: its prompt (paged) or prompt and output (reserve)."""
        if not self.paged:
            return int(seq_pages(prompt_tokens, max(target - generated - 1, 0), self.beams, self.pt))
        return pages_for(prompt_tokens, self.pt)

    def seq_pages_now(self, q: _Seq) -> int:
        """Pages sequence `q` holds after the replica's decode steps so far."""
        if not self.paged:
            return q.pages
        return pages_for(q.prompt + self.s - q.s0, self.pt)

    # Decoding sequences --------------------------------------------------------------------
    def _add(self, rid: int, prompt_tokens: int, generated: int, pages: int) -> None:
        """A request starts decoding: `generated` tokens so far, its prompt's KV in the cache."""
        self._sid += 1
        self._order += 1
        target = int(self.sim.req.output[rid])
        q = _Seq(rid, prompt_tokens, self.s, generated, target, pages, self._order)
        self.seqs[self._sid] = q
        heapq.heappush(self.finish, (self.s + target - generated, self._sid))
        self.by_order.append(self._sid)
        self.sum_prompt += prompt_tokens
        self.sum_gofs += 1 - self.s
        if self.paged:
            self.residue[(prompt_tokens - self.s) % self.pt] += 1

    def _remove(self, sid: int) -> _Seq:
        q = self.seqs.pop(sid)
        self.sum_prompt -= q.prompt
        self.sum_gofs -= 1 - q.s0
        if self.paged:
            self.residue[(q.prompt - q.s0) % self.pt] -= 1
        self.ledger.give(self.seq_pages_now(q))
        return q

    def _preempt_latest(self) -> None:
        """Preempt the latest admitted decoding sequence: free its pages; it waits at the head of
        the queue to recompute its prompt and the tokens it has generated."""
        while self.by_order and self.by_order[-1] not in self.seqs:
            self.by_order.pop()
        sid = self.by_order.pop()
        q = self._remove(sid)
        gen = q.total0 + self.s - q.s0
        prompt = int(self.sim.req.prompt[q.rid])
        self.waiting.appendleft((q.rid, prompt + gen, gen))
        self.sim.log.preemptions[q.rid] += 1
        self.preempted += 1

    def _grow(self) -> None:
        """Paged: take the pages this decode step's new tokens need, preempting while short."""
        while self.seqs:
            need = self.residue[(-self.s) % self.pt]
            if need <= self.ledger.free:
                self.ledger.take(need)
                return
            self._preempt_latest()

    # Planning a step -----------------------------------------------------------------------
    def _admit_chunks(self, budget: int, seats: int, whole: bool) -> list[tuple[_Prefill, int]]:
        """Prompt chunks for this step: prefills in progress first, then the queue's head in
        order while tokens, seats and pages last (`whole`: only whole prompts, the first one
        even beyond the budget)."""
        chunks: list[tuple[_Prefill, int]] = []
        for p in self.prefilling:
            if budget <= 0:
                break
            n = min(p.tokens - p.done, budget)
            chunks.append((p, n))
            budget -= n
        req = self.sim.req
        while self.waiting and seats > 0 and (budget > 0 or (whole and not chunks)):
            rid, tokens, gen = self.waiting[0]
            if whole and chunks and tokens > budget:
                break
            pages = self.admit_pages(tokens, gen, int(req.output[rid]))
            if pages > self.ledger.free:
                break
            self.waiting.popleft()
            self.ledger.take(pages)
            p = _Prefill(rid, tokens, gen, pages)
            self.prefilling.append(p)
            n = tokens if whole else min(tokens, budget)
            chunks.append((p, n))
            budget -= n
            seats -= 1
        return chunks

    def plan(self) -> _Plan | None:
        """The next step, or None when there is nothing to run."""
        pol, beams, seqs = self.policy, self.beams, self.seqs
        if self.role == "decode":
            self._start_transfers()
            while self.ready and len(seqs) < self.n_slots:
                rid, pages = self.ready.popleft()
                self._add(rid, int(self.sim.req.prompt[rid]), 1, pages)
        chunks: list[tuple[_Prefill, int]] = []
        decode = bool(seqs)
        prefills = self.role != "decode" and (self.waiting or self.prefilling)
        if prefills and pol.prefill == "separate":
            chunks = self._admit_chunks(pol.token_budget, self.n_slots - len(seqs) - len(self.prefilling), whole=True)
            decode = decode and not chunks
        if decode and self.paged:
            self._grow()
            decode = bool(seqs)
        d = len(seqs) if decode else 0
        n_dec = d * beams
        if prefills and not chunks and pol.prefill == "chunked":
            chunks = self._admit_chunks(pol.token_budget - n_dec, self.n_slots - d - len(self.prefilling), whole=False)
        # attention: each decoding sequence's queries (one per beam) over its prompt and own tokens
        n_all = len(seqs)
        all_since = self.sum_gofs + n_all * self.s  # tokens since their prefill, over every sequence
        P = self.sum_prompt
        kv = float(P + beams * (all_since - n_all) + n_dec)  # in the cache while the step runs
        if d:
            q, k, r = float(n_dec), float(beams * (P + all_since)), float(P + beams * (all_since - d))
        else:
            q = k = r = 0.0
        tokens, w, finishing = n_dec, float(n_dec), 0
        for p in self.prefilling:
            kv += p.done
        for p, n in chunks:
            tokens += n
            q += n
            k += n * (p.done + (n + 1) / 2.0)
            r += p.done
            w += n
            kv += n
            finishing += p.done + n == p.tokens
        if tokens == 0:
            return None
        dt = self.sim.timer.tokens_step_s(tokens, n_dec + finishing, q, k, r, w)
        if self.sim.audit:
            self._audit(kv, decode)
        return _Plan(dt, decode, chunks, tokens, self.sim.env.now, kv)

    def held_pages(self, decode: bool) -> int:
        """Pages this replica's sequences hold, counted from the sequences (the ledger must agree),
        with this step's new tokens' pages if it decodes."""
        pt, s = self.pt, self.s + (1 if decode else 0)
        seqs = sum(pages_for(q.prompt + s - q.s0, pt) if self.paged else q.pages for q in self.seqs.values())
        return seqs + sum(p.pages for p in self.prefilling) + sum(pg for _, pg in self.ready) + self.sending + self.arriving

    def _audit(self, kv_tokens: float, decode: bool) -> None:
        """The KV-cache invariant, checked before every step when auditing: the pages the
        sequences hold are the ledger's, within the capacity, and the tokens in the cache fit."""
        held = self.held_pages(decode)
        if held != self.ledger.used or self.ledger.used > self.ledger.capacity:
            raise InternalError(f"replica {self.index}: pages held {held}, ledger {self.ledger.used} of {self.ledger.capacity}")
        if kv_tokens > self.sim.budget.tokens:
            raise InternalError(f"replica {self.index}: {kv_tokens:.0f} KV tokens in use, the cache holds {self.sim.budget.tokens}")

    # Committing a step ---------------------------------------------------------------------
    def commit(self, plan: _Plan, now: float | None = None) -> None:
        """Apply a step that ended at `now` (default: the clock's now)."""
        sim, log = self.sim, self.sim.log
        now = sim.env.now if now is None else now
        d = len(self.seqs) if plan.decode else 0
        if plan.decode:
            self.s += 1
            while self.finish and self.finish[0][0] <= self.s:
                _, sid = heapq.heappop(self.finish)
                if sid in self.seqs:
                    done = self._remove(sid).rid
                    log.end_s[done] = now
                    if sim.clients is not None:
                        sim.release_client(done, now)
        for p, n in plan.chunks:
            p.done += n
            if p.done < p.tokens:
                continue
            self.prefilling.remove(p)
            rid = p.rid
            if math.isnan(log.first_s[rid]):
                log.first_s[rid] = now
            generated = p.generated + 1
            if generated >= int(sim.req.output[rid]):
                log.end_s[rid] = now
                if sim.clients is not None:
                    sim.release_client(rid, now)
                self.ledger.give(p.pages)
            elif self.role == "prefill":
                sim.hand_over(self, rid, p.pages)
            else:
                self._add(rid, p.tokens, generated, p.pages)
        seqs = d + len(plan.chunks)
        self.max_seqs_seen = max(self.max_seqs_seen, seqs)
        sim.kv_tokens_max = max(sim.kv_tokens_max, plan.kv_tokens)
        self.steps.add((now, now - plan.start, plan.tokens, d * self.beams, seqs, self.ledger.used, plan.kv_tokens))
        self.busy_s += now - plan.start
        if len(self.by_order) > 4 * len(self.seqs) + 64:  # drop finished ids from the admission list
            self.by_order = [sid for sid in self.by_order if sid in self.seqs]

    # Decode role: KV arriving from prefill replicas -----------------------------------------
    def _start_transfers(self) -> None:
        req = self.sim.req
        while self.incoming:
            rid = self.incoming[0]
            pages = self.admit_pages(int(req.prompt[rid]), 1, int(req.output[rid]))
            if pages > self.ledger.free:
                return
            self.incoming.popleft()
            self.ledger.take(pages)
            self.arriving += pages
            self.sim.env.process(self.sim.transfer(rid, self, pages))

    # The process ---------------------------------------------------------------------------
    def run(self):
        env, sim = self.sim.env, self.sim
        while True:
            plan = self.plan()
            if plan is None:
                self.wake = env.event()
                yield self.wake
                self.wake = None
                continue
            if sim.run_ahead and self.role == "both" and plan.decode and not plan.chunks and not self.waiting \
                    and not self.prefilling and plan.start + plan.dt < sim.next_arrival_s:
                self.ahead_until = self._decode_run(plan)
                yield env.timeout(self.ahead_until - env.now)
                continue
            yield env.timeout(plan.dt)
            self.commit(plan)

    def _decode_run(self, plan: _Plan) -> float:
        """Commit `plan` (a decode-only step) and the decode steps after it that nothing outside
        this replica can change: they end before the next arrival, nothing waits or prefills, and
        (paged) their pages are free. The same steps, times and records as one step at a time,
        without the clock's events; returns when the last ends."""
        sim, beams, pt = self.sim, self.beams, self.pt
        step, seqs, finish, end_s, add = sim.timer.tokens_step_s, self.seqs, self.finish, sim.log.end_s, self.steps.add
        t = plan.start + plan.dt
        self.commit(plan, t)
        while seqs and not self.waiting and not self.prefilling:
            d = len(seqs)
            n = d * beams
            since = self.sum_gofs + d * self.s
            prompt = self.sum_prompt
            dt = step(n, n, float(n), float(beams * (prompt + since)), float(prompt + beams * (since - d)), float(n))
            if t + dt >= sim.next_arrival_s:
                break
            if self.paged:
                need = self.residue[(-self.s) % pt]
                if need > self.ledger.free:
                    break
                self.ledger.take(need)
            kv = float(prompt + beams * (since - d)) + n
            if sim.audit:
                self._audit(kv, True)
            t += dt
            self.s += 1  # the decode part of commit(), for a step of decode tokens only
            while finish and finish[0][0] <= self.s:
                sid = heapq.heappop(finish)[1]
                if sid in seqs:
                    done = self._remove(sid).rid
                    end_s[done] = t
                    if sim.clients is not None:
                        sim.release_client(done, t)
            add((t, dt, n, n, d, self.ledger.used, kv))
            if kv > sim.kv_tokens_max:
                sim.kv_tokens_max = kv
            self.busy_s += dt
        if len(self.by_order) > 4 * len(seqs) + 64:
            self.by_order = [sid for sid in self.by_order if sid in seqs]
        return t

    def padded(self, n: int) -> int:
        """The batch size a static batch of `n` requests runs at (the policy's batch_sizes)."""
        return next((b for b in self.policy.batch_sizes if b >= n), n)

    def _batch_shape(self, batch: list[int]) -> tuple[int, int, int]:
        """A static batch's padded prompt length, decode steps and KV pages per padded row."""
        req, pol = self.sim.req, self.policy
        longest = int(req.prompt[batch].max())
        length = next((b for b in pol.buckets if b >= longest), longest)
        steps = int(req.output[batch].max()) - 1
        return length, steps, int(seq_pages(length, steps, req.beams, self.pt))

    def batch_s(self, m: int, length: int, steps: int) -> tuple[float, float]:
        """(prefill, decode) seconds on the slice of a static batch run at `m` rows padded to
        `length` prompt tokens with `steps` decode steps."""
        if self.policy.batcher == "saxml":
            key = (m, length, steps)
            if key not in self._praxis_s:
                self._praxis_s[key] = self._praxis_batch_s(m, length, steps)
            return self._praxis_s[key]
        step, beams = self.sim.timer.tokens_step_s, self.beams
        prefill = step(m * length, m, m * length, m * length * (length + 1) / 2.0, 0.0, m * length)
        decode = 0.0
        for k in range(1, steps + 1):
            decode += step(m * beams, m * beams, m * beams, m * beams * (length + k), m * (length + beams * (k - 1)), m * beams)
        return prefill, decode

    def _praxis_batch_s(self, m: int, length: int, steps: int) -> tuple[float, float]:
        """`batch_s` as praxis runs a Saxml batch (google/praxis@c46c844, the round 3.1 code):
        the prompts' fprop (`LanguageModel.decode_with_params`' `fprop_fn`) is dense attention
        over every key of the bucket (`_dot_atten`: logits materialised, fp32 softmax) and
        samples nothing (its logits are unused); then `steps + 1` extend steps
        (`beam_search_after_prefix_fprop`: the prompt's last token is re-run as the first), each
        attending to the shared prompt and its beam's whole static buffer of the current
        segment of `decode_segments` plus 1 (`lazy_broadcast_prefix_fn`, `pad_state_fn`), and
        reordering every beam's buffer across beams (`shuffle_state`)."""
        sim, beams = self.sim, self.beams
        timer, shard, on = sim.timer, sim.shard, sim.praxis_costs
        n = m * length
        keys = float(n) * length if "dense_prefill" in on else n * (length + 1) / 2.0
        prefill = timer.tokens_step_s(n, 0, n, keys, 0.0, n)
        if "logits" in on:
            prefill += timer.memory_s(shard.dense_logits_bytes(keys))
        if "prefill_collectives_hidden" in on:  # what-if: every collective beside the prefill's matmuls
            prefill -= timer.breakdown(n, 0, shard.load(n, keys, 0.0, n)).comm_exposed_s
        segments = self.policy.decode_segments or (steps + 1,)
        rows = m * beams
        dequant = 4.0 * (shard.weight_bytes() - shard.embed_weight_bytes()) if "int8_materialised" in on else 0.0
        decode = 0.0
        for k in range(1, steps + 2):
            buffer = next((s for s in segments if s >= k), k) + 1 if "static_buffers" in on else k
            step_keys = float(rows) * (length + buffer)
            extra = (shard.dense_logits_bytes(step_keys) if "logits" in on else 0.0) + dequant
            if "beam_reorder" in on:
                extra += shard.beam_reorder_bytes(rows * buffer)
            decode += timer.tokens_step_s(rows, rows, rows, step_keys, m * length + rows * buffer, rows) + timer.memory_s(extra)
        return prefill, decode

    def _run_batch(self, batch: list[int], length: int, steps: int, per: int):
        """Run one static batch on the slice (its pages already taken): one prefill of every
        padded row, `steps` decode steps, every result returned when it ends."""
        sim, env, beams = self.sim, self.sim.env, self.beams
        n, m = len(batch), self.padded(len(batch))
        t0 = env.now
        prefill, decode = self.batch_s(m, length, steps)
        self.max_seqs_seen = max(self.max_seqs_seen, m)
        kv = float(m * (length + beams * steps))
        sim.kv_tokens_max = max(sim.kv_tokens_max, kv)
        self.busy_until = t0 + prefill + decode
        yield env.timeout(prefill + decode)
        for rid in batch:
            sim.log.first_s[rid] = t0 + prefill
            sim.log.end_s[rid] = env.now
            if sim.clients is not None:
                sim.release_client(rid, env.now)
        self.ledger.give(per * m)
        self.in_batches -= n
        self.steps.add((env.now, env.now - t0, m * length + steps * m * beams, steps * m * beams, m, per * m, kv))
        self.busy_s += env.now - t0

    def run_static(self):
        """Request-level batches formed when the replica is idle (batcher `idle`, see BatchPolicy):
        form, prefill, decode to the end, return."""
        sim, env, pol, req = self.sim, self.sim.env, self.policy, self.sim.req
        while True:
            if not self.waiting:
                self.wake = env.event()
                yield self.wake
                self.wake = None
                continue
            deadline = req.arrival_s[self.waiting[0][0]] + pol.max_wait
            while len(self.waiting) < pol.max_batch and env.now < deadline and not sim.arrivals_done:
                self.wake = env.event()
                yield env.any_of([self.wake, env.timeout(deadline - env.now)])
                self.wake = None
            batch = [self.waiting[i][0] for i in range(min(pol.max_batch, len(self.waiting)))]
            length, steps, per = self._batch_shape(batch)
            n = len(batch)
            while n > 1 and per * self.padded(n) > self.ledger.free:  # as many as the cache holds
                n -= 1
            batch = batch[:n]
            for _ in range(n):
                self.waiting.popleft()
            self.ledger.take(per * self.padded(n))
            self.in_batches += n
            yield from self._run_batch(batch, length, steps, per)

    def run_saxml(self):
        """Saxml's batcher (batcher `saxml`, see BatchPolicy): a batch is started only when fewer
        than `depth` are live, by taking the queue's first request (waiting for one), then
        collecting until `max_batch` or `max_wait` after that take; formed batches go to the
        device first in, first out (`_device`), and their slot frees when their results return.
        google/saxml@fe1d6b48e5824e9d89b921e7d339074a43f0351b (2023-08-18, the round 3.1 code):
        PerMethodBatcher._batching (batch_sem of 2), utils.RpcQueue.take_batch (the wait clock
        starts at the first take); the depth of 1 when MAX_LIVE_BATCHES <= 2 is d290a4c (2024-04-01;
        `batcher_depth` sets the depth, 2 for the 2023 code)."""
        sim, env, pol = self.sim, self.sim.env, self.policy
        depth = pol.batcher_depth if pol.batcher_depth is not None else 1 if pol.max_live_batches <= 2 else 2
        slots = simpy.Resource(env, capacity=depth)
        formed: simpy.Store = simpy.Store(env)
        env.process(self._device(formed, slots))
        while True:
            slot = slots.request()
            yield slot
            while not self.waiting:
                self.wake = env.event()
                yield self.wake
                self.wake = None
            end = env.now + pol.max_wait
            batch = [self.waiting.popleft()[0]]
            self.in_batches += 1
            while len(batch) < pol.max_batch:
                if self.waiting:
                    batch.append(self.waiting.popleft()[0])
                    self.in_batches += 1
                    continue
                if env.now >= end or (sim.arrivals_done and not sim.retrying):
                    break
                self.wake = env.event()
                yield env.any_of([self.wake, env.timeout(end - env.now)])
                self.wake = None
            formed.put((batch, slot))

    def _device(self, formed: simpy.Store, slots: simpy.Resource):
        """The slice under the Saxml batcher: the formed batches one at a time, in order."""
        while True:
            batch, slot = yield formed.get()
            length, steps, per = self._batch_shape(batch)
            pages = per * self.padded(len(batch))
            if pages > self.ledger.free:
                raise PodsimError(f"a static batch of {len(batch)} requests (run at {self.padded(len(batch))}) padded to "
                                  f"{length} tokens with {steps} decode steps needs {pages} KV pages; the cache holds "
                                  f"{self.ledger.capacity} (a Saxml server allocates the whole batch's cache): lower "
                                  "max_batch or batch_sizes, or use more chips")
            self.ledger.take(pages)
            yield from self._run_batch(batch, length, steps, per)
            slots.release(slot)


class ServingSim:
    """One serving simulation; `run()` once. Use `simulate_serving`."""

    def __init__(self, config: ServingConfig, requests: Requests | None = None, *, timer: StepTimer | None = None,
                 on_progress: ProgressFn | None = None, audit: bool = False, dcn: DcnSpec | None = None,
                 generation: Generation | None = None, run_ahead: bool = True, retry_skip: bool = True,
                 praxis_costs: frozenset[str] | None = None):
        self.config = config
        # saxml batches: which of praxis's costs `Replica._praxis_batch_s` charges (all by default;
        # fewer, or PRAXIS_WHAT_IFS, only for diagnostics)
        self.praxis_costs = PRAXIS_COSTS if praxis_costs is None else frozenset(praxis_costs)
        if unknown := self.praxis_costs - PRAXIS_COSTS - PRAXIS_WHAT_IFS:
            raise PodsimError(f"praxis costs {sorted(unknown)} are not known; use: {', '.join(sorted(PRAXIS_COSTS | PRAXIS_WHAT_IFS))}")
        self.generation = generation if generation is not None else get_generation(config.generation)
        if self.generation.id != config.generation:
            raise PodsimError(f"generation {self.generation.id!r} given for a config of {config.generation!r}")
        self.shape = parse_shape(config.slice)
        chips = math.prod(self.shape)
        m = config.model
        tensor = m.tensor if m.tensor is not None else max(chips // m.expert, 1)
        self.shard = InferenceShard(m.config(), tensor, m.expert, m.precision, m.parallel_block, m.capacity_factor,
                                    m.kv_states)
        self.timer = timer or StepTimer(self.shard, self.generation, self.shape, routing=config.routing)
        pol = config.batch
        longest = max(pol.buckets) if pol.buckets else self.shard.cfg.seq_len
        max_tokens = pol.token_budget if pol.kind == "continuous" else pol.max_batch * longest
        max_seqs = pol.max_seqs if pol.kind == "continuous" else pol.max_batch
        self.prefill_workspace_bytes: float | None = None
        if pol.kind == "static" and pol.batcher == "saxml":
            # a Saxml batch is one praxis program: the prompts' fprop (its activations beside the
            # prompts' KV only), then the decode loop, whose output KV buffers are made after the
            # fprop (see _check_saxml_cache): the cache sits beside a decode step's workspace
            rows, beams = (pol.batch_sizes[-1] if pol.batch_sizes else pol.max_batch), config.requests.beams
            self.prefill_workspace_bytes = self.shard.workspace_bytes(rows * longest, rows)
            max_tokens = max_seqs = rows * beams
        self.budget: KvBudget = kv_budget(self.shard, self.generation, pol.page_tokens, max_tokens, max_seqs, config.hbm_reserve)
        self.req = requests if requests is not None else draw_requests(config.requests, config.duration, config.seed)
        self.log = RequestLog.empty(len(self.req))
        # batcher saxml: requests alive per replica at most (more are turned away); None for other batchers
        self.saxml_alive = pol.max_batch * pol.max_live_batches if pol.kind == "static" and pol.batcher == "saxml" else None
        if self.saxml_alive is not None and len(self.req):
            self._check_saxml_cache()
        self.env = simpy.Environment()
        self.audit = audit
        self.on_progress = on_progress
        self.kv_tokens_max = 0.0
        self.arrivals_done = False
        self.next_arrival_s = 0.0  # the arrival process's next request (inf when all have arrived)
        self.run_ahead = run_ahead  # decode steps no outside event can change, committed in one go
        d = config.disaggregated
        if d is None:
            self.replicas = [Replica(self, i, "both") for i in range(config.replicas)]
            self.pool, self.decoders = self.replicas, []
        else:
            self.pool = [Replica(self, i, "prefill") for i in range(d.prefill)]
            self.decoders = [Replica(self, d.prefill + i, "decode") for i in range(d.decode)]
            self.replicas = self.pool + self.decoders
        self.kv_transfer = KvTransfer(self.generation, self.shape, d.transfer, dcn, config.routing) if d is not None else None
        self._rr = 0
        self.retry_skip = retry_skip and config.router == "least_loaded"  # round robin moves with every attempt
        self.sax_retries = SaxRetries(config.seed)  # requests Saxml turned away, retried by the Sax client
        self._retry_wake: simpy.Event | None = None
        self._retry_wait_until = math.inf
        n_clients = config.requests.clients
        self.clients = simpy.Resource(self.env, capacity=n_clients) if n_clients is not None else None
        self._client_of: dict[int, simpy.resources.resource.Request] = {}
        self._source: dict[int, tuple[Replica, int]] = {}  # request handed over -> (prefill replica, its pages)

    def _check_saxml_cache(self) -> None:
        """A Saxml server compiles its largest batch at its longest bucket when it loads the
        model: refuse a configuration whose program cannot fit. praxis runs the batch as one
        program (google/praxis@c46c844 praxis/layers/models.py `LanguageModel.decode_with_params`,
        praxis/beam_search.py `beam_search_after_prefix_fprop`): the prompts' fprop writes their
        KV, then the decode loop's KV buffers are made (`lazy_broadcast_prefix_fn`: each beam's
        own buffer of the first MAX_DECODE_STEPS segment; `decoder_utils.pad_state_fn` grows them
        between segments), so the fprop's activations live beside the prompts' KV only, and the
        whole cache beside a decode step's activations. Both phases must fit."""
        pol, req = self.config.batch, self.req
        length = max(pol.buckets) if pol.buckets else int(req.prompt.max())
        steps = int(req.output.max()) - 1
        rows = pol.batch_sizes[-1] if pol.batch_sizes else pol.max_batch
        if pol.decode_segments and steps + 1 > pol.decode_segments[-1]:
            raise PodsimError(f"requests of up to {steps + 1} output tokens exceed decode_segments' last, "
                              f"{pol.decode_segments[-1]} (Saxml's MAX_DECODE_STEPS caps a request's output): "
                              "raise it or shorten the outputs")
        need = rows * int(seq_pages(length, steps, req.beams, pol.page_tokens))
        b = self.budget
        if need > b.pages:
            raise PodsimError(
                f"a Saxml batch of {rows} requests x {req.beams} beams at {length} prompt and {steps + 1} output tokens "
                f"needs {need * pol.page_tokens:,} KV tokens; {self.shard.cfg.name} on this slice leaves room for "
                f"{b.tokens:,} ({b.weight_bytes / 1e9:.2f} GB of weights and {b.workspace_bytes / 1e9:.2f} GB of a decode "
                f"step's workspace per chip): lower max_batch, batch_sizes or buckets, or use more chips")
        prompts = rows * int(seq_pages(length, 0, 1, pol.page_tokens))
        room = b.hbm_bytes - b.reserve_bytes - b.weight_bytes - (self.prefill_workspace_bytes or 0.0)
        if prompts * b.page_bytes > room:
            raise PodsimError(
                f"the prefill of a Saxml batch of {rows} requests at {length} prompt tokens needs their "
                f"{prompts * pol.page_tokens:,} KV tokens beside {(self.prefill_workspace_bytes or 0.0) / 1e9:.2f} GB of "
                f"activations per chip; {self.shard.cfg.name} on this slice leaves room for "
                f"{max(int(room // b.page_bytes), 0) * pol.page_tokens:,} ({b.weight_bytes / 1e9:.2f} GB of weights per chip): "
                f"lower max_batch, batch_sizes or buckets, or use more chips")

    # Routing ---------------------------------------------------------------------------------
    def _pick(self, pool: list[Replica]) -> Replica:
        if self.config.router == "round_robin":
            self._rr = (self._rr + 1) % len(pool)
            return pool[self._rr]
        return min(pool, key=lambda r: (r.outstanding, r.index))

    def arrivals(self):
        env, req, log = self.env, self.req, self.log
        cap = self.budget.pages
        alive = self.saxml_alive if self.saxml_alive is not None else math.inf
        for rid in range(len(req)):
            t = float(req.arrival_s[rid])
            self.next_arrival_s = t
            if t > env.now:
                yield env.timeout(t - env.now)
            if self.clients is not None:  # wait for a free client (latency still counts from t)
                token = self.clients.request()
                yield token
                self._client_of[rid] = token
            r = self._pick(self.pool)
            log.replica[rid] = r.index
            if r.alone_pages(rid) > cap:
                log.rejected[rid] = True
                if self.clients is not None:
                    self.release_client(rid, env.now)
                continue
            if r.outstanding >= alive:
                self.turn_away(rid)
                continue
            r.submit(rid)
        self.arrivals_done = True
        self.next_arrival_s = math.inf
        for r in self.pool:
            r.poke()

    def release_client(self, rid: int, t: float) -> None:
        """Request `rid` ended at `t` (now, or later for steps committed ahead): its client is free then."""
        token = self._client_of.pop(rid)
        if t <= self.env.now:
            self.clients.release(token)
        else:
            self.env.timeout(t - self.env.now).callbacks.append(lambda _e: self.clients.release(token))

    def turn_away(self, rid: int) -> None:
        """Saxml turned request `rid` away (RESOURCE_EXHAUSTED: its replica has `max_batch` x
        `max_live_batches` requests alive): the Sax client retries it with backoff until admitted
        (`podsim.serving.saxclient`). Its latency counts from its first arrival."""
        t = self.sax_retries.add(rid, self.env.now)
        if self._retry_wake is not None and not self._retry_wake.triggered and t < self._retry_wait_until:
            self._retry_wake.succeed()

    @property
    def retrying(self) -> int:
        """Requests waiting to retry (batcher saxml)."""
        return len(self.sax_retries)

    @property
    def retries_total(self) -> int:
        """Retries that failed, over the run."""
        return self.sax_retries.failed

    def _retries(self, alive: int):
        """The Sax client's retries, earliest first: admitted when a replica has a place; else
        every attempt before a running batch returns (the first moment a place can free) fails,
        counted without events (`retry_skip`)."""
        env, q, log = self.env, self.sax_retries, self.log
        while True:
            t, i = q.earliest() if len(q) else (math.inf, -1)
            if t > env.now:
                self._retry_wait_until = t
                self._retry_wake = env.event()
                yield env.any_of([self._retry_wake, env.timeout(t - env.now)]) if i >= 0 else self._retry_wake
                self._retry_wake = None
                continue
            r = self._pick(self.pool)
            if r.outstanding < alive:
                rid = q.admit(i)
                log.replica[rid] = r.index
                r.submit(rid)
                continue
            if self.retry_skip:
                free_at = self._saxml_free_at(alive)
                q.fail_one(i, free_at)
                q.fail_before(free_at)
            else:
                q.fail_one(i)

    def _saxml_free_at(self, alive: int) -> float:
        """The earliest time a pool replica can have fewer than `alive` requests alive: now if one
        has; else when the first running batch returns (only a returning batch frees places)."""
        now = self.env.now
        return min((now if r.outstanding < alive else max(r.busy_until, now) for r in self.pool), default=now)

    # Disaggregated: prefill -> decode --------------------------------------------------------
    def hand_over(self, src: Replica, rid: int, pages: int) -> None:
        """A prefill replica finished `rid`'s prompt: queue it at a decode replica, its pages held
        at the source until the KV cache has moved."""
        dst = self._pick(self.decoders)
        src.sending += pages
        self._source[rid] = (src, pages)
        dst.incoming.append(rid)
        dst.poke()

    def transfer(self, rid: int, dst: Replica, dst_pages: int):
        """Move `rid`'s KV cache (pages already taken at `dst`) over the source's transfer link."""
        src, src_pages = self._source[rid]
        with src.link.request() as slot:
            yield slot
            yield self.env.timeout(self.kv_transfer.time_s(int(self.req.prompt[rid]) * self.shard.kv_bytes_per_token()))
        del self._source[rid]
        src.sending -= src_pages
        src.ledger.give(src_pages)
        src.poke()
        dst.arriving -= dst_pages
        dst.ready.append((rid, dst_pages))
        dst.poke()

    # Running ---------------------------------------------------------------------------------
    def progress(self, every: float):
        end = self.config.duration
        while True:
            yield self.env.timeout(every)
            self.on_progress(min(self.env.now, end), end)

    def run(self) -> float:
        t0 = time.perf_counter()
        env = self.env
        env.process(self.arrivals())
        pol = self.config.batch
        if self.saxml_alive is not None:
            env.process(self._retries(self.saxml_alive))
        for r in self.replicas:
            env.process(r.run() if pol.kind != "static" else r.run_saxml() if self.saxml_alive is not None else r.run_static())
        offline = self.config.requests.arrivals.kind == "offline"
        horizon = (float(self.req.arrival_s.max()) if len(self.req) else 0.0) if offline else self.config.duration
        horizon += self.config.drain_s if not offline else 1e9
        if self.on_progress is not None:
            env.process(self.progress(max(self.config.duration / 100.0, 1e-3)))
        until = env.timeout(horizon)
        done = env.event()

        def watch():
            while True:
                yield env.timeout(max(self.config.duration / 50.0, 1.0))
                if (self.arrivals_done and not self.retrying and not any(r.outstanding for r in self.replicas) and not self._source
                        and all(r.ahead_until <= env.now for r in self.replicas)):
                    done.succeed()
                    return

        env.process(watch())
        env.run(until=env.any_of([until, done]))
        if self.on_progress is not None:
            self.on_progress(self.config.duration, self.config.duration)
        return time.perf_counter() - t0
