"""Plan search: the best parallelism plans of a model on a chip budget (ranked by the analytic
estimate, the best confirmed on the engine), and time to train a token budget: how long on the
chips, or the fewest chips by a deadline, at what cost and energy. The same search as `podsim plan`."""

from __future__ import annotations

import streamlit as st

from app_pages.common import inline_errors, percent, seconds, tpu_generations
from podsim.plan import (
    PlanQuery,
    TrainQuery,
    search,
    search_summary,
    time_to_train,
    train_summary,
)
from podsim.plan.result import ranged_text
from podsim.plan.search import no_fit_advice
from podsim.plan.train import parse_tokens
from podsim.trace.configs import PRESETS, TransformerConfig
from podsim.units import format_bytes

MODELS = [k for k, v in PRESETS.items() if isinstance(v, TransformerConfig) and v.causal]


@st.cache_data(max_entries=8, show_spinner=False)
def run(model: str, gen: str, chips: int | None, overrides: tuple, top: int, tokens: float | None, days: float | None,
        price: float | None) -> dict:
    """One search (or time to train) as its summary dict, with a progress bar."""
    bar = st.progress(0.0, text="Searching plans...")

    def on_progress(stage: str, done: float, total: float) -> None:
        bar.progress(min(done / max(total, 1), 1.0), text=f"{stage}: {done:.0f} of {total:.0f}")

    query = PlanQuery(model, gen, chips=chips, model_overrides=dict(overrides), top=top)
    try:
        if tokens is not None:
            return {"train": train_summary(time_to_train(TrainQuery(query, tokens, days=days, price_per_chip_hour=price), on_progress))}
        s = search(query, on_progress)
        if not s.ranked:
            from podsim.errors import PodsimError

            raise PodsimError(no_fit_advice(s))
        return {"search": search_summary(s)}
    finally:
        bar.empty()


st.title("Plan search")
st.caption("Every plan of a model on a chip budget (slices x slice shape, data, FSDP, tensor and expert axes, micro-batches, "
           "recompute, sequence parallelism, collective matmul), pruned by the generator's refusals and the memory model, "
           "ranked by an analytic estimate and the best confirmed on the engine. The same search as `podsim plan`.")

with st.form("plan"):
    c1, c2, c3, c4 = st.columns(4)
    gens = tpu_generations()
    gen = c1.selectbox("Generation", gens, index=gens.index("tpu-v5p") if "tpu-v5p" in gens else 0, key="pl_gen")
    model = c2.selectbox("Model", MODELS, index=MODELS.index("llama2-70b"), key="pl_model")
    mode = c3.radio("Question", ["Best plan on a chip budget", "Time to train on a chip budget", "Fewest chips by a deadline"],
                    key="pl_mode")
    top = c4.number_input("Plans confirmed on the engine", min_value=1, max_value=10, value=3, key="pl_top")
    d1, d2, d3, d4, d5 = st.columns(5)
    chips = d1.number_input("Chips", min_value=1, max_value=65536, value=1024, step=64, key="pl_chips")
    layers = d2.number_input("Layers (0: the preset's)", min_value=0, max_value=200, value=0, key="pl_layers",
                             help="fewer layers for a quick look; every layer is alike, so the ranking barely moves")
    tokens = d3.text_input("Tokens to train", value="2T", key="pl_tokens")
    days = d4.number_input("Deadline (days)", min_value=0.1, max_value=3650.0, value=30.0, key="pl_days")
    price = d5.number_input("Price per chip-hour (USD, 0: published)", min_value=0.0, max_value=1000.0, value=0.0, key="pl_price")
    st.form_submit_button("Search", type="primary")

with inline_errors():
    overrides = (("n_layers", int(layers)),) if layers else ()
    timed = mode != "Best plan on a chip budget"
    out = run(model, gen, None if mode == "Fewest chips by a deadline" else int(chips), overrides, int(top),
              parse_tokens(tokens) if timed else None, float(days) if mode == "Fewest chips by a deadline" else None,
              float(price) or None)

s = out["train"]["search"] if "train" in out else out["search"]
best = s["best"]
st.subheader(f"{model} on {s['chips']:,} {gen} chips: {best['plan']}")
cols = st.columns(5)
cols[0].metric("Step time", seconds(best["step_time_s"]))
cols[1].metric("MFU", percent(best["mfu"]))
cols[2].metric("Tokens/s", f"{best['tokens_per_s']:,.0f}")
cols[3].metric("Plans ranked", f"{s['counts']['ranked']:,} of {s['counts']['enumerated']:,}")
cols[4].metric("Search", f"{s['wall_s']['total']:.1f} s")
if "train" in out:
    t = out["train"]

    def rng(r: dict, fmt: str) -> str:
        from podsim.plan.train import Ranged

        return ranged_text(Ranged(r["value"], r["low"], r["high"]), fmt)

    tc = st.columns(5)
    tc[0].metric("Chips", f"{t['chips']:,}")
    tc[1].metric("Days", rng(t["days"], ".1f"))
    tc[2].metric("Chip-hours", rng(t["chip_hours"], ",.0f"))
    tc[3].metric("Cost (USD)", rng(t["cost_usd"], ",.0f") if t["cost_usd"]["value"] is not None else "not published")
    tc[4].metric("Goodput", percent(t["goodput"]["goodput"]))
    st.caption(f"Step {t['step_error_text']}; price {t['price_per_chip_hour']['text']}; power {t['power_per_chip']['text']}; "
               f"host failures: {t['goodput']['source']}")
    if t["chip_counts_tried"]:
        st.table({"chips": [r["chips"] for r in t["chip_counts_tried"]],
                  "estimated days": [f"{r['estimated_days']:.1f}" for r in t["chip_counts_tried"]],
                  "best plan (estimate)": [r["plan"] or "no plan fits" for r in t["chip_counts_tried"]]})
st.markdown("**Confirmed on the engine**")
st.table({"plan": [p["plan"] for p in s["plans"]], "step": [seconds(p["step_time_s"]) for p in s["plans"]],
          "estimate": [f"{seconds(p['estimate_s'])} ({p['estimate_error']:+.1%})" for p in s["plans"]],
          "MFU": [percent(p["mfu"]) for p in s["plans"]], "HFU": [percent(p["hfu"]) for p in s["plans"]], "HBM per chip": [format_bytes(p["hbm_bytes_per_chip"]) for p in s["plans"]],
          "why it loses": [p["why"] for p in s["plans"]]})
st.markdown("**Ranked by the estimate**")
st.table({"plan": [r["plan"] for r in s["ranked"]], "estimate": [seconds(r["estimate_s"]) for r in s["ranked"]],
          "why it loses": [r["why"] for r in s["ranked"]]})
st.caption(f"The same step: `{best['steptime_command']}`")
