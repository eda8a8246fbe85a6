"""The dashboard's Plan search page under Streamlit's AppTest: it shows the library's search (the
same best plan and step as podsim.plan.search) and time to train, and a bad input is one red line."""

from __future__ import annotations

import pytest
from test_dashboard import metrics, ok, open_page

from podsim.plan import PlanQuery, search


def test_plan_page_shows_the_librarys_best_plan():
    at = ok(open_page("plan", pl_gen="tpu-v5p", pl_model="llama2-70b", pl_chips=128, pl_layers=4, pl_top=1))
    s = search(PlanQuery("llama2-70b", "tpu-v5p", chips=128, model_overrides={"n_layers": 4}, top=1))
    assert at.subheader[0].value.endswith(s.best.assessed.candidate.label())
    m = metrics(at)
    assert m["MFU"] == f"{s.best.mfu:.1%}"
    assert m["Plans ranked"].startswith(f"{s.counts.ranked:,} of")
    assert len(at.table) == 2


def test_plan_page_time_to_train_and_bad_input():
    at = ok(open_page("plan", pl_gen="tpu-v5p", pl_model="llama2-70b", pl_chips=128, pl_layers=4, pl_top=1,
                      pl_mode="Time to train on a chip budget", pl_tokens="20B", pl_price=4.0))
    m = metrics(at)
    assert m["Chips"] == "128" and m["Cost (USD)"] != "not published"
    at.text_input(key="pl_tokens").set_value("lots")
    at.button[0].click().run()
    assert not at.exception and "tokens 'lots'" in at.error[0].value


@pytest.mark.slow
def test_plan_page_no_plan_fits_says_what_would():
    at = open_page("plan", pl_gen="tpu-v5e", pl_model="palm-540b", pl_chips=64, pl_top=1)
    assert not at.exception and "fits in HBM" in at.error[0].value
