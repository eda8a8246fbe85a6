"""Import Chakra execution traces (mlcommons/chakra): `.et` files and Chakra's JSON form.

An `.et` file is a stream of protobuf records, each preceded by its length as a varint: one
GlobalMetadata, then Nodes (schema: chakra_schema/chakra_et.proto, wire-compatible with
Chakra's et_def.proto), or, in the 2023 vintages, Node records of an older schema from the first
byte (chakra_legacy.proto: plain fields; chakra_legacy_attr.proto: typed attributes);
chakra_wire.py tells them apart by the bytes and maps their nodes onto the current fields (their
run times are ASTRA-sim ticks: ns at 1 GHz, `clock_hz`).
There is one file per rank, named `<prefix>.<rank>.et` by Chakra and
ASTRA-sim. podsim traces are SPMD, so the ranks' programs must match (same node types, names,
sizes and dependency structure; node ids may differ); the first rank's program becomes the
trace, or pick one rank with `rank=`.

Nodes read:
- COMP_NODE: `duration_micros` -> duration_s; attributes `num_ops` -> flops, `tensor_size` ->
  hbm_bytes. Host-side nodes (`is_cpu_op` true) are left out by default (their dependencies
  are kept, bridged through them): the trace is the accelerator's program.
- COMM_COLL_NODE: `comm_type` (CollectiveCommType) and `comm_size` (bytes, taken in the
  nccl-tests convention, as ASTRA-sim does). The group is the slice axes in `involved_dim`
  (one bool per network dimension, ASTRA-sim's attribute) or else `group` (default: every
  axis). BARRIER becomes a zero-byte all-reduce.
- COMM_SEND_NODE / COMM_RECV_NODE: `comm_src`, `comm_dst`, `comm_size`. A send to the rank
  `k` places ahead is a SendRecv with shift k along the group's single axis (SPMD: every rank
  sends alike); a receive joins the send with the same shift on this rank, or else becomes the
  SendRecv its peer's send makes.
- MEM_LOAD_NODE / MEM_STORE_NODE: Compute with hbm_bytes = `tensor_size`.
- METADATA, STORAGE, BATCH and CHECKPOINT nodes are left out (bridged) and counted in meta.

Files written by podsim's exporter (chakra_export.py) also carry `podsim_*` attributes (op id,
layer, group, algorithm, exact sizes and times, shift); they take precedence, so a round trip
gives the same trace. `load_trace` passes `RankFile`s, read one at a time during the SPMD check.

Errors name the file, the node (or the byte offset of a bad record) and the problem.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError

from podsim import quantities as q
from podsim.bounds import budget, check_budget
from podsim.errors import PodsimError
from podsim.files import MAX_BINARY_BYTES, read_bytes
from podsim.trace.astra import ASTRA_CLOCK_HZ
from podsim.trace.chakra_export import KIND_COMM, rank_coords
from podsim.trace.chakra_schema import chakra_et_pb2 as pb
from podsim.trace.chakra_wire import (
    CURRENT,
    LEGACY,
    LEGACY_ATTR,
    attr_to_current,
    detect_vintage,
    legacy_to_current,
    split_records,
)
from podsim.trace.kinds import normalise_algorithm, normalise_kind
from podsim.trace.model import (
    SLICE_AXES,
    AxisGroup,
    Collective,
    Compute,
    Op,
    SendRecv,
    StepTrace,
    parse_group,
)

COMM_KINDS = {
    pb.ALL_REDUCE: "all_reduce",
    pb.REDUCE: "reduce",
    pb.ALL_GATHER: "all_gather",
    pb.BROADCAST: "broadcast",
    pb.ALL_TO_ALL: "all_to_all",
    pb.REDUCE_SCATTER: "reduce_scatter",
    pb.REDUCE_SCATTER_BLOCK: "reduce_scatter",
    pb.BARRIER: "all_reduce",
}
SKIPPED_TYPES = (pb.METADATA_NODE, pb.STORAGE_NODE, pb.BATCH_NODE, pb.CHECKPOINT_NODE)
# Records a rank file may hold per op of the ops budget: host (CPU) and metadata nodes are left
# out of the trace, and PyTorch execution traces hold several per accelerator op.
MAX_NODES_PER_OP = 10


@dataclass
class RankTrace:
    """The decoded nodes of one rank's file, with where each came from (for errors)."""

    path: Path
    rank: int
    version: str
    nodes: list[Any]  # pb.Node
    where: list[str] = field(default_factory=list)  # 'byte offset N' / 'node #i'
    vintage: str = CURRENT
    durations_s: dict[int, float] | None = None  # node id -> s (2023 files); else duration_micros
    title: str = ""  # the trace name podsim's exports keep in GlobalMetadata (`podsim_trace`)
    podsim_meta: dict = field(default_factory=dict)  # and its meta (`podsim_meta`, JSON), with `podsim_generation`


