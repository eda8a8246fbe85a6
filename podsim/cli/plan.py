"""`podsim plan MODEL -g GEN --chips N` (or `--slice S [--slices N]`): the best parallelism plans
on a chip budget, confirmed by the engine; with `--tokens 2T`, how long (`--chips`) or the fewest
chips by a deadline (`--days D`), at what cost and energy."""

from __future__ import annotations

import typer

from podsim import quantities as q
from podsim.cli import app
from podsim.cli.common import (
    comma_counts,
    comma_list,
    emit_json,
    progress_lines,
    refuse_options,
    with_budgets,
)
from podsim.errors import PodsimError
from podsim.units import format_bytes, format_percent, format_seconds, parse_duration

CHIPS = q.count("a chip count", 1, q.MAX_FLEET_CHIPS, "at most the largest fleet's chips")


def _fmt_rate(tokens_per_s: float) -> str:
    return f"{tokens_per_s / 1e6:.3g}M" if tokens_per_s >= 1e6 else f"{tokens_per_s / 1e3:.3g}k"


def _search_text(s, summary: dict) -> None:
    from podsim.plan.result import ranked_rows

    c = s.counts
    print(f"{s.query.model} on {summary['chips']:,} {summary['generation']} chips, global batch {summary['global_batch']} "
          f"({summary['tokens_per_step']:,} tokens per step)")
    print(f"plans: {c.enumerated:,} enumerated, {c.refused:,} refused by the generator, {c.over_hbm:,} over HBM, "
          f"{c.dominated:,} dominated (more micro-batches or recompute than needed to fit), {c.bounded:,} bounded out "
          f"(compute alone too slow), {c.ranked:,} ranked, {c.confirmed} confirmed by the engine; "
          f"{s.wall_s['total']:.1f} s ({s.wall_s['prune'] + s.wall_s['rank']:.1f} s analytic, {s.wall_s['confirm']:.1f} s engine)")
    rows = summary["plans"]  # search_summary's plan_rows: not built twice
    if rows:
        w = max(len(r["plan"]) for r in rows)
        print(f"\n{'#':>2} {'plan':<{w}} {'step':>9} {'estimate':>16} {'MFU':>6} {'HFU':>6} {'HBM/chip':>10} {'tokens/s':>9}  why it loses")
        for r in rows:
            est = f"{format_seconds(r['estimate_s'])} ({r['estimate_error']:+.1%})"
            print(f"{r['rank']:>2} {r['plan']:<{w}} {format_seconds(r['step_time_s']):>9} {est:>16} {format_percent(r['mfu']):>6} {format_percent(r['hfu']):>6} "
                  f"{format_bytes(r['hbm_bytes_per_chip']):>10} {_fmt_rate(r['tokens_per_s']):>9}  {r['why']}")
        best = s.best
        from podsim.validation.bands import step_band

        band = step_band(s.context.generation.id, best.assessed.candidate.slices)
        print(f"\nbest: {format_seconds(best.step_s)} per step ({band.text()}); mesh {best.assessed.estimate.mesh}")
        print(f"the same step: {summary['best']['steptime_command']}")
    rest = ranked_rows(s, len(s.ranked))[len(rows):]
    ties = [r for r in rest if r["why"].startswith("ties")]
    losers = [r for r in rest if not r["why"].startswith("ties")][:5]
    if ties:
        print(f"\n{len(ties)} more ranked plan(s) tie the best's estimate within 0.1% (other slice shapes or splits of the same axes)")
    if losers:
        print("next by the estimate (not run on the engine), and why each loses to the best:")
        for r in losers:
            print(f"   {r['plan']}: {format_seconds(r['estimate_s'])}, {r['why']}")
    for a, why in s.engine_refused:
        print(f"engine refused {a.candidate.label()}: {why}")


def _deadline(t) -> str:
    if t.meets_deadline is None:
        return ""
    if not t.meets_deadline:
        return "  (MISSES the deadline)"
    if t.days.high is not None and t.days.high > t.query.days:
        return f"  (meets the deadline; the high end of its range, {t.days.high:.1f} d, does not)"
    return "  (meets the deadline, its whole range too)"


