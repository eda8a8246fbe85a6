"""The per-op compute model: pure functions from an op's shape to its time on one chip.

- A matmul [m, k] x [k, n] (`count` of them, e.g. one per attention head) is 2·m·k·n FLOPs,
  but the MXU is a weight-stationary mxu_dim x mxu_dim systolic array (128x128 on v2-v5p,
  256x256 on v6e; hardware.md v2.5, v3.3, v4.3, v6e.3): the weight block K x N is padded to
  whole tiles, so the chip spends 2·m·ceil(k/T)·T·ceil(n/T)·T FLOPs of MXU time. It runs at
  the precision's peak x its achievable fraction (podsim.perf.chips), or at its operand traffic over HBM, whichever is
  slower (a roofline per matmul).
- Memory-bound work (norms, elementwise, softmax, optimiser update, embedding lookups) takes
  its HBM bytes at HBM bandwidth x HBM_FRACTION.
- A compute op is a sequence of both on one core: its time is the sum.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from podsim.errors import PodsimError
from podsim.perf.chips import ChipCompute


@dataclass(frozen=True)
class Matmul:
    """`count` matmuls [m, k] x [k, n]; `hbm_bytes`: their operand traffic (0: counted by the op);
    `precision`: what it runs at where that is not the program's ('' : the program's, e.g. an
    attention core left in bf16 by a program that quantizes its weight matmuls); `backward_precision`:
    its two backward matmuls' ('' : as the forward's)."""

    m: float
    k: float
    n: float
    count: float = 1.0
    hbm_bytes: float = 0.0
    precision: str = ""
    backward_precision: str = ""

    @property
    def flops(self) -> float:
        return 2.0 * self.count * self.m * self.k * self.n

    def as_tuple(self) -> tuple[float, float, float, float, float]:
        return (self.count, self.m, self.k, self.n, self.hbm_bytes)

    @classmethod
    def of(cls, t: Sequence[float]) -> Matmul:
        """From the trace's tuple (count, m, k, n[, hbm_bytes])."""
        if len(t) not in (4, 5) or any(float(x) < 0 for x in t):
            raise PodsimError(f"matmul {list(t)} is not [count, m, k, n, hbm_bytes] with non-negative numbers")
        return cls(float(t[1]), float(t[2]), float(t[3]), float(t[0]), float(t[4]) if len(t) == 5 else 0.0)


def padded_flops(mm: Matmul, tile: int) -> float:
    """MXU FLOPs the matmul occupies: K and N padded to whole tiles."""
    if tile <= 1:
        return mm.flops
    return 2.0 * mm.count * mm.m * math.ceil(mm.k / tile) * tile * math.ceil(mm.n / tile) * tile


def matmul_time_s(mm: Matmul, chip: ChipCompute, precision: str = "bf16") -> float:
    """The slower of its padded FLOPs at the precision's achievable rate and its operand traffic."""
    t_mxu = padded_flops(mm, chip.mxu_dim) / (chip.peak_for(precision, "matmul") * chip.fraction_for(precision))
    return max(t_mxu, memory_time_s(mm.hbm_bytes, chip))


def memory_time_s(hbm_bytes: float, chip: ChipCompute) -> float:
    return hbm_bytes / (chip.hbm_bytes_per_s * chip.hbm_fraction) if hbm_bytes > 0 else 0.0


def compute_time_s(chip: ChipCompute, flops: float, hbm_bytes: float, matmuls: Sequence[Sequence[float]] = (),
                   precision: str = "bf16") -> float:
    """A compute op's time: its matmuls (padded, at `precision`) then its memory-bound bytes
    (the op's HBM bytes less its matmuls' operand bytes). An op without matmul shapes (an
    imported trace) is a roofline: FLOPs at the bf16 achievable rate vs bytes at HBM rate."""
    if not matmuls:
        t_flops = flops / (chip.peak_for(precision) * chip.fraction_for(precision)) if flops else 0.0
        return max(t_flops, memory_time_s(hbm_bytes, chip))
    mms = [Matmul.of(t) for t in matmuls]
    t = sum(matmul_time_s(mm, chip, precision) for mm in mms)
    rest = hbm_bytes - sum(mm.hbm_bytes for mm in mms)
    return t + memory_time_s(max(rest, 0.0), chip)


def backward_matmuls(mm: Matmul) -> tuple[Matmul, Matmul]:
    """The two matmuls of a matmul's backward: dX = dY·Wᵀ [m, n]x[n, k] and dW = Xᵀ·dY
    [k, m]x[m, n]; each moves the same operand bytes as the forward and runs at the forward's
    `backward_precision` (else its precision)."""
    p = mm.backward_precision or mm.precision
    return (Matmul(mm.m, mm.n, mm.k, mm.count, mm.hbm_bytes, p, p), Matmul(mm.k, mm.m, mm.n, mm.count, mm.hbm_bytes, p, p))


def op_time_s(op, generation, chip: ChipCompute | None, efficiency: float | None = None) -> float:
    """A trace's compute op as the engine charges it: its fixed duration; else its own efficiency
    or the flat override `efficiency` (a roofline at that fraction of `generation`'s peak); else
    the per-op model on `chip` (chip_compute(generation))."""
    if op.duration_s is not None or op.efficiency is not None or efficiency is not None:
        return op.duration_on(generation.peak_flops_per_s, generation.hbm_bytes_per_s,
                              efficiency if efficiency is not None else 1.0)
    return compute_time_s(chip, op.flops, op.hbm_bytes, op.matmuls, op.precision)


def compute_timing(efficiency: float | None) -> str:
    """How compute was timed, for people: the per-op model (None) or a flat fraction of peak."""
    return "compute by the per-op model" if efficiency is None else f"compute at {100 * efficiency:g}% of peak"


def op_timer(generation, chip: ChipCompute | None, efficiency: float | None = None) -> Callable[[object], float]:
    """`op_time_s` for every compute op of a step, each distinct op shape timed once (a model's
    layers repeat a handful of them)."""
    durations: dict[tuple, float] = {}

    def duration(op) -> float:
        key = (op.duration_s, op.efficiency, op.flops, op.hbm_bytes, op.matmuls, op.precision)
        if key not in durations:
            durations[key] = op_time_s(op, generation, chip, efficiency)
        return durations[key]

    return duration
