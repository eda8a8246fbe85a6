"""Validation table: published measured TPU step times next to podsim's prediction.

Rows, sources and error rules: podsim/validation/table.py and docs/validation.md.
Run (from the repository root, a few minutes on 2 cores):

    PYTHONPATH=$PWD .venv/bin/python benchmarks/validation.py            # the whole table, cross-validated
    PYTHONPATH=$PWD .venv/bin/python benchmarks/validation.py M1 M9 P1   # some rows (no cross-validation)
    PYTHONPATH=$PWD .venv/bin/python benchmarks/validation.py --no-cv    # the whole table, plain figures only
    PYTHONPATH=$PWD .venv/bin/python benchmarks/validation.py --calibrate  # refit every calibrated constant on its rule-picked row
    PYTHONPATH=$PWD .venv/bin/python benchmarks/validation.py --calibrate tpu-v5p:hbm=P32x1@128  # try another row (refused if not eligible)
    PYTHONPATH=$PWD .venv/bin/python benchmarks/validation.py --markdown   # the table for docs/validation.md
    PYTHONPATH=$PWD .venv/bin/python benchmarks/validation.py --tf1        # the TF1 rows, each setting switched back
    PYTHONPATH=$PWD .venv/bin/python benchmarks/validation.py --sharding   # sharded activations, collective matmul, host input switched back
    PYTHONPATH=$PWD .venv/bin/python benchmarks/validation.py --multipod-wrap  # the v3 multipod rows with the long axis closed
    PYTHONPATH=$PWD .venv/bin/python benchmarks/validation.py --as-user    # every row also as a user would give it (podsim's defaults)
    PYTHONPATH=$PWD .venv/bin/python benchmarks/validation.py --serving    # the serving table only (plain and cross-validated)
    PYTHONPATH=$PWD .venv/bin/python benchmarks/validation.py --serving --server --saxml --write-bands --markdown --calibrate
    PYTHONPATH=$PWD .venv/bin/python benchmarks/validation.py --series     # the multislice series only (per-chip throughput ratios)
    PYTHONPATH=$PWD .venv/bin/python benchmarks/validation.py --write-bands  # the whole table, then podsim/data/error_bands.json from it

After the table, the multislice series (podsim.validation.SERIES): one model measured at several
slice counts, its per-chip throughput relative to the fewest slices, measured and predicted.

The serving table (podsim/validation/serving_table.py) follows the training table: measured serving runs
(TensorRT-LLM's tables, MLPerf Inference on H100s and TPU v5e, JetStream) against podsim's serving
simulation, with the calibration rule's rows marked and leave-one-out / leave-one-source-out errors.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

from podsim.errors import PodsimError
from podsim.validation import ROWS, SERIES, bands, series_table
from podsim.validation.split import (
    HOST_CONSTANTS,
    Predictor,
    calibrate,
    calibration_rows,
    check_can_calibrate,
    check_identifiable,
    constants,
    cross_validate,
    current_values,
    row_facts,
    sensitivity,
    unidentified,
)
from podsim.validation.table import (
    SERIES_TOLERANCE,
    as_user,
    band_errors,
    constants_by_row,
    error,
    kind_figures,
    predict,
    record,
    summarise,
)

TF1_SETTINGS = {"combined all-reduce": {"combine_grad_reduce": False}, "replica per TensorCore": {"replicas_per_chip": 1},
                "fp32 gradients": {"grad_bytes": 2}, "distributed batch norm": {"bn_group": 1}}
# issue 22's per-row settings (podsim/validation/table.py): switching sharded activations off goes
# back to Megatron all-reduces, which no collective matmul decomposes
SHARDING_SETTINGS = {"collective matmul": {"collective_matmul": "exposed"},
                     "sharded activations": {"sequence_parallel": False, "collective_matmul": "exposed"},
                     "host input": {"input_pipeline": "none"}}


def _fmt_s(x: float) -> str:
    return f"{x * 1e3:.2f} ms" if x < 1 else f"{x:.2f} s"


def _pct(x: float | None) -> str:
    """A utilisation as a percentage; '-' when the row has none."""
    return f"{x:.1%}" if x else "-"


def _peak(r: dict) -> str:
    """The precision whose peak the row's MFU and HFU are taken against (podsim.validation.table.peak_scale)."""
    return f"of {r['peak_precision']} peak"


