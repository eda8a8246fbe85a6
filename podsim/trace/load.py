"""Load any supported trace file into a validated StepTrace, and summarise a trace.

Formats, told apart by suffix and content:
- podsim native: `.json` / `.yaml` / `.yml` with `podsim_trace: 1` (native.py);
- Chakra execution traces: `.et` / `.eg` or any binary file (protobuf records, either vintage:
  chakra_wire.py) or Chakra JSON (`{"nodes": [...]}`), one file per rank (chakra.py);
- ASTRA-sim 1.0 text workloads: any other text file whose first word is a policy such as DATA
  (astra.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial
from pathlib import Path

from podsim.errors import PodsimError
from podsim.files import check_input_file, decode_text, read_bytes
from podsim.topology import format_shape, get_generation
from podsim.trace.astra import ASTRA_CLOCK_HZ, ASTRA_POLICIES, import_astra_text
from podsim.trace.chakra import RankFile, import_chakra, rank_of, read_chakra_json, read_et
from podsim.trace.model import (
    DCN_AXIS,
    SLICE_AXES,
    AxisGroup,
    Collective,
    Compute,
    SendRecv,
    StepTrace,
    format_group,
)
from podsim.trace.native import load_native, read_structured, trace_slice


def _kind(path: Path) -> tuple[str, object]:
    """('native' | 'chakra-json' | 'chakra-et' | 'astra', parsed content if any)."""
    suffix = path.suffix.lower()
    check_input_file(path, "trace")  # missing, a folder, a FIFO or a device: one line, nothing opened
    if suffix in (".et", ".eg"):  # .eg: the 2023 converters' name for the same records
        return "chakra-et", None
    if suffix in (".json", ".yaml", ".yml"):
        data = read_structured(path)
        if isinstance(data, dict) and "podsim_trace" in data:
            return "native", data
        if suffix == ".json" and isinstance(data, dict) and "nodes" in data:
            return "chakra-json", data
        raise PodsimError(f"{path.name}: neither a podsim trace (`podsim_trace: 1`) nor a Chakra JSON trace (`nodes`)")
    data = read_bytes(path, "trace")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return "chakra-bin", None  # binary: Chakra records are the only binary format podsim reads
    first = text.split(maxsplit=1)[0] if text.strip() else ""
    if first in ASTRA_POLICIES:
        return "astra", decode_text(data, path.name)  # a NUL byte is refused with its offset
    if "\x00" in text:
        return "chakra-bin", None  # protobuf records can be valid UTF-8; text never holds NUL
    raise PodsimError(f"{path.name}: unknown trace format (first word {first!r}); use .json/.yaml (podsim), .et or Chakra .json, or an ASTRA-sim text workload starting with a policy such as DATA")


def load_trace(
    paths: str | Path | Sequence[str | Path],
    *,
    shape: Sequence[int] | None = None,
    group: str | None = None,
    rank: int | None = None,
    clock_hz: float | None = None,
    keep_cpu_ops: bool | None = None,
) -> StepTrace:
    """Load a trace from any supported file: podsim JSON/YAML, ASTRA-sim text workloads, Chakra
    `.et` / JSON (one file per rank; any schema vintage, told by its bytes).

    Each option is refused for a format it does not apply to (it would be ignored): group,
    rank and keep_cpu_ops are Chakra's, clock_hz ASTRA-sim text's and Chakra .et's.

    Parameters
    ----------
    paths : path or sequence of paths
        The file (several only for Chakra's one per rank).
    shape : sequence of int, optional
        The slice the trace will run on; its axes bound the groups (default x, y, z), and the
        trace is checked to fit it.
    group : str, optional
        The axes a Chakra collective spans when the file does not say (default: every axis).
    rank : int, optional
        Import one Chakra rank.
    clock_hz : float, optional
        The clock of ASTRA-sim compute cycles and 2023 Chakra ticks (default 1 GHz).
    keep_cpu_ops : bool, optional
        Keep Chakra host (CPU) compute nodes.

    Returns
    -------
    StepTrace
        The validated trace.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from podsim import generate_trace, load_trace
    >>> from podsim.trace import save_trace
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "step.json"
    >>> _ = save_trace(generate_trace("resnet50", "2x2x2", "data=8", overrides={"global_batch": 64}), path)
    >>> load_trace(path, shape=(2, 2, 2)).name
    'resnet50 data=8 on tpu-v4 2x2x2'
    """
    items = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    if not items:
        raise PodsimError("no trace file given")
    axes = SLICE_AXES[: len(shape)] if shape is not None else SLICE_AXES
    kinds = [_kind(p) for p in items]
    names = {k for k, _ in kinds}
    if len(items) > 1 and not names <= {"chakra-et", "chakra-bin", "chakra-json"}:
        raise PodsimError("several files make one trace only for Chakra traces (one file per rank); give one podsim or ASTRA-sim file")
    kind, content = kinds[0]
    _refuse_options(kind, items[0].name, group=group, rank=rank, keep_cpu_ops=keep_cpu_ops, clock_hz=clock_hz)
    keep_cpu_ops = bool(keep_cpu_ops)
    clock_hz = ASTRA_CLOCK_HZ if clock_hz is None else clock_hz
    if kind == "native":
        trace = load_native(items[0], content)
    elif kind == "astra":
        trace = import_astra_text(items[0], shape=shape, axes=axes, clock_hz=clock_hz, text=str(content))
    else:
        ranks = []
        for i, (p, (k, data)) in enumerate(zip(items, kinds, strict=True)):
            r = rank_of(p, i)
            if k == "chakra-json":
                ranks.append(read_chakra_json(p, data, r))
            else:  # read when the importer needs it: one rank in memory at a time
                ranks.append(RankFile(p, r, partial(_read_binary, p, r, clock_hz, sniffed=k == "chakra-bin")))
        trace = import_chakra(ranks, axes=axes, group=group, rank=rank, keep_cpu_ops=keep_cpu_ops, shape=shape)
    if shape is not None:
        check_fits(trace, shape)
    return trace


_APPLIES = {"group": ("chakra-et", "chakra-bin", "chakra-json"), "rank": ("chakra-et", "chakra-bin", "chakra-json"),
            "keep_cpu_ops": ("chakra-et", "chakra-bin", "chakra-json"), "clock_hz": ("astra", "chakra-et", "chakra-bin")}
_FORMAT_NAMES = {"native": "a podsim trace", "astra": "an ASTRA-sim text workload", "chakra-json": "a Chakra JSON trace",
                 "chakra-et": "Chakra records", "chakra-bin": "Chakra records"}
_FLAGS = {"group": "--group", "rank": "--rank", "keep_cpu_ops": "--keep-cpu-ops", "clock_hz": "--clock-ghz"}


def _refuse_options(kind: str, name: str, **given) -> None:
    """An import option given for a format that has no use for it is an error, not ignored."""
    for key, value in given.items():
        if value is not None and value is not False and kind not in _APPLIES[key]:
            raise PodsimError(f"{key} ({_FLAGS[key]}) does not apply to {name}, {_FORMAT_NAMES[kind]}; drop it")


def _read_binary(path: Path, rank: int, clock_hz: float, sniffed: bool):
    """read_et; for a binary file without a Chakra suffix, a failure says the format is unknown."""
    try:
        return read_et(path, rank, clock_hz)
    except PodsimError as exc:
        if not sniffed:
            raise
        why = str(exc).removeprefix(f"{path.name}: ")
        raise PodsimError(f"{path.name}: unknown trace format: binary, and not Chakra records ({why})") from None


def check_fits(trace: StepTrace, shape: Sequence[int]) -> None:
    """The trace runs on this slice: the one it was made for (meta.slice), if it says; every
    group names axes the slice has and holds more than one chip (or asks for one, x:1); every
    x:SIZE[:STRIDE] block tiles its axis."""
    shape = tuple(int(n) for n in shape)
    made = trace_slice(trace.meta)
    if made is not None and made != shape:
        raise PodsimError(f"trace {trace.name or ''!r} was made for a {format_shape(made)} slice (its meta.slice): its "
                          f"groups and per-chip sizes are that slice's; run it on {format_shape(made)}, not "
                          f"{format_shape(shape)} (or generate it for {format_shape(shape)})")
    axes = SLICE_AXES[: len(shape)]
    trace.validate(axes=axes)
    length = dict(zip(axes, shape, strict=False))
    for op in trace.ops:
        groups: tuple[AxisGroup, ...] = op.group if isinstance(op, Collective | SendRecv) else ()
        if isinstance(op, Collective) and groups and all(g.axis != DCN_AXIS and g.size is None for g in groups) \
                and math.prod(length[g.axis] // g.stride for g in groups) <= 1:
            group = ",".join(str(g) for g in groups)
            raise PodsimError(f"op {op.id!r}: group {group} has 1 chip on the {format_shape(shape)} slice, so nothing is "
                              "communicated; name axes longer than 1 (or ask for a 1-chip group explicitly, e.g. x:1)")
        for g in groups:
            if g.axis == DCN_AXIS:
                continue
            if g.size is not None:
                span = g.size * g.stride
                if length[g.axis] % span:
                    raise PodsimError(f"op {op.id!r}: group {g} spans {span} chips along {g.axis} but the slice has {length[g.axis]}; the span must divide it")
            if isinstance(op, SendRecv):
                members = g.size or length[g.axis] // g.stride
                if op.shift % members == 0:
                    raise PodsimError(f"op {op.id!r}: send_recv shift {op.shift} along {g} ({members} chips) sends every chip's "
                                      "bytes to itself; give a shift that is not a multiple of the group size")


def summarize_trace(trace: StepTrace, generation: str | None = None) -> dict:
    """Ops, FLOPs and bytes per collective kind; with a generation, the compute time at peak."""
    gen = get_generation(generation) if generation else None
    comp = {"ops": 0, "flops": 0.0, "bubble_ops": 0, "bubble_flops": 0.0, "hbm_bytes": 0.0, "fixed_duration_s": 0.0}
    colls: dict[str, dict] = {}
    groups: dict[str, float] = {}
    send = {"ops": 0, "bytes": 0.0}
    host = {"ops": 0, "duration_s": 0.0}  # host work beside the chips (the input pipeline)
    at_peak = 0.0
    for op in trace.ops:
        if isinstance(op, Compute) and op.host:
            host["ops"] += 1
            host["duration_s"] += op.duration_s or 0.0
        elif isinstance(op, Compute):
            comp["ops"] += 1
            comp["hbm_bytes"] += op.hbm_bytes
            if op.bubble:
                comp["bubble_ops"] += 1
                comp["bubble_flops"] += op.flops
            else:
                comp["flops"] += op.flops
            if op.duration_s is not None:
                comp["fixed_duration_s"] += op.duration_s
                at_peak += op.duration_s
            elif gen is not None:
                at_peak += op.duration_on(gen.peak_flops_per_s, gen.hbm_bytes_per_s, 1.0)
        elif isinstance(op, Collective):
            c = colls.setdefault(op.kind, {"ops": 0, "bytes": 0.0})
            c["ops"] += 1
            c["bytes"] += op.bytes
            key = format_group(op.group)
            groups[key] = groups.get(key, 0.0) + op.bytes
        else:
            send["ops"] += 1
            send["bytes"] += op.bytes
            key = f"send_recv {format_group(op.group)}"
            groups[key] = groups.get(key, 0.0) + op.bytes
    out = {
        "name": trace.name,
        "ops": len(trace.ops),
        "compute": comp,
        "collectives": dict(sorted(colls.items())),
        "send_recv": send,
        "host": host,
        "bytes_per_group": dict(sorted(groups.items(), key=lambda kv: -kv[1])),
        "meta": trace.meta,
    }
    chips = trace.meta.get("chips")
    model_flops = trace.meta.get("model_flops_per_step")
    if chips and model_flops:
        out["flops_vs_model"] = comp["flops"] * chips / model_flops
    if gen is not None:
        out["generation"] = gen.id
        out["compute_s_at_peak"] = at_peak
    if not math.isfinite(comp["flops"]):
        raise PodsimError("the trace's FLOPs do not add up to a finite number")
    return out
