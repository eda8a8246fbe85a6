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

A replica's steps are `podsim.serving.replica` (continuous batching), `podsim.serving.static`
(static batches) and `podsim.serving.saxml` (Saxml's batcher and front end). A request whose
pages exceed the whole cache is rejected on arrival.

Times are recorded per request: arrival, first token (the end of the step that finishes its
prompt), last token (the end of the step that generates it; a static batch returns every result
when the batch ends). No I/O; every draw comes from the config's seed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace

import simpy

from podsim.errors import PodsimError
from podsim.serving.engines import EngineModel, resolve_engine
from podsim.serving.kvcache import KvBudget, kv_budget, static_batch_shape, step_workspace_shape
from podsim.serving.records import RequestLog
from podsim.serving.replica import Replica
from podsim.serving.saxclient import SaxRetries
from podsim.serving.saxml import SaxmlFrontEnd
from podsim.serving.spec import ServingConfig
from podsim.serving.steptime import StepTimer
from podsim.serving.transfer import KvTransfer
from podsim.serving.workload import Requests, draw_requests
from podsim.topology import DcnSpec, Generation, get_generation, parse_shape

ProgressFn = Callable[[float, float], None]


class ServingSim(SaxmlFrontEnd):
    """One serving simulation; `run()` once. Use `simulate_serving`."""

    def __init__(self, config: ServingConfig, requests: Requests | None = None, *, timer: StepTimer | None = None,
                 on_progress: ProgressFn | None = None, audit: bool = False, dcn: DcnSpec | None = None,
                 generation: Generation | None = None, run_ahead: bool = True, retry_skip: bool = True,
                 engine: EngineModel | None = None):
        self.config = config
        self.generation = generation if generation is not None else get_generation(config.generation)
        if self.generation.id != config.generation:
            raise PodsimError(f"generation {self.generation.id!r} given for a config of {config.generation!r}")
        pol = config.batch
        # the engine's parameters (podsim.serving.engines); `engine`: a what-if set in their place
        self.engine = engine if engine is not None else resolve_engine(config.engine, self.generation, pol.kind, pol.batcher)
        if self.engine.kv_read_block_pages.value and config.requests.beams > 1:
            raise PodsimError(f"engine {self.engine.name} reads each sequence's KV cache in blocks of pages; beam search "
                              f"(beams {config.requests.beams}) is not modelled with it: use beams 1 or another engine")
        self.shape = parse_shape(config.slice)
        chips = math.prod(self.shape)
        shard = config.model.shard(chips, self.engine.kv_read_fraction.value)
        # a decode kernel without GQA sharing reads each KV head once per query head of its group
        self.shard = shard if self.engine.gqa_kv_sharing else replace(shard, kv_head_reads=shard.heads / shard.kv_heads)
        self.timer = timer or StepTimer(self.shard, self.generation, self.shape, routing=config.routing, engine=self.engine)
        beams = config.requests.beams
        max_tokens, max_seqs = step_workspace_shape(pol, beams, self.shard.cfg.seq_len)  # the largest step, padded
        self.prefill_workspace_bytes: float | None = None
        logits = 0.0  # a dense prefill's live logits beside the whole cache (not Saxml's: its fprop sits beside the prompts')
        if pol.kind == "static" and self.engine.static_prefill == "whole":
            # a Saxml batch is one praxis program: the prompts' fprop (its activations beside the
            # prompts' KV only), then the decode loop, whose output KV buffers are made after the
            # fprop (see _check_saxml_cache): the cache sits beside a decode step's workspace
            # praxis's dense prefill also holds a layer's logits and probabilities
            rows, longest = static_batch_shape(pol, self.shard.cfg.seq_len)
            dense = self.shard.dense_logits_live_bytes(rows * longest * longest) if self.engine.logits_materialised else 0.0
            self.prefill_workspace_bytes = self.shard.workspace_bytes(rows * longest, rows) + dense
            max_tokens = max_seqs = rows * beams
            if pol.batcher != "saxml":  # no two-phase check: the whole prefill's workspace beside the cache
                max_tokens, logits = rows * longest, dense
        self.budget: KvBudget = kv_budget(self.shard, self.generation, pol.page_tokens, max_tokens, max_seqs, config.hbm_reserve,
                                          logits)
        self.req = requests if requests is not None else draw_requests(config.requests, config.duration, config.seed)
        if pol.kind == "static" and pol.buckets and len(self.req) and int(self.req.prompt.max()) > pol.buckets[-1]:
            raise PodsimError(f"a prompt of {int(self.req.prompt.max())} tokens is longer than the largest bucket "
                              f"{pol.buckets[-1]}: a static batch's engine truncates it (not modelled); raise the bucket "
                              "or cap the prompts (requests.prompt.high)")
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
