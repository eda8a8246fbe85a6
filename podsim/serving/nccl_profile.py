"""Measured NCCL all-reduce times on one 8-GPU H100 node, by message size: what a serving step's
tensor-parallel all-reduces cost on gpu-h100 (sources cl.1-cl.3).

podsim's flow engine on gpu-h100's NVLink (450 GB/s a direction) plus NCCL's time per collective
(`collective_latency`, 27 us from cl.1) matches the measured all-reduce at a few kB, but from 16 MiB up
(4 MiB on 8 GPUs) it is 7-27% faster than measured (at 64 MiB: bus bandwidth 403 against 365
GB/s on 8, 396 against 317 on 4, 373 against 274 on 2). A decode step of a large batch all-reduces
4-40 MB twice a layer, a prefill chunk of 8-16k tokens 130-270 MB, so a serving step on H100s
takes its all-reduces from the measured curve: vidur's profile
(`microsoft/vidur@7d47513363ec447a741ac5e47241580b47724fbf:data/profiling/network/h100_dgx/all_reduce.csv`,
rank 0 of 2, 4 and 8 GPUs, fp16, 2 kB to 64 MiB; the kernel time of NCCL via torch.distributed,
median of 11 launches, CUDA graphs off). An independent run is 12-17% slower than the curve
(torch.distributed NCCL on 8 H100s: 4 MB 59 us, 8 MB 91 us, 16 MB 136 us, ByteDance-Seed/Triton-distributed
issue 57, 2025-07-14; tested).

The stored points are the medians (of size and of time) of the profile's sizes in each half-octave
band (`benchmarks/serving_decompose.py --derive CSV` recomputes them from a copy of the file).
Below 1 MiB the profile is noisy (the same size measured 7 us and 40 us on 2 GPUs), so the curve
is the band medians' monotone fit (pool-adjacent-violators: a collective does not finish sooner
with more bytes), linear in bytes between points, the smallest point's time below it. Above the
largest size (64 MiB) the largest size's bus bandwidth holds (time in proportion to bytes): NCCL's
bandwidth usually still rises past 64 MiB, so this may be slow there (an assumption, stated).
"""

from __future__ import annotations

import bisect
from functools import cache

from podsim.topology import Generation, get_generation

SOURCE = ("cl.1-cl.3: microsoft/vidur@7d47513363ec447a741ac5e47241580b47724fbf:"
          "data/profiling/network/h100_dgx/all_reduce.csv")

# GPUs in the group -> (bytes, microseconds): each half-octave band's median size and median time
H100_DGX_ALL_REDUCE_US: dict[int, tuple[tuple[int, float], ...]] = {
    2: ((2048, 7.0), (10240, 7.0), (18432, 11.0), (26624, 7.0), (38912, 36.5), (55296, 36.0), (79872, 40.0),
        (112640, 26.5), (157696, 11.0), (223232, 28.0), (317440, 39.0), (448512, 41.5), (632832, 39.0), (894976, 42.0),
        (1261568, 38.5), (1785856, 40.5), (2523136, 42.0), (3571712, 43.0), (5062656, 42.5), (7159808, 44.0),
        (10125312, 51.0), (14319616, 66.0), (20185088, 88.0), (28639232, 118.0), (40501248, 158.0), (57278464, 215.0),
        (67108864, 245.0)),
    4: ((2048, 38.0), (10240, 38.0), (18432, 38.0), (26624, 40.0), (38912, 39.0), (55296, 39.5), (79872, 39.5),
        (112640, 41.0), (157696, 41.0), (223232, 41.0), (317440, 42.0), (448512, 44.0), (632832, 44.0), (894976, 42.0),
        (1261568, 32.0), (1785856, 33.0), (2523136, 39.0), (3571712, 44.0), (5062656, 51.0), (7159808, 52.0),
        (10125312, 69.0), (14319616, 84.0), (20185088, 107.0), (28639232, 145.5), (40501248, 201.0), (57278464, 274.0),
        (67108864, 318.0)),
    8: ((2048, 37.0), (10240, 23.0), (18432, 29.0), (26624, 36.0), (38912, 34.0), (55296, 23.0), (79872, 28.0),
        (112640, 24.0), (157696, 35.0), (223232, 30.0), (317440, 34.5), (448512, 36.0), (632832, 31.0), (894976, 32.0),
        (1261568, 34.0), (1785856, 36.5), (2523136, 45.0), (3571712, 47.0), (5062656, 57.0), (7159808, 70.0),
        (10125312, 89.0), (14319616, 109.0), (20185088, 133.0), (28639232, 173.0), (40501248, 228.0), (57278464, 303.0),
        (67108864, 322.0)),
}
PROFILES: dict[str, dict[int, tuple[tuple[int, float], ...]]] = {"gpu-h100": H100_DGX_ALL_REDUCE_US}
"""Generation id -> its measured all-reduce profile (group size -> points)."""


def monotone(times: list[float]) -> list[float]:
    """The non-decreasing sequence nearest `times` in least squares (pool-adjacent-violators)."""
    blocks: list[list[float]] = []  # [sum, count]
    for t in times:
        blocks.append([t, 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            s, c = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += c
    out: list[float] = []
    for s, c in blocks:
        out += [s / c] * int(c)
    return out


@cache
def _curve(generation_id: str, gpus: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    points = PROFILES[generation_id][gpus]
    return tuple(float(b) for b, _ in points), tuple(t * 1e-6 for t in monotone([t for _, t in points]))


def all_reduce_s(generation_id: str, gpus: int, nbytes: float) -> float:
    """The measured curve's time of an all-reduce of `nbytes` per GPU over `gpus` GPUs."""
    sizes, times = _curve(generation_id, gpus)
    if nbytes <= sizes[0]:
        return times[0]
    if nbytes >= sizes[-1]:
        return times[-1] * nbytes / sizes[-1]
    i = bisect.bisect_left(sizes, nbytes)
    lo, hi = sizes[i - 1], sizes[i]
    return times[i - 1] + (times[i] - times[i - 1]) * (nbytes - lo) / (hi - lo)


def profile_for(generation: Generation, kind: str, gpus: int) -> bool:
    """Whether a collective of `kind` over `gpus` GPUs of `generation` is costed from a measured
    profile: an all-reduce, a group size the profile measured, and the generation as published
    (a scenario that overrides its figures is costed by the engine on them, not by a profile
    measured on other ones)."""
    if kind != "all_reduce" or gpus not in PROFILES.get(generation.id, {}):
        return False
    return generation == get_generation(generation.id)


__all__ = ["H100_DGX_ALL_REDUCE_US", "PROFILES", "SOURCE", "all_reduce_s", "monotone", "profile_for"]
