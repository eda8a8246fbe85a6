"""Static (request-level) batches on a replica: formed when the slice is idle (batcher `idle`),
prefilled together with prompts padded to a bucket, decoded until every request has finished,
every result returned with the batch; the batch's time on the slice from the step timer.
Mixed into `podsim.serving.replica.Replica`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from podsim.serving.kvcache import seq_pages

if TYPE_CHECKING:
    from podsim.serving.simulate import ServingSim


PRAXIS_COSTS = frozenset({"dense_prefill", "logits", "static_buffers", "beam_reorder"})
"""The costs of a Saxml batch praxis's code implies (`Replica._praxis_batch_s`), all charged."""
PRAXIS_WHAT_IFS = frozenset({"prefill_collectives_hidden", "int8_materialised"})
"""Bounds no row uses: the prefill's tensor collectives all hidden under its matmuls (the
classes' windowed-einsum flags at their best), and int8 weights materialised as bf16 at every
decode step (written and read: 4 bytes more per weight)."""


class StaticBatches:
    """A replica's static batches (see the module docstring)."""

    sim: ServingSim

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