def duration_s(rt: RankTrace, node: Any) -> float | None:
    """A node's run time in seconds, None when it gives none (then FLOPs and bytes decide)."""
    if rt.durations_s is not None:
        return rt.durations_s.get(node.id)
    return node.duration_micros / 1e6 if node.duration_micros else None


def read_et(path: str | Path, rank: int = 0, clock_hz: float = ASTRA_CLOCK_HZ) -> RankTrace:
    """Decode an `.et` file of any vintage (chakra_wire.py): GlobalMetadata then Nodes, or 2023
    Node records from the first byte (their run times are ticks at `clock_hz`)."""
    path = Path(path)
    data = read_bytes(path, "Chakra trace", MAX_BINARY_BYTES)
    if not data:
        raise PodsimError(f"{path.name}: the file is empty; a Chakra trace starts with a GlobalMetadata or a node record")
    try:
        records = split_records(data, max_records=MAX_NODES_PER_OP * budget().ops + 1)
    except PodsimError as exc:
        raise PodsimError(f"{path.name}: {exc}") from None
    vintage, has_meta = detect_vintage(records, path.name)
    version = title = ""
    extra: dict = {}
    if has_meta and vintage == LEGACY_ATTR:
        records = records[1:]  # that revision's GlobalMetadata holds attributes only
    elif has_meta:
        meta = pb.GlobalMetadata()
        off, body = records[0]
        try:
            meta.ParseFromString(body)
            version = meta.version
            title = next((a.string_val for a in meta.attr if a.name == "podsim_trace"), "")
            extra = _podsim_meta(meta, path)
        except DecodeError:
            version = ""  # early-2023 GlobalMetadata held attributes in field 1; nothing podsim uses
        records = records[1:]
    nodes, where, durations = [], [], {}
    for off, body in records:
        if vintage in (LEGACY, LEGACY_ATTR):
            convert = legacy_to_current if vintage == LEGACY else attr_to_current
            node, dur = convert(body, f"{path.name}: byte offset {off}", clock_hz)
            if dur is not None:
                durations[node.id] = dur
        else:
            node = pb.Node()
            try:
                node.ParseFromString(body)
            except DecodeError as exc:
                raise PodsimError(f"{path.name}: byte offset {off}: not a valid Chakra Node record ({exc})") from None
        nodes.append(node)
        where.append(f"byte offset {off}")
    return RankTrace(path, rank, version, nodes, where, vintage, durations if vintage != CURRENT else None, title, extra)


def _podsim_meta(meta: Any, path: Path) -> dict:
    """The trace meta a podsim export keeps in GlobalMetadata (`podsim_meta`, JSON), plus
    `chakra_durations_generation`: whose chip the nodes' durations are times on."""
    out: dict = {}
    for a in meta.attr:
        if a.name == "podsim_meta" and a.string_val:
            try:
                value = json.loads(a.string_val)
            except ValueError:
                raise PodsimError(f"{path.name}: GlobalMetadata attribute podsim_meta is not JSON") from None
            if isinstance(value, dict):
                out.update(value)
        elif a.name == "podsim_generation" and a.string_val:
            out["chakra_durations_generation"] = a.string_val
    return out


