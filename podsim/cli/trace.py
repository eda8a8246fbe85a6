"""`podsim trace generate|import|show|models`: make, convert and inspect step traces."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Annotated

import typer

from podsim import quantities as q
from podsim.bounds import check_budget
from podsim.cli import app
from podsim.cli.common import comma_list, console, emit_json, refuse_options, table, with_budgets
from podsim.errors import PodsimError
from podsim.files import (
    inside,
    output_dir,
    output_file,
    output_folder,
    plain_name,
    safe_component,
    staged_folder,
    write_new,
    write_text_atomic,
)
from podsim.topology import format_shape, get_generation, parse_shape
from podsim.trace import PRESETS, GenerateOptions, generate_trace, load_trace, save_trace
from podsim.trace.astra_network import astra_configs, network_yaml, system_json
from podsim.trace.chakra_export import chakra_files, et_file_names
from podsim.trace.configs import parse_assignments, parse_overrides
from podsim.trace.kinds import normalise_algorithm
from podsim.trace.load import check_fits, summarize_trace
from podsim.trace.memory import hbm_text
from podsim.trace.model import SendRecv
from podsim.trace.native import output_format
from podsim.units import format_bytes

trace_app = typer.Typer(help="Step traces: generate from a model, import Chakra / ASTRA-sim, export Chakra, show.", no_args_is_help=True)
app.add_typer(trace_app, name="trace")


def _mapping(items: list[str] | None) -> dict[str, str] | None:
    return parse_assignments(items, "--map", "tensor=z or data=x:4:2") or None


def _shape(slice_shape: str | None) -> tuple[int, ...] | None:
    return parse_shape(slice_shape) if slice_shape else None


def _summary_rows(s: dict) -> list[tuple[str, str]]:
    c = s["compute"]
    rows = [("ops", str(s["ops"])), ("compute ops", f"{c['ops']}" + (f" ({c['bubble_ops']} pipeline bubble)" if c["bubble_ops"] else ""))]
    if c["flops"]:
        rows.append(("FLOPs per chip", f"{c['flops']:.4g}" + (f" (+{c['bubble_flops']:.4g} in bubbles)" if c["bubble_flops"] else "")))
    footprint = s["meta"].get("hbm_footprint")
    if footprint and s["meta"].get("generation"):  # what the step holds at its peak, against the chip's HBM
        rows.append(("HBM per chip (peak)", hbm_text(footprint["total_bytes"], get_generation(s["meta"]["generation"]).hbm_per_chip.si)))
    if c["hbm_bytes"]:
        rows.append(("HBM traffic per chip (read + written)", format_bytes(c["hbm_bytes"])))
    if c["fixed_duration_s"]:
        rows.append(("fixed compute time", f"{c['fixed_duration_s']:.6g} s"))
    if "compute_s_at_peak" in s:
        rows.append((f"compute at peak ({s['generation']})", f"{s['compute_s_at_peak']:.6g} s"))
    if "flops_vs_model" in s:
        rows.append(("FLOPs x chips / model FLOPs", f"{s['flops_vs_model']:.4f}"))
    for kind, v in s["collectives"].items():
        rows.append((kind, f"{v['ops']} ops, {format_bytes(v['bytes'])}"))
    if s["send_recv"]["ops"]:
        rows.append(("send_recv", f"{s['send_recv']['ops']} ops, {format_bytes(s['send_recv']['bytes'])}"))
    if s.get("host", {}).get("ops"):
        rows.append(("host input", f"{s['host']['duration_s']:.6g} s per step on the hosts, beside the chips"))
    meta = s["meta"]
    for key in ("parallelism", "mesh", "microbatches", "policy", "ranks", "chakra_vintage"):
        if key in meta:
            rows.append((key, str(meta[key])))
    return rows


def _check_out(out: str) -> Path:
    """The -o FILE of generate and import, refused before any work: its suffix (a format) and
    what is at the path (podsim.files.output_file)."""
    out = output_file(out, "--out")
    output_format(out)
    return out


def _write(trace, out: Path, as_json: bool) -> None:
    output_folder(out.parent)  # -o out/tour/x.json makes out/tour, as `podsim run -o` does
    path = save_trace(trace, out)
    s = summarize_trace(trace)
    if as_json:
        emit_json({"output": str(path), **{k: v for k, v in s.items() if k != "meta"}})
        return
    table(f"{trace.name} -> {path}", _summary_rows(s))


def _overlaps_off(items: list[str] | None) -> dict[str, bool]:
    known = ("fsdp_prefetch", "grad_reduce", "dcn")
    out = {}
    for item in items or []:
        for name in comma_list(item, "--no-overlap", "dcn,grad_reduce"):
            if name not in known:
                raise PodsimError(f"--no-overlap {name!r} is not known; use one of: {', '.join(known)}")
            out[f"overlap_{name}"] = False
    return out


@trace_app.command("generate")
@with_budgets("ops")
def generate_cmd(
    model: Annotated[str, typer.Argument(help=f"model preset: {', '.join(PRESETS)}")],
    slice_shape: Annotated[str, typer.Option("--slice", help="slice shape, e.g. 8x16x16")],
    parallelism: Annotated[str, typer.Option("--parallelism", "-p", help="logical mesh, e.g. 'data=8,fsdp=16,tensor=16' (data, fsdp, pipeline, tensor, expert, dcn)")],
    out: Annotated[str, typer.Option("--out", "-o", help="output file (.json, .yaml or .yml)")],
    generation: Annotated[str, typer.Option("--generation", "-g", help="hardware generation")] = "tpu-v4",
    twisted: Annotated[bool, typer.Option("--twisted", help="twisted torus slice")] = False,
    microbatches: Annotated[int | None, typer.Option("--microbatches", "-m", help="micro-batches per step (default: 1; with a pipeline the largest divisor of the local batch <= 4 x stages)", callback=q.MICROBATCHES.option("--microbatches"))] = None,
    recompute: Annotated[str, typer.Option("--recompute", help="activation recomputation: none, minimal (attention core), dots (JAX: weight matmuls kept), save_attention (Lingvo-JAX: Q/K/V and attention outputs kept) or full")] = "none",
    precision: Annotated[str, typer.Option("--precision", help="matmul precision: bf16, int8 or fp8 (where the generation publishes the rate)")] = "bf16",
    no_overlap: Annotated[list[str] | None, typer.Option("--no-overlap", help="switch an overlap off: fsdp_prefetch, grad_reduce or dcn (repeatable)")] = None,
    collective_matmul: Annotated[str, typer.Option("--collective-matmul", help="tensor-parallel collectives and their matmuls: auto (the compiler's default: chunked on TPUs, whose XLA decomposes tensor-parallel einsums unless told not to; on GPUs from XLA's windowed-einsum threshold; podsim.trace.defaults), exposed, chunked (decomposed, XLA's windowed einsum; implies sequence parallelism), all_gather, reduce_scatter (one side only) or hidden (the ideal bound)")] = "auto",
    attention: Annotated[str, typer.Option("--attention", help="flash (fused, causal half) or materialized (score matrix through HBM)")] = "flash",
    sequence_parallel: Annotated[bool | None, typer.Option("--sequence-parallel/--no-sequence-parallel", help="activations sharded over the tensor axis between blocks (Megatron sequence parallelism: all-gather + reduce-scatter instead of all-reduce); default: on with a tensor axis that divides the sequence or the width, as MaxText's logical axis rules shard them (podsim.trace.defaults)")] = None,
    capacity_factor: Annotated[float, typer.Option("--capacity-factor", help="MoE expert capacity factor", callback=q.CAPACITY_FACTOR.option("--capacity-factor"))] = 1.0,
    grad_bytes: Annotated[int, typer.Option("--grad-bytes", help="bytes per gradient element as reduced (2 bf16, 4 fp32)", callback=q.GRAD_BYTES.option("--grad-bytes"))] = 2,
    combine_grad_reduce: Annotated[bool, typer.Option("--combine-grad-reduce", help="one data-parallel gradient all-reduce after the backward pass (XLA's combiner on a TF1 program) instead of one per layer under it")] = False,
    replicas_per_chip: Annotated[int, typer.Option("--replicas-per-chip", help="CNN data parallelism: replicas per chip (2: one per TensorCore, TF's num_cores on v2-v4); each updates its own weights", callback=q.REPLICAS_PER_CHIP.option("--replicas-per-chip"))] = 1,
    bn_group: Annotated[int, typer.Option("--bn-group", help="CNN distributed batch norm: replicas whose batch statistics are all-reduced together (TF's distributed_group_size), forward and backward, over a compact block of chips", callback=q.BN_GROUP.option("--bn-group"))] = 1,
    input_pipeline: Annotated[str, typer.Option("--input-pipeline", help="the hosts' input pipeline: none, or jpeg (JPEGs decoded every step at the generation's host rate)")] = "none",
    input_rate: Annotated[float | None, typer.Option("--input-rate", help="images (CNN) or tokens (transformer) per second one host feeds its chips; the step waits when they are slower", callback=q.INPUT_RATE.option("--input-rate"))] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="override a model field, e.g. --set global_batch=2048 (repeatable)")] = None,
    mesh_order: Annotated[str | None, typer.Option("--mesh-order", help="logical axes heaviest first, e.g. tensor,fsdp,data (default: measured)")] = None,
    mesh_map: Annotated[list[str] | None, typer.Option("--map", help="explicit mapping LOGICAL=GROUP, e.g. --map tensor=z --map data=x,y (repeatable)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object on stdout")] = False,
) -> None:
    """Generate a model's training-step trace for a parallelism plan on a slice."""
    opts = GenerateOptions(
        microbatches=microbatches, recompute=recompute, sequence_parallel=sequence_parallel,
        capacity_factor=capacity_factor, grad_bytes=grad_bytes, combine_grad_reduce=combine_grad_reduce, replicas_per_chip=replicas_per_chip, bn_group=bn_group,
        mesh_order=tuple(comma_list(mesh_order, "--mesh-order", "tensor,fsdp,data")) or None,
        mesh=_mapping(mesh_map), precision=precision, attention=attention, collective_matmul=collective_matmul,
        input_pipeline=input_pipeline, input_rate_per_host=input_rate, **_overlaps_off(no_overlap),
    )
    out = _check_out(out)
    trace = generate_trace(model, slice_shape, parallelism, generation=generation, twisted=twisted, overrides=parse_overrides(set_), options=opts)
    _write(trace, out, as_json)


