"""`podsim steptime`: simulate a collective, or a whole step trace, on a slice.

    podsim steptime --generation tpu-v4 --slice 16x16x16 --collective all_reduce --bytes 1GiB
    podsim steptime --trace step.json --generation tpu-v4 --slice 8x16x16 [--json]
    podsim steptime --model llama2-70b -p fsdp=32,tensor=4 --generation tpu-v4 --slice 4x4x8 [--option recompute=full]
    podsim steptime --trace dcn32.json --generation tpu-v5e --slice 16x16 [--slices 32] [--dcn ocs]
    podsim steptime --trace all_reduce.*.et --network inputs_network_tpu_v3_8.yml
"""

from __future__ import annotations

import dataclasses
import glob
import math
from typing import TYPE_CHECKING

import typer

from podsim import quantities as q
from podsim.cli import app
from podsim.cli.common import (
    check_timeline_path,
    emit_json,
    refuse_options,
    table,
    with_budgets,
    write_timeline,
)
from podsim.collectives import ALGORITHMS, KINDS
from podsim.collectives.fabricroutes import check_routing
from podsim.engine import simulate_collective
from podsim.engine.jobs import declared_slices
from podsim.engine.linkload import record_link_load
from podsim.engine.results import CollectiveResult
from podsim.errors import PodsimError, first_error
from podsim.study.multislice import STRAGGLER_CV
from podsim.topology import build_slice, format_shape, get_generation, parse_shape
from podsim.topology.dcn import dcn_choice
from podsim.topology.dcntiers import TIERS_HELP
from podsim.topology.multipath import ROUTING_POLICIES
from podsim.trace.kinds import normalise_algorithm, normalise_kind
from podsim.trace.model import DEFAULT_COMPUTE_EFFICIENCY
from podsim.units import format_bytes, format_percent, format_rate, format_seconds, parse_bytes

if TYPE_CHECKING:
    from podsim.study import StepStudy
    from podsim.trace.generate import GenerateOptions

# A step (--trace, --model) imports the step study, the generator and the importers where it
# runs, so one collective on one slice starts without them (benchmarks/bench_startup.py).


def collective_rows(r: CollectiveResult) -> list[tuple[str, str]]:
    """Human-readable rows of one collective's result."""
    gap = r.simulated_s / r.closed_form_s - 1 if r.closed_form_s > 0 else 0.0
    rows = [
        ("collective", f"{r.kind} of {format_bytes(r.size_bytes)} over group {r.group} ({r.group_size} chips, {r.instances} instance(s))"),
        ("algorithm", r.algorithm),
        ("simulated time", format_seconds(r.simulated_s)),
        ("closed-form time", f"{format_seconds(r.closed_form_s)} (simulated {gap:+.2%})"),
        ("algorithm bandwidth", format_rate(r.algbw_bytes_per_s)),
        ("bus bandwidth", f"{format_rate(r.busbw_bytes_per_s)} per chip"),
        ("engine", f"{r.engine_wall_s:.3f} s wall, {r.events} events, {r.flows_simulated:,} of {r.flows:,} flows simulated"
                   + (" (symmetry fast path)" if r.fast_path else "")),
    ]
    if len(r.candidates_s) > 1:
        rows.append(("closed form by algorithm", ", ".join(f"{a} {format_seconds(t)}" for a, t in sorted(r.candidates_s.items(), key=lambda kv: kv[1]))))
    return rows