def _train_text(t, summary: dict) -> None:
    from podsim.plan.result import ranged_text

    _search_text(t.search, summary["search"])
    g = t.goodput
    print(f"\ntime to train {t.query.tokens:.3g} tokens" + (f" within {t.query.days:g} days" if t.query.days else ""))
    if t.tried:
        print("  chip counts estimated: " + ", ".join(
            f"{r['chips']:,} ({r['estimated_days']:.1f} d)" if r["estimated_days"] != float("inf") else f"{r['chips']:,} (no plan fits)"
            for r in t.tried))
    rows = [
        ("chips", f"{t.chips:,} = {summary['slices']} x {summary['slice']}"),
        ("plan", summary["plan"]),
        ("step", f"{format_seconds(t.step_s)} ({t.band.text()})"),
        ("steps", f"{t.steps:,} of {t.tokens_per_step:,} tokens"),
        ("goodput", f"{g.goodput:.1%}: {g.interruptions_per_day:.2g} interruptions a day on {g.hosts:,} hosts, each losing "
                    f"{format_seconds(g.lost_per_interruption_s)} (the work since the last checkpoint, one every "
                    f"{format_seconds(g.checkpoint_interval_s)}; a {format_seconds(g.restart_s)} restart; "
                    f"{format_seconds(g.reconfigure_s)} OCS reconfiguration); host failures: {g.source}"),
        ("days", ranged_text(t.days, ".1f") + _deadline(t)),
        ("chip-hours", ranged_text(t.chip_hours, ",.0f")),
        ("cost", f"{ranged_text(t.cost_usd, ',.0f')} USD at {t.price.text()}" if not t.price.missing else
         f"unknown: {t.search.context.generation.id} has no published price per chip-hour ({t.price.source}: {t.price.note}); "
         "give --price-per-chip-hour"),
        ("energy", f"{ranged_text(t.energy_mwh, ',.1f')} MWh of chip power at {t.power.text()}" if not t.power.missing else
         f"unknown: {t.search.context.generation.id} has no published power per chip ({t.power.source}: {t.power.note}); "
         "give --power-per-chip"),
    ]
    w = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"  {k:<{w}}  {v}")


