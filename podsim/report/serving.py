"""The report's serving rows, section and plots: per serving run (a scenario's workload
`serving`), its latency percentiles, throughput, cost per million tokens and KV cache in the key
figures; its capacity search and HBM budget in a section; latency CDFs, throughput over time and
the capacity probes as plots. The HTML report and the dashboard's serving page show the same."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import plotly.graph_objects as go

from podsim.report.figures import PALETTE, _having, _layout
from podsim.scenario.result import RunResult
from podsim.units import format_bytes, is_missing
from podsim.units import format_duration as sec
from podsim.units import format_percent as pct


def _num(v, digits: int = 4) -> str:
    if is_missing(v):
        return "n/a"
    return f"{v:,.{digits}g}" if abs(v) < 1e4 else f"{v:,.0f}"


def _usd(v) -> str:
    return "not published" if is_missing(v) else f"${v:,.4g}"


def _pcts(m: dict, name: str) -> str:
    return " / ".join(sec(m.get(f"{name}_p{q}_s")) for q in (50, 95, 99))


def _count(v) -> str:
    return "n/a" if is_missing(v) else f"{v:,.0f}" if float(v).is_integer() else f"{v:,.1f}"


def _requests(m: dict) -> str:
    text = f"{_count(m['requests'])} counted, {_count(m['requests_completed'])} finished"
    if m.get("requests_unfinished"):
        text += f", {_count(m['requests_unfinished'])} UNFINISHED at the end (percentiles are over the finished)"
    if m.get("requests_rejected"):
        text += f", {_count(m['requests_rejected'])} rejected (KV cache too small for them)"
    return text + (f"; offered {_num(m['offered_rps'])}/s" if not is_missing(m.get("offered_rps")) else "")


def _kv(m: dict) -> str:
    return (f"{_count(m['kv_cache_tokens'])} tokens per replica, peak {pct(m['kv_peak_fraction'])} of its pages, "
            f"{_count(m.get('kv_preemptions', 0))} preemptions")


SERVING_ROWS: list[tuple[str, Callable[[RunResult], str]]] = [
    ("fleet", lambda r: f"{r.metrics['replicas']} x {r.metrics['generation']} {r.metrics['slice']} ({r.metrics['chips']:,} chips), "
                        f"{r.metrics['serving_mode']}"),
    ("model / batching", lambda r: f"{r.metrics['model']} ({r.metrics['parallelism']}), {r.metrics['batch_policy']}"),
    ("requests", lambda r: _requests(r.metrics)),
    ("TTFT p50 / p95 / p99", lambda r: _pcts(r.metrics, "ttft")),
    ("TPOT p50 / p95 / p99", lambda r: _pcts(r.metrics, "tpot")),
    ("end-to-end latency p50 / p95 / p99", lambda r: _pcts(r.metrics, "e2e")),
    ("SLO attainment (TTFT <= X and TPOT <= Y)", lambda r: f"{pct(r.metrics['slo_attainment'])} (TTFT <= {sec(r.metrics['slo_ttft_s'])}, "
                                                           f"TPOT <= {sec(r.metrics['slo_tpot_s'])}); goodput "
                                                           f"{_num(r.metrics['goodput_rps'])} requests/s"),
    ("throughput", lambda r: f"{_num(r.metrics['tokens_per_s'])} output tokens/s = {_num(r.metrics['tokens_per_s_per_chip'])} per chip"),
    ("cost per million output tokens", lambda r: _usd(r.metrics.get("cost_per_million_tokens_usd"))),
    ("energy per million output tokens", lambda r: "not published" if is_missing(r.metrics.get("energy_per_million_tokens_kwh"))
     else f"{_num(r.metrics['energy_per_million_tokens_kwh'])} kWh"),
    ("KV cache", lambda r: _kv(r.metrics)),
    ("decode step, one sequence (1k context) / HBM bound", lambda r: f"{sec(r.metrics['decode_step_b1_s'])} / "
                                                                     f"{sec(r.metrics['hbm_bound_decode_s'])}"),
    ("capacity", lambda r: r.metrics.get("capacity_answer") or "not searched"),
    ("engine", lambda r: f"{r.metrics.get('engine_figures', 'n/a')}; weight matmuls at {r.metrics.get('matmul_peak_source', 'n/a')}"),
    ("typical error (serving validation)", lambda r: r.metrics.get("serving_error_text") or "n/a"),
    ("simulated / wall time", lambda r: f"{sec(r.metrics['simulated_s'])} / {r.wall_s:.2f} s"),
]


def _cdf(runs: Sequence[RunResult], labels: Sequence[str], column: str, title: str) -> go.Figure | None:
    rows = _having(runs, "serving", "serving_requests", "arrival_s")
    if not rows:
        return None
    fig = go.Figure()
    for i, r in rows:
        t = r.table("serving_requests")
        v = np.sort(t[column][t["counted"] & np.isfinite(t[column])])
        if not len(v):
            continue
        fig.add_scatter(x=v, y=np.arange(1, len(v) + 1) / len(v), mode="lines", name=labels[i], line={"color": PALETTE[i % 10]})
        slo = r.metrics.get("slo_ttft_s" if column == "ttft_s" else "slo_tpot_s")
        if slo is not None:
            fig.add_vline(x=slo, line={"dash": "dot", "color": PALETTE[i % 10]})
    fig.update_xaxes(type="log")
    fig.update_yaxes(tickformat=".0%")
    return _layout(fig, title, "seconds (log)", "share of requests")


def ttft_cdf(runs, labels):
    """Time to first token per request (counted requests), the target dotted."""
    return _cdf(runs, labels, "ttft_s", "Time to first token (CDF; dotted: the target)")


def tpot_cdf(runs, labels):
    """Time per output token per request, the target dotted."""
    return _cdf(runs, labels, "tpot_s", "Time per output token (CDF; dotted: the target)")


def over_time(runs, labels):
    """Output tokens per second of the fleet and KV-cache use per replica over time."""
    rows = _having(runs, "serving", "serving_timeseries", "t_s")
    if not rows:
        return None
    fig = go.Figure()
    for i, r in rows:
        ts = r.table("serving_timeseries")
        fig.add_scatter(x=ts["t_s"], y=ts["tokens_per_s"], mode="lines", name=f"{labels[i]}: tokens/s", line={"color": PALETTE[i % 10]})
        fig.add_scatter(x=ts["t_s"], y=ts["kv_used_fraction"], mode="lines", name=f"{labels[i]}: KV cache used", yaxis="y2",
                        line={"color": PALETTE[i % 10], "dash": "dot"})
    fig.update_layout(yaxis2={"overlaying": "y", "side": "right", "tickformat": ".0%", "range": [0, 1.05], "title": "KV cache used"})
    return _layout(fig, "Output tokens per second and KV-cache use over time", "seconds", "output tokens/s")


def capacity_figure(runs, labels):
    """Each capacity probe: p99 TTFT (mean and 95% interval over its replicates) against chips."""
    rows = _having(runs, "serving", "serving_capacity", "chips")
    if not rows:
        return None
    fig = go.Figure()
    k = 0
    for i, r in rows:
        t = r.table("serving_capacity")
        for shape in dict.fromkeys(t["slice"]):
            sel = t["slice"] == shape
            order = np.argsort(t["chips"][sel])
            x, y = t["chips"][sel][order], t["ttft_p99_mean"][sel][order]
            hi, lo = t["ttft_p99_high"][sel][order], t["ttft_p99_low"][sel][order]
            err = {"type": "data", "array": np.nan_to_num(hi - y), "arrayminus": np.nan_to_num(y - lo)}
            fig.add_scatter(x=x, y=y, error_y=err, mode="lines+markers", name=f"{labels[i]}: {shape}",
                            marker={"symbol": ["circle" if m else "x" for m in t["met"][sel][order]]},
                            line={"color": PALETTE[k % 10]})
            k += 1
        target = (r.scenario.get("workload", {}).get("serving", {}) or {}).get("capacity", {}) or {}
        if target.get("ttft_p99") is not None:
            fig.add_hline(y=float(target["ttft_p99"]), line={"dash": "dot"})
    fig.update_yaxes(type="log")
    return _layout(fig, "Capacity search: p99 TTFT against chips (x: missed a target; dotted: the TTFT target)", "chips", "p99 TTFT (s)")


def serving_figures(runs: Sequence[RunResult], labels: Sequence[str]) -> list[tuple[str, go.Figure | None]]:
    return [("TTFT CDF", ttft_cdf(runs, labels)), ("TPOT CDF", tpot_cdf(runs, labels)),
            ("Serving over time", over_time(runs, labels)), ("Serving capacity", capacity_figure(runs, labels))]


def _budget_rows(r: RunResult) -> list[tuple[str, str]]:
    b = r.topology.get("kv_budget") or {}
    if not b:
        return []
    return [("HBM per chip", format_bytes(b["hbm_bytes_per_chip"])),
            ("weights per chip", format_bytes(b["weight_bytes_per_chip"])),
            ("workspace per chip (largest step)", format_bytes(b["workspace_bytes_per_chip"])),
            ("reserved for the runtime", format_bytes(b["reserve_bytes_per_chip"])),
            ("KV bytes per token per chip", format_bytes(b["kv_bytes_per_token_per_chip"])),
            ("KV cache", f"{b['kv_pages']:,} pages of {b['page_tokens']} tokens = {b['kv_tokens']:,} tokens per replica")]


def capacity_rows(r: RunResult) -> list[list[str]]:
    t = r.table("serving_capacity")
    out = []
    for i in range(len(t["chips"])):
        def iv(m: str, i: int = i) -> str:
            mean, lo, hi = t[f"{m}_mean"][i], t[f"{m}_low"][i], t[f"{m}_high"][i]
            return sec(mean) + (f" [{sec(lo)}, {sec(hi)}]" if np.isfinite(lo) else "")
        out.append([str(t["slice"][i]), f"{int(t['replicas'][i])}", f"{int(t['chips'][i]):,}", iv("ttft_p99"), iv("tpot_p99"),
                    _usd(float(t["cost_per_million_tokens_usd_mean"][i])), "met" if t["met"][i] else f"missed: {t['why'][i]}"])
    return out


CAPACITY_HEADER = ("slice", "replicas", "chips", "p99 TTFT [95% interval]", "p99 TPOT [95% interval]",
                   "cost per million tokens", "verdict")


def serving_details(runs: Sequence[RunResult], labels: Sequence[str]) -> list[dict]:
    """One entry per serving run: label, the capacity answer, its probes, the HBM budget, notes."""
    out = []
    for label, r in zip(labels, runs, strict=True):
        if r.kind != "serving":
            continue
        out.append({"label": label, "answer": r.metrics.get("capacity_answer") or "", "header": CAPACITY_HEADER,
                    "probes": capacity_rows(r), "budget": _budget_rows(r), "notes": list(r.topology.get("notes") or [])})
    return out