def read_chakra_json(path: str | Path, data: Any, rank: int = 0) -> RankTrace:
    """Decode Chakra's JSON form: {"metadata": {...}, "nodes": [...]}."""
    path = Path(path)
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        raise PodsimError(f"{path.name}: not a Chakra JSON trace (needs a list of `nodes`)")
    version = str((data.get("metadata") or {}).get("version", ""))
    check_budget("ops", len(data["nodes"]) / MAX_NODES_PER_OP, f"{path.name}: {len(data['nodes']):,} nodes",
                 f"counted as 1/{MAX_NODES_PER_OP} op each: host and metadata nodes are left out")
    nodes, where = [], []
    for i, raw in enumerate(data["nodes"]):
        node = pb.Node()
        try:
            json_format.ParseDict(raw, node, ignore_unknown_fields=True)
        except (json_format.ParseError, TypeError, AttributeError) as exc:
            raise PodsimError(f"{path.name}: node #{i}: {' '.join(str(exc).split())}") from None
        nodes.append(node)
        where.append(f"node #{i}")
    return RankTrace(path, rank, version, nodes, where)


def _attrs(node: Any) -> dict[str, Any]:
    out = {}
    for a in node.attr:
        which = a.WhichOneof("value")
        if which is None:
            continue
        v = getattr(a, which)
        out[a.name] = list(v.values) if which.endswith("_list") else v
    return out


def rank_of(path: Path, index: int) -> int:
    """Chakra names per-rank files `<prefix>.<rank>.et`; otherwise the position in the list."""
    m = re.search(r"\.(\d+)\.(?:et|eg|json)$", path.name)
    return int(m.group(1)) if m else index


def _signature(rt: RankTrace, n_ranks: int, grid: tuple[int, ...] | None = None, axes: Sequence[str] = SLICE_AXES,
               default_group=None) -> list[tuple]:
    """A rank's program with node ids replaced by positions and peers by offsets (shifts along
    the node's axis on a grid), for SPMD checks."""
    pos = {node.id: i for i, node in enumerate(rt.nodes)}
    sig = []
    for node in rt.nodes:
        a = _attrs(node)
        peer = None
        if node.type in (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE):
            other = a.get("comm_dst") if node.type == pb.COMM_SEND_NODE else a.get("comm_src")
            if other is None:
                peer = None
            elif grid is not None:
                key, sign = ("comm_dst", 1) if node.type == pb.COMM_SEND_NODE else ("comm_src", -1)
                axis = _axis(a, axes, default_group, f"{rt.path.name}: node {node.id} ({node.name!r})")
                peer = (str(axis), _shift(rt, node, a, n_ranks, key, sign, axis, grid))
            else:
                peer = (int(other) - rt.rank) % max(n_ranks, 1)
        a.pop("comm_dst", None), a.pop("comm_src", None)
        deps = tuple(sorted(pos.get(d, -1) for d in (*node.data_deps, *node.ctrl_deps)))
        sig.append((node.type, node.name, duration_s(rt, node), tuple(sorted((k, str(v)) for k, v in a.items())), deps, peer))
    return sig


@dataclass(frozen=True)
class RankFile:
    """A rank's file read only when needed (`read()`), so the SPMD check holds one rank at a time."""

    path: Path
    rank: int
    read: Callable[[], RankTrace]


def _load(item: RankTrace | RankFile) -> RankTrace:
    return item.read() if isinstance(item, RankFile) else item