def _measured(r: dict) -> str:
    if r["kind"] == "range":
        return f"{_fmt_s(r['measured_s'])}-{_fmt_s(r['measured_hi_s'])}"
    return ("<= " if r["kind"] == "upper_bound" else "") + _fmt_s(r["measured_s"])


def _implied(r: dict) -> str:
    """The value a row is scored against (split rule R6), where it is not the measurement."""
    return "" if r["kind"] == "measured" else f" (implies {_fmt_s(r['implied_s'])})"


HEAD = f"{'id':13} {'system':36} {'model':13} {'measured':>26} {'podsim':>10} {'error':>7}"


def _line(r: dict) -> str:
    tag = f" [calibration: {r['calibration']}]" if r["calibration"] else ""
    tag += f" [{r['unscored']}]" if r.get("unscored") else ""
    return (f"{r['id']:13} {r['system'][:36]:36} {r['model'][:13]:13} {_measured(r) + _implied(r):>26} {_fmt_s(r['predicted_s']):>10} "
            f"{r['error']:+7.1%}  MFU {_pct(r['mfu']):>6} HFU {_pct(r['hfu']):>6} {_peak(r):13}  "
            f"({r['engine_wall_s']:.1f} s){tag}")


def _hbm(r: dict) -> str:
    """HBM bytes per chip (podsim.trace.memory), marked when over the chip's capacity."""
    if r.get("hbm_bytes_per_chip") is None:
        return "-"
    return f"{r['hbm_bytes_per_chip'] / 2**30:.1f} GiB" + ("" if r["hbm_fits"] else " (over)")