@trace_app.command("import")
@with_budgets("ops", "input_bytes")
def import_cmd(
    files: Annotated[list[Path], typer.Argument(help="Chakra .et / JSON files (one per rank; current or 2023 schema, told by their bytes), or one ASTRA-sim text workload or podsim trace")],
    out: Annotated[str, typer.Option("--out", "-o", help="output file (.json, .yaml or .yml)")],
    slice_shape: Annotated[str | None, typer.Option("--slice", help="network shape the trace runs on, e.g. 8 or 4x8 (its axes bound the groups)")] = None,
    group: Annotated[str | None, typer.Option("--group", help="axes a Chakra collective spans when the file does not say (default: all)")] = None,
    rank: Annotated[int | None, typer.Option("--rank", help="import one Chakra rank when the ranks' programs differ", callback=q.RANK.option("--rank"))] = None,
    clock_ghz: Annotated[float | None, typer.Option("--clock-ghz", help="clock of ASTRA-sim compute cycles (default 1 GHz: 1 cycle = 1 ns)", callback=q.CLOCK_GHZ.option("--clock-ghz"))] = None,
    keep_cpu_ops: Annotated[bool, typer.Option("--keep-cpu-ops", help="keep Chakra host (CPU) compute nodes")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object on stdout")] = False,
) -> None:
    """Convert Chakra or ASTRA-sim traces into a podsim trace file."""
    out = _check_out(out)
    shape = _shape(slice_shape)
    trace = load_trace(files, shape=shape, group=group, rank=rank,
                       clock_hz=None if clock_ghz is None else clock_ghz * 1e9, keep_cpu_ops=keep_cpu_ops or None)
    if shape is not None and "slice" not in trace.meta:  # its groups are now this slice's: it carries the slice
        trace = dataclasses.replace(trace, meta={**trace.meta, "slice": format_shape(shape)})
    _write(trace, out, as_json)


@trace_app.command("export")
@with_budgets("ops", "files", "input_bytes")
def export_cmd(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="a trace in any supported format (podsim JSON/YAML, ASTRA-sim text, Chakra)")],
    out_dir: Annotated[str, typer.Option("--out", "-o", help="output folder (new, empty, or an export's with --force: replaced whole)")],
    fmt: Annotated[str, typer.Option("--format", help="output format: chakra (one current-schema .et per rank) or astra-sim (network .yml, system .json and the .et workload)")] = "chakra",
    algorithm: Annotated[str, typer.Option("--algorithm", help="astra-sim: the collective implementation on every dimension (ring, direct, halving_doubling)")] = "ring",
    slice_shape: Annotated[str | None, typer.Option("--slice", help="slice shape: one .et per chip (default: the shape a generated trace was made for)")] = None,
    prefix: Annotated[str | None, typer.Option("--prefix", help="file prefix: PREFIX.RANK.et (default: the input file's stem)")] = None,
    extras: Annotated[bool, typer.Option("--extras/--no-extras", help="keep podsim's own attributes (exact sizes and times, ids, groups, matmul shapes) beside the schema's fields")] = True,
    generation: Annotated[str | None, typer.Option("--generation", "-g", help="the chip whose per-op model times each compute node (default: the generation a generated trace was made for)")] = None,
    efficiency: Annotated[float | None, typer.Option("--compute-efficiency", help="time compute at this flat fraction of peak instead of the per-op model", callback=q.EFFICIENCY.option("--compute-efficiency"))] = None,
    force: Annotated[bool, typer.Option("--force", help="replace an output folder podsim wrote (whole, once the export is done)")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object on stdout")] = False,
) -> None:
    """Write a trace as Chakra execution traces ASTRA-sim reads: PREFIX.RANK.et per chip, every compute node with its duration."""
    fmt = fmt.lower().replace("_", "-")
    if fmt not in ("chakra", "astra-sim", "astrasim"):
        raise PodsimError(f"--format {fmt!r} is not supported; use chakra or astra-sim")
    trace = load_trace([file])
    shape_text = slice_shape or trace.meta.get("slice")
    if not shape_text:
        raise PodsimError(f"{file.name}: give --slice SHAPE (one .et per chip, e.g. --slice 4x4x8); the trace does not say its slice")
    shape = parse_shape(str(shape_text))
    check_fits(trace, shape)
    ranks = math.prod(shape)
    check_budget("files", ranks, f"--slice {format_shape(shape)}: one .et per chip", "each is a file of the export")
    name = plain_name(prefix, "--prefix") if prefix is not None else safe_component(file.name.split(".")[0], "trace")
    out_dir = output_dir(out_dir, "--out", force=force)  # made by staged_folder below, once the options hold
    configs = []
    if fmt == "chakra":
        refuse_options(ctx, ("algorithm",), "with --format chakra (it sets the ASTRA-sim system file's collectives)")
    else:  # an ASTRA-sim case: network and system configs beside the workload
        gen = generation or trace.meta.get("generation")
        if gen is None:
            raise PodsimError("give --generation GEN: the network and system files describe its chip and ICI")
        network, system = astra_configs(gen, shape, normalise_algorithm(algorithm, field="--algorithm"))
        generation = gen
    et_dir = out_dir if fmt == "chakra" else out_dir / "workload"
    nodes = len(trace.ops) + sum(isinstance(op, SendRecv) for op in trace.ops)
    total = 0
    # The whole folder is staged beside --out and renamed into its place: Ctrl-C, SIGTERM or a
    # full disk leaves the old folder (or none), and an export never mixes with an older one's files.
    names = et_file_names(name, ranks)
    with staged_folder(out_dir) as staging:
        into = staging if fmt == "chakra" else output_folder(staging / "workload")
        for n, data in zip(names, chakra_files(trace, shape, extras=extras, generation=generation,
                                               efficiency=efficiency), strict=True):
            write_new(inside(into, n, "--prefix"), data)
            total += len(data)
        if fmt != "chakra":
            write_text_atomic(staging / "network.yml", network_yaml(network))
            write_text_atomic(staging / "system.json", system_json(system))
    paths = [et_dir / n for n in names]
    if fmt != "chakra":
        configs = [out_dir / "network.yml", out_dir / "system.json"]
    if as_json:
        emit_json({"output": str(out_dir), "files": len(paths), "first": paths[0].name, "bytes": total,
                   "nodes_per_rank": nodes, "ops": len(trace.ops), "slice": format_shape(shape),
                   "configs": [str(p) for p in configs]})
        return
    rows = [("files", f"{len(paths)} ({paths[0].name} .. {paths[-1].name})"), ("ops", str(len(trace.ops))),
            ("nodes per rank", str(nodes)), ("bytes", format_bytes(total)),
            ("read back", f"podsim trace import '{et_dir}/{name}.*.et' --slice {format_shape(shape)} -o trace.json")]
    if configs:
        rows += [("ASTRA-sim configs", ", ".join(p.name for p in configs)),
                 ("run in podsim", f"podsim steptime --trace '{et_dir}/{name}.*.et' --network {configs[0]} --system {configs[1]}")]
    table(f"{trace.name or file.name} -> {out_dir}", rows)