@app.command("plan")
@with_budgets("ops", "flows")
def plan_cmd(
    ctx: typer.Context,
    model: str = typer.Argument(..., help="transformer model preset, e.g. llama2-70b (podsim trace models)"),
    generation: str = typer.Option(..., "--generation", "-g", help="generation id, e.g. tpu-v5p"),
    chips: int = typer.Option(None, "--chips", help="chip budget: every split into equal slices the generation can place", callback=CHIPS.option("--chips")),
    slice_shape: str = typer.Option(None, "--slice", help="a fixed slice shape, e.g. 8x8x16"),
    slices: int = typer.Option(None, "--slices", help="a fixed slice count (with --slice or --chips)", callback=q.JOB_SLICES.option("--slices")),
    global_batch: int = typer.Option(None, "--global-batch", help="sequences per step (default: the preset's)", callback=q.BATCH.option("--global-batch")),
    tokens_per_step: str = typer.Option(None, "--tokens-per-step", help="tokens per step instead of --global-batch, e.g. 4M"),
    set_: list[str] = typer.Option(None, "--set", help="override a model field, e.g. --set n_layers=40 (repeatable)"),
    option: list[str] = typer.Option(None, "--option", help="a generator option held fixed, e.g. --option precision=int8 (repeatable; the searched ones are not allowed)"),
    recompute: str = typer.Option(None, "--recompute", help="recompute policies to search, comma-separated (default: every policy the generator has, e.g. none,minimal,full)"),
    microbatches: str = typer.Option(None, "--microbatches", help="micro-batch counts to search, comma-separated (default: every divisor of the sequences per chip up to 64)"),
    collective_matmul: str = typer.Option("exposed,all_gather,reduce_scatter,chunked", "--collective-matmul", help="collective-matmul modes to search with sequence parallelism"),
    top: int = typer.Option(5, "--top", help="plans confirmed with the engine (0: the analytic ranking only)"),
    tokens: str = typer.Option(None, "--tokens", help="time to train this many tokens, e.g. 2T"),
    days: float = typer.Option(None, "--days", help="with --tokens: the fewest chips that finish in this many days"),
    max_chips: int = typer.Option(65536, "--max-chips", help="with --days: the most chips tried", callback=CHIPS.option("--max-chips")),
    host_availability: float = typer.Option(None, "--host-availability", help="with --tokens: host availability, e.g. 0.999 (with --mttr)", callback=q.AVAILABILITY.option("--host-availability")),
    mtbf: str = typer.Option(None, "--mtbf", help="with --tokens: host mean time between failures, e.g. 6000h"),
    mttr: str = typer.Option(None, "--mttr", help="with --host-availability: mean time to repair (default 1h)"),
    checkpoint_interval: str = typer.Option(None, "--checkpoint-interval", help="with --tokens: run time between checkpoints (default: the cluster's, 1h)"),
    restart_overhead: str = typer.Option(None, "--restart-overhead", help="with --tokens: time to restart from a checkpoint (default: the cluster's, 300s)"),
    price: float = typer.Option(None, "--price-per-chip-hour", help="with --tokens: USD per chip-hour (default: the generation's published price)"),
    power: float = typer.Option(None, "--power-per-chip", help="with --tokens: watts per chip (default: the generation's published power)"),
    as_json: bool = typer.Option(False, "--json", help="one JSON object on stdout"),
) -> None:
    """Search parallelism plans for a model on a chip budget (analytic ranking, engine-confirmed best); with --tokens, time, chips and cost to train."""
    from podsim.cli.steptime import step_options
    from podsim.cluster.failures import host_failure_spec
    from podsim.plan.result import search_summary, train_summary
    from podsim.plan.search import SEARCHED_OPTIONS, PlanQuery, no_fit_advice, refuse_top, search
    from podsim.plan.train import TrainQuery, parse_tokens, refuse_nonpositive, time_to_train
    from podsim.topology import get_generation, parse_shape
    from podsim.trace.configs import parse_overrides

    refuse_top("--top", top)
    if tokens is None:
        refuse_options(ctx, ("days", "max_chips", "host_availability", "mtbf", "mttr", "checkpoint_interval", "restart_overhead",
                             "price", "power"), "without --tokens")
    if days is None:
        refuse_options(ctx, ("max_chips",), "without --days")
    if days is not None and (chips is not None or slice_shape is not None or slices is not None):
        raise PodsimError("--days finds the chips itself: drop --chips, --slice and --slices (or drop --days to time a chip budget)")
    refuse_nonpositive("--days", days, "a number of days ")
    if tokens is not None and days is None and chips is None and slice_shape is None:
        raise PodsimError("--tokens needs --chips (how long on them) or --days (the fewest chips that finish in time)")
    if tokens is None and chips is None and slice_shape is None:
        raise PodsimError("give --chips N (a chip budget) or --slice SHAPE (a slice shape), or --tokens with --days")
    if top == 0 and tokens is not None:
        raise PodsimError("--top 0 ranks without the engine; time to train needs the engine's step: use --top 1 or more")
    refuse_nonpositive("--price-per-chip-hour", price)
    refuse_nonpositive("--power-per-chip", power)
    gen = get_generation(generation)
    overrides = parse_overrides(set_)
    if global_batch is not None and tokens_per_step is not None:
        raise PodsimError("give --global-batch or --tokens-per-step, not both")
    if (global_batch is not None or tokens_per_step is not None) and "global_batch" in overrides:
        raise PodsimError("--set global_batch and --global-batch/--tokens-per-step say the same thing; give one")
    if global_batch is not None:
        overrides["global_batch"] = global_batch
    if tokens_per_step is not None:
        from podsim.trace.plans import model_config

        n = parse_tokens(tokens_per_step)
        seq = model_config(model, {k: v for k, v in overrides.items() if k != "global_batch"}).seq_len
        if n % seq:
            raise PodsimError(f"--tokens-per-step {tokens_per_step}: {n:.0f} tokens is not a whole number of {seq}-token sequences")
        overrides["global_batch"] = int(n // seq)
    opts = step_options(option)
    given = {o.partition("=")[0].strip() for o in option or []}
    for name in SEARCHED_OPTIONS:
        if name in given:
            flag = {"microbatches": "--microbatches", "recompute": "--recompute", "collective_matmul": "--collective-matmul"}.get(name)
            raise PodsimError(f"--option {name}: the search chooses it" + (f"; narrow it with {flag}" if flag else "; leave it out"))
    mbs = tuple(comma_counts(microbatches, "--microbatches", "1,2,4", q.MICROBATCHES)) if microbatches else None
    shape = parse_shape(slice_shape, gen.dims) if slice_shape else None
    query = PlanQuery(model, gen.id, chips=chips, slice=shape, slices=slices, model_overrides=overrides, options=opts,
                      **({"recompute": tuple(comma_list(recompute, "--recompute", "none,full"))} if recompute is not None else {}),
                      microbatches=mbs, tensor_modes=tuple(comma_list(collective_matmul, "--collective-matmul", "exposed,chunked")),
                      top=top)
    progress = None if as_json else progress_lines("podsim plan")

    def on_progress(stage: str, done: float, total: float) -> None:
        if progress is not None:
            progress(done, total, stage)

    if tokens is not None:
        tq = TrainQuery(query, parse_tokens(tokens), days=days, failures=host_failure_spec(host_availability, mtbf, mttr),
                        checkpoint_interval_s=None if checkpoint_interval is None else
                        q.CHECKPOINT_INTERVAL.check(parse_duration(checkpoint_interval), "--checkpoint-interval"),
                        restart_s=None if restart_overhead is None else
                        q.RESTART_OVERHEAD.check(parse_duration(restart_overhead), "--restart-overhead"),
                        price_per_chip_hour=price, power_per_chip_w=power, max_chips=max_chips)
        t = time_to_train(tq, on_progress)
        summary = train_summary(t)
        if as_json:
            emit_json(summary)
        else:
            _train_text(t, summary)
        return
    s = search(query, on_progress)
    if not s.ranked:
        raise PodsimError(no_fit_advice(s))
    summary = search_summary(s)
    if as_json:
        emit_json(summary)
    else:
        _search_text(s, summary)
