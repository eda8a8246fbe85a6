"""Serving: a model served by replicas of a slice; TTFT, TPOT, throughput, cost per million tokens,
the KV cache, and the fewest chips for a request rate within the latency targets."""

from __future__ import annotations

import streamlit as st

from app_pages.common import inline_errors, percent, seconds, tpu_generations
from podsim.report.serving import capacity_rows, serving_details, serving_figures
from podsim.scenario import RunResult
from podsim.scenario.serving import serving_run_result
from podsim.serving.engines import ENGINE_NAMES
from podsim.serving.spec import ServingWorkload
from podsim.trace.configs import PRESETS, TransformerConfig

MODELS = [k for k, v in PRESETS.items() if isinstance(v, TransformerConfig) and v.causal]
SLICES = {"tpu-v5e": ["2x4", "2x2", "4x4"], "tpu-v6e": ["2x4", "2x2", "4x4"], "tpu-v5p": ["2x2x2", "2x2x4", "2x4x4"],
          "tpu-v4": ["2x2x2", "2x2x4", "2x4x4"]}
TRACES = {"Azure conversation trace (lengths)": "azure-conv", "Azure code trace (lengths)": "azure-code"}


@st.cache_data(max_entries=16, show_spinner=False)
def run(gen: str, body: str, seed: int, replicates: int) -> RunResult:
    """One `podsim serve` run (the same serving workload the CLI's flags build) as its RunResult."""
    bar = st.progress(0.0, text="Simulating requests...")

    def on_progress(done: float, total: float) -> None:
        bar.progress(min(done / total, 1.0), text=f"Simulating requests: {seconds(done)} of {seconds(total)}")

    workload = ServingWorkload.model_validate_json(body)
    result = serving_run_result(workload, gen, seed, replicates, name=f"{gen} {workload.slice}", on_progress=on_progress)
    bar.empty()
    return result


st.title("Serving")
st.caption("A model served by replicas of a slice: requests arrive, a batch policy runs prefill and decode steps "
           "(each timed by the per-op compute model and the engine's collectives), the KV cache bounds what runs at "
           "once. The same configuration as `podsim serve` and a scenario's `workload.serving`.")

with st.form("serving"):
    c1, c2, c3, c4 = st.columns(4)
    gens = [g for g in tpu_generations() if g in SLICES]
    gen = c1.selectbox("Generation", gens, index=gens.index("tpu-v5e"), key="sv_gen")
    shape = c2.text_input("Slice of one replica", value="2x4", key="sv_slice", help=f"e.g. {', '.join(SLICES.get(gen, []))}")
    model = c3.selectbox("Model", MODELS, index=MODELS.index("llama2-70b"), key="sv_model")
    weights = c4.selectbox("Weights", ["int8", "bf16", "fp8"], key="sv_weights", help="int8/fp8: 1 byte per weight")
    d1, d2, d3, d4 = st.columns(4)
    rate = d1.number_input("Requests per second", min_value=0.01, max_value=10_000.0, value=2.0, step=0.5, key="sv_rate")
    replicas = d2.number_input("Replicas", min_value=1, max_value=256, value=1, step=1, key="sv_replicas")
    lengths = d3.selectbox("Prompt and output lengths", [*TRACES, "Fixed"], key="sv_lengths")
    duration = d4.number_input("Traffic (minutes)", min_value=0.5, max_value=120.0, value=2.0, step=1.0, key="sv_minutes")
    e1, e2, e3, e4 = st.columns(4)
    policy = e1.selectbox("Batching", ["continuous/chunked", "continuous/separate", "static"], key="sv_policy")
    ttft = e2.number_input("TTFT target (s)", min_value=0.01, max_value=600.0, value=2.0, key="sv_ttft")
    tpot = e3.number_input("TPOT target (ms)", min_value=1.0, max_value=10_000.0, value=100.0, key="sv_tpot")
    seed = e4.number_input("Seed", min_value=0, value=1, step=1, key="sv_seed")
    f1, f2, f3, f4 = st.columns(4)
    cap_rate = f1.number_input("Capacity: rate to serve (0: no search)", min_value=0.0, max_value=10_000.0, value=0.0,
                               key="sv_cap_rate", help="fewest chips within p99 TTFT and TPOT of the targets")
    cap_slices = f2.text_input("Capacity: candidate slices", value="", key="sv_cap_slices", help="e.g. 2x4,4x4 (default: the slice)")
    replicates = f3.number_input("Replicates per size", min_value=1, max_value=10, value=2, key="sv_cap_replicates")
    engine = f4.selectbox("Engine", list(ENGINE_NAMES), key="sv_engine",
                          help="whose host time per step and attention kernels are modelled (podsim.serving.engines)")
    st.form_submit_button("Run simulation", type="primary")

