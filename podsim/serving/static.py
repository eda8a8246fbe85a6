"""Static (request-level) batches on a replica: formed when the slice is idle (batcher `idle`),
prefilled together with prompts padded to a bucket, decoded until every request has finished,
every result returned with the batch; the batch's time on the slice from the step timer.
Mixed into `podsim.serving.replica.Replica`.
"""

from __future__ import annotations

from podsim.serving.kvcache import seq_pages


def prefill_s(sim, m: int, length: int, sampled: bool) -> float:
    """A static batch's prefill of `m` prompts of `length` tokens as the engine runs it: all in one
    step (`static_prefill` whole: praxis's fprop, dense attention over the bucket when the engine's
    prefill attention is dense, its logits materialised when they are), or in steps of at most the
    policy's `token_budget` tokens, whole prompts together (a prompt longer than the budget in
    chunks over steps, each chunk attending to the ones before). `sampled`: whether the prefill
    samples each prompt's first token."""
    eng, timer, shard = sim.engine, sim.timer, sim.shard
    n = m * length
    if eng.static_prefill == "whole":
        keys = float(n) * length if eng.prefill_attention == "dense" else n * (length + 1) / 2.0
        t = timer.tokens_step_s(n, m if sampled else 0, n, keys, 0.0, n)
        if eng.logits_materialised:
            t += timer.memory_s(shard.dense_logits_bytes(keys))
        if "prefill_collectives_hidden" in eng.what_ifs:  # what-if: every collective beside the prefill's matmuls
            t -= timer.breakdown(n, 0, shard.load(n, keys, 0.0, n)).comm_exposed_s
        return t
    budget = sim.config.batch.token_budget
    if length <= budget:  # whole prompts, up to the budget's worth per step
        per = budget // length
        full, rest = divmod(m, per)
        t = 0.0
        for k, count in ((per, full), (rest, 1 if rest else 0)):
            if count:
                q = k * length
                t += count * timer.tokens_step_s(q, k if sampled else 0, q, k * length * (length + 1) / 2.0, 0.0, q)
        return t
    t, done = 0.0, 0
    while done < length:  # each prompt in chunks of the budget, one prompt per step
        c = min(budget, length - done)
        last = done + c == length
        t += timer.tokens_step_s(c, 1 if sampled and last else 0, c, c * (done + (c + 1) / 2.0), float(done), c)
        done += c
    return m * t


def decode_s(sim, m: int, length: int, steps: int, beams: int) -> float:
    """A static batch's decode steps: `m` rows x `beams` each step, each query over its prompt
    (read once for its beams) and its own tokens so far (`kv_buffers` paged) or its beam's whole
    static buffer of the current segment of the policy's `decode_segments`, plus 1 (`static`,
    praxis's `lazy_broadcast_prefix_fn` and `pad_state_fn`), the engine's dense logits and beam
    reorder where it has them."""
    eng, timer, shard = sim.engine, sim.timer, sim.shard
    rows = m * beams
    segments = sim.config.batch.decode_segments or (steps,)
    dequant = 4.0 * (shard.weight_bytes() - shard.embed_weight_bytes()) if "int8_materialised" in eng.what_ifs else 0.0
    block = int(eng.kv_read_block_pages.value) * sim.config.batch.page_tokens if eng.kv_buffers == "paged" else 0
    t = 0.0
    for k in range(1, steps + 1):
        if eng.kv_buffers == "static":
            own_keys = own_read = next((s for s in segments if s >= k), k) + 1
        else:
            own_keys, own_read = k, k - 1
        if block:  # the kernel reads each row's KV in whole blocks (one beam a row: refused otherwise)
            own_keys = -(-(length + k) // block) * block - length
            own_read = own_keys - 1
        keys = float(rows) * (length + own_keys)
        extra = (shard.dense_logits_bytes(keys) if eng.logits_materialised else 0.0) + dequant
        if eng.beam_reorder:
            extra += shard.beam_reorder_bytes(rows * own_keys)
        t += timer.tokens_step_s(rows, rows, rows, keys, m * length + rows * own_read, rows)
        if extra:
            t += timer.memory_s(extra)
    return t


def static_batch_s(sim, m: int, length: int, steps: int, beams: int) -> tuple[float, float]:
    """(prefill, decode) seconds of a static batch: the prompts' prefill, then `steps` decode
    steps. An engine whose prefill samples nothing (`first_token_from_prefill` False: praxis's
    `beam_search_after_prefix_fprop` re-runs each prompt's last token as the first extend step)
    runs `steps + 1` extend steps."""
    first = sim.engine.first_token_from_prefill
    return prefill_s(sim, m, length, first), decode_s(sim, m, length, steps if first else steps + 1, beams)


class StaticBatches:
    """A replica's static batches (see the module docstring)."""

    sim: object  # the ServingSim it belongs to (podsim.serving.simulate; not imported: no import circle)

    def padded(self, n: int) -> int:
        """The batch size `n` requests (a static batch, or a continuous step's decoding sequences)
        run at: the smallest of the policy's batch_sizes that holds them, else `n`."""
        return next((b for b in self.policy.batch_sizes if b >= n), n)

    def bucketed(self, n: int) -> int:
        """The length `n` prompt tokens (a static batch's longest, or a continuous step's chunk)
        run at: the smallest of the policy's buckets that holds them, else `n`."""
        return next((b for b in self.policy.buckets if b >= n), n)

    def _batch_shape(self, batch: list[int]) -> tuple[int, int, int]:
        """A static batch's padded prompt length, decode steps and KV pages per padded row."""
        req = self.sim.req
        longest = int(req.prompt[batch].max())
        length = self.bucketed(longest)
        steps = int(req.output[batch].max()) - 1
        return length, steps, int(seq_pages(length, steps, req.beams, self.pt))

    def batch_s(self, m: int, length: int, steps: int) -> tuple[float, float]:
        """(prefill, decode) seconds on the slice of a static batch run at `m` rows padded to
        `length` prompt tokens with `steps` decode steps, as the engine runs it (cached by shape)."""
        key = (m, length, steps)
        if key not in self._batch_s:
            self._batch_s[key] = static_batch_s(self.sim, m, length, steps, self.beams)
        return self._batch_s[key]

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