@trace_app.command("show")
@with_budgets("ops", "input_bytes")
def show_cmd(
    files: Annotated[list[Path], typer.Argument(help="a trace file in any supported format (Chakra: one per rank)")],
    generation: Annotated[str | None, typer.Option("--generation", "-g", help="also give the compute time at this generation's peak")] = None,
    slice_shape: Annotated[str | None, typer.Option("--slice", help="check the trace fits this slice shape")] = None,
    clock_ghz: Annotated[float | None, typer.Option("--clock-ghz", help="clock of ASTRA-sim compute cycles", callback=q.CLOCK_GHZ.option("--clock-ghz"))] = None,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object on stdout")] = False,
) -> None:
    """Summarise a trace: ops, FLOPs, bytes per collective kind and per group."""
    shape = _shape(slice_shape)
    if generation and shape:
        parse_shape(slice_shape, get_generation(generation).dims)
    trace = load_trace(files, shape=shape, clock_hz=None if clock_ghz is None else clock_ghz * 1e9)
    s = summarize_trace(trace, generation)
    if as_json:
        emit_json(s)
        return
    table(trace.name or str(files[0]), _summary_rows(s))
    top = list(s["bytes_per_group"].items())[:6]
    if top:
        console.print("bytes per group: " + ", ".join(f"{g}: {format_bytes(b)}" for g, b in top))


@trace_app.command("models")
def models_cmd(as_json: Annotated[bool, typer.Option("--json", help="one JSON object on stdout")] = False) -> None:
    """List the model presets with their sizes and sources."""
    rows = {}
    for name, cfg in PRESETS.items():
        rows[name] = {"kind": cfg.kind, "params": cfg.params, "model_flops_per_step": cfg.training_flops_per_step(), "global_batch": cfg.global_batch, "source": cfg.source}
    if as_json:
        emit_json(rows)
        return
    table("model presets", [(n, f"{r['kind']}, {r['params'] / 1e9:.4g} B params, batch {r['global_batch']}, {r['model_flops_per_step']:.3e} FLOPs/step") for n, r in rows.items()])
