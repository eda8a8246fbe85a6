"""The spellings of collective kinds and algorithms, normalised once.

Users write a collective the way their tool does: `all-reduce` (prose, XLA HLO), `allreduce`
(NCCL's ncclAllReduce, nccl-tests' all_reduce_perf), `ALLREDUCE` (ASTRA-sim workloads),
`ALL_REDUCE` (Chakra's CollectiveCommType), `AllReduce` / `MPI_Allreduce` (MPI). A name is
compared by its letters and digits only, case ignored, with a leading `nccl` / `mpi_` dropped, so
all of those are `all_reduce`. XLA's `collective-permute` is podsim's `send_recv`. Algorithms
likewise: `bidirectional-ring`, `BidirRing` -> `bidir_ring`; ASTRA-sim's `halvingDoubling` ->
`halving_doubling`.

Every place a kind or algorithm is named (CLI options, podsim trace files, scenarios through
their traces, the ASTRA-sim and Chakra importers) calls `normalise_kind` / `normalise_algorithm`.
"""

from __future__ import annotations

import re

from podsim.errors import PodsimError

COLLECTIVE_KINDS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast", "reduce")
SEND_RECV = "send_recv"
ALGORITHMS = ("ring", "bidir_ring", "torus", "torus_all_links", "halving_doubling", "direct", "hierarchical")

# Extra names beyond the canonical name with its underscores removed (the key of each kind).
_KIND_ALIASES = {
    "bcast": "broadcast",  # MPI_Bcast
    "alltoallv": "all_to_all",  # the same traffic pattern with per-peer sizes
    "reducescatterblock": "reduce_scatter",  # Chakra REDUCE_SCATTER_BLOCK, MPI_Reduce_scatter_block
    "collectivepermute": SEND_RECV,  # XLA HLO collective-permute
    "permute": SEND_RECV,
    "ppermute": SEND_RECV,  # jax.lax.ppermute
    "sendrecv": SEND_RECV,
    "p2p": SEND_RECV,
}
_ALGORITHM_ALIASES = {
    "bidirectionalring": "bidir_ring",
    "bidiring": "bidir_ring",
    "recursivehalvingdoubling": "halving_doubling",
    "rhd": "halving_doubling",
    "toruslinks": "torus_all_links",
    "alllinks": "torus_all_links",
    "fullyconnected": "direct",  # ASTRA-sim's direct algorithm on a FullyConnected dimension
    "hier": "hierarchical",
}


def _key(text: str) -> str:
    key = re.sub(r"[^0-9a-z]", "", text.lower())
    for prefix in ("nccl", "mpi"):
        if key.startswith(prefix) and len(key) > len(prefix):
            key = key[len(prefix):]
    return key


_KINDS = {**{k.replace("_", ""): k for k in (*COLLECTIVE_KINDS, SEND_RECV)}, **_KIND_ALIASES}
_ALGS = {**{a.replace("_", ""): a for a in ALGORITHMS}, **_ALGORITHM_ALIASES}


def normalise_kind(value: object, *, field: str = "kind", send_recv: bool = True) -> str:
    """Any accepted spelling of a collective kind -> podsim's name (`all_reduce`, ...); a
    one-line error names `field`, the value and the kinds allowed."""
    allowed = (*COLLECTIVE_KINDS, SEND_RECV) if send_recv else COLLECTIVE_KINDS
    kind = _KINDS.get(_key(str(value))) if isinstance(value, str) else None
    if kind is None or kind not in allowed:
        raise PodsimError(f"{field} {value!r} is not a known collective; use one of: {', '.join(allowed)} "
                          "(any case, with -, _ or none: all-reduce, allreduce, ALLREDUCE)")
    return kind


def normalise_algorithm(value: object, *, field: str = "algorithm", auto: bool = True) -> str:
    """Any accepted spelling of a collective algorithm (or `auto`) -> podsim's name."""
    if isinstance(value, str) and auto and _key(value) == "auto":
        return "auto"
    alg = _ALGS.get(_key(value)) if isinstance(value, str) else None
    if alg is None:
        allowed = ("auto", *ALGORITHMS) if auto else ALGORITHMS
        raise PodsimError(f"{field} {value!r} is not a known algorithm; use one of: {', '.join(allowed)}")
    return alg
