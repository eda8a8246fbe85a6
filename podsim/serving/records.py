"""What a serving simulation records and plans: per request (`RequestLog`), per step of a
replica (`StepLog`), and the state a continuous-batching replica keeps of a prompt being
prefilled (`Prefill`), a decoding sequence (`DecodingSeq`) and the step it plans (`StepPlan`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


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
class Prefill:
    """An admitted request whose prompt (or recompute) is being prefilled."""

    rid: int
    tokens: int  # tokens to prefill: the prompt, or prompt + tokens so far after a preemption
    generated: int  # tokens it had generated before (0 unless recomputing)
    pages: int
    done: int = 0


@dataclass
class DecodingSeq:
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
class StepPlan:
    dt: float
    decode: bool  # the decoding sequences run this step
    chunks: list[tuple[Prefill, int]]
    tokens: int
    start: float
    kv_tokens: float  # tokens in the KV cache while the step runs