with inline_errors():
    kind, _, prefill = policy.partition("/")
    batch = {"kind": kind, **({"prefill": prefill} if prefill else {"max_batch": 32, "max_wait": 1.0, "kv": "reserve"})}
    if lengths == "Fixed":
        req_lengths = {"prompt": {"kind": "fixed", "mean": 1024}, "output": {"kind": "fixed", "mean": 256}}
    else:
        req_lengths = {"trace": TRACES[lengths], "prompt": {"kind": "trace"}, "output": {"kind": "trace"}}
    body = {"slice": shape, "engine": engine, "replicas": int(replicas), "duration": float(duration) * 60, "batch": batch,
            "model": {"model": model, "precision": {"weights": weights}},
            "requests": {"arrivals": {"kind": "poisson", "rate": float(rate) * 3600}, **req_lengths},
            "slo": {"ttft": float(ttft), "tpot": float(tpot) / 1000}}
    if cap_rate > 0:
        body["capacity"] = {"rate": float(cap_rate) * 3600, "ttft_p99": float(ttft), "tpot_p99": float(tpot) / 1000,
                            "slices": [s.strip() for s in cap_slices.split(",") if s.strip()], "replicates": int(replicates)}
    try:
        workload = ServingWorkload.model_validate(body)
    except ValueError as exc:
        from podsim.errors import PodsimError

        raise PodsimError(str(exc).splitlines()[-1] if "\n" in str(exc) else str(exc)) from None
    result = run(gen, workload.model_dump_json(), int(seed), 1)

m = result.metrics
st.subheader(f"{m['replicas']} x {gen} {m['slice']} ({m['chips']:,} chips): {m['model']} ({m['parallelism']}), {m['batch_policy']}")
cols = st.columns(6)
cols[0].metric("TTFT p99", seconds(m["ttft_p99_s"]))
cols[1].metric("TPOT p99", seconds(m["tpot_p99_s"]))
cols[2].metric("SLO attainment", percent(m["slo_attainment"]))
cols[3].metric("Tokens/s per chip", f"{m['tokens_per_s_per_chip']:,.1f}")
cols[4].metric("Cost per M tokens", "not published" if m.get("cost_per_million_tokens_usd") is None
               else f"${m['cost_per_million_tokens_usd']:,.2f}")
cols[5].metric("KV cache peak", percent(m["kv_peak_fraction"]))
st.caption(f"Typical error against published serving runs: {m.get('serving_error_text', 'n/a')}")
st.caption(f"{m.get('engine_figures', '')}; weight matmuls at {m.get('matmul_peak_source', 'n/a')}")
if m.get("requests_unfinished"):
    st.warning(f"{m['requests_unfinished']:,} requests still unfinished when the simulation ended: the fleet is overloaded; "
               "its percentiles are over the finished requests only")
if m.get("capacity_answer"):
    st.success(m["capacity_answer"])
for name, fig in serving_figures([result], ["this run"]):
    if fig is not None:
        st.plotly_chart(fig, key=name.lower().replace(" ", "_"))
detail = serving_details([result], ["this run"])[0]
if detail["probes"]:
    st.table({h: [row[i] for row in capacity_rows(result)] for i, h in enumerate(detail["header"])})
st.caption(" · ".join(f"{k}: {v}" for k, v in detail["budget"]))
for note in detail["notes"]:
    st.caption(note)