def import_chakra(
    ranks: Sequence[RankTrace | RankFile],
    *,
    axes: Sequence[str] = SLICE_AXES,
    group: str | None = None,
    rank: int | None = None,
    keep_cpu_ops: bool = False,
    shape: Sequence[int] | None = None,
) -> StepTrace:
    """Per-rank Chakra traces -> one SPMD StepTrace (see the module docstring). With the slice
    `shape` (and one file per chip), a send's peer is read as coordinates (rank = x + X*(y +
    Y*z), ASTRA-sim's numbering) and its shift counted along its axis; else ranks form one ring."""
    if not ranks:
        raise PodsimError("no Chakra files given")
    ranks = sorted(ranks, key=lambda r: r.rank)
    n = len(ranks)
    grid = tuple(shape) if shape is not None and math.prod(shape) == n else None
    default_group = parse_group(group) if group else parse_group(list(axes))
    if len({r.rank for r in ranks}) != n:
        raise PodsimError("two Chakra files have the same rank number; name them <prefix>.<rank>.et")
    if rank is not None:
        chosen = [r for r in ranks if r.rank == rank]
        if not chosen:
            raise PodsimError(f"rank {rank} is not among the files (ranks {', '.join(str(r.rank) for r in ranks)})")
        rep = _load(chosen[0])
    else:
        rep = _load(ranks[0])
        ref = _signature(rep, n, grid, axes, default_group)
        for item in ranks[1:]:
            other = _load(item)
            sig = _signature(other, n, grid, axes, default_group)
            if len(sig) != len(ref):
                raise PodsimError(f"ranks {rep.rank} and {other.rank} differ: {len(ref)} vs {len(sig)} nodes; podsim traces are SPMD: pick one rank with rank=R (--rank R)")
            for i, (x, y) in enumerate(zip(ref, sig, strict=True)):
                if x != y:
                    raise PodsimError(f"ranks {rep.rank} and {other.rank} differ at node {other.nodes[i].id} ({other.where[i]} of {other.path.name}, {other.nodes[i].name!r}); podsim traces are SPMD: pick one rank with rank=R (--rank R)")
    ops, skipped = _convert(rep, n, axes, default_group, keep_cpu_ops, grid)
    meta = {
        "source_format": "chakra",
        "chakra_version": rep.version,
        "chakra_vintage": rep.vintage,
        "files": [r.path.name for r in ranks],
        "ranks": n,
        "representative_rank": rep.rank,
        "skipped_nodes": skipped,
    }
    trace = StepTrace(tuple(ops), name=rep.title or re.sub(r"\.\d+\.(et|eg|json)$", "", rep.path.name),
                      meta={**rep.podsim_meta, **meta})
    trace.validate(axes=axes)
    return trace


