"""ASTRA-sim configs: analytical network files (`.yml`) as podsim generations, system files
(`.json`) as the collective algorithms and compute roofline they set, and both written back for
a podsim step (`astra_configs`), so the same case can run in ASTRA-sim.

Network: per dimension `topology` (Ring, Switch, FullyConnected), `npus_count`, `bandwidth` in
GB/s per link per direction, `latency` in ns per link. podsim maps `[Ring]` to a ring of n chips,
`[Ring, Ring]` to an a x b 2-D torus and three Rings to a 3-D torus, each dimension with its own bandwidth and latency
(`Generation.ici_axis_bandwidth`), and `[Switch]` to one switched node (GPUs on an NVSwitch), so
a workload imported from ASTRA-sim runs on the network it was written for.

System: `all-reduce-implementation` (and all-gather, reduce-scatter, all-to-all) per dimension
become the algorithm of each collective the trace leaves to `auto` (one dimension: its
implementation; several: `torus`, axis by axis, where every one is `ring`, else the one they all
name); with `roofline-enabled`, `peak-perf` (TFLOP/s) and `local-mem-bw` (GB/s) become the chip's
peak and HBM bandwidth. What podsim's flow-level engine does not model (chunking, scheduling
policy, endpoint delay) is listed in `AstraSystem.unmodelled`, and said by the CLI.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from podsim import quantities as q
from podsim.errors import PodsimError
from podsim.files import read_json, read_yaml
from podsim.topology.generations import Generation, custom_generation, get_generation
from podsim.trace.kinds import normalise_algorithm
from podsim.trace.model import SLICE_AXES, Collective, StepTrace

MAX_NPUS = q.NPUS_PER_DIM.high  # per dimension: past the largest pod podsim models (tpu-v4: 4096 chips)


def _checked(path: Path, name: str, values: list, quantity: q.Quantity) -> list:
    """Each entry of one per-dimension list in range (one line naming the file and the field)."""
    try:
        return [quantity.check(v) for v in values]
    except PodsimError as exc:
        raise PodsimError(f"{path.name}: {name} {exc}") from None
# ASTRA-sim's implementation names per dimension (system/collective/*) -> podsim's algorithms
ASTRA_IMPLEMENTATIONS = {"ring": "ring", "direct": "direct", "halvingdoubling": "halving_doubling",
                         "oneRing": "ring", "oneDirect": "direct", "oneHalvingDoubling": "halving_doubling"}
SYSTEM_KINDS = {"all-reduce-implementation": "all_reduce", "all-gather-implementation": "all_gather",
                "reduce-scatter-implementation": "reduce_scatter", "all-to-all-implementation": "all_to_all"}
# keys ASTRA-sim's system layer reads that a flow-level model has no counterpart for
UNMODELLED = ("scheduling-policy", "endpoint-delay", "active-chunks-per-dimension", "preferred-dataset-splits",
              "collective-optimization", "boost-mode", "intra-dimension-scheduling", "inter-dimension-scheduling",
              "track-local-mem", "local-mem-trace-filename")


def _config(path: Path, reader, what: str, shape: str) -> dict:
    """An ASTRA-sim config file as a mapping (podsim.files reads it); one line if it is missing or not one."""
    cfg = reader(path, what)  # missing, a folder, a FIFO or a device: one line from podsim.files
    if not isinstance(cfg, dict):
        raise PodsimError(f"{path.name}: {shape}")
    return cfg


def network_generation(path: str | Path, system: AstraSystem | None = None) -> Generation:
    """A generation whose pod is the network of an ASTRA-sim analytical config file (and, with a
    system file's roofline, its chip's peak and memory bandwidth)."""
    path = Path(path)
    cfg = _config(path, read_yaml, "network config", "expected topology, npus_count, bandwidth and latency")
    missing = [k for k in ("topology", "npus_count", "bandwidth", "latency") if not isinstance(cfg.get(k), list)]
    if missing:
        raise PodsimError(f"{path.name}: field {missing[0]!r} missing or not a list (topology, npus_count, bandwidth, latency: one entry per dimension)")
    topo = [str(t) for t in cfg["topology"]]
    npus = [int(n) for n in _checked(path, "npus_count", cfg["npus_count"], q.NPUS_PER_DIM)]
    bw = [float(b) for b in _checked(path, "bandwidth", cfg["bandwidth"], q.LINK_GBYTES_PER_S)]
    lat = [float(x) for x in _checked(path, "latency", cfg["latency"], q.LINK_LATENCY_NS)]
    if not (len(topo) == len(npus) == len(bw) == len(lat)) or not topo:
        raise PodsimError(f"{path.name}: topology, npus_count, bandwidth and latency need one entry per dimension")
    note = f"ASTRA-sim network {path.name}"
    chip = _roofline(system)
    if topo == ["Switch"]:
        n = npus[0]
        return custom_generation("gpu-h100", f"astra:{path.stem}", note, pod_shape=(n,), host_shape=(n,),
                                 chips_per_host=n, nics_per_host=1, ici_link_bandwidth=bw[0],
                                 ici_hop_latency=lat[0] / 1000.0, **chip)
    if set(topo) == {"Ring"} and len(topo) <= 3:
        shape = (npus[0], 1) if len(npus) == 1 else tuple(npus)
        axis_bw = (bw[0], bw[0]) if len(bw) == 1 else tuple(bw)
        axis_lat = (lat[0], lat[0]) if len(lat) == 1 else tuple(lat)
        if len(shape) == 3:
            chip["dims"] = 3
        uniform = len(set(axis_bw)) == 1 and len(set(axis_lat)) == 1
        per_axis = {} if uniform else {"ici_axis_bandwidth": tuple(b * 1e9 for b in axis_bw),
                                       "ici_axis_latency": tuple(x * 1e-9 for x in axis_lat)}
        return custom_generation("tpu-v5e", f"astra:{path.stem}", note, pod_shape=shape, host_shape=shape,
                                 chips_per_host=math.prod(shape), nics_per_host=1, slice_shapes=(),
                                 ici_link_bandwidth=max(axis_bw), ici_hop_latency=max(axis_lat) / 1000.0,
                                 **per_axis, **chip)
    raise PodsimError(f"{path.name}: topology {topo} is not supported; podsim maps [Ring], [Ring, Ring], [Ring, Ring, Ring] and [Switch]")


@dataclass(frozen=True)
class AstraSystem:
    """An ASTRA-sim system file as podsim uses it: per collective kind, the implementation of
    each network dimension (podsim algorithm names); the roofline's peak and memory bandwidth
    (None without roofline-enabled); and the keys podsim's model has no counterpart for."""

    path: str
    implementations: dict[str, tuple[str, ...]]
    peak_tflops: float | None = None
    local_mem_gbps: float | None = None
    unmodelled: dict[str, object] = field(default_factory=dict)

    def check_dimensions(self, n: int) -> None:
        """Each implementation list names one entry per network dimension, as ASTRA-sim reads
        them: a list of another length is refused, not cut or padded."""
        for kind, impl in self.implementations.items():
            if len(impl) != n:
                raise PodsimError(f"{self.path}: {kind.replace('_', '-')}-implementation names {len(impl)} dimension(s); "
                                  f"the network has {n}: give one implementation per dimension")

    def algorithm(self, kind: str, dims: tuple[int, ...]) -> str | None:
        """The podsim algorithm for a `kind` collective over network dimensions `dims` (None:
        the file sets none for that kind)."""
        impl = self.implementations.get(kind)
        if not impl:
            return None
        if any(d >= len(impl) for d in dims):
            raise PodsimError(f"{self.path}: {kind.replace('_', '-')}-implementation names {len(impl)} dimension(s); "
                              f"the collective spans dimension {max(dims)}")
        chosen = {impl[d] for d in dims}
        if len(dims) > 1 and chosen == {"ring"}:
            return "torus"  # a ring per dimension, one after the other (podsim's torus)
        if len(chosen) > 1:
            raise PodsimError(f"{self.path}: a {kind} over dimensions {list(dims)} mixes implementations "
                              f"{sorted(chosen)}; podsim runs one algorithm per collective")
        return chosen.pop()


