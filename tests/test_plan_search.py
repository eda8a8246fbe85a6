"""The plan search end to end on small models: its counts add up, every ranked plan fits HBM, the
confirmed best is `podsim steptime`'s step of that plan, nothing fitting says what would, time to
train and its goodput (checked against the cluster simulation of one job)."""

from __future__ import annotations

import json
import math

import pytest
from helpers import run_podsim

from podsim.cluster import ClusterConfig, simulate
from podsim.cluster.failures import FailureModel, FailureProcess, FailureSpec
from podsim.errors import PodsimError
from podsim.plan import PlanQuery, TrainQuery, search, time_to_train
from podsim.plan.goodput import training_goodput
from podsim.plan.search import no_fit_advice
from podsim.plan.train import parse_tokens
from podsim.topology import get_generation
from podsim.workload.jobs import Job

SMALL = {"n_layers": 4, "global_batch": 256}


@pytest.fixture(scope="module")
def small_search():
    return search(PlanQuery("llama2-70b", "tpu-v5p", chips=128, model_overrides=SMALL, top=2))


def test_counts_add_up_and_ranked_plans_fit(small_search):
    """Every enumerated plan is refused, over HBM, dominated, bounded out or ranked; every ranked
    plan fits the chip's HBM; the ranking is by the estimate; the best confirmed is the fastest
    confirmed."""
    s = small_search
    c = s.counts
    assert c.enumerated == c.refused + c.over_hbm + c.dominated + c.bounded + c.ranked
    assert c.ranked > 20 and c.confirmed == 2
    cap = get_generation("tpu-v5p").hbm_per_chip.si
    assert all(a.hbm_bytes <= cap for a in s.ranked)
    steps = [a.estimate.step_s for a in s.ranked]
    assert steps == sorted(steps)
    assert all(a.bound_s <= a.estimate.step_s * (1 + 1e-9) for a in s.ranked)
    assert s.best.step_s == min(x.step_s for x in s.confirmed)
    assert abs(s.best.estimate_error) < 0.10


def test_the_best_plan_is_steptimes_step(small_search, capsys):
    """Must-show: the best plan's step equals `podsim steptime` of that plan (the command the search prints)."""
    from podsim.plan.result import steptime_command

    cmd = steptime_command(small_search).split()[1:]
    r = run_podsim(capsys, *cmd, "--json")
    assert r.code == 0, r.err
    m = json.loads(r.out)["metrics"]
    assert m["step_time_s"] == pytest.approx(small_search.best.step_s, rel=1e-12)
    # its MFU and HFU are steptime's too (one formula, podsim.engine.summary.flops_utilisation)
    assert (m["mfu"], m["hfu"]) == pytest.approx((small_search.best.mfu, small_search.best.hfu), rel=1e-12)


def test_no_plan_fits_says_what_would():
    s = search(PlanQuery("palm-540b", "tpu-v5e", chips=64, top=1))
    assert not s.ranked and s.counts.over_hbm > 0
    text = no_fit_advice(s)
    assert "fits in HBM" in text and "more chips (about" in text


def test_goodput_matches_the_cluster_simulation():
    """One 64-chip job on a v5e pod, hosts failing every 40 h: the simulated share of wall time that
    makes progress over four seeds is the closed form's within two standard errors."""
    h = 3600.0
    got = []
    for seed in range(4):
        cfg = ClusterConfig(generation="tpu-v5e", horizon_s=30 * 86400, fragmentation=False,
                            failures=FailureModel(host=FailureProcess(mtbf_s=40 * h, mttr_s=h)))
        o = simulate(cfg, [Job("j", 0.0, (8, 8), duration_s=10 * 86400)], seed=seed).jobs[0]
        assert o.status == "completed" and o.interruptions > 30
        got.append(o.nominal_s / (o.end_s - o.first_start_s))
    g = training_goodput(get_generation("tpu-v5e"), 64, FailureSpec(mtbf_s=40 * h, mttr_s=h))
    mean = sum(got) / len(got)
    se = math.sqrt(sum((x - mean) ** 2 for x in got) / (len(got) - 1) / len(got))
    assert abs(mean - g.goodput) < max(2 * se, 0.01)