def _convert(rt: RankTrace, n_ranks: int, axes: Sequence[str], default_group, keep_cpu_ops: bool,
             grid: tuple[int, ...] | None = None) -> tuple[list[Op], dict[str, int]]:
    by_id = {}
    for node, where in zip(rt.nodes, rt.where, strict=True):
        if node.id in by_id:
            raise PodsimError(f"{rt.path.name}: node {node.id} ({where}) reuses an id")
        by_id[node.id] = node
    where_of = {node.id: w for node, w in zip(rt.nodes, rt.where, strict=True)}
    dropped: dict[int, tuple[int, ...]] = {}
    skipped: dict[str, int] = {}
    kept = []
    for node in rt.nodes:
        a = _attrs(node)
        deps = tuple(dict.fromkeys((*node.data_deps, *node.ctrl_deps)))
        for d in deps:
            if d not in by_id:
                raise PodsimError(f"{rt.path.name}: node {node.id} ({where_of[node.id]}) depends on node {d}, which is not in the file")
        if node.type == pb.INVALID_NODE:
            raise PodsimError(f"{rt.path.name}: node {node.id} ({where_of[node.id]}) has no valid type (INVALID_NODE); the file may be corrupt")
        cpu = bool(a.get("is_cpu_op", False)) and node.type == pb.COMP_NODE
        if node.type in SKIPPED_TYPES or (cpu and not keep_cpu_ops):
            label = "CPU COMP_NODE" if cpu else pb.NodeType.Name(node.type)
            skipped[label] = skipped.get(label, 0) + 1
            dropped[node.id] = deps
            continue
        kept.append((node, a, deps))

    resolved: dict[int, tuple[int, ...]] = {}

    def live(dep: int, seen: frozenset = frozenset()) -> tuple[int, ...]:
        """The kept nodes a dependency stands for (through left-out nodes)."""
        if dep not in dropped:
            return (dep,)
        if dep in resolved:
            return resolved[dep]
        if dep in seen:
            raise PodsimError(f"{rt.path.name}: the dependencies form a cycle through node {dep}")
        out = tuple(dict.fromkeys(x for d in dropped[dep] for x in live(d, seen | {dep})))
        resolved[dep] = out
        return out

    # podsim's own exports name each op (`podsim_id`); other files get n<node id>.
    op_id = {node.id: str(a.get("podsim_id") or f"n{node.id}") for node, a, _ in kept}
    ops: list[Op] = []
    alias: dict[int, int] = {}
    sends: dict[tuple, list[int]] = {}  # (axis, shift) -> send node ids, in file order
    send_of_op: dict[str, int] = {}  # podsim's exports: the op a send belongs to -> its node id
    for node, a, _ in kept:
        if node.type == pb.COMM_SEND_NODE:
            w = f"{rt.path.name}: node {node.id} ({where_of[node.id]}, {node.name!r})"
            axis = _axis(a, axes, default_group, w)
            sends.setdefault((axis, _shift(rt, node, a, n_ranks, "comm_dst", +1, axis, grid)), []).append(node.id)
            if "podsim_id" in a:
                send_of_op[str(a["podsim_id"])] = node.id
    paired: dict[tuple, int] = {}  # (axis, shift) -> receives paired so far with that key's sends
    for node, a, deps in kept:
        oid = op_id[node.id]
        where = f"{rt.path.name}: node {node.id} ({where_of[node.id]}, {node.name!r})"
        dep_ids = tuple(dict.fromkeys(alias.get(x, x) for d in deps for x in live(d)))
        layer = str(a.get("podsim_layer", ""))
        if node.type == pb.COMP_NODE or node.type in (pb.MEM_LOAD_NODE, pb.MEM_STORE_NODE):
            # podsim's exports mark ops the per-op model times (duration_micros is then that time
            # on the exporting chip, for other readers): they come back as modelled ops
            modelled = bool(a.get("podsim_modelled", False))
            dur = None if modelled else _bounded(a.get("podsim_duration_s", duration_s(rt, node)), q.OP_SECONDS, where, "run time")
            flops = _bounded(float(a.get("podsim_flops", a.get("num_ops", 0))), q.OP_FLOPS, where, "num_ops") if node.type == pb.COMP_NODE else 0.0
            hbm = _bounded(float(a.get("podsim_hbm_bytes", a.get("tensor_size", 0))), q.OP_BYTES, where, "tensor_size")
            if dur is None and not flops and not hbm and not modelled:
                dur = 0.0
            eff = a.get("podsim_efficiency")
            flat = [float(v) for v in a.get("podsim_matmuls", ())]
            matmuls = tuple(tuple(flat[i:i + 5]) for i in range(0, len(flat) - len(flat) % 5, 5))
            ops.append(Compute(oid, None if dur is None else float(dur), flops, hbm, None if eff is None else float(eff),
                               dep_ids, node.name, layer, bool(a.get("podsim_bubble", False)), matmuls,
                               str(a.get("podsim_precision", "bf16"))))
        elif node.type == pb.COMM_COLL_NODE:
            raw = a.get("comm_type", -1)
            if isinstance(raw, str):  # a name (Chakra JSON written by hand): any spelling
                ctype = KIND_COMM[normalise_kind(raw, field=f"{where}: comm_type", send_recv=False)]
            else:
                ctype = int(raw)
            if ctype not in COMM_KINDS:
                known = ", ".join(pb.CollectiveCommType.Name(k) for k in COMM_KINDS)
                name = pb.CollectiveCommType.Name(ctype) if ctype in pb.CollectiveCommType.values() else str(ctype)
                raise PodsimError(f"{where}: collective type {name} is not supported; supported: {known}")
            size = 0.0 if ctype == pb.BARRIER else _bounded(float(a.get("podsim_bytes", a.get("comm_size", 0))), q.OP_BYTES, where, "comm_size")
            grp = _group(a, axes, default_group, where)
            alg = normalise_algorithm(a.get("podsim_algorithm", "auto"), field=f"{where}: podsim_algorithm")
            ops.append(Collective(oid, COMM_KINDS[ctype], size, grp, alg, dep_ids, node.name, layer))
        elif node.type in (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE):
            axis = _axis(a, axes, default_group, where)
            if node.type == pb.COMM_SEND_NODE:
                shift = _shift(rt, node, a, n_ranks, "comm_dst", +1, axis, grid)
            else:
                shift = _shift(rt, node, a, n_ranks, "comm_src", -1, axis, grid)
                # the send of the same permute stands for this receive: by op where the file names it
                # (podsim's exports), else the k-th receive of an (axis, shift) with that key's k-th send
                mate = send_of_op.get(str(a["podsim_id"])) if "podsim_id" in a else None
                if mate is None:
                    match, k = sends.get((axis, shift), []), paired.get((axis, shift), 0)
                    mate = match[k] if k < len(match) else None
                    paired[(axis, shift)] = k + 1
                if mate is not None:
                    alias[node.id] = mate
                    continue
            size = _bounded(float(a.get("podsim_bytes", a.get("comm_size", 0))), q.OP_BYTES, where, "comm_size")
            if "podsim_shift" in a:  # podsim's exports keep the shift as written (-1, not size - 1)
                shift = int(a["podsim_shift"])
            ops.append(SendRecv(oid, size, axis, shift, dep_ids, node.name, layer))
        else:
            raise PodsimError(f"{where}: node type {pb.NodeType.Name(node.type)} is not supported")
    # Dependencies were node ids: name them by op, a receive that joined a send by the send.
    ops = [replace(op, deps=tuple(dict.fromkeys(op_id[alias.get(d, d)] for d in op.deps if op_id[alias.get(d, d)] != op.id)))
           for op in ops]
    return ops, skipped