def step_rows(result, constants: str = "") -> list[tuple[str, str]]:
    """Human-readable rows of a step's RunResult (its metrics and step_kinds table); `constants`:
    the compute constants the step read, with their basis (podsim.engine.summary.compute_constants_text)."""
    from podsim.trace.memory import hbm_text

    m = result.metrics
    band = m.get("step_time_error_text")
    rows = [
        ("step time", format_seconds(m["step_time_s"]) + (f" ({band})" if band else "")),
        ("compute", format_seconds(m["compute_s"])),
        *([("compute constants", constants)] if constants else []),
        ("communication", f"{format_seconds(m['comm_s'])} busy, {format_seconds(m['exposed_comm_s'])} exposed"),
    ]
    slices = m.get("slices", 1)
    for level, label in (("ici", "ICI (inside slices)"), ("dcn", f"DCN (across {slices} slices)"), ("wan", "WAN (across sites)")):
        busy = m.get(f"{level}_busy_s")
        if busy is not None and (busy > 0 or level == "dcn" and slices > 1):
            rows.append((label, f"{format_seconds(busy)} busy, {format_seconds(m[f'{level}_exposed_s'])} exposed"))
    if slices > 1:
        rows.extend(tier_rows(m))
        rows.append(("multislice", multislice_text(m)))
    k = result.table("step_kinds")
    for i in sorted(range(len(k["kind"])), key=lambda i: k["kind"][i]):
        rows.append((k["kind"][i], f"{int(k['ops'][i])} ops, {format_bytes(k['bytes'][i])}, {format_seconds(k['busy_s'][i])} busy; "
                                   f"op time {format_seconds(k['op_s'][i])} (closed form {format_seconds(k['closed_form_s'][i])})"))
    if m.get("input_s"):
        rows.append(("host input", f"{format_seconds(m['input_s'])} per step on the hosts; " + (
            f"input-bound: the chips wait {format_seconds(m['input_wait_s'])} for it" if m["input_bound"] else "the chips take longer (not input-bound)")))
    if not math.isnan(m.get("mfu", math.nan)):
        err = m.get("step_time_error", math.nan)
        rows.append(("model FLOPs utilisation", f"{format_percent(m['mfu'])} of the bf16 peak" + ("" if math.isnan(err) else f" (±{err:.0%}, as the step time)")))
    if not math.isnan(m.get("hfu", math.nan)):
        rows.append(("hardware FLOPs utilisation", f"{format_percent(m['hfu'])} of the bf16 peak (recomputation included)"))
    if "hbm_bytes_per_chip" in m:
        rows.append(("HBM per chip", hbm_text(m["hbm_bytes_per_chip"], m.get("hbm_capacity_bytes"))))
    rows.append(("engine", f"{m['engine_wall_s']:.3f} s wall, {m['events']:,} events, {m['flows_simulated']:,} of {m['flows']:,} flows simulated"))
    return rows


def multislice_text(m: dict) -> str:
    """What the slices add beyond one slice's step, term by term with its source (the metrics of
    podsim.study.multislice): 'straggler wait 0.12 s (source), DCN tail 0.013 s, ECMP collisions 0 s'."""
    from podsim.study.multislice import terms_text

    notes = {term: m[f"{term}_source"] for term in ("straggler", "ecmp_collision") if f"{term}_source" in m}
    return terms_text(m.get("straggler_wait_s", 0.0), m.get("dcn_tail_s", 0.0), m.get("ecmp_collision_s", 0.0), notes)


def tier_rows(m: dict) -> list[tuple[str, str]]:
    """Per DCN tier (StepResult.tiers, as metrics tier_<name>_<figure>): the ops that climb to it
    and the time its busiest link needs for the step's bytes."""
    tiers = [k.removeprefix("tier_").removesuffix("_link_busy_s") for k in m if k.startswith("tier_") and k.endswith("_link_busy_s")]
    return [(f"  DCN tier {t}", f"{format_seconds(m[f'tier_{t}_busy_s'])} busy, {format_seconds(m[f'tier_{t}_exposed_s'])} exposed; "
                                f"its busiest link needs {format_seconds(m[f'tier_{t}_link_busy_s'])}"
                                + (f"; ECMP collisions {format_seconds(m[f'tier_{t}_ecmp_collision_s'])}"
                                   if m.get(f"tier_{t}_ecmp_collision_s") else ""))
            for t in tiers]


def expand_paths(patterns: list[str]) -> list[str]:
    """Shell-style patterns (quoted 'all_reduce.*.et') to sorted paths; a pattern that matches
    nothing is kept as given so the loader names the missing file."""
    out: list[str] = []
    for p in patterns:
        hits = sorted(glob.glob(p)) if glob.has_magic(p) else []
        out.extend(hits or [p])
    return out


