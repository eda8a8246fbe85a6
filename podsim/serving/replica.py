"""One replica of a serving fleet: its queue, the prompts it is prefilling, its decoding
sequences and KV pages, and the SimPy process that runs continuous-batching steps on its slice.

Continuous batching: every running sequence decodes one token (one per beam) in every step;
the rest of the token budget goes to prompts in arrival order (`chunked`: a prompt may be split
over steps; `separate`: a step prefills whole prompts only, and decoding waits), at most
`prefill_seqs` prompts at once, each chunk computed at its bucket's length and the decoding
sequences at their batch size (the policy's `buckets` and `batch_sizes`). A request is
admitted only when its prompt's pages are free (`paged`) or its prompt's and whole output's
(`reserve`); the head of the queue that does not fit blocks the rest (first come, first served).
Under `paged`, when a decode step needs more pages than are free, the latest admitted sequences
are preempted: their pages freed, each back at the head of the queue to recompute its prompt
and its tokens so far. Static batches are `podsim.serving.static` (and Saxml's batcher
`podsim.serving.saxml`), mixed into the replica.
"""

from __future__ import annotations

import heapq
import math
from collections import deque

import numpy as np
import simpy

from podsim.errors import InternalError
from podsim.serving.kvcache import PageLedger, pages_for, seq_pages
from podsim.serving.records import DecodingSeq, Prefill, StepLog, StepPlan
from podsim.serving.saxml import SaxmlBatcher
from podsim.serving.static import StaticBatches


