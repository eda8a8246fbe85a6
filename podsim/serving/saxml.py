"""Saxml's batcher and front end as the MLPerf submissions ran them (google/saxml
`PerMethodBatcher`, `RpcQueue.take_batch`): batches pipelined two deep past the batcher, the
device running them first in, first out; at most `max_batch` x `max_live_batches` requests alive
per replica, the rest turned away and retried by the Sax client (`podsim.serving.saxclient`);
and the compiled batch's fit in HBM in praxis's two phases. `SaxmlBatcher` is mixed into the
replica, `SaxmlFrontEnd` into the simulation.
"""

from __future__ import annotations

import math

import simpy

from podsim.errors import PodsimError
from podsim.serving.kvcache import seq_pages


class SaxmlBatcher:
    """A replica's batches under Saxml's batcher (batcher `saxml`)."""

    sim: object  # the ServingSim it belongs to (podsim.serving.simulate; not imported: no import circle)

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


class SaxmlFrontEnd:
    """The simulation's side of Saxml: the compiled batch's fit, requests turned away and the Sax
    client's retries."""

    pool: list  # the simulation's prefill (or only) replicas

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