def resolve_slices(trace, given: int | None) -> int:
    """The job's slice count: `--slices`, else what the trace says (dcn=N), else 1; the two
    disagreeing is an error."""
    declared = declared_slices(trace)
    if given is not None:
        if given < 1:
            raise PodsimError(f"--slices {given}: give a whole number >= 1")
        if declared is not None and declared != given:
            raise PodsimError(f"--slices {given} conflicts with the trace, made for {declared} slice(s) (dcn={declared}); drop --slices or regenerate the trace")
        return given
    return declared or 1




def _assignments(items: list[str] | None, flag: str, example: str, tp, unknown: str):
    """`FLAG KEY=VALUE` (repeatable) validated as `tp`, each value read as its field's type; a
    boolean field takes only true or false (pydantic would read 1 or yes as true), an unknown key is
    refused with `unknown`, any other error in one line naming the key."""
    from pydantic import TypeAdapter, ValidationError

    from podsim.quantities import find_nonbool
    from podsim.trace.configs import parse_assignments

    given = parse_assignments(items, flag, example)
    bad = find_nonbool(given, tp)
    if bad is not None:
        raise PodsimError(f"{flag} {'.'.join(map(str, bad[0]))}={bad[1]}: not a boolean; give true or false")
    try:
        return TypeAdapter(tp).validate_python(given)
    except ValidationError as exc:
        where, msg = first_error(exc, flag.removeprefix("--"))
        if exc.errors()[0]["type"] in ("unexpected_keyword_argument", "extra_forbidden"):
            msg = unknown
        raise PodsimError(f"{flag} {where}: {msg}") from None


def step_options(items: list[str] | None) -> GenerateOptions:
    """`--option KEY=VALUE` (repeatable) as the generator's GenerateOptions, each value read as its
    field's type (e.g. recompute=full, collective_matmul=true, microbatches=8)."""
    from podsim.trace.generate import GenerateOptions

    allowed = ", ".join(f.name for f in dataclasses.fields(GenerateOptions) if f.name != "mesh")
    return _assignments(items, "--option", "recompute=full", GenerateOptions, f"unknown option; options: {allowed}")


def multislice_spec(items: list[str] | None):
    """`--multislice KEY=VALUE` (repeatable) as the study's MultisliceSpec: straggler=false,
    straggler_cv=0.01, ecmp_collisions=false (podsim.study.multislice)."""
    from podsim.study.multislice import MultisliceSpec

    return _assignments(items, "--multislice", "straggler=false", MultisliceSpec,
                        f"unknown term; terms: {', '.join(MultisliceSpec.model_fields)}")


OPTION_HELP = ("a generator option KEY=VALUE, e.g. --option recompute=full (repeatable; the fields of "
               "podsim.trace.GenerateOptions). Defaults as current programs run (podsim.trace.defaults): a tensor axis shards "
               "the activations between blocks (sequence_parallel, as MaxText's logical_axis_rules shard activation_embed over "
               "tensor) and, on TPUs, collective_matmul=chunked (the TPU compiler decomposes tensor-parallel einsums unless told "
               "not to: MaxText's DISABLE_COLLECTIVE_MATMUL flag); give sequence_parallel=false or collective_matmul=exposed "
               "for a Megatron all-reduce program")
MULTISLICE_HELP = ("with several slices: switch a term of what they add, KEY=VALUE (repeatable): straggler=false (the expected "
                   f"wait for the slowest slice: the expected maximum of N normals x a per-slice step-time CV of {STRAGGLER_CV:.2%}, from "
                   "the published trace of Lin et al., OSDI 2025), straggler_cv=0.01, ecmp_collisions=false (per-flow hashing on the DCN uplinks); "
                   "see docs/multislice.md")


