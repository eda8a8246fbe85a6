"""ASTRA-sim analytical network configs (`.yml`) as podsim generations.

ASTRA-sim describes a network per dimension: `topology` (Ring, Switch, FullyConnected),
`npus_count`, `bandwidth` in GB/s per link per direction, `latency` in ns per link. podsim
maps `[Ring]` to a ring of n chips, `[Ring, Ring]` to an a x b 2-D torus and `[Switch]` to one
switched node (GPUs on an NVSwitch), keeping the link bandwidth and latency, so a workload
imported from ASTRA-sim runs on the network it was written for.
"""

from __future__ import annotations

from pathlib import Path

from podsim import quantities as q
from podsim.errors import PodsimError
from podsim.files import read_yaml
from podsim.topology.generations import Generation, custom_generation

MAX_NPUS = q.NPUS_PER_DIM.high  # per dimension: past the largest pod podsim models (tpu-v4: 4096 chips)


def _checked(path: Path, name: str, values: list, quantity: q.Quantity) -> list:
    """Each entry of one per-dimension list in range (one line naming the file and the field)."""
    try:
        return [quantity.check(v) for v in values]
    except PodsimError as exc:
        raise PodsimError(f"{path.name}: {name} {exc}") from None


def network_generation(path: str | Path) -> Generation:
    """A generation whose pod is the network of an ASTRA-sim analytical config file."""
    path = Path(path)
    cfg = read_yaml(path, "network config")
    if not isinstance(cfg, dict):
        raise PodsimError(f"{path.name}: expected topology, npus_count, bandwidth and latency")
    missing = [k for k in ("topology", "npus_count", "bandwidth", "latency") if not isinstance(cfg.get(k), list)]
    if missing:
        raise PodsimError(f"{path.name}: field {missing[0]!r} missing or not a list (topology, npus_count, bandwidth, latency: one entry per dimension)")
    topo = [str(t) for t in cfg["topology"]]
    npus = [int(n) for n in _checked(path, "npus_count", cfg["npus_count"], q.NPUS_PER_DIM)]
    bw = [float(b) for b in _checked(path, "bandwidth", cfg["bandwidth"], q.LINK_GBYTES_PER_S)]
    lat = [float(x) for x in _checked(path, "latency", cfg["latency"], q.LINK_LATENCY_NS)]
    if not (len(topo) == len(npus) == len(bw) == len(lat)) or not topo:
        raise PodsimError(f"{path.name}: topology, npus_count, bandwidth and latency need one entry per dimension")
    if len(set(bw)) != 1 or len(set(lat)) != 1:
        raise PodsimError(f"{path.name}: podsim needs the same bandwidth and latency on every dimension, got {bw} GB/s, {lat} ns")
    note = f"ASTRA-sim network {path.name}"
    common = {"ici_link_bandwidth": bw[0], "ici_hop_latency": lat[0] / 1000.0}
    if topo == ["Switch"]:
        n = npus[0]
        return custom_generation("gpu-h100", f"astra:{path.stem}", note, pod_shape=(n,), host_shape=(n,),
                                 chips_per_host=n, nics_per_host=1, **common)
    if set(topo) == {"Ring"} and len(topo) <= 2:
        shape = (npus[0], 1) if len(npus) == 1 else tuple(npus)
        return custom_generation("tpu-v5e", f"astra:{path.stem}", note, pod_shape=shape, host_shape=shape,
                                 chips_per_host=shape[0] * shape[1], nics_per_host=1, slice_shapes=(), **common)
    raise PodsimError(f"{path.name}: topology {topo} is not supported; podsim maps [Ring], [Ring, Ring] and [Switch]")