def read_system(path: str | Path) -> AstraSystem:
    """An ASTRA-sim system `.json`; one-line errors name the key and what is allowed."""
    path = Path(path)
    cfg = _config(path, read_json, "system config", "an ASTRA-sim system file is a JSON object")
    impls: dict[str, tuple[str, ...]] = {}
    for key, kind in SYSTEM_KINDS.items():
        if key not in cfg:
            continue
        value = cfg[key]
        if not isinstance(value, list) or not value:
            raise PodsimError(f"{path.name}: {key} is a list of implementations, one per network dimension")
        names = []
        for v in value:
            name = ASTRA_IMPLEMENTATIONS.get(str(v)) or ASTRA_IMPLEMENTATIONS.get(str(v).lower())
            if name is None:
                raise PodsimError(f"{path.name}: {key} {v!r} is not one podsim models; allowed: "
                                  f"{', '.join(ASTRA_IMPLEMENTATIONS)}")
            names.append(normalise_algorithm(name, field=key))
        impls[kind] = tuple(names)
    unmodelled = {k: cfg[k] for k in UNMODELLED if k in cfg}
    if any(n != "direct" for n in impls.get("all_to_all", ())):  # podsim has no ring all-to-all schedule
        unmodelled["all-to-all-implementation"] = cfg["all-to-all-implementation"]
        del impls["all_to_all"]  # its all-to-alls keep `auto` (the smallest closed form), said in the note
    peak = mem = None
    if int(cfg.get("roofline-enabled", 0) or 0):
        try:
            peak, mem = float(cfg["peak-perf"]), float(cfg["local-mem-bw"])
        except (KeyError, TypeError, ValueError):
            raise PodsimError(f"{path.name}: roofline-enabled needs peak-perf (TFLOP/s) and local-mem-bw (GB/s) as numbers") from None
        if not (math.isfinite(peak) and peak > 0 and math.isfinite(mem) and mem > 0):
            raise PodsimError(f"{path.name}: peak-perf {peak} and local-mem-bw {mem} must be finite numbers > 0")
        _checked(path, "peak-perf", [peak], q.FIGURE_RANGES["TFLOP/s"])
        _checked(path, "local-mem-bw", [mem], q.FIGURE_RANGES["GB/s"])
    return AstraSystem(path.name, impls, peak, mem, unmodelled)