def cli_study(files: list[str] | None, model: str | None, generation: str | None, network: str | None,
              slice_shape: str | None, twisted: bool, efficiency: float | None, fast_path: bool, slices: int | None,
              dcn: str, oversubscription: float, wan: tuple[int, float, float, str], routing: str,
              plan: str | None = None, overrides: list[str] | None = None, options: list[str] | None = None,
              system: str | None = None, tiers: str | None = None, multislice: list[str] | None = None) -> tuple[StepStudy, list[str]]:
    """The step study `podsim steptime --trace FILE | --model MODEL ...` asks for (`system`: an
    ASTRA-sim system file beside `network`: its collective implementations and roofline), and the
    notes to print with its result (after it: a run refused later says one line only)."""
    from podsim.study import StepStudy
    from podsim.trace import load_trace
    from podsim.trace.astra_network import apply_system, network_generation, read_system
    from podsim.trace.configs import parse_overrides

    if bool(files) == (model is not None):
        raise PodsimError("give --trace FILE (a step trace) or --model MODEL (a preset, generated for --parallelism), one of the two")
    if (generation is None) == (network is None):
        raise PodsimError("give --generation GEN (with --slice) or --network ASTRA_NETWORK.yml for a trace")
    if model is not None and network is not None:
        raise PodsimError("--network describes an ASTRA-sim trace's network; give --generation with --model")
    if system is not None and network is None:
        raise PodsimError("--system ASTRA_SYSTEM.json goes with --network ASTRA_NETWORK.yml (an ASTRA-sim case)")
    astra = read_system(system) if system else None
    gen = network_generation(network, astra) if network else get_generation(generation)
    if astra is not None:
        astra.check_dimensions(sum(1 for n in gen.pod_shape if n > 1))
    shape = parse_shape(slice_shape, gen.dims) if slice_shape else None
    spec, engineer = dcn_choice(dcn, oversubscription, *wan, tiers=tiers)
    common = {"twisted": twisted, "compute_efficiency": efficiency, "fast_path": fast_path, "dcn": spec,
              "engineer_dcn": engineer, "routing": routing, "multislice": multislice_spec(multislice)}
    if model is not None:
        return StepStudy(gen, shape, model=model, plan=plan, model_overrides=parse_overrides(overrides),
                         options=step_options(options), slices=slices or 1, name=model, **common), []
    for flag, given in (("--parallelism", plan), ("--set", overrides), ("--option", options)):
        if given:
            raise PodsimError(f"{flag} shapes a generated step (--model); a trace file holds its own ops and plan")
    trace = load_trace(expand_paths(files), shape=shape or gen.pod_shape)
    notes = []
    if astra is not None:
        trace = apply_system(trace, astra, tuple(shape or gen.pod_shape))
        if astra.unmodelled:
            notes.append(f"note: {astra.path}: podsim's flow-level engine has no counterpart for "
                         + ", ".join(f"{k} {v}" for k, v in astra.unmodelled.items()) + "; they are not modelled")
    return StepStudy(gen, shape, trace=trace, slices=resolve_slices(trace, slices), name=trace.name or "trace", **common), notes


def _step_mode(study: StepStudy, as_json: bool, timeline: str | None, title: str, notes: list[str] = ()) -> None:
    from podsim.engine.summary import compute_constants_text
    from podsim.scenario.run import STEP_JSON_TABLES, step_result
    from podsim.study import run_study
    from podsim.trace.memory import fits_message

    check_timeline_path(timeline)
    with record_link_load(timeline is not None) as load:
        r = run_study(study)
    if timeline:
        write_timeline(timeline, r, load.last, title=title)
    result = step_result(study, r=r)
    m = result.metrics
    for note in notes:
        typer.echo(note, err=True)
    if m.get("hbm_fits") is False:
        typer.echo("warning: " + fits_message(m["hbm_bytes_per_chip"], m["hbm_capacity_bytes"]), err=True)
    if as_json:
        emit_json(result.summary(tables=STEP_JSON_TABLES))  # compute_constants: the constants the text prints
        return
    n, shape_name = study.slices, m["slice"]
    where = shape_name if n == 1 else f"{n} x {shape_name} on {m['pods']} pod(s), {m['dcn']} DCN"
    if study.sites > 1:
        where += f", {study.sites} sites"
    table(f"{title} on {study.generation.name} — {where}", step_rows(result, compute_constants_text(r, study.compute_efficiency)))