def test_goodput_when_failures_outrun_checkpoints():
    """Hosts failing every minute against an hourly checkpoint: refused in one line (no overflow on
    the way); at rare failures the lost time per interruption is the textbook first-order figure,
    the work since the last checkpoint 1/rate - T/(e^(rate T) - 1) plus the restart."""
    gen = get_generation("tpu-v5e")
    with pytest.raises(PodsimError, match="never finishes"):
        training_goodput(gen, 64, FailureSpec(mtbf_s=60.0))
    g = training_goodput(gen, 8, FailureSpec(mtbf_s=86400.0 * 100), checkpoint_interval_s=7200.0, restart_s=0.0)
    rate, t = 1 / 86400 / 100, 7200.0
    assert g.lost_per_interruption_s == pytest.approx((1 - g.goodput) / rate, rel=1e-12)
    first_order = 1 / rate - t / math.expm1(rate * t) + g.reconfigure_s
    assert g.lost_per_interruption_s == pytest.approx(first_order, rel=0.01)


@pytest.mark.parametrize(("gen", "chips", "mtbf_h"), [("tpu-v5e", 64, 40), ("tpu-v5p", 1024, 6000), ("tpu-v4", 4096, 2000)])
def test_goodput_is_the_cluster_breakdowns_closed_form(gen, chips, mtbf_h):
    """One formula for one question: the plan's goodput is the cluster report's renewal closed form
    (podsim.cluster.breakdown.checkpoint_goodput) at the job's hosts, checkpoint and restart, which
    tests/test_cluster_scale.py checks per shape against the simulation."""
    from podsim.cluster.breakdown import checkpoint_goodput

    g = training_goodput(get_generation(gen), chips, FailureSpec(mtbf_s=mtbf_h * 3600.0))
    want = checkpoint_goodput(g.hosts, g.host_mtbf_s, g.checkpoint_interval_s, g.restart_s + g.reconfigure_s)
    assert g.goodput == want
    assert 0.5 < g.goodput < 1.0


def test_time_to_train_on_a_budget():
    t = time_to_train(TrainQuery(PlanQuery("llama2-70b", "tpu-v5p", chips=128, model_overrides=SMALL, top=1),
                                 tokens=1e11, price_per_chip_hour=4.2, power_per_chip_w=500))
    steps = math.ceil(1e11 / (256 * 4096))
    assert t.steps == steps
    assert t.days.value == pytest.approx(steps * t.step_s / t.goodput.goodput / 86400)
    assert t.chip_hours.value == pytest.approx(t.days.value * 24 * 128)
    assert t.cost_usd.value == pytest.approx(t.chip_hours.value * 4.2)
    assert t.energy_mwh.value == pytest.approx(t.chip_hours.value * 500 / 1e6)
    assert t.days.low < t.days.value < t.days.high  # the step's error band carried
    assert t.price.source == "given"


@pytest.mark.parametrize(("text", "value"), [("2T", 2e12), ("300B", 3e11), ("1.5e12", 1.5e12), ("4m", 4e6)])
def test_tokens_parse(text, value):
    assert parse_tokens(text) == value


@pytest.mark.parametrize("text", ["0", "-1T", "2X", "T", ""])
def test_tokens_refused(text):
    with pytest.raises(PodsimError):
        parse_tokens(text)


def test_recompute_order_given_does_not_change_the_ranking():
    """Dominance prunes heavier recomputation only against lighter policies, whatever order the
    user lists them in."""
    q = dict(model_overrides=SMALL, top=0, chips=64)
    a = search(PlanQuery("llama2-70b", "tpu-v5p", recompute=("none", "full"), **q))
    b = search(PlanQuery("llama2-70b", "tpu-v5p", recompute=("full", "none"), **q))
    assert [x.candidate for x in a.ranked] == [x.candidate for x in b.ranked]


def test_a_plan_whose_trace_has_no_model_flops_has_no_mfu(monkeypatch, capsys):
    """flops_utilisation gives no MFU for a trace without model FLOPs: the confirmed plan's MFU
    is None (it raised KeyError), its HFU stays, the JSON says null and the plan table prints
    'n/a' with the one percent formatter (units.format_percent) for both MFU and HFU."""
    import sys

    from podsim.cli.plan import _search_text
    from podsim.plan.result import search_summary
    from podsim.units import format_percent

    def no_model_flops(study):
        r = run_study(study)
        r.trace.meta.pop("model_flops_per_step", None)
        return r

    plan_search = sys.modules["podsim.plan.search"]  # the module (podsim.plan.search is the function)
    run_study = plan_search.run_study
    monkeypatch.setattr(plan_search, "run_study", no_model_flops)
    s = search(PlanQuery("llama2-7b", "tpu-v5e", chips=8, model_overrides={"n_layers": 2, "global_batch": 16}, top=1))
    assert s.best.mfu is None and s.best.hfu > 0
    summary = search_summary(s)
    assert json.loads(json.dumps(summary))["best"]["mfu"] is None
    _search_text(s, summary)
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(" 1 "))
    assert f"   n/a {format_percent(s.best.hfu):>6} " in row