def _markdown(table: list[dict]) -> str:
    out = ["| id | system | model | measured | scored against (R6) | podsim | error | LOO | LOSO | MFU | HFU | peak | recompute | HBM per chip | note |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        note = f"**calibration** ({r['calibration']})" if r["calibration"] else ""
        if r["assumed"]:
            note = (note + "; " if note else "") + r["assumed"]
        if r.get("no_basis"):
            note = (note + "; " if note else "") + "no basis (the vendor's figure): " + ", ".join(r["no_basis"])
        if r.get("unscored"):
            note = (note + "; " if note else "") + r["unscored"]
        cv = "".join(f" {r[k]:+.1%} |" if k in r else " - |" for k in ("loo", "loso"))
        out.append(f"| {r['id']} | {r['system']} | {r['model']} | {_measured(r)} | {_fmt_s(r['implied_s'])} | {_fmt_s(r['predicted_s'])} | "
                   f"{r['error']:+.1%} |{cv} {_pct(r['mfu'])} | {_pct(r['hfu'])} | {r['peak_precision']} | {r['recompute']} | {_hbm(r)} | {note} |")
    return "\n".join(out)


def setting_effects(settings: dict[str, dict], rows) -> None:
    """Each row's error (and step) as built and with each of its code-stated settings switched back."""
    def cell(row) -> str:
        t = predict(row)["step_time_s"]
        return f"{error(row, t):+.1%} ({_fmt_s(t)})"

    print(f"{'id':4} {'as built':>20}  " + "  ".join(f"{'without ' + k:>28}" for k in settings))
    for r in rows:
        cells = [f"{cell(r):>20}"]
        for change in settings.values():
            same = all(getattr(r.options, k) == v for k, v in change.items())
            cells.append(f"{'(same)' if same else cell(replace(r, options=replace(r.options, **change))):>28}")
        print(f"{r.id:4} " + "  ".join(cells), flush=True)


def multipod_wrap() -> None:
    """The v3 multipod rows (M3, M7) as wired (the 128-chip axis a mesh line, MULTIPOD-WRAP) and
    with that axis closed into a ring, the what-if docs/validation.md quotes."""
    from podsim.topology.generations import custom_generation

    ring = custom_generation("tpu-v3-multipod", "tpu-v3-multipod-ring", "long axis closed into a ring", axis_wraps=(True, True))
    print(f"{'id':4} {'as wired':>20}  {'long axis a ring':>20}")
    for r in (r for r in ROWS if r.generation == "tpu-v3-multipod"):
        cells = []
        for gen in (r.generation, ring):
            t = predict(replace(r, generation=gen))["step_time_s"]
            cells.append(f"{error(r, t):+.1%} ({_fmt_s(t)})")
        print(f"{r.id:4} " + "  ".join(f"{c:>20}" for c in cells), flush=True)


def _serving_figure(r: dict, value: float | None) -> str:
    """A serving row's figure in its unit: seconds (offline) or samples/s (server)."""
    if value is None:
        return "refused"
    return _fmt_s(value) if r["scenario"] == "offline" else f"{value:.2f}/s"


def _serving_cells(r: dict) -> tuple[str, str, str, str]:
    """A serving row's podsim figure, error, p99 and minimum latency at the run's scheduled rate
    (podsim / measured), or 'refused'."""
    p99 = f"{_fmt_s(r['predicted_p99_s'])} / {_fmt_s(r['measured_p99_s'])}" if r["measured_p99_s"] and r["predicted_p99_s"] else "-"
    low = f"{_fmt_s(r['predicted_min_s'])} / {_fmt_s(r['measured_min_s'])}" if r["measured_min_s"] and r["predicted_min_s"] else "-"
    if r["error"] is None:
        return "refused", "miss", p99, low
    return _serving_figure(r, r["predicted"]), f"{r['error']:+.1%}", p99, low


def _serving_markdown(table: list[dict]) -> str:
    out = ["| id | system | scenario | measured (as logged) | measured | podsim | error | at the run's rate: p99 podsim / measured "
           "| min latency podsim / measured | note |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        note = f"**calibration** ({r['calibration']}); " if r["calibration"] else ""
        note += f"podsim refuses: {r['refused']}; " if r["refused"] else ""
        if r["rate_probes"]:
            note += (f"rate search: {r['rate_probes']} probes x {r['rate_replicates']} seeds, Poisson rate "
                     f"{r['rate_rps']:.3f}/s meets (p99 / early-stopping estimate, mean {r['rate_p99_s']:.2f} s), "
                     f"{r['rate_missed_rps']:.3f}/s misses; ")
        pred, err, p99, low = _serving_cells(r)
        out.append(f"| {r['id']} | {r['system']} | {r['scenario']}: {r['metric']} | {r['logged']} | "
                   f"{_serving_figure(r, r['measured'])} | {pred} | {err} | {p99} | {low} | {note}{r['assumed']} |")
    return "\n".join(out)


SENSITIVITY_REPLICATES = 2  # seeds of the what-if's rate searches, to 0.05/s (the table's: serving.SERVER_REPLICATES, RATE_TOLERANCE_RPS)


def serving_table(argv: list[str]) -> None:
    """The serving table (podsim.validation.serving_table): every engine row and the Saxml rows, plain and
    cross-validated errors; `--server` adds the MLPerf Llama 2 70B Server rate searches (minutes),
    `--write-bands` stores the serving bands beside the step bands, `--saxml` prints the Saxml rows' diagnostics."""
    from podsim.serving import engines
    from podsim.validation import serving_table as st
    from podsim.validation.serving_rows import ALL_ROWS

    if "--calibrate" in argv:
        t0 = time.perf_counter()
        for engine, (source, value) in st.calibrate(ALL_ROWS).items():
            param = st.CALIBRATED[engine]
            stored = getattr(engines.ENGINES[engine][next(iter(engines.ENGINES[engine]))], param).value
            print(f"{engine} {param} = {value:.6g} s ({source}); in use {stored:.6g} s")
        print(f"calibrated in {time.perf_counter() - t0:.0f} s")
        return
    print(st.HEADER)
    t0 = time.perf_counter()
    table, cv = st.run_table(server="--server" in argv, on_row=lambda r: print(st.line(r), flush=True))
    s = st.summarise(table, cv)
    print("\n" + "\n".join(st.line(r, cv) for r in table))
    print(f"\nserving table: {s['scored']} scored rows from {len(s['groups'])} sources ({', '.join(s['groups'])}), "
          f"{s['calibration']} calibration rows, {s['refused']} refused (a full miss): median |error| "
          f"{s['median_abs_error']:.1%}, max {s['max_abs_error']:.1%}; cross-validated over all {s['rows']} rows: "
          f"leave-one-out median {s['loo_median_abs_error']:.1%} (max {s['loo_max_abs_error']:.1%}), leave-one-source-out "
          f"median {s['loso_median_abs_error']:.1%} (max {s['loso_max_abs_error']:.1%}). Wall time {time.perf_counter() - t0:.0f} s.")
    for per in engines.ENGINES.values():
        for model in per.values():
            print("  " + model.describe())
    if "--markdown" in argv:
        print("\n" + st.markdown(table, cv))
    if "--write-bands" in argv:
        write_serving_bands(table)
    if "--saxml" in argv:
        saxml_diagnostics([])


def saxml_diagnostics(ids: list[str]) -> None:
    """The Saxml rows' diagnostics: praxis's costs cumulatively, the Offline rows' sorted batches, the Server
    rows' batch-time what-if."""
    from podsim.validation import serving

    rows = tuple(r for r in serving.ROWS if not ids or r.id in ids)
    table = serving.run_table(rows)
    print("\nA Saxml batch's costs from praxis's code, cumulative (each row's error; a diagnostic, the rows charge all four; "
          "Server rate searches with 2 seeds to 0.05/s here):")
    for a in serving.praxis_ablation(rows):
        print(f"  {a['name']:42} batch {a['batch_s']:.2f} s  " + "  ".join(
            f"{rid} {'refused' if e is None else f'{e:+.1%}'}" for rid, e in a["errors"].items())
              + f"  median {a['median_abs_error']:.1%}"
              + ("  p99 at the run's rate " + "  ".join(f"{rid} {e:+.1%}" for rid, e in a["p99_errors"].items())
                 if a["p99_errors"] else ""))
    for row in rows:
        if row.scenario == "offline":
            mix = serving.offline_mix(row, bucket_s=next(r for r in table if r["id"] == row.id)["bucket_batch_s"])
            print(f"\n{row.id} sorted batches (article lengths: {serving.CNNDM_SOURCE}; + {serving.PROMPT_TEMPLATE_TOKENS} "
                  f"template tokens, cap {serving.PROMPT_CAP}); simulated s per batch at each bucket: "
                  + ", ".join(f"{b}: {t:.2f} s" for b, t in mix["bucket_s"].items()) + f"; measured {row.measured:.2f} s")
            for name, m in [*mix["shapes"].items(), *((f"lognormal, lengths x {k:g}", m) for k, m in mix["scaled"].items())]:
                print(f"  {name + (' (the row)' if name == 'lognormal' else ' (sensitivity)'):38} batches "
                      + " ".join(f"{b}: {x:5.1%}" for b, x in m["shares"].items())
                      + f"  -> {m['batch_s']:.2f} s per batch, {m['error']:+.1%}")
    for row in rows:
        if row.scenario == "server" and row.measured_min_s and not next(r for r in table if r["id"] == row.id)["refused"]:
            print(f"\n{row.id} were a batch to take longer on the chips (every step scaled alike; a what-if, no row uses it):"
                  f" measured min {row.measured_min_s:.2f} s, p99 {row.measured_p99_s:.2f} s at {row.rate_per_s:g}/s; "
                  f"max rate: the rate search with {SENSITIVITY_REPLICATES} seeds to 0.05/s")
            for r in serving.batch_time_sensitivity(row, (4.0, 4.4, 4.5, row.measured_min_s), rate_replicates=SENSITIVITY_REPLICATES,
                                                        tolerance_rps=0.05):
                print(f"  batch {r['batch_s']:.2f} s{' (podsim)' if r['podsim'] else '':9}  min {r['p0_s']:6.2f} s  "
                      f"p50 {r['p50_s']:6.2f} s  p99 {r['p99_s']:6.2f} s  max rate {r['max_rps']:.2f}/s  "
                      f"Sax client retries {r['retries']}")


def series_lines(table: list[dict], markdown: bool) -> list[str]:
    """The multislice series: per row, measured and predicted per-chip throughput / the fewest slices'."""
    rows = series_table(table)
    if markdown:
        out = ["| series | id | slices | chips | measured per-chip throughput / fewest slices | podsim | difference |",
               "|---|---|---|---|---|---|---|"]
        out += [f"| {r['series']} | {r['id']} | {r['slices']} | {r['chips']:,} | {r['measured_ratio']:.3f} | "
                f"{r['predicted_ratio']:.3f} | {100 * r['difference']:+.1f} pp |" for r in rows]
        return out
    out = [f"{'id':4} {'slices':>6} {'chips':>7} {'measured':>9} {'podsim':>7} {'difference':>10}   (per-chip throughput / fewest slices)"]
    for r in rows:
        out.append(f"{r['id']:4} {r['slices']:>6} {r['chips']:>7,} {r['measured_ratio']:>9.3f} {r['predicted_ratio']:>7.3f} "
                   f"{100 * r['difference']:>+9.1f}pp   {r['series']}")
    worst = max(abs(r["difference"]) for r in rows)
    out.append(f"largest difference {100 * worst:.1f} points (target {100 * SERIES_TOLERANCE:.0f})")
    return out


BANDS_NOTE = ("written by `benchmarks/validation.py --write-bands` (step bands: the step-time table, "
              "podsim/validation/table.py: leave-one-out |error| of every row the quality rule scores, calibration rows with "
              "their held-out error) and `--serving --write-bands` (serve bands: the serving table, "
              "podsim/validation/serving_table.py: |error| of the rows that set no constant), per kind prefix")


def write_serving_bands(table: list[dict]) -> None:
    """The serving table's bands into podsim/data/error_bands.json, beside the step bands already there."""
    from podsim.validation import serving_table as st

    path = Path(__file__).resolve().parents[1] / "podsim" / "data" / bands.BANDS_FILE
    new = bands.bands_from_errors(st.band_errors(table))
    path.write_text(bands.to_json(bands.merged(bands.stored_bands(), new, "serve"), BANDS_NOTE), encoding="utf-8")
    print(f"wrote the serving bands into {path}")


def write_bands(table: list[dict]) -> None:
    """The step bands of podsim/data/error_bands.json from the whole table's cross-validated errors
    (podsim.validation.bands), beside the serving bands already there."""
    if {r["id"] for r in table} != {r.id for r in ROWS} or any("loo" not in r for r in table):
        raise SystemExit("--write-bands needs the whole table, cross-validated: give no row ids and not --no-cv")
    path = Path(__file__).resolve().parents[1] / "podsim" / "data" / bands.BANDS_FILE
    new = bands.bands_from_errors(band_errors(table, {r["id"]: r["loo"] for r in table}))
    path.write_text(bands.to_json(bands.merged(bands.stored_bands(), new, "step"), BANDS_NOTE), encoding="utf-8")
    print(f"wrote {path}")


def _pick_reason(name: str, rid: str) -> str:
    """Why the rule picked the row: its measured MFU, FLOPs per HBM byte or images per host, and
    the constant's identifiability from it (A2)."""
    row = next(r for r in ROWS if r.id == rid)
    f, kind = row_facts(row), name.split(":")[1]
    if kind == "matmul":
        why = f"highest measured MFU among eligible rows: {f.measured_mfu:.1%}"
    elif kind == "hbm":
        why = f"lowest model FLOPs per HBM byte among eligible rows: {f.flops_per_hbm_byte:.0f}"
    else:
        why = f"most images per host per step among eligible rows: {f.host_items:.0f}"
    return why + f"; sensitivity {sensitivity(row, name):.2f}"


def print_picks(picks: dict[str, str], values: dict[str, float], rows=ROWS) -> None:
    """The rule's picks with their values, and the constants it finds no identifiable row for, both
    from the same `rows` (a run of some rows: those of their generations)."""
    print("calibration rows (podsim.validation.split.calibration_rows, split rule R2 with A1 and A2; every other row validates):")
    for name, rid in sorted(picks.items()):
        v = f"{values[name]:,.0f}" if name in HOST_CONSTANTS else f"{values[name]:.3f}"
        print(f"  {name:22} = {v:>8}  from {rid:13} ({_pick_reason(name, rid)})")
    for name, why in sorted(unidentified(rows).items()):
        fallback = "the hosts never hold a step" if name in HOST_CONSTANTS else f"the vendor's figure, {current_values([name])[name]:.3f}"
        print(f"  {name:22}   no basis (A2): {why}; {fallback}")


def _summary_line(label: str, errs: list[float]) -> str:
    a = [abs(e) for e in errs]
    return f"{label}: median |error| {statistics.median(a):.1%}, max {max(a):.1%} over {len(a)} rows"


def cv_lines(table: list[dict], markdown: bool) -> list[str]:
    """Per kind (generation x single/multislice): the plain error over validation rows and the
    cross-validated errors over every scored row."""
    figs = kind_figures(table)
    if markdown:
        out = ["| kind | validation rows | plain median / max | scored rows | LOO median / max | LOSO median / max |", "|---|---|---|---|---|---|"]
        out += [f"| {k} | {f['plain_n']} | {f['plain_median']:.1%} / {f['plain_max']:.1%} | {f['n']} | {f['loo_median']:.1%} / "
                f"{f['loo_max']:.1%} | {f['loso_median']:.1%} / {f['loso_max']:.1%} |" for k, f in figs.items()]
        return out
    out = [f"{'kind':32} {'plain (validation rows)':>26} {'LOO (every row)':>22} {'LOSO (every row)':>22}"]
    out += [f"{k:32} {f['plain_n']:>4} rows {f['plain_median']:6.1%} / {f['plain_max']:6.1%}  {f['n']:>3} {f['loo_median']:6.1%} / "
            f"{f['loo_max']:6.1%}   {f['loso_median']:6.1%} / {f['loso_max']:6.1%}" for k, f in figs.items()]
    return out


def step_table(ids: list[str], argv: list[str]) -> list[dict]:
    """The training rows: the rule's picks, each row's prediction, the cross-validated errors."""
    rows = tuple(r for r in ROWS if not ids or r.id in ids)
    chips = {row_facts(r).chip for r in rows}
    t0 = time.perf_counter()
    pool = [r for r in ROWS if row_facts(r).chip in chips]
    picks = calibration_rows(pool)
    values = current_values(picks)
    print_picks(picks, values, pool)
    print(f"(rule applied to {len(pool)} rows' data and traces in {time.perf_counter() - t0:.0f} s)\n\n{HEAD}")
    predictor, sets = Predictor(), constants_by_row(picks)
    t1 = time.perf_counter()
    table = []
    for row in rows:
        table.append(record(row, predictor.summary(row, values), sets.get(row.id, ())))
        print(_line(table[-1]), flush=True)
    s = summarise(table)
    unscored = sum(1 for r in table if r.get("unscored"))
    print(f"\n{s['validation_rows']} validation rows (of {s['rows']}: {len(set(picks.values()))} set constants, {unscored} not scored by the "
          f"quality rule): median |error| {s['median_abs_error']:.1%}, "
          f"max |error| {s['max_abs_error']:.1%} (issue 32's targets 5% and 15%). Wall time {time.perf_counter() - t1:.0f} s.")
    if not ids and "--no-cv" not in argv:
        t2 = time.perf_counter()
        cv = cross_validate(ROWS, picks, values, predictor, error)
        for r in table:
            r["loo"], r["loso"] = cv["loo"][r["id"]], cv["loso"][r["id"]]
        moved = [r for r in table if abs(r["loo"] - r["error"]) > 1e-9 or abs(r["loso"] - r["error"]) > 1e-9]
        print(f"\ncross-validated (R5: each fold re-applies the rule to the rows left and refits): rows whose held-out error "
              f"differs from the plain one\n{'id':13} {'plain':>7} {'LOO':>7} {'LOSO':>7}  (corpus)")
        for r in moved:
            print(f"{r['id']:13} {r['error']:+7.1%} {r['loo']:+7.1%} {r['loso']:+7.1%}  ({r['corpus']}){' calibration' if r['calibration'] else ''}")
        scored = [r for r in table if not r.get("unscored")]
        print(_summary_line("leave-one-out, every scored row", [r["loo"] for r in scored]))
        print(_summary_line("leave-one-source-out, every scored row", [r["loso"] for r in scored]))
        for corpus in sorted({r["corpus"] for r in scored}):
            print(_summary_line(f"  held-out {corpus}", [r["loso"] for r in scored if r["corpus"] == corpus]))
        print(f"Cross-validation wall time {time.perf_counter() - t2:.0f} s ({predictor.engine_runs} engine runs in all).")
        print("\nper kind:\n" + "\n".join(cv_lines(table, "--markdown" in argv)))
    if "--markdown" in argv:
        print("\n" + _markdown(table))
    return table


def as_user_table() -> None:
    """Every row's error as the table runs it (the settings its code states) and as a user would give
    it (`podsim.validation.table.as_user`: the run's configuration only, podsim's defaults for the
    rest), at the constants in force; the summary over the validation rows, overall and per corpus."""
    predictor = Predictor()  # the rule's sensitivity runs at the constants in force are the table's own
    picks = calibration_rows(ROWS, predictor)
    values, sets = current_values(picks), constants_by_row(picks)
    print(f"{'id':14} {'stated':>8} {'as user':>8}  options the row states that a user would leave to podsim")
    scored = []  # (corpus, stated error, as-user error or None where refused) of the validation rows
    for row in ROWS:
        rec = record(row, predictor.summary(row, values), sets.get(row.id, ()))
        user = as_user(row)
        differs = [f"{k}={getattr(row.options, k)}" for k in vars(row.options) if getattr(row.options, k) != getattr(user.options, k)]
        try:
            user_e = error(row, predictor.step_s(user, values))
            cell = f"{user_e:+8.1%}"
        except PodsimError as exc:  # podsim refuses the run as given: a miss of the defaults, counted apart
            user_e, cell = None, f"{'refused':>8}"
            differs.append(f"refused: {str(exc)[:120]}")
        ok = not rec["calibration"] and not rec.get("unscored")
        if ok:
            scored.append((row.corpus, rec["error"], user_e))
        print(f"{row.id:14} {rec['error']:+8.1%} {cell}  {', '.join(differs) or '(none)'}{'' if ok else '  [not scored]'}", flush=True)
    for corpus in (None, *sorted({c for c, *_ in scored})):
        group = [(a, b) for c, a, b in scored if corpus in (None, c)]
        stated, got = [abs(a) for a, _ in group], [abs(b) for _, b in group if b is not None]
        refused = len(group) - len(got)
        if got:
            print(f"{corpus or 'every validation row':>22} ({len(stated):2}): stated median |error| {statistics.median(stated):.1%} "
                  f"(max {max(stated):.1%}); as a user would give them {statistics.median(got):.1%} "
                  f"(max {max(got):.1%}){f'; {refused} refused as given, not in it' if refused else ''}")


def calibrate_command(argv: list[str]) -> None:
    """Refit every calibrated constant on the row the rule picks (or `NAME=ROW` given, refused in
    one line where the row may not set it), then re-apply the rule at the new values: A2 measures
    identifiability at the constants in force, so the picks must be the same there (a fixed point)."""
    picks = calibration_rows(ROWS)
    by_id = {r.id: r for r in ROWS}
    for a in (a for a in argv if "=" in a and not a.startswith("--")):
        name, _, rid = a.partition("=")
        if rid not in by_id:
            raise PodsimError(f"--calibrate {a}: no row {rid!r}")
        if name not in HOST_CONSTANTS:
            check_can_calibrate(by_id[rid], name)
        check_identifiable(by_id[rid], name)
        picks[name] = rid
    t0 = time.perf_counter()
    predictor = Predictor()
    fit = calibrate(ROWS, picks, predictor, start=current_values(picks))
    print(f"calibrated in {time.perf_counter() - t0:.0f} s ({predictor.engine_runs} engine runs):")
    print_picks(picks, fit)
    with constants(fit):
        again = calibration_rows(ROWS, Predictor())
    print("the rule at the new values picks " + ("the same rows" if again == picks else
          "other rows: " + ", ".join(f"{n}: {picks.get(n)} -> {again.get(n)}" for n in sorted({*picks, *again}) if picks.get(n) != again.get(n))
          + " (calibrate again)"))
    print("CALIBRATED = {" + ", ".join(f'"{k}": {v:.3f}' for k, v in sorted(fit.items()) if k not in HOST_CONSTANTS) + "}")
    print("in use: " + ", ".join(f"{k} = {v:.3f}" for k, v in sorted(current_values(fit).items())))


def main(argv: list[str]) -> None:
    ids = [a for a in argv if not a.startswith("--")]
    if "--series" in argv:
        ids = sorted({rid for s in SERIES for rid in s.rows})
    if "--serving" in argv:
        serving_table(argv)
        return
    if "--tf1" in argv:
        setting_effects(TF1_SETTINGS, [r for r in ROWS if r.options.combine_grad_reduce])
        return
    if "--sharding" in argv:
        setting_effects(SHARDING_SETTINGS, [r for r in ROWS if r.options.sequence_parallel or r.options.input_pipeline != "none"])
        return
    if "--as-user" in argv:
        as_user_table()
        return
    if "--multipod-wrap" in argv:
        multipod_wrap()
        return
    if "--calibrate" in argv:
        try:
            calibrate_command(argv)
        except PodsimError as exc:
            print(f"error: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
        return
    table = step_table(ids, argv)
    if "--write-bands" in argv:
        write_bands(table)
        return
    have = {r["id"] for r in table}
    if all(rid in have for s in SERIES for rid in s.rows):
        print("\n" + "\n".join(series_lines(table, "--markdown" in argv)))
    if "--series" not in argv:
        serving_table([a for a in argv if a == "--markdown"])


if __name__ == "__main__":
    main(sys.argv[1:])