def _roofline(system: AstraSystem | None) -> dict:
    if system is None or system.peak_tflops is None:
        return {}
    return {"peak_bf16_tflops_per_chip": system.peak_tflops, "hbm_bandwidth_per_chip": system.local_mem_gbps}


def apply_system(trace: StepTrace, system: AstraSystem, shape: tuple[int, ...]) -> StepTrace:
    """The trace with each collective it leaves to `auto` given the system file's implementation
    for its kind and dimensions (slice axis x, y, z = network dimension 0, 1, 2; an axis of one
    chip, as a 1-D network's second axis, is no dimension)."""
    ops = []
    for op in trace.ops:
        if isinstance(op, Collective) and op.algorithm == "auto":
            dims = tuple(sorted({SLICE_AXES.index(g.axis) for g in op.group
                                 if g.axis in SLICE_AXES[: len(shape)] and shape[SLICE_AXES.index(g.axis)] > 1}))
            alg = system.algorithm(op.kind, dims) if dims else None
            if alg is not None:
                op = replace(op, algorithm=alg)
        ops.append(op)
    return replace(trace, ops=tuple(ops), meta={**trace.meta, "astra_system": system.path})


# Writing a podsim case as ASTRA-sim inputs -----------------------------------------------------
_PODSIM_TO_ASTRA = {"ring": "ring", "bidir_ring": "ring", "torus": "ring", "torus_all_links": "ring",
                    "direct": "direct", "halving_doubling": "halvingDoubling"}


def astra_configs(generation: str | Generation, shape: tuple[int, ...], algorithm: str = "ring") -> tuple[dict, dict]:
    """The network `.yml` and system `.json` contents for a podsim slice: a Ring per slice axis
    (its chips, the generation's ICI bandwidth per link and direction in GB/s and hop latency in
    ns, per axis where the generation has them), `algorithm` on every dimension, and the chip's
    bf16 peak and HBM bandwidth as the roofline."""
    gen = get_generation(generation)
    if gen.wraparound == "switched":
        raise PodsimError(f"{gen.id}: a switched GPU node has no ring dimensions to write; podsim writes ASTRA-sim rings for TPU slices")
    dims = list(shape)
    while len(dims) > 1 and dims[-1] == 1:  # a trailing axis of one chip is no dimension (2x2x1: a 2x2 network)
        dims.pop()
    if dims == [1]:
        raise PodsimError("a slice of one chip has no network for ASTRA-sim; export a slice of 2 chips or more")
    if 1 in dims:
        raise PodsimError(f"slice {'x'.join(map(str, shape))}: an axis of one chip between others has no ASTRA-sim "
                          "network dimension (each has 2 NPUs or more); give the axes of one chip last, e.g. 2x2x1")
    bw = list(gen.ici_axis_bandwidth) if gen.ici_axis_bandwidth else [gen.link_bytes_per_s] * len(dims)
    lat = list(gen.ici_axis_latency) if gen.ici_axis_latency else [gen.hop_latency_s] * len(dims)
    network = {"topology": ["Ring"] * len(dims), "npus_count": dims,
               "bandwidth": [b / 1e9 for b in bw[: len(dims)]], "latency": [x * 1e9 for x in lat[: len(dims)]]}
    impl = _PODSIM_TO_ASTRA.get(algorithm)
    if impl is None:
        raise PodsimError(f"algorithm {algorithm!r} has no ASTRA-sim implementation; use one of {', '.join(_PODSIM_TO_ASTRA)}")
    per_dim = [impl] * len(dims)
    system = {key: per_dim for key in SYSTEM_KINDS}
    system.update({"roofline-enabled": 1, "peak-perf": gen.peak_flops_per_s / 1e12, "local-mem-bw": gen.hbm_bytes_per_s / 1e9})
    return network, system


def network_yaml(network: dict) -> str:
    """The network config as ASTRA-sim's files write it (YAML flow lists)."""
    return "".join(f"{k}: [ {', '.join(str(v) if not isinstance(v, float) else repr(v) for v in vals)} ]\n"
                   for k, vals in network.items())


def system_json(system: dict) -> str:
    return json.dumps(system, indent=2) + "\n"