def _bounded(value: float | None, quantity: q.Quantity, where: str, name: str) -> float | None:
    """A node's size or time in range (a corrupt or hostile file: one line naming the node)."""
    if value is None:
        return None
    try:
        return float(quantity.check(float(value), name))
    except PodsimError as exc:
        raise PodsimError(f"{where}: {exc}") from None


def _axis(a: dict, axes: Sequence[str], default_group, where: str) -> AxisGroup:
    grp = _group(a, axes, default_group, where)
    if len(grp) != 1:
        raise PodsimError(f"{where}: a send/recv runs along one axis but the group is {','.join(map(str, grp))}; give a one-axis group (--group x)")
    return grp[0]


def _shift(rt: RankTrace, node: Any, a: dict, n_ranks: int, key: str, sign: int, axis: AxisGroup,
           grid: tuple[int, ...] | None) -> int:
    peer = a.get(key)
    if peer is None:
        raise PodsimError(f"{rt.path.name}: node {node.id} ({node.name!r}) has no {key} attribute")
    if n_ranks < 2:
        raise PodsimError(f"{rt.path.name}: node {node.id} is a send/recv, which needs the files of all ranks (got one)")
    if grid is None or axis.axis not in SLICE_AXES[: len(grid)]:
        return (sign * (int(peer) - rt.rank)) % n_ranks
    i = SLICE_AXES.index(axis.axis)
    mine, theirs = rank_coords(rt.rank, grid), rank_coords(int(peer), grid)
    if any(m != t for j, (m, t) in enumerate(zip(mine, theirs, strict=True)) if j != i):
        raise PodsimError(f"{rt.path.name}: node {node.id} ({node.name!r}) of rank {rt.rank} {mine} names rank {int(peer)} {theirs}, "
                          f"which is not along its axis {axis.axis} on a {'x'.join(map(str, grid))} slice")
    size, stride = axis.size or grid[i], axis.stride
    return (sign * ((theirs[i] // stride) % size - (mine[i] // stride) % size)) % size


def _group(a: dict, axes: Sequence[str], default_group, where: str):
    if "podsim_group" in a:  # podsim's exports: groups involved_dim cannot name (x:4:2, dcn)
        return parse_group(str(a["podsim_group"]))
    dims = a.get("involved_dim")
    if dims is None:
        return default_group
    chosen = [axes[i] for i, on in enumerate(dims) if on and i < len(axes)]
    if not chosen:
        raise PodsimError(f"{where}: involved_dim {list(dims)} names no dimension of this slice ({', '.join(axes)})")
    return parse_group(chosen)