class Replica(StaticBatches, SaxmlBatcher):
    """One replica: its queue, prefills in progress, decoding sequences and KV pages."""

    def __init__(self, sim, index: int, role: str):
        self.sim, self.index, self.role = sim, index, role  # role: both, prefill or decode
        self.policy = sim.config.batch
        self.n_slots = self.policy.max_seqs if self.policy.kind == "continuous" else self.policy.max_batch
        self.beams = sim.req.beams
        self.pt = self.policy.page_tokens
        self.paged = self.policy.kv == "paged"
        # decoding sequences, by id; aggregates kept as they join and leave
        self.seqs: dict[int, DecodingSeq] = {}
        self.finish: list[tuple[int, int]] = []  # heap of (decode step it finishes after, seq id)
        self.by_order: list[int] = []  # seq ids in admission order (preemption takes the latest)
        self.s = 0  # decode steps run
        self.sum_prompt = 0  # sum of prompt over decoding sequences
        self.sum_gofs = 0  # sum of (1 - s0): since = that + s per sequence
        self.residue = [0] * self.pt  # paged: sequences by (prompt - s0) mod page_tokens
        # the decode kernel reads each sequence's KV in blocks of this many tokens (0: the tokens it holds)
        self.kv_block = int(sim.engine.kv_read_block_pages.value) * self.pt
        self.block_res = np.zeros(self.kv_block, dtype=np.int64)  # sequences by (prompt - s0) mod kv_block
        self.block_pos = np.arange(self.kv_block, dtype=np.int64)
        self._sid = 0
        self.waiting: deque[tuple[int, int, int]] = deque()  # (rid, tokens to prefill, generated before)
        self.prefilling: list[Prefill] = []
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
        self._batch_s: dict[tuple[int, int, int], tuple[float, float]] = {}  # static: batch_s by (rows, length, steps)

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
            length = self.bucketed(prompt)
            return int(seq_pages(length, out - 1, req.beams, self.pt)) * self.padded(1)
        return int(seq_pages(prompt, out - 1, req.beams, self.pt)) if not self.paged else pages_for(prompt, self.pt)

    def admit_pages(self, prompt_tokens: int, generated: int, target: int) -> int:
        """Pages a request takes on admission: its prompt (paged) or prompt and output (reserve)."""
        if not self.paged:
            return int(seq_pages(prompt_tokens, max(target - generated - 1, 0), self.beams, self.pt))
        return pages_for(prompt_tokens, self.pt)

    def seq_pages_now(self, q: DecodingSeq) -> int:
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
        q = DecodingSeq(rid, prompt_tokens, self.s, generated, target, pages, self._order)
        self.seqs[self._sid] = q
        heapq.heappush(self.finish, (self.s + target - generated, self._sid))
        self.by_order.append(self._sid)
        self.sum_prompt += prompt_tokens
        self.sum_gofs += 1 - self.s
        if self.paged:
            self.residue[(prompt_tokens - self.s) % self.pt] += 1
        if self.kv_block:
            self.block_res[(prompt_tokens - self.s) % self.kv_block] += 1

    def _remove(self, sid: int) -> DecodingSeq:
        q = self.seqs.pop(sid)
        self.sum_prompt -= q.prompt
        self.sum_gofs -= 1 - q.s0
        if self.paged:
            self.residue[(q.prompt - q.s0) % self.pt] -= 1
        if self.kv_block:
            self.block_res[(q.prompt - q.s0) % self.kv_block] -= 1
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
    def _admit_chunks(self, budget: int, seats: int, whole: bool) -> list[tuple[Prefill, int]]:
        """Prompt chunks for this step: prefills in progress first, then the queue's head in
        order while tokens, seats and pages last (`whole`: only whole prompts, the first one
        even beyond the budget). No chunk is longer than the largest bucket: a prompt past it
        continues in the next steps, as JetStream's chunked prefill splits it (ov.20)."""
        chunks: list[tuple[Prefill, int]] = []
        top = self.policy.buckets[-1] if self.policy.buckets else math.inf  # a chunk past it: the rest next step
        for p in self.prefilling:
            if budget <= 0:
                break
            n = min(p.tokens - p.done, budget, top)
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
            p = Prefill(rid, tokens, gen, pages)
            self.prefilling.append(p)
            n = min(tokens if whole else min(tokens, budget), top)
            chunks.append((p, n))
            budget -= n
            seats -= 1
        return chunks

    def block_pad(self) -> float:
        """KV tokens this decode step's kernel reads past the sequences' own: each sequence's
        reads (its cached tokens and this step's) rounded up to whole blocks of `kv_block`."""
        if not self.kv_block or not self.seqs:
            return 0.0
        return float(self.block_res @ ((-(self.block_pos + self.s + 1)) % self.kv_block))

    def _seats(self, decoding: int) -> int:
        """New prompts this step may start: free sequence slots, within `prefill_seqs`."""
        seats = self.n_slots - decoding - len(self.prefilling)
        cap = self.policy.prefill_seqs
        return seats if cap is None else min(seats, cap - len(self.prefilling))

    def plan(self) -> StepPlan | None:
        """The next step, or None when there is nothing to run."""
        pol, beams, seqs = self.policy, self.beams, self.seqs
        if self.role == "decode":
            self._start_transfers()
            while self.ready and len(seqs) < self.n_slots:
                rid, pages = self.ready.popleft()
                self._add(rid, int(self.sim.req.prompt[rid]), 1, pages)
        chunks: list[tuple[Prefill, int]] = []
        decode = bool(seqs)
        prefills = self.role != "decode" and (self.waiting or self.prefilling)
        if prefills and pol.prefill == "separate":
            chunks = self._admit_chunks(pol.token_budget, self._seats(len(seqs)), whole=True)
            decode = decode and not chunks
        if decode and self.paged:
            self._grow()
            decode = bool(seqs)
        d = len(seqs) if decode else 0
        n_dec = d * beams
        if prefills and not chunks and pol.prefill == "chunked":
            chunks = self._admit_chunks(pol.token_budget - n_dec, self._seats(d), whole=False)
        # attention: each decoding sequence's queries (one per beam) over its prompt and own tokens
        n_all = len(seqs)
        all_since = self.sum_gofs + n_all * self.s  # tokens since their prefill, over every sequence
        P = self.sum_prompt
        kv = float(P + beams * (all_since - n_all) + n_dec)  # in the cache while the step runs
        if d:
            pad = self.block_pad()
            q, k, r = float(n_dec), float(beams * (P + all_since)) + pad, float(P + beams * (all_since - d)) + pad
        else:
            q = k = r = 0.0
        rows = self.padded(d) * beams if d else 0  # the decode rows the step computes (batch_sizes)
        tokens, work, w, finishing = n_dec, rows, float(n_dec), 0
        for p in self.prefilling:
            kv += p.done
        for p, n in chunks:
            m = self.bucketed(n)  # the prompt rows the step computes (buckets; no chunk is past the largest)
            tokens += n
            work += m
            q += m
            k += m * (p.done + (m + 1) / 2.0)
            r += p.done
            w += n
            kv += n
            finishing += p.done + n == p.tokens
        if tokens == 0:
            return None
        dt = self.sim.timer.tokens_step_s(work, rows + finishing, q, k, r, w)
        if self.sim.audit:
            self._audit(kv, decode)
        return StepPlan(dt, decode, chunks, tokens, self.sim.env.now, kv)

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
    def commit(self, plan: StepPlan, now: float | None = None) -> None:
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

    def _decode_run(self, plan: StepPlan) -> float:
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
            rows = self.padded(d) * beams
            since = self.sum_gofs + d * self.s
            prompt = self.sum_prompt
            pad = self.block_pad()
            dt = step(rows, rows, float(n), float(beams * (prompt + since)) + pad, float(prompt + beams * (since - d)) + pad,
                      float(n))
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