@app.command("steptime")
@with_budgets("ops", "flows", "input_bytes")
def steptime_cmd(
    ctx: typer.Context,
    generation: str = typer.Option(None, "--generation", help="generation id, e.g. tpu-v4"),
    trace_files: list[str] = typer.Option(None, "--trace", help="a step trace (podsim JSON/YAML, ASTRA-sim text, Chakra .et/.json); for Chakra, one file per rank: repeat --trace or quote a pattern like 'all_reduce.*.et'"),
    network: str = typer.Option(None, "--network", help="with --trace: an ASTRA-sim network .yml instead of --generation"),
    system: str = typer.Option(None, "--system", help="with --network: an ASTRA-sim system .json (collective implementations per dimension, roofline)"),
    model: str = typer.Option(None, "--model", help="a model preset (podsim trace models): its step generated for --parallelism, instead of --trace"),
    parallelism: str = typer.Option(None, "--parallelism", "-p", help="with --model: the plan inside a slice, e.g. fsdp=16,tensor=4 (one axis may be auto; dcn is set to --slices); default: FSDP as far as the batch splits, tensor parallel over the rest"),
    set_: list[str] = typer.Option(None, "--set", help="with --model: override a model field, e.g. --set global_batch=2048 (repeatable)"),
    option: list[str] = typer.Option(None, "--option", help="with --model: " + OPTION_HELP),
    multislice: list[str] = typer.Option(None, "--multislice", help=MULTISLICE_HELP),
    efficiency: float = typer.Option(None, "--compute-efficiency", help=f"with a step: a flat fraction of peak FLOP/s for every compute op (e.g. {DEFAULT_COMPUTE_EFFICIENCY}, hardware.md perf.3) instead of the per-op model", callback=q.EFFICIENCY.option("--compute-efficiency")),
    slice_shape: str = typer.Option(None, "--slice", help="slice shape, e.g. 4x4x8; default: the whole pod"),
    twisted: bool = typer.Option(False, "--twisted", help="twisted torus (k x k x 2k or k x 2k x 2k)"),
    collective: str = typer.Option(None, "--collective", help=f"one of: {', '.join(KINDS)}"),
    size: str = typer.Option(None, "--bytes", help="size in the nccl-tests convention, e.g. 1GiB, 256MB, 4096"),
    group: str = typer.Option("all", "--group", help="slice axes of the group: x, x,y, all, x:4 ..."),
    algorithm: str = typer.Option("auto", "--algorithm", help=f"auto (fastest by closed form) or one of: {', '.join(ALGORITHMS)}"),
    slices: int = typer.Option(None, "--slices", help="with a step: slices of a multislice job (default: a trace's dcn=N, else 1)", callback=q.JOB_SLICES.option("--slices")),
    dcn: str = typer.Option("eps", "--dcn", help="with a step: data-centre network between slices: eps (leaf-spine Clos), ocs (uniform OCS mesh), ocs-job (OCS circuits engineered for the job)"),
    oversubscription: float = typer.Option(1.0, "--oversubscription", help="with --dcn eps: NIC bandwidth : spine uplink bandwidth", callback=q.OVERSUBSCRIPTION.option("--oversubscription")),
    sites: int = typer.Option(1, "--sites", help="with a step: data centres the slices split over, joined by WAN links (EPS DCN)", callback=q.SITES.option("--sites")),
    wan_latency_ms: float = typer.Option(1.0, "--wan-latency-ms", help="with --sites: one-way WAN latency (assumption: 1 ms, ~200 km of fibre)", callback=q.WAN_LATENCY.option("--wan-latency-ms", scale=1e-3, unit="ms")),
    wan_gbps: float = typer.Option(12800.0, "--wan-gbps", help="with --sites: WAN capacity per site pair and direction, Gb/s (assumption: 16 x 800GbE)", callback=q.WAN_GBPS.option("--wan-gbps")),
    ecmp: str = typer.Option("split", "--ecmp", help="with --dcn eps: split (each flow evenly over the spines) or hash (one spine per NIC pair, collisions included)"),
    dcn_tiers: str = typer.Option(None, "--dcn-tiers", help=f"with a step: the DCN in tiers (NIC -> ToR -> aggregation block -> spine): {TIERS_HELP}"),
    no_fast_path: bool = typer.Option(False, "--no-fast-path", help="simulate every flow (no symmetry folding)"),
    routing: str = typer.Option("dimension_order", "--routing", help=f"ICI routing in the slice: {', '.join(ROUTING_POLICIES)}"),
    timeline: str = typer.Option(None, "--timeline", help="with a step: write the step as Chrome trace-event JSON (open in Perfetto), e.g. step.json"),
    as_json: bool = typer.Option(False, "--json", help="one JSON object on stdout"),
) -> None:
    """Simulate a collective on a slice (simulated and closed-form time, algorithm and bus
    bandwidth), or a whole training step (--trace FILE or --model MODEL: step time and where it goes)."""
    check_routing(routing)
    if trace_files or model is not None:
        for flag, given in (("--collective", collective is not None), ("--bytes", size is not None),
                            ("--group", group != "all"), ("--algorithm", algorithm != "auto")):
            if given:
                raise PodsimError(f"{flag} applies to one collective (--collective KIND --bytes SIZE), not to a step")
        if sites == 1:
            refuse_options(ctx, ("wan_latency_ms", "wan_gbps"), "without --sites > 1 (no WAN links)")
        study, notes = cli_study(trace_files, model, generation, network, slice_shape, twisted, efficiency, not no_fast_path, slices,
                          dcn, oversubscription, (sites, wan_latency_ms, wan_gbps, ecmp), routing, parallelism, set_, option,
                                 system, dcn_tiers, multislice)
        _step_mode(study, as_json, timeline, study.model_name or (trace_files or ["trace"])[0], notes)
        return
    for flag, given in (("--timeline", timeline is not None), ("--slices", slices is not None), ("--network", network is not None),
                        ("--system", system is not None),
                        ("--compute-efficiency", efficiency is not None), ("--dcn", dcn != "eps"),
                        ("--oversubscription", oversubscription != 1.0), ("--sites", sites != 1),
                        ("--wan-latency-ms", wan_latency_ms != 1.0), ("--wan-gbps", wan_gbps != 12800.0),
                        ("--ecmp", ecmp != "split"), ("--dcn-tiers", dcn_tiers is not None),
                        ("--parallelism", parallelism is not None), ("--set", bool(set_)),
                        ("--option", bool(option)), ("--multislice", bool(multislice))):
        if given:
            raise PodsimError(f"{flag} applies to a step (--trace FILE or --model MODEL), not to one collective on one slice")
    if generation is None:
        raise PodsimError("give --generation GEN (e.g. --generation tpu-v4)")
    if collective is None or size is None:
        raise PodsimError("give --collective KIND and --bytes SIZE (e.g. --collective all_reduce --bytes 1GiB)")
    collective, algorithm = normalise_kind(collective, field="--collective"), normalise_algorithm(algorithm, field="--algorithm")
    nbytes = q.OP_BYTES.check(parse_bytes(size), "--bytes")
    built = build_slice(generation, slice_shape, twisted=twisted)
    r = simulate_collective(built, collective, nbytes, group=group, algorithm=algorithm, fast_path=not no_fast_path,
                            routing=routing)
    if as_json:
        out = r.to_dict()
        out.update(generation=generation, slice=format_shape(built.slice.shape), twisted=built.slice.twisted, routing=routing)
        emit_json(out)
        return
    name = built.fabric.generation.name
    table(f"{name} — {format_shape(built.slice.shape)}{' twisted' if built.slice.twisted else ''}, {routing} routing",
          collective_rows(r))
